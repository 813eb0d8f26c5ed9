# Tables (per run, per setting, RAISE Table 1 layout for RBMs, Table 2 layout for DBMs / DBNs,
# bias / MSE of log Z over seeds against the ground truth: Liu et al. Figs 3-4; learner-trained
# models against the AVIL paper's Tables 2-3; the papers' published values beside ours; the brackets of the
# sandwich and of BDMC: table_bracket.csv, plots/<model>_bracket.png), flags and plots from every estimate,
# and review.html, one self-contained page per model of all of it (logzbench.report.review);
# flags are also set as tags on the MLflow runs.  Outputs are marked for `--report`.

DIAGNOSED_MODELS = diagnose.diagnosed_models(PLAN)
DIAGNOSTIC_PLOTS = rules.diagnostic_report_plots(PLAN, REPORT_DIR)
LEARNER_PLOTS = learner_report_plots(PLAN, REPORT_DIR)
MODEL_REPORT_OUTPUTS = [
    f"{REPORT_DIR}/table1.csv",
    f"{REPORT_DIR}/table2.csv",
    f"{REPORT_DIR}/summary.csv",
    f"{REPORT_DIR}/per_run.csv",
    f"{REPORT_DIR}/flags.csv",
    f"{REPORT_DIR}/report.json",
    f"{REPORT_DIR}/annealed_trials.csv",
    f"{REPORT_DIR}/table_continuous.csv",
    f"{REPORT_DIR}/plots/model_size.png",
    f"{REPORT_DIR}/table_learners.csv",
    f"{REPORT_DIR}/table_papers.csv",
    f"{REPORT_DIR}/table_csl.csv",
    f"{REPORT_DIR}/table_bracket.csv",
    f"{REPORT_DIR}/table_hidden_mass.csv",
    f"{REPORT_DIR}/table_per_class.csv",
    f"{REPORT_DIR}/review.html",
] + DIAGNOSTIC_PLOTS + expand(f"{REPORT_DIR}/plots/{{model}}_bracket.png", model=PLAN.bracket_models) + ([f"{REPORT_DIR}/table_learners_paper.csv", f"{REPORT_DIR}/table_learner_timing.csv"] if PLAN.learner_models else []) + LEARNER_PLOTS + expand(f"{REPORT_DIR}/plots/{{model}}.png", model=list(PLAN.models)) + expand(
    f"{REPORT_DIR}/plots/{{model}}_bias_mse.png", model=list(PLAN.models))


# every figure also as PDF (not marked for `--report`, which shows the PNGs)
MODEL_REPORT_OUTPUTS = MODEL_REPORT_OUTPUTS + rules.figure_pdfs(MODEL_REPORT_OUTPUTS)
# a config with repeated-trial experiments only (e.g. config/liu_fig1.yaml) has no model report
REPORT_OUTPUTS = (MODEL_REPORT_OUTPUTS if PLAN.models else []) + rules.trials_report_outputs(config, TRIALS_DIR, TRIALS_REPORT_DIR)


