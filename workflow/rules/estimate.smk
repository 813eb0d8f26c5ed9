# One job per estimate.  exact: once per model (only where enumeration is affordable, or a closed
# form exists for a continuous model); csl, hais, ais-hmc, ais-mh: K x seed (no init); ais / raise / ads / ads-multinomial / reverse-ais: K x init x seed.  Each writes a JSON record and the
# per-chain log-weights (.npz), and logs one MLflow run keyed by its settings.

_ESTIMATE_INPUT = dict(
    model=f"{RESULTS}/models/{{model}}.npz",
    data=dataset_file,
    store=ancient(TRACKING_SENTINEL),
)


rule estimate_exact:
    input:
        **_ESTIMATE_INPUT,
    output:
        json=f"{RESULTS}/estimates/{{model}}/{{estimator}}/exact.json",
        arrays=f"{RESULTS}/estimates/{{model}}/{{estimator}}/exact.npz",
    wildcard_constraints:
        estimator=_alternatives(ESTIMATOR_NAMES["exact"]),
    params:
        settings=estimator_params,
        tracking=TRACKING,
        ess_fraction=config["report"]["ess_fraction"],
    log:
        f"{LOGS}/estimate/{{model}}/{{estimator}}/exact.log",
    benchmark:
        f"{BENCH}/estimate/{{model}}/{{estimator}}/exact.tsv"
    threads: config["threads"]["exact"]
    resources:
        **resources_for("exact"),
    script:
        "../scripts/estimate.py"


rule estimate_csl:
    input:
        **_ESTIMATE_INPUT,
    output:
        json=f"{RESULTS}/estimates/{{model}}/{{estimator}}/K{{K}}_seed{{seed}}.json",
        arrays=f"{RESULTS}/estimates/{{model}}/{{estimator}}/K{{K}}_seed{{seed}}.npz",
    wildcard_constraints:
        estimator=_alternatives(ESTIMATOR_NAMES["csl"]),
    params:
        settings=estimator_params,
        tracking=TRACKING,
        ess_fraction=config["report"]["ess_fraction"],
    log:
        f"{LOGS}/estimate/{{model}}/{{estimator}}/K{{K}}_seed{{seed}}.log",
    benchmark:
        f"{BENCH}/estimate/{{model}}/{{estimator}}/K{{K}}_seed{{seed}}.tsv"
    threads: config["threads"]["estimate"]
    resources:
        **resources_for("estimate"),
    script:
        "../scripts/estimate.py"


rule estimate_annealed:
    input:
        **_ESTIMATE_INPUT,
    output:
        json=f"{RESULTS}/estimates/{{model}}/{{estimator}}/K{{K}}_{{init}}_seed{{seed}}.json",
        arrays=f"{RESULTS}/estimates/{{model}}/{{estimator}}/K{{K}}_{{init}}_seed{{seed}}.npz",
    wildcard_constraints:
        estimator=_alternatives([n for m in METHODS_ANNEALED for n in ESTIMATOR_NAMES[m]]),
    params:
        settings=estimator_params,
        tracking=TRACKING,
        ess_fraction=config["report"]["ess_fraction"],
    log:
        f"{LOGS}/estimate/{{model}}/{{estimator}}/K{{K}}_{{init}}_seed{{seed}}.log",
    benchmark:
        f"{BENCH}/estimate/{{model}}/{{estimator}}/K{{K}}_{{init}}_seed{{seed}}.tsv"
    threads: config["threads"]["estimate"]
    resources:
        **resources_for("estimate"),
    script:
        "../scripts/estimate.py"


rule estimate_hais:
    input:
        **_ESTIMATE_INPUT,
    output:
        json=f"{RESULTS}/estimates/{{model}}/{{estimator}}/K{{K}}_seed{{seed}}.json",
        arrays=f"{RESULTS}/estimates/{{model}}/{{estimator}}/K{{K}}_seed{{seed}}.npz",
    wildcard_constraints:
        estimator=_alternatives([n for m in METHODS_CONTINUOUS for n in ESTIMATOR_NAMES[m]]),
    params:
        settings=estimator_params,
        tracking=TRACKING,
        ess_fraction=config["report"]["ess_fraction"],
    log:
        f"{LOGS}/estimate/{{model}}/{{estimator}}/K{{K}}_seed{{seed}}.log",
    benchmark:
        f"{BENCH}/estimate/{{model}}/{{estimator}}/K{{K}}_seed{{seed}}.tsv"
    threads: config["threads"]["estimate"]
    resources:
        **resources_for("estimate"),
    script:
        "../scripts/estimate.py"
