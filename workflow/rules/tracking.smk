# The MLflow store is created ONCE, here, before any job writes to it: several processes
# creating a fresh SQLite store at the same time lose runs (concurrent schema migrations).


rule init_tracking:
    output:
        TRACKING_SENTINEL,
    params:
        tracking=TRACKING,
    log:
        log_file("init_tracking"),
    benchmark:
        benchmark_file("init_tracking")
    threads: 1
    localrule: True
    conda:
        CONDA_ENV
    script:
        "../scripts/init_tracking.py"
