"""What only the Snakemake workflow needs: from its config to its jobs, and each job end to end.

* :mod:`~logzbench.pipeline.plan`: the config read once into a frozen :class:`~logzbench.pipeline.plan.Plan` (its
  entries: :mod:`~logzbench.pipeline.entries`), which the rules read; :mod:`~logzbench.pipeline.rules`: what the
  rules read beside it (cluster groups, warm start, resources, trials, report figures);
* :mod:`~logzbench.pipeline.sweep`: a config's models, estimators, the jobs of their sweeps and
  each job's settings (what the plan is built of); :mod:`~logzbench.pipeline.model_files`: what is read of a
  source model's file without loading it;
* :mod:`~logzbench.pipeline.config_schema`: the config loaded: its size, the ``--config`` values, the schema
  and the estimator entries' options (:func:`~logzbench.pipeline.config_schema.load_config`);
* :mod:`~logzbench.pipeline.config`: the config's checks beyond its schema (:func:`check_config`);
* :mod:`~logzbench.pipeline.outputs`: the files of an earlier run checked before they are trusted;
* :mod:`~logzbench.pipeline.jobs`: one job (prepare, train, an estimate sweep, trials) end to end;
* :mod:`~logzbench.pipeline.diagnose`: a model's diagnose job (samples, mass on the most probable hidden
  configurations, per-class test log-likelihoods), and which models get one;
* :mod:`~logzbench.pipeline.warm`: the fork server that runs those jobs with their imports paid once
  (its client; the server in :mod:`~logzbench.pipeline.warm_server`, what both share in
  :mod:`~logzbench.pipeline.warm_common`);
* :mod:`~logzbench.pipeline.usage`: a job's logs, benchmarks and its own process's resource usage.

Building the workflow's DAG imports ``plan``, ``rules``, ``sweep``, ``config_schema``, ``config``, ``outputs`` and
``diagnose``, none of which imports torch; nothing is imported here, so that importing one of them imports no other.
"""

__all__ = [
    "config",
    "config_schema",
    "diagnose",
    "entries",
    "jobs",
    "model_files",
    "outputs",
    "plan",
    "rules",
    "sweep",
    "usage",
    "warm",
]
