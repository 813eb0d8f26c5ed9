# Download/verify (offline mirror first) and prepare each dataset into one .npz: binary sources binarised
# (logzbench.data.prepare_dataset; the UCI sets are binary already), continuous ones (vanhateren, frey)
# by logzbench.data.prepare_patches.  The mirror is $LOGZBENCH_DATA_MIRROR (common.smk), not a param: naming
# the same mirror another way reruns nothing.


rule prepare_dataset:
    output:
        f"{RESULTS}/data/{{dataset}}.npz",
    params:
        # n_visible is a check of the row width, except for clustered, whose rows it sizes
        spec=lambda wc: {k: v for k, v in config["datasets"][wc.dataset].items()
                         if k != "n_visible" or config["datasets"][wc.dataset]["source"] == "clustered"},
    group:
        job_group("prepare_dataset")
    log:
        log_file("prepare/{dataset}"),
    benchmark:
        benchmark_file("prepare/{dataset}")
    # before any ready estimate: every model's training waits on its dataset (see train_model's priority)
    priority: 1
    threads: config["threads"]["prepare"]
    resources:
        **rules.rule_resources(config, "prepare"),
    conda:
        CONDA_ENV
    script:
        "../scripts/prepare.py"
