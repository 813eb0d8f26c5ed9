"""Liu et al. Sec. 6 on small grid MRFs: every estimator within its reported uncertainty of the
transfer-matrix log Z."""

import pytest
import torch

from logzbench import schedules
from logzbench.estimators.ads import ads
from logzbench.estimators.importance import importance_sampling
from logzbench.estimators.is_combinations import discriminance_sampling, naive_average
from logzbench.estimators.reverse_ais import reverse_ais
from logzbench.estimators.reverse_importance import reverse_importance_sampling
from logzbench.models import GridMRF


def _samples(mrf, reference, n, seed):
    g = torch.Generator().manual_seed(seed)
    x0 = reference.sample(n, g)
    x1 = mrf.gibbs(reference.sample(n, g), g, n_sweeps=500)  # Gibbs with 500 burn-in sweeps, as in the paper
    l0 = mrf.log_f(x0) - reference.log_prob(x0)
    l1 = mrf.log_f(x1) - reference.log_prob(x1)
    return l0.numpy(), l1.numpy()


@pytest.mark.parametrize("reference", ["uniform", "mean-field"])
def test_sampling_estimators_on_a_small_grid(reference):
    mrf = GridMRF.random(4, 4, sigma_pair=0.5, seed=3)
    exact = mrf.exact_log_z()
    ref = mrf.uniform_reference() if reference == "uniform" else mrf.mean_field()
    l0, l1 = _samples(mrf, ref, 2000, seed=1)
    for est in (
        importance_sampling(l0),
        reverse_importance_sampling(l1),
        discriminance_sampling(l0, l1),
        naive_average(l0, l1),
    ):
        se = est.log_z_stderr
        assert abs(est.log_z - exact) < 4 * se + 0.02, (est.estimator, est.log_z, exact, se)


@pytest.mark.parametrize("init", ["uniform", "mean-field"])
def test_annealed_estimators_on_a_small_grid(init):
    mrf = GridMRF.random(4, 4, sigma_pair=1.0, seed=4)
    exact = mrf.exact_log_z()
    path = mrf.annealing_path(init)
    a = ads(path, schedules.linear(30), 400, torch.Generator().manual_seed(0))
    assert abs(a.log_z - exact) < 4 * a.log_z_stderr + 0.01
    r = reverse_ais(path, schedules.linear(200), 400, torch.Generator().manual_seed(1))
    assert abs(r.log_z - exact) < 4 * r.log_z_stderr + 0.01
