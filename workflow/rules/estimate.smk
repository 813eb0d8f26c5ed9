# One job per estimate (logzbench.sweep.model_jobs): exact once per model (only where enumeration is
# affordable, or a closed form exists for a continuous model); every other estimator over its
# registry sweep axes -- csl, hais, ais-hmc, ais-mh: K x seed; ais, raise, ads, ads-multinomial,
# reverse-ais: K x init x seed; the IS family (is, ris, is-avg, is-weighted, is-select, ds):
# init x seed.  {setting} is the file stem of those axes (logzbench.registry.setting_stem: exact,
# K10_seed0, K10_uniform_seed0, uniform_seed0).  Each job writes a JSON record and the per-chain
# log-weights (.npz), and logs one MLflow run keyed by its settings (logzbench.jobs.run_estimate).
# Threads and resources: threads.exact / resources.exact for the exact method, threads.estimate /
# resources.estimate for the others.


rule estimate:
    input:
        model=f"{RESULTS}/models/{{model}}.npz",
        data=dataset_file,
        store=ancient(TRACKING_SENTINEL),
    output:
        json=f"{RESULTS}/estimates/{{model}}/{{estimator}}/{{setting}}.json",
        arrays=f"{RESULTS}/estimates/{{model}}/{{estimator}}/{{setting}}.npz",
    params:
        settings=estimate_settings,
        tracking=TRACKING,
        ess_fraction=config["report"]["ess_fraction"],
    log:
        f"{LOGS}/estimate/{{model}}/{{estimator}}/{{setting}}.log",
    benchmark:
        f"{BENCH}/estimate/{{model}}/{{estimator}}/{{setting}}.tsv"
    threads: estimate_threads
    resources:
        **estimate_resources(),
    conda:
        CONDA_ENV
    script:
        "../scripts/estimate.py"
