"""The black-box learners as the report names them (:func:`learner_label`), and which of them it
compares on one dataset (the AVIL paper's Fig. 5: :data:`COMPARED_LEARNERS`).

Importable without pandas, Matplotlib or torch: the workflow reads it while it builds its job graph,
to name the report's ``plots/<dataset>_bounds_vs_ais.png`` files (:func:`compared_learner_datasets`).
"""

from __future__ import annotations

__all__ = [
    "COMPARED_FAMILY",
    "COMPARED_LEARNERS",
    "LEARNER_LABELS",
    "compared_learner_datasets",
    "learner_label",
    "learner_report_plots",
]

#: each learner's name in legends, titles and tables (:data:`logzbench.registry.LEARNERS`)
LEARNER_LABELS = {"avil": "AVIL", "nvil": "NVIL", "vcd": "VCD-1"}


def learner_label(name: str) -> str:
    """The display name of learner ``name`` (:data:`LEARNER_LABELS`; the name itself for another)."""
    return LEARNER_LABELS.get(name, name)


#: the learners whose bounds of log Z the AVIL paper's Fig. 5 compares on one dataset, and their family
COMPARED_LEARNERS, COMPARED_FAMILY = ("nvil", "avil"), "rbm"


def compared_learner_datasets(models) -> list[str]:
    """The datasets, sorted, on which a :data:`COMPARED_FAMILY` model was trained by each of
    :data:`COMPARED_LEARNERS` (the report's ``plots/<dataset>_bounds_vs_ais.png``); ``models`` are
    ``(dataset, family, learner)`` triples."""
    seen: dict[str, set] = {}
    for dataset, family_name, learner_name in models:
        if str(family_name).lower() == COMPARED_FAMILY:
            seen.setdefault(str(dataset), set()).add(str(learner_name).lower())
    return sorted(d for d, names in seen.items() if set(COMPARED_LEARNERS) <= names)


def learner_report_plots(plan, report_dir: str) -> list[str]:
    """The learner figures :mod:`logzbench.report.learner_plots` always draws, named for the workflow's DAG:
    plots/<model>_bounds.png of each learner-trained model of ``plan`` (a
    :class:`~logzbench.pipeline.plan.Plan`), plots/<dataset>_bounds_vs_ais.png of each dataset with an NVIL-
    and an AVIL-trained RBM (the sample and filter figures depend on files and image shapes: undeclared)."""
    learned = plan.learner_models
    paired = compared_learner_datasets(
        (plan.models[m].dataset, hp.get("family", "rbm"), hp["learner"]) for m, hp in learned.items()
    )
    return [f"{report_dir}/plots/{m}_bounds.png" for m in learned] + [
        f"{report_dir}/plots/{d}_bounds_vs_ais.png" for d in paired
    ]
