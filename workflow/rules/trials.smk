# Repeated-trial experiments of Liu et al. (2015), Figs 1-2 (config section `trials`): one job per
# setting runs every trial and every method, writes the long per-trial table and logs one MLflow run
# (every trial as metric steps); rule report_trials summarises bias / MSE and draws the figures.
# Figs 3-4 (annealed estimators on RBMs / DBMs) are ordinary estimator sweeps with several seeds:
# their bias / MSE table is part of rule report.
# The file lists and settings (gaussian_trial_files, grid_setting, ...) are in common.smk.


rule trials_gaussian:
    input:
        store=ancient(TRACKING_SENTINEL),
    output:
        f"{TRIALS_DIR}/gaussian/sigma0={{sigma0}}.csv",
    wildcard_constraints:
        sigma0=r"[0-9.e+-]+",
    params:
        experiment="gaussian",
        setting=gaussian_setting,
        tracking=TRACKING,
    log:
        f"{LOGS}/trials/gaussian/sigma0={{sigma0}}.log",
    benchmark:
        f"{BENCH}/trials/gaussian/sigma0={{sigma0}}.tsv"
    threads: config["threads"]["estimate"]
    resources:
        **resources_for("estimate"),
    conda:
        CONDA_ENV
    script:
        "../scripts/trials.py"


rule trials_grid:
    input:
        store=ancient(TRACKING_SENTINEL),
    output:
        f"{TRIALS_DIR}/grid/{{reference}}/sigma_pair={{sigma_pair}}.csv",
    wildcard_constraints:
        reference="uniform|mean-field|trw",
        sigma_pair=r"[0-9.e+-]+",
    params:
        experiment="grid",
        setting=grid_setting,
        tracking=TRACKING,
    log:
        f"{LOGS}/trials/grid/{{reference}}/sigma_pair={{sigma_pair}}.log",
    benchmark:
        f"{BENCH}/trials/grid/{{reference}}/sigma_pair={{sigma_pair}}.tsv"
    threads: config["threads"]["estimate"]
    resources:
        **resources_for("estimate"),
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
    log:
        f"{LOGS}/report_trials.log",
    benchmark:
        f"{BENCH}/report_trials.tsv"
    threads: config["threads"]["report"]
    resources:
        **resources_for("report"),
    conda:
        CONDA_ENV
    script:
        "../scripts/report_trials.py"
