# logzbench: side-by-side partition-function / test log-likelihood estimators.
#
# DAG: prepare (per dataset) -> train (per model) -> estimate (one job per model x estimator runs
# the estimator's sweep over K / init / seed, as declared in the config: logzbench.pipeline.sweep) ->
# report; repeated-trial experiments (config `trials`: Liu et al. Figs 1-2, one job per experiment) ->
# report_trials.  Every train/estimate job depends on the MLflow store, which is created once by
# rule `init_tracking`.  Jobs run in processes forked from a warm server that has imported torch,
# MLflow and logzbench once (config `warm_start`, logzbench.pipeline.warm).  Each rule's benchmark
# (results/benchmarks/<job>.tsv) measures the rule's own process, a thin client under the warm start;
# the job's own process is measured in results/benchmarks/<job>.job.tsv (logzbench.pipeline.usage).
# Every rule runs in workflow/envs/logzbench.yaml with --use-conda (else in the current environment).
#
#   snakemake --cores 2 --workflow-profile workflow/profiles/default           # default config
#   snakemake --cores 2 --configfile config/test.yaml                          # another config
#   snakemake --report report.html                                             # HTML report
#
# A --configfile replaces config/config.yaml (each file in config/ is complete).

import os

from snakemake.utils import min_version

min_version("8.0")


if not workflow.overwrite_configfiles:
    _default_config = "config/config.yaml"
    if not os.path.exists(_default_config):  # running with --directory elsewhere
        _default_config = os.path.join(workflow.basedir, "config", "config.yaml")

    configfile: _default_config


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/tracking.smk"
include: "workflow/rules/prepare.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/estimate.smk"
include: "workflow/rules/diagnose.smk"
include: "workflow/rules/trials.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        REPORT_OUTPUTS,
    default_target: True


# At the end of the run: the warm server stops; the MLflow UI's page is printed.
onsuccess:
    stop_warm_server()
    rules.print_dashboard_hint(TRACKING_SENTINEL)


onerror:
    stop_warm_server()
