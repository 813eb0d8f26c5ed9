"""The API and the command line take K's default from one declaration (logzbench.schedules.default_K)."""

import json

import pytest
import torch

from logzbench import cli
from logzbench.api import estimate
from logzbench.models.io import save_model
from logzbench.models.rbm import BinaryRBM
from logzbench.options import EstimateOptions
from logzbench.schedules import DEFAULT_K, default_K


def test_default_K_by_schedule_and_estimator():
    for schedule in ("linear", "sigmoid", "adaptive", "tuned"):
        assert default_K(schedule) == DEFAULT_K == 1000
        assert default_K(schedule, own_start=True) is None
    for schedule in ("sm14500", "salakhutdinov-murray", "salakhutdinov_murray", "betas.npy"):
        assert default_K(schedule) is None
    assert EstimateOptions.from_kwargs().K == DEFAULT_K
    assert EstimateOptions.from_kwargs(steps=7).K == 7
    assert EstimateOptions.from_kwargs(schedule="sm14500").K is None
    assert EstimateOptions.from_kwargs(own_start_K=True).K is None


@pytest.mark.parametrize(
    "estimator, schedule, K",
    [("ais", "linear", 1000), ("ais", "adaptive", 1000), ("ais", "sm14500", 14500), ("sandwich", None, None)],
)
def test_the_api_and_the_command_line_default_K_alike(tmp_path, capsys, estimator, schedule, K):
    path = tmp_path / "rbm.npz"
    model = BinaryRBM.random(6, 3, generator=torch.Generator().manual_seed(0))
    save_model(model, path)
    kw = {"chains": 4, "seed": 3, "pilot_chains": 4}
    flags = ["--chains", "4", "--seed", "3", "--pilot-chains", "4"]
    if schedule:
        kw["schedule"], flags = schedule, [*flags, "--schedule", schedule]
    if estimator == "sandwich":  # one round: the first K is the sandwich's own
        kw.update(max_sweeps=10**9, target_width=1e9)
        flags += ["--max-sweeps", str(10**9), "--target-width", "1e9"]
    api = estimate(model, estimator, threads=1, **kw).to_dict()
    capsys.readouterr()
    assert cli.main(["estimate", str(path), "--estimator", estimator, "--threads", "1", *flags]) == 0
    out = json.loads(capsys.readouterr().out)
    assert api["settings"].get("K") == out["settings"].get("K")
    if K is not None:
        assert api["settings"]["K"] == K
    assert api["log_z"] == out["log_z"]
