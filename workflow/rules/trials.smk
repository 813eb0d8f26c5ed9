# Repeated-trial experiments of Liu et al. (2015), Figs 1-2 (config section `trials`): one job per
# experiment runs every setting in one process (logzbench.pipeline.jobs.trials_job); per setting it runs every
# trial and every method, writes the long per-trial table and logs one MLflow run (every trial as
# metric steps); rule report_trials summarises bias / MSE and draws the figures.
# Figs 3-4 (annealed estimators on RBMs / DBMs) are ordinary estimator sweeps with several seeds:
# their bias / MSE table is part of rule report.
# The file lists and settings (gaussian_trial_files, grid_settings, ...) are in common.smk.

if gaussian_trial_files():

    rule trials_gaussian:
        input:
            store=ancient(TRACKING_SENTINEL),
        output:
            gaussian_trial_files(),
        params:
            experiment="gaussian",
            settings=gaussian_settings(),
            tracking=TRACKING,
        group:
            job_group("trials_gaussian")
        log:
            log_file("trials/gaussian"),
        benchmark:
            benchmark_file("trials/gaussian")
        threads: config["threads"]["estimate"]
        resources:
            **rule_resources("estimate"),
        conda:
            CONDA_ENV
        script:
            "../scripts/trials.py"


if grid_trial_files():

    rule trials_grid:
        input:
            store=ancient(TRACKING_SENTINEL),
        output:
            grid_trial_files(),
        params:
            experiment="grid",
            settings=grid_settings(),
            tracking=TRACKING,
        group:
            job_group("trials_grid")
        log:
            log_file("trials/grid"),
        benchmark:
            benchmark_file("trials/grid")
        threads: config["threads"]["estimate"]
        resources:
            **rule_resources("estimate"),
        conda:
            CONDA_ENV
        script:
            "../scripts/trials.py"


rule report_trials:
    input:
        gaussian=gaussian_trial_files(),
        grid=grid_trial_files(),
    output:
        [report(f, caption="../report/trials.rst", category="4. Repeated trials (Liu et al. Figs 1-2)")
         for f in trials_report_outputs()],
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
        **rule_resources("report"),
    conda:
        CONDA_ENV
    script:
        "../scripts/report_trials.py"
