# Tables (per run, per setting, RAISE Table 1 layout for RBMs, Table 2 layout for DBMs / DBNs),
# flags and plots from every estimate;
# flags are also set as tags on the MLflow runs.  Outputs are marked for `--report`.

REPORT_DIR = f"{RESULTS}/report"
REPORT_OUTPUTS = [
    f"{REPORT_DIR}/table1.csv",
    f"{REPORT_DIR}/table2.csv",
    f"{REPORT_DIR}/summary.csv",
    f"{REPORT_DIR}/per_run.csv",
    f"{REPORT_DIR}/flags.csv",
    f"{REPORT_DIR}/report.json",
] + expand(f"{REPORT_DIR}/plots/{{model}}.png", model=list(config["models"]))


rule report:
    input:
        estimates=all_estimate_files(),
        models=expand(f"{RESULTS}/models/{{model}}.json", model=list(config["models"])),
        store=ancient(TRACKING_SENTINEL),
    output:
        table1=report(f"{REPORT_DIR}/table1.csv", caption="../report/table1.rst", category="1. Results",
                      labels={"table": "RAISE Table 1 layout (RBMs)"}),
        table2=report(f"{REPORT_DIR}/table2.csv", caption="../report/table2.rst", category="1. Results",
                      labels={"table": "RAISE Table 2 layout (DBMs, DBNs)"}),
        summary=report(f"{REPORT_DIR}/summary.csv", caption="../report/summary.rst", category="1. Results",
                       labels={"table": "summary over seeds"}),
        flags=report(f"{REPORT_DIR}/flags.csv", caption="../report/flags.rst", category="1. Results",
                     labels={"table": "flags"}),
        per_run=report(f"{REPORT_DIR}/per_run.csv", caption="../report/per_run.rst", category="1. Results",
                       labels={"table": "every run"}),
        json=f"{REPORT_DIR}/report.json",
        plots=report(expand(f"{REPORT_DIR}/plots/{{model}}.png", model=list(config["models"])),
                     caption="../report/plot.rst", category="2. Estimate vs K"),
    params:
        models=list(config["models"]),
        thresholds=config["report"],
        tracking=TRACKING,
    log:
        f"{LOGS}/report.log",
    benchmark:
        f"{BENCH}/report.tsv"
    threads: config["threads"]["report"]
    resources:
        **resources_for("report"),
    script:
        "../scripts/report.py"
