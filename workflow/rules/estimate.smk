# One job per model x estimator (logzbench.pipeline.sweep.sweep_pairs, the plan's) runs that estimator's whole sweep in
# one process (logzbench.pipeline.jobs.run_estimate_sweep): exact once per model (only where enumeration is
# affordable, or a closed form exists for a continuous model); every other estimator over its
# registry sweep axes (logzbench.registry.EstimatorSpec.axes: K, init and seed, or a subset).  The
# job's output is the directory results/estimates/{model}/{estimator}/ with one JSON record and one
# .npz of per-chain log-weights per setting, named by the setting's file stem
# (logzbench.registry.setting_stem: exact, K10_seed0, K10_uniform_seed0, uniform_seed0); each
# setting is its own MLflow run keyed by its settings.  Changing any setting of the sweep re-runs it
# (the settings are the rule's params); a failed job leaves no directory behind.
# Threads and resources: threads.exact / resources.exact for the exact method, threads.estimate /
# resources.estimate for the others.
# A source model (config `source`: FILE.py:NAME, a TorchScript or Potts text file, an .npz) has no train job:
# its file is the `model` input (editing it reruns its estimates) and its rows are a prepared dataset or its
# `data` files (estimate_inputs, common.smk).


rule estimate:
    input:
        unpack(estimate_inputs),
        store=ancient(TRACKING_SENTINEL),
    output:
        directory(f"{RESULTS}/estimates/{{model}}/{{estimator}}"),
    params:
        settings=estimate_settings,
        tracking=TRACKING,
        ess_fraction=config["report"]["ess_fraction"],
        progress=bool(config.get("progress", False)),
    group:
        job_group("estimate")
    log:
        log_file("estimate/{model}/{estimator}"),
    benchmark:
        benchmark_file("estimate/{model}/{estimator}")
    threads: rules.estimate_threads(PLAN)
    resources:
        **rules.estimate_resources(PLAN),
    conda:
        CONDA_ENV
    script:
        "../scripts/estimate.py"
