# Train one model per model entry (a dataset plus a training preset and/or explicit hyperparams):
# logzbench.training.train_model with the family (rbm | dbm | dbn) of the preset / hyperparams.


rule train_model:
    input:
        data=dataset_file,
        store=ancient(TRACKING_SENTINEL),
    output:
        model=f"{RESULTS}/models/{{model}}.npz",
        summary=f"{RESULTS}/models/{{model}}.json",
        history=report(
            f"{RESULTS}/models/{{model}}.history.csv",
            caption="../report/history.rst",
            category="Training",
            subcategory="{model}",
            labels={"model": "{model}", "file": "history (CSV)"},
        ),
        plot=report(
            f"{RESULTS}/models/{{model}}.history.png",
            caption="../report/history.rst",
            category="Training",
            subcategory="{model}",
            labels={"model": "{model}", "file": "training curves"},
        ),
    params:
        hyperparams=lambda wc: dict(PLAN.models[wc.model].hyperparams),
        dataset=lambda wc: PLAN.models[wc.model].dataset,
        device=config["device"],
        tracking=TRACKING,
        progress=bool(config.get("progress", False)),
    group:
        job_group("train_model")
    log:
        log_file("train/{model}"),
    benchmark:
        benchmark_file("train/{model}")
    # before any ready estimate: an estimate waits on its model, so training last would leave the final
    # minutes of a run to one model's estimates with the other cores idle (benchmarks/workflow_overhead.py)
    priority: 1
    threads: config["threads"]["train"]
    resources:
        **rules.rule_resources(config, "train", gpu=True),
    conda:
        CONDA_ENV
    script:
        "../scripts/train.py"
