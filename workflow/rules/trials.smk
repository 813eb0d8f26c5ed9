# Repeated-trial experiments of Liu et al. (2015), Figs 1-2 (config section `trials`): one job per
# setting runs every trial and every method, writes the long per-trial table and logs one MLflow run
# (every trial as metric steps); rule report_trials summarises bias / MSE and draws the figures.
# Figs 3-4 (annealed estimators on RBMs / DBMs) are ordinary estimator sweeps with several seeds:
# their bias / MSE table is part of rule report.

TRIALS = config.get("trials") or {}
TRIALS_DIR = f"{RESULTS}/trials"
TRIALS_REPORT_DIR = f"{RESULTS}/report/trials"


def _num_label(x):
    """A float as it appears in file names (0.5 -> 0.5, 1.0 -> 1)."""
    return f"{float(x):g}"


def gaussian_trial_files():
    g = TRIALS.get("gaussian")
    if not g:
        return []
    return [f"{TRIALS_DIR}/gaussian/sigma0={_num_label(s)}.csv" for s in g["sigma0"]]


def grid_trial_files():
    g = TRIALS.get("grid")
    if not g:
        return []
    return [f"{TRIALS_DIR}/grid/{ref}/sigma_pair={_num_label(sp)}.csv"
            for ref in g["references"] for sp in g["sigma_pair"]]


def trials_report_outputs():
    out = []
    for name, files in (("gaussian", gaussian_trial_files()), ("grid", grid_trial_files())):
        if files:
            out += [f"{TRIALS_REPORT_DIR}/{name}.csv", f"{TRIALS_REPORT_DIR}/{name}.png"]
    return out


def _gaussian_setting(wildcards):
    g = TRIALS["gaussian"]
    return {"sigma0": float(wildcards.sigma0), "n": g["n"], "n_trials": g["trials"], "seed": g["seed"]}


def _grid_setting(wildcards):
    g = TRIALS["grid"]
    return {"height": g["height"], "width": g["width"], "sigma_pair": float(wildcards.sigma_pair),
            "reference": wildcards.reference, "sigma_unary": g["sigma_unary"], "n": g["n"],
            "n_trials": g["trials"], "seed": g["seed"], "burn_in": g["burn_in"], "trw_trees": g["trw_trees"]}


rule trials_gaussian:
    input:
        store=ancient(TRACKING_SENTINEL),
    output:
        f"{TRIALS_DIR}/gaussian/sigma0={{sigma0}}.csv",
    wildcard_constraints:
        sigma0=r"[0-9.e+-]+",
    params:
        experiment="gaussian",
        setting=_gaussian_setting,
        tracking=TRACKING,
    log:
        f"{LOGS}/trials/gaussian/sigma0={{sigma0}}.log",
    benchmark:
        f"{BENCH}/trials/gaussian/sigma0={{sigma0}}.tsv"
    threads: config["threads"]["estimate"]
    resources:
        **resources_for("estimate"),
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
        setting=_grid_setting,
        tracking=TRACKING,
    log:
        f"{LOGS}/trials/grid/{{reference}}/sigma_pair={{sigma_pair}}.log",
    benchmark:
        f"{BENCH}/trials/grid/{{reference}}/sigma_pair={{sigma_pair}}.tsv"
    threads: config["threads"]["estimate"]
    resources:
        **resources_for("estimate"),
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
        out_dir=TRIALS_REPORT_DIR,
    log:
        f"{LOGS}/report_trials.log",
    benchmark:
        f"{BENCH}/report_trials.tsv"
    threads: config["threads"]["report"]
    resources:
        **resources_for("report"),
    script:
        "../scripts/report_trials.py"
