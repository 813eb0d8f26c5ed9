# One job per model (logzbench.pipeline.diagnose.diagnosed_models: binary RBMs, DBMs, DBNs and the continuous
# families with filters; none with `diagnostics.enabled: false`) runs logzbench.pipeline.diagnose.diagnose_job:
# samples of the model and of p_ann (RAISE Figs 5-6), the mass on its most probable hidden configurations
# (RAISE Sec. 5.1), the mean test log-likelihood per class of labelled data, and the learned filters of the
# continuous models (HAIS Fig. 1).  Its inputs are the model, its prepared dataset and its exact and AIS
# estimate directories (log Z of the per-class table: exact, else the workflow's AIS at its largest K); its
# outputs results/diagnostics/<model>.json and <model>_samples.npz (both or neither), read by the report.
# Threads and resources: the estimate step's (threads.estimate, resources.estimate; a GPU where the config's
# device may use one).  Its input functions are
# in common.smk (diagnose_estimate_dirs); the report's figures are logzbench.pipeline.rules.diagnostic_report_plots.


rule diagnose:
    input:
        model=f"{RESULTS}/models/{{model}}.npz",
        data=dataset_file,
        estimates=diagnose_estimate_dirs,
    output:
        json=f"{RESULTS}/diagnostics/{{model}}.json",
        npz=f"{RESULTS}/diagnostics/{{model}}_samples.npz",
    params:
        settings=lambda wc: diagnose.diagnose_settings(PLAN, wc.model),
    group:
        job_group("diagnose")
    log:
        log_file("diagnose/{model}"),
    benchmark:
        benchmark_file("diagnose/{model}")
    threads: config["threads"]["estimate"]
    resources:
        **rules.rule_resources(config, "estimate", gpu=True),
    conda:
        CONDA_ENV
    script:
        "../scripts/diagnose.py"
