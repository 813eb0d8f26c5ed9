"""Deep belief network with two hidden layers: an RBM on ``(h_1, h_2)`` over a sigmoid belief layer.

The generative model is (RAISE paper, Eq. 3)

    p(v, h_1, h_2) = p_2(h_1, h_2) p_1(v | h_1),
    p_1(v | h_1)   = prod_i sigmoid(+-(a_i + (W_1 h_1)_i)),

with ``p_2`` a binary RBM (weights ``W_2`` of shape ``(n_1, n_2)``, biases ``b_1``, ``b_2``).
Its normaliser is the top RBM's ``Z``; ``f(v) = sum_{h_1} p_1(v | h_1) f_2(h_1)`` with ``h_2``
summed out of ``f_2``.  The recognition distribution ``q(h_1 | v) = prod_j sigmoid(c_j + (v R)_j)``
(Hinton et al. 2006: after greedy training ``R = W_1`` and ``c`` is the first RBM's hidden
bias) is the importance proposal for ``f(v)`` (RAISE Sec. 5.3) and the first layer of the
RAISE proposal for the unrolled network (Sec. 3.3, Fig. 2).
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import ModelFileError
from . import enumeration
from ._arrays import checked_arrays, errors_named, file_arrays
from ._importance import PROPOSAL_CLIP, LogFEstimate, clip_logits, importance_log_f, sample_factorial
from ._random import normal, resolve_generator
from ._shape import Axis, DeviceOf
from .rbm import BinaryRBM, RBMAnnealingPath, VisibleRows, as_float64, as_param, validate_rbm_arrays

#: Exact ``log f(v)`` enumerates ``h_1``; refuse above 2^MAX_EXACT_BITS states.
MAX_EXACT_BITS = 26


def validate_dbn_arrays(
    W_1, bias_0, W_2, bias_1, bias_2, recognition_W, recognition_bias, data_mean=None, source: str = "DBN"
) -> None:
    """Refuse inconsistent shapes, NaN/inf and overflowing parameters, naming the array."""
    validate_rbm_arrays(
        np.asarray(W_1),
        np.asarray(bias_0),
        np.asarray(recognition_bias),
        data_mean,
        source=f"{source} (directed layer: W_1, bias_0, recognition_bias)",
    )
    validate_rbm_arrays(
        np.asarray(recognition_W),
        np.asarray(bias_0),
        np.asarray(recognition_bias),
        source=f"{source} (recognition: recognition_W, bias_0, recognition_bias)",
    )
    validate_rbm_arrays(
        np.asarray(W_2), np.asarray(bias_1), np.asarray(bias_2), source=f"{source} (top RBM: W_2, bias_1, bias_2)"
    )
    if np.asarray(W_1).shape[1] != np.asarray(W_2).shape[0]:
        raise ModelFileError(
            f"{source}: W_1 has {np.asarray(W_1).shape[1]} columns (h_1 units) but W_2 has "
            f"{np.asarray(W_2).shape[0]} rows; they must match"
        )


class DBN(VisibleRows):
    """A two-hidden-layer deep belief network.

    Parameters
    ----------
    W_1 : array-like, shape (n_visible, n_1)
        Generative weights of the directed layer ``p(v | h_1)``.
    bias_0 : array-like, shape (n_visible,)
        Visible biases of ``p(v | h_1)``.
    W_2 : array-like, shape (n_1, n_2)
        Top RBM weights.
    bias_1, bias_2 : array-like, shapes (n_1,), (n_2,)
        Top RBM biases.
    recognition_bias : array-like, shape (n_1,)
        Biases ``c`` of ``q(h_1 | v)``.
    recognition_W : array-like, shape (n_visible, n_1), optional
        Recognition weights ``R``; default ``W_1`` (tied, as after greedy training).
    device : str or torch.device, optional
    data_mean : array-like, shape (n_visible,), optional
        Kept for the file format; the data-base-rate path is not defined for DBNs.
    """

    family = "dbn"

    def __init__(
        self, W_1, bias_0, W_2, bias_1, bias_2, recognition_bias, recognition_W=None, device=None, data_mean=None
    ):
        device = torch.device(device) if device is not None else torch.device("cpu")
        validate_dbn_arrays(
            *(
                as_float64(x)
                for x in (
                    W_1,
                    bias_0,
                    W_2,
                    bias_1,
                    bias_2,
                    W_1 if recognition_W is None else recognition_W,
                    recognition_bias,
                    data_mean,
                )
            )
        )
        self.W_1 = as_param(W_1, device)
        self.bias_0 = as_param(bias_0, device)
        self.recognition_W = self.W_1 if recognition_W is None else as_param(recognition_W, device)
        self.recognition_bias = as_param(recognition_bias, device)
        self.data_mean = None if data_mean is None else as_param(data_mean, device)
        self.top = BinaryRBM(W_2, bias_1, bias_2, device=device)

    # ------------------------------------------------------------------ basics
    n_visible = Axis("W_1", 0)

    @property
    def layer_sizes(self) -> tuple[int, int, int]:
        return self.n_visible, self.top.n_visible, self.top.n_hidden

    device = DeviceOf("W_1")

    def to(self, device) -> "DBN":
        return DBN(
            self.W_1.to(device),
            self.bias_0.to(device),
            self.top.W.to(device),
            self.top.visible_bias.to(device),
            self.top.hidden_bias.to(device),
            self.recognition_bias.to(device),
            self.recognition_W.to(device),
            device=device,
            data_mean=None if self.data_mean is None else self.data_mean.to(device),
        )

    @classmethod
    def random(
        cls,
        layer_sizes,
        scale: float = 0.01,
        bias_scale: float = 0.0,
        generator: torch.Generator | None = None,
        device=None,
        tied: bool = True,
    ) -> "DBN":
        """Random parameters, for tests; ``tied=False`` draws recognition weights separately from ``W_1``."""
        g = resolve_generator(generator)
        nv, n1, n2 = (int(n) for n in layer_sizes)
        return cls(
            normal(g, nv, n1, scale=scale),
            normal(g, nv, scale=bias_scale),
            normal(g, n1, n2, scale=scale),
            normal(g, n1, scale=bias_scale),
            normal(g, n2, scale=bias_scale),
            normal(g, n1, scale=bias_scale),
            None if tied else normal(g, nv, n1, scale=scale),
            device=device,
        )

    def to_arrays(self) -> dict[str, np.ndarray]:
        params = {
            "W_1": self.W_1,
            "bias_0": self.bias_0,
            "W_2": self.top.W,
            "bias_1": self.top.visible_bias,
            "bias_2": self.top.hidden_bias,
            "recognition_W": self.recognition_W,
            "recognition_bias": self.recognition_bias,
        }
        return file_arrays(params, self.data_mean)

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], source: str = "model", device=None) -> "DBN":
        """A model from :meth:`to_arrays` output (e.g. an ``.npz`` file's contents): ``W_1``, ``bias_0``,
        ``W_2``, ``bias_1``, ``bias_2``, ``recognition_bias``; optional ``recognition_W`` (default ``W_1``),
        ``data_mean`` and ``model_type`` (``"dbn"``).  ``source`` and ``device`` as in
        :meth:`~logzbench.models._arrays.ParameterFile.from_arrays`; a
        :class:`~logzbench.errors.ModelFileError` names ``source`` and the problem: missing, unexpected or
        non-real arrays, inconsistent shapes, NaN / inf, overflowing parameters."""
        a = checked_arrays(
            arrays,
            cls.family,
            ("W_1", "bias_0", "W_2", "bias_1", "bias_2", "recognition_bias"),
            ("recognition_W", "data_mean"),
            source,
        )
        with errors_named(source):
            return cls(
                a["W_1"],
                a["bias_0"],
                a["W_2"],
                a["bias_1"],
                a["bias_2"],
                a["recognition_bias"],
                a.get("recognition_W"),
                device=device,
                data_mean=a.get("data_mean"),
            )

    # ------------------------------------------------------------------ densities
    def log_p_v_given_h1(self, v, h1) -> torch.Tensor:
        """``log p_1(v | h_1)`` for paired rows, float64, shape ``(n,)``."""
        v = self._as_input(v).double()
        pre = torch.as_tensor(h1, device=self.device).double() @ self.W_1.double().T + self.bias_0.double()
        return (v * pre - F.softplus(pre)).sum(1)

    def recognition_logits(self, v) -> torch.Tensor:
        """Logits of ``q(h_1 | v)``, float32, shape ``(n, n_1)``."""
        return torch.addmm(self.recognition_bias, self._as_input(v), self.recognition_W)

    def sample_recognition(
        self, v, generator: torch.Generator, clip: float = PROPOSAL_CLIP
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``h_1 ~ q(h_1 | v)`` (probabilities kept in ``[clip, 1 - clip]``) and ``log q(h_1 | v)`` (float64)."""
        return sample_factorial(clip_logits(self.recognition_logits(v), clip), generator)

    def importance_log_f(
        self, v, n_samples: int, generator: torch.Generator, clip: float = PROPOSAL_CLIP
    ) -> LogFEstimate:
        """Importance-sampling estimate of ``log f(v)`` with the recognition proposal (RAISE Sec. 5.3).

        ``f̂(v) = mean_s p_1(v | h_1^s) f_2(h_1^s) / q(h_1^s | v)``: unbiased for ``f(v)``, so
        ``log f̂(v)`` is a stochastic lower bound on ``log f(v)``.  The recognition
        probabilities are kept in ``[clip, 1 - clip]`` (see :mod:`logzbench.models._importance`;
        on a CD-trained MNIST DBN this cut the bias of ``log f̂`` at 200 samples from -2.0 to
        -1.2 nats).

        Returns
        -------
        LogFEstimate
            ``(log_f, stderr, ess)``, each float64 of shape ``(n,)``.
        """
        v = self._as_input(v)
        logits = clip_logits(self.recognition_logits(v), clip)
        return importance_log_f(
            v,
            logits,
            n_samples,
            generator,
            lambda vi, h: self.log_p_v_given_h1(vi, h) + self.top.log_unnormalized_marginal(h),
        )

    def exact_log_f(self, v, chunk: int = 1 << 14) -> torch.Tensor:
        """``log f(v) = log sum_{h_1} p_1(v | h_1) f_2(h_1)`` by enumerating ``h_1``, float64."""
        v = self._as_input(v).double()
        n1 = self.top.n_visible
        if n1 > MAX_EXACT_BITS:
            raise ValueError(f"exact log f(v) needs 2^{n1} states of h_1; refusing above 2^{MAX_EXACT_BITS}")
        total = 1 << n1
        c = min(total, chunk)
        rows = max(1, (1 << 22) // c)  # (rows, c) float64 blocks near 32 MB
        acc = torch.full((v.shape[0],), -math.inf, dtype=torch.float64, device=v.device)
        for start in range(0, total, c):
            h = enumeration.state_bits(start, min(start + c, total), n1, self.device, torch.float64)
            pre = h @ self.W_1.double().T + self.bias_0.double()  # (c, n_v)
            offset = self.top.log_unnormalized_marginal(h) - F.softplus(pre).sum(1)  # (c,)
            for r in range(0, v.shape[0], rows):
                lse = torch.logsumexp(v[r : r + rows] @ pre.T + offset, dim=1)  # log sum_h p(v|h) f_2(h)
                acc[r : r + rows] = torch.logaddexp(acc[r : r + rows], lse)
        return acc

    def exact_log_z(self, **kw) -> float:
        """``log Z`` of the DBN: that of its top RBM (``p_1(v | h_1)`` is normalised)."""
        return enumeration.exact_log_z(self.top, **kw)

    # ------------------------------------------------------------------ annealing
    def annealing_path(self, init: str = "uniform", data=None) -> "DBNAnnealingPath":
        """AIS / RAISE path of the unrolled DBN (RAISE Sec. 3.3): the top RBM's path from uniform.

        The data-base-rate initial distribution is not defined for DBNs (RAISE Sec. 5.3).
        """
        if init != "uniform":
            raise ValueError(
                f"initial distribution {init!r} is not defined for DBNs; use 'uniform' "
                "(the data base rate describes v, which the top RBM does not model)"
            )
        return DBNAnnealingPath(self, self.top.annealing_path("uniform"))


class DBNAnnealingPath:
    """The top RBM's annealing path, plus the directed layer for RAISE on the unrolled net.

    Everything of the :class:`~logzbench.models.base.AnnealingPath` protocol is the top RBM's
    (so AIS estimates the DBN's ``log Z``).  :meth:`encode` is the bottom of the RAISE proposal
    in Fig. 2: ``h_1 ~ q(h_1 | v)`` with the log-weight offset ``log p_1(v | h_1) - log q(h_1 | v)``;
    RAISE then treats ``h_1`` as the top RBM's data.
    """

    def __init__(self, dbn: DBN, top_path: RBMAnnealingPath):
        self.dbn = dbn
        self.top_path = top_path

    def __getattr__(self, name):  # delegate the AnnealingPath protocol to the top RBM's path
        if name in ("dbn", "top_path"):
            raise AttributeError(name)
        return getattr(self.top_path, name)

    def encode(self, v: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``(h_1, log p_1(v | h_1) - log q(h_1 | v))`` with ``h_1 ~ q(h_1 | v)``, one per row of ``v``."""
        h1, lq = self.dbn.sample_recognition(v, generator)
        return h1, self.dbn.log_p_v_given_h1(v, h1) - lq
