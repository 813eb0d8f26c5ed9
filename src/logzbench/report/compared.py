"""The black-box learners as the report names them (:func:`learner_label`), and which of them it
compares on one dataset (the AVIL paper's Fig. 5: :data:`COMPARED_LEARNERS`).

Importable without pandas, Matplotlib or torch: the workflow reads it while it builds its job graph,
to name the report's ``plots/<dataset>_bounds_vs_ais.png`` files (:func:`compared_learner_datasets`).
"""

from __future__ import annotations

__all__ = ["COMPARED_FAMILY", "COMPARED_LEARNERS", "LEARNER_LABELS", "compared_learner_datasets", "learner_label"]

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
