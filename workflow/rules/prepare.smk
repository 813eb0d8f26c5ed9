# Download/verify (offline mirror first) and prepare each dataset into one .npz: binary sources binarised
# (logzbench.data.prepare_dataset; the UCI sets are binary already), continuous ones (vanhateren, frey)
# by logzbench.data.prepare_patches.  The mirror is $LOGZBENCH_DATA_MIRROR (common.smk), not a param: naming
# the same mirror another way reruns nothing.


rule prepare_dataset:
    output:
        f"{RESULTS}/data/{{dataset}}.npz",
    params:
        spec=lambda wc: {k: v for k, v in config["datasets"][wc.dataset].items() if k != "n_visible"},
    group:
        job_group("prepare_dataset")
    log:
        log_file("prepare/{dataset}"),
    benchmark:
        benchmark_file("prepare/{dataset}")
    threads: config["threads"]["prepare"]
    resources:
        **rule_resources("prepare"),
    conda:
        CONDA_ENV
    script:
        "../scripts/prepare.py"