rule report:
    input:
        estimates=checked_estimate_dirs,  # and the files of an earlier run checked (common.smk)
        # the training records (a source model, not trained, has none)
        models=expand(f"{RESULTS}/models/{{model}}.json", model=PLAN.trained_models),
        store=ancient(TRACKING_SENTINEL),
        # the learner-trained models' datasets: source names, image shapes (logzbench.report.learners)
        data=sorted({f"{RESULTS}/data/{PLAN.models[m].dataset}.npz" for m in PLAN.learner_models}),
        # the per-model diagnostics (rule diagnose): their records and arrays
        diagnostics=expand(f"{RESULTS}/diagnostics/{{model}}.json", model=DIAGNOSED_MODELS),
        diagnostic_arrays=expand(f"{RESULTS}/diagnostics/{{model}}_samples.npz", model=DIAGNOSED_MODELS),
    output:
        # the page a person reads: per model every estimate with its s.e., the exact value and the difference,
        # brackets, flags in words and figures, then the tables (self-contained; first in `--report`)
        review=report(f"{REPORT_DIR}/review.html", caption="../report/review.rst", category="0. Review",
                      labels={"page": "review of every model"}),
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
        table_continuous=report(f"{REPORT_DIR}/table_continuous.csv", caption="../report/table_continuous.rst",
                                category="1. Results", labels={"table": "continuous models (HAIS Table 1 layout)"}),
        model_size=report(f"{REPORT_DIR}/plots/model_size.png", caption="../report/table_continuous.rst",
                          category="2. Estimate vs K"),
        annealed_trials=report(f"{REPORT_DIR}/annealed_trials.csv", caption="../report/annealed_trials.rst",
                               category="1. Results", labels={"table": "bias / MSE of log Z over seeds"}),
        trial_plots=report(expand(f"{REPORT_DIR}/plots/{{model}}_bias_mse.png", model=list(PLAN.models)),
                           caption="../report/annealed_trials.rst", category="3. Bias / MSE vs K"),
        plots=report(expand(f"{REPORT_DIR}/plots/{{model}}.png", model=list(PLAN.models)),
                     caption="../report/plot.rst", category="2. Estimate vs K"),
        # always written (header only without learner-trained models)
        table_learners=f"{REPORT_DIR}/table_learners.csv",
        # the papers' published values beside ours (header only where no model has a `paper` entry)
        table_papers=report(f"{REPORT_DIR}/table_papers.csv", caption="../report/table_papers.rst",
                            category="1. Results", labels={"table": "the papers' values beside ours"}),
        # the paper's Tables 2-3 as printed: written where the config has learner-trained models
        table_learners_paper=[f"{REPORT_DIR}/table_learners_paper.csv"] if PLAN.learner_models else [],
        # training time per learner-trained model, AVIL's over VCD's (Li et al. Sec. 5.5): likewise
        table_learner_timing=report([f"{REPORT_DIR}/table_learner_timing.csv"] if PLAN.learner_models else [],
                                    caption="../report/table_learner_timing.rst", category="1. Results",
                                    labels={"table": "learners' training time"}),
        # Upadhya & Sastry Table 2 layout of the CSL estimates (header only without CSL)
        table_csl=report(f"{REPORT_DIR}/table_csl.csv", caption="../report/table_csl.rst", category="1. Results",
                         labels={"table": "CSL (Upadhya & Sastry Table 2 layout)"}),
        learner_plots=LEARNER_PLOTS,
        # the sandwich's and BDMC's brackets (header only without them), and a figure per model with one
        table_bracket=report(f"{REPORT_DIR}/table_bracket.csv", caption="../report/table_bracket.rst",
                             category="1. Results", labels={"table": "brackets (sandwich, BDMC)"}),
        bracket_plots=report(expand(f"{REPORT_DIR}/plots/{{model}}_bracket.png", model=PLAN.bracket_models),
                             caption="../report/bracket_plot.rst", category="5. Brackets vs cost"),
        # the per-model diagnostics (header only without them): mass on the top hidden configurations,
        # per-class test log-likelihoods, samples of the RBMs and of p_ann, the continuous models' filters
        table_hidden_mass=report(f"{REPORT_DIR}/table_hidden_mass.csv", caption="../report/table_hidden_mass.rst",
                                 category="6. Diagnostics", labels={"table": "mass on the top hidden configurations"}),
        table_per_class=report(f"{REPORT_DIR}/table_per_class.csv", caption="../report/table_per_class.rst",
                               category="6. Diagnostics", labels={"table": "test log-likelihood per class"}),
        diagnostic_plots=report(DIAGNOSTIC_PLOTS, caption="../report/diagnostic_plots.rst",
                                category="6. Diagnostics"),
        # the PDF beside each PNG above (logzbench.plotting.save_figure)
        figure_pdfs=rules.figure_pdfs(MODEL_REPORT_OUTPUTS),
    params:
        estimates=PLAN.estimate_files("json", RESULTS),
        out_dir=lambda w, output: os.path.dirname(output.json),  # REPORT_DIR
        models=list(PLAN.models),
        bracket_models=list(PLAN.bracket_models),
        paper_rows=PLAN.paper_rows,
        thresholds=config["report"],
        tracking=TRACKING,
    group:
        job_group("report")
    log:
        log_file("report"),
    benchmark:
        benchmark_file("report")
    threads: config["threads"]["report"]
    resources:
        **rules.rule_resources(config, "report"),
    conda:
        CONDA_ENV
    script:
        "../scripts/report.py"
