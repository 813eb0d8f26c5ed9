# Repeated-trial experiments of Liu et al. (2015), Figs 1-2 (config section `trials`): one job per
# experiment runs every setting in one process (logzbench.pipeline.jobs.trials_job); per setting it runs every
# trial and every method, writes the long per-trial table and logs one MLflow run (every trial as
# metric steps); rule report_trials summarises bias / MSE and draws the figures.
# Figs 3-4 (annealed estimators on RBMs / DBMs) are ordinary estimator sweeps with several seeds:
# their bias / MSE table is part of rule report.
# The file lists and settings are logzbench.pipeline.rules' (gaussian_trial_files, grid_settings, ...).

GAUSSIAN_FILES = rules.gaussian_trial_files(config, TRIALS_DIR)
GRID_FILES = rules.grid_trial_files(config, TRIALS_DIR)

if GAUSSIAN_FILES:

    rule trials_gaussian:
        input:
            store=ancient(TRACKING_SENTINEL),
        output:
            GAUSSIAN_FILES,
        params:
            experiment="gaussian",
            settings=rules.gaussian_settings(config),
            tracking=TRACKING,
        group:
            job_group("trials_gaussian")
        log:
            log_file("trials/gaussian"),
        benchmark:
            benchmark_file("trials/gaussian")
        threads: config["threads"]["estimate"]
        resources:
            **rules.rule_resources(config, "estimate"),
        conda:
            CONDA_ENV
        script:
            "../scripts/trials.py"


if GRID_FILES:

    rule trials_grid:
        input:
            store=ancient(TRACKING_SENTINEL),
        output:
            GRID_FILES,
        params:
            experiment="grid",
            settings=rules.grid_settings(config),
            tracking=TRACKING,
        group:
            job_group("trials_grid")
        log:
            log_file("trials/grid"),
        benchmark:
            benchmark_file("trials/grid")
        threads: config["threads"]["estimate"]
        resources:
            **rules.rule_resources(config, "estimate"),
        conda:
            CONDA_ENV
        script:
            "../scripts/trials.py"


rule report_trials:
    input:
        gaussian=GAUSSIAN_FILES,
        grid=GRID_FILES,
    output:
        [report(f, caption="../report/trials.rst", category="4. Repeated trials (Liu et al. Figs 1-2)")
         for f in rules.trials_report_outputs(config, TRIALS_DIR, TRIALS_REPORT_DIR)],
    params:
        out_dir=lambda wildcards, output: os.path.dirname(output[0]),
    group:
        job_group("report_trials")
    log:
        log_file("report_trials"),
    benchmark:
        benchmark_file("report_trials")
    threads: config["threads"]["report"]
    resources:
        **rules.rule_resources(config, "report"),
    conda:
        CONDA_ENV
    script:
        "../scripts/report_trials.py"
