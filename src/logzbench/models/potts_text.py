"""Plain-text Potts parameter files (adabmDCA / bmDCA): :func:`read_potts_text` and :func:`write_potts_text`.

The text format of the DCA tools, read into and written from a :class:`~logzbench.models.potts.PottsModel`
(the model itself, its ``.npz`` files and its annealing path are :mod:`logzbench.models.potts`'s).

One parameter per line, fields separated by white space::

    J i j a b value
    h i a value

* Indices are **0-based**: sites ``i, j`` in ``0..L-1``, states ``a, b`` in ``0..q-1``; ``L`` and ``q``
  are inferred as one more than the largest site and state index in the file.
* States may be written as numbers (bmDCA and adabmDCA's "old" format) or as letters of an alphabet
  (adabmDCA's current format, ``adabmDCA/io.py`` ``save_params``: ``J 0 1 A C 0.01``); a letter is
  mapped to its position in ``alphabet`` (default adabmDCA's protein alphabet
  ``-ACDEFGHIKLMNPQRSTVWY``, gap first, so ``-`` is state 0).  The alphabet's order matters: the test
  rows must be encoded with the same alphabet.
* Couplings are written for ``i < j`` only (adabmDCA's writer), and the reader fills the other order
  symmetrically, ``J[j, i, b, a] = J[i, j, a, b]``.  A line with ``i > j`` is read as its mirror
  ``J j i b a``; both orders of the same entry may appear only with the same value.  ``i = j`` is
  refused (a pairwise model has no diagonal couplings).
* Missing entries are 0.  No gauge is imposed or assumed: gauge changes (moving terms between ``h`` and
  ``J``) change neither ``log f(x)`` nor ``log Z``, so files in the zero-sum or any other gauge are read
  as they are.
* Blank lines and lines starting with ``#`` are skipped.  A malformed line (unknown leading letter,
  wrong number of fields, a non-integer index, an index out of range, an unknown state letter, a
  non-finite value or one beyond ``+-1e30`` (:data:`~logzbench.models.potts.PARAM_LIMIT`), a repeated
  entry, bytes that are not UTF-8) is refused with a :class:`~logzbench.errors.ModelFileError` naming
  the file and the line number; so is a file with no parameter lines at all.
* ``L`` and ``q`` come from the largest indices, and the model is dense (``J`` holds ``L^2 q^2``
  float64), so before anything is allocated the size they imply is checked against the memory
  available (:func:`~logzbench.models.potts.dense_bytes`, :func:`logzbench.utils.memory_shortfall`): one mistyped index
  (``h 0 999999 0.1``) is refused naming the line, not answered with a 7 TiB allocation.

:func:`write_potts_text` writes numeric states, ``J`` lines for ``i < j`` (every ``a, b``) then ``h``
lines, each value with 17 significant digits (a float64 round trip).
"""

from __future__ import annotations

import math
import os

import numpy as np
import torch

from ..errors import ModelFileError
from ._arrays import errors_named
from .potts import PARAM_LIMIT, PottsModel, dense_bytes

__all__ = ["DEFAULT_ALPHABET", "read_potts_text", "write_potts_text"]

#: adabmDCA's protein alphabet (``TOKENS_PROTEIN`` in ``adabmDCA/fasta.py``): the gap is state 0
DEFAULT_ALPHABET = "-ACDEFGHIKLMNPQRSTVWY"
#: the longest line of a text parameter file read (bytes; a parameter line is a few dozen)
_MAX_LINE = 1 << 16


def _check_dense_memory(L: int, q: int, src: str, site_line: int, state_line: int, device=None) -> None:
    """Refuse (ModelFileError naming the lines whose indices set ``L`` and ``q``) a text file whose dense
    model (:func:`dense_bytes`) would not fit in the memory available, before anything is allocated: the
    dense arrays are read on the CPU, the model's copies live on ``device``."""
    from ..utils import memory_shortfall

    device = torch.device(device) if device is not None else torch.device("cpu")
    arrays = 8 * (L * L * q * q + L * q)  # the file's h and J, on the CPU
    model = dense_bytes(L, q) - arrays
    short = (
        memory_shortfall(arrays + model)
        if device.type == "cpu"
        else memory_shortfall(arrays) or memory_shortfall(model, device)
    )
    if short is not None:
        raise ModelFileError(
            f"{src}: the largest site index {L - 1} (line {site_line}) and state index {q - 1} (line "
            f"{state_line}) make a dense model of L = {L} sites and q = {q} states (J: L x L x q x q float64), "
            f"which needs {short}; check those indices"
        )


def _content_lines(fh):
    """``(line number, fields)`` of the non-empty, non-comment lines."""
    for n, line in enumerate(fh, start=1):
        s = line.strip()
        if s and not s.startswith("#"):
            yield n, s.split()


def _text_lines(fh, src: str):
    """The lines of binary file ``fh`` decoded as UTF-8; a line that is not UTF-8 or longer than
    :data:`_MAX_LINE` bytes (a binary file) is refused naming its number (ModelFileError)."""
    n = 0
    while True:
        raw = fh.readline(_MAX_LINE + 1)
        if not raw:
            return
        n += 1
        if len(raw) > _MAX_LINE:
            raise ModelFileError(
                f"{src}, line {n}: not a text file (a line of more than {_MAX_LINE} bytes); a Potts parameter "
                "file has lines 'J i j a b value' and 'h i a value', a model file is an .npz"
            )
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ModelFileError(
                f"{src}, line {n}: not a text file (byte {raw[exc.start]:#04x} is not UTF-8); a Potts parameter "
                "file has lines 'J i j a b value' and 'h i a value', a model file is an .npz"
            ) from None


class _Parameters:
    """The parameters read so far from one Potts text file, each line's fields checked as it is added:
    ``h`` by ``(i, a)``; ``J`` by ``(i, j, a, b)`` with ``i < j``, as ``(value, line, written mirrored)``;
    the largest site and state index seen, with their lines (``L`` and ``q``, named when too large)."""

    def __init__(self, src: str, alphabet: str):
        self.src, self.alphabet = src, alphabet
        self.letter = {c: k for k, c in enumerate(alphabet)}
        self.h: dict[tuple[int, int], float] = {}
        self.J: dict[tuple[int, int, int, int], tuple[float, int, bool]] = {}
        self.top_site, self.top_state = (-1, 0), (-1, 0)  # (largest index, its line)

    def _error(self, n: int, what: str) -> ModelFileError:
        return ModelFileError(f"{self.src}, line {n}: {what}")

    def _index(self, tok: str, n: int, what: str, not_integer) -> int:
        """A 0-based ``what`` index written as an integer; ``not_integer(tok, n)`` answers (or refuses) a
        token that is no integer."""
        try:
            v = int(tok)
        except ValueError:
            return not_integer(tok, n)
        if v < 0:
            raise self._error(n, f"{what} index {v} is negative (indices are 0-based)")
        return v

    def _letter(self, tok: str, n: int) -> int:
        if tok in self.letter:
            return self.letter[tok]
        raise self._error(
            n, f"state {tok!r} is neither an integer nor a letter of the alphabet {self.alphabet!r}"
        ) from None

    def _no_site(self, tok: str, n: int) -> int:
        raise self._error(n, f"site index {tok!r} is not an integer") from None

    def state(self, tok: str, n: int) -> int:
        """A state: a 0-based integer, or a letter of the alphabet."""
        return self._index(tok, n, "state", self._letter)

    def site(self, tok: str, n: int) -> int:
        """A 0-based site index."""
        return self._index(tok, n, "site", self._no_site)

    def value(self, tok: str, n: int) -> float:
        """A parameter value: a finite number within ``PARAM_LIMIT``."""
        try:
            v = float(tok)
        except ValueError:
            raise self._error(n, f"value {tok!r} is not a number") from None
        if not math.isfinite(v):
            raise self._error(n, f"value {tok!r} is not finite")
        if abs(v) > PARAM_LIMIT:
            raise self._error(
                n,
                f"value {tok!r} is beyond +-{PARAM_LIMIT:.0e}; parameters this large overflow "
                "log f (not a usable model)",
            )
        return v

    def _note(self, n: int, sites: tuple[int, ...], states: tuple[int, ...]) -> None:
        self.top_site = max(self.top_site, (max(sites), n), key=lambda t: t[0])
        self.top_state = max(self.top_state, (max(states), n), key=lambda t: t[0])

    def add_coupling(self, f: list[str], n: int) -> None:
        """A ``J i j a b value`` line; the same coupling may be written once each way round, alike."""
        if len(f) != 6:
            raise self._error(n, f"a 'J' line has 6 fields (J i j a b value), got {len(f)}")
        i, j, a, b, v = (
            self.site(f[1], n),
            self.site(f[2], n),
            self.state(f[3], n),
            self.state(f[4], n),
            self.value(f[5], n),
        )
        if i == j:
            raise self._error(n, f"coupling of site {i} with itself (i = j)")
        mirrored = i > j
        key = (j, i, b, a) if mirrored else (i, j, a, b)
        if key in self.J:
            v0, n0, m0 = self.J[key]
            if m0 == mirrored or v0 != v:
                raise self._error(n, f"duplicate coupling J {i} {j} {f[3]} {f[4]} (also given on line {n0})")
        self.J[key] = (v, n, mirrored)
        self._note(n, (i, j), (a, b))

    def add_field(self, f: list[str], n: int) -> None:
        """An ``h i a value`` line."""
        if len(f) != 4:
            raise self._error(n, f"an 'h' line has 4 fields (h i a value), got {len(f)}")
        key = (self.site(f[1], n), self.state(f[2], n))
        v = self.value(f[3], n)
        if key in self.h:
            raise self._error(n, f"duplicate field h {f[1]} {f[2]}")
        self.h[key] = v
        self._note(n, key[:1], key[1:])

    def add(self, f: list[str], n: int) -> None:
        """Line ``n``'s fields ``f``: a coupling or a field."""
        if f[0] == "J":
            self.add_coupling(f, n)
        elif f[0] == "h":
            self.add_field(f, n)
        else:
            raise self._error(
                n, f"unknown parameter {f[0]!r}; lines start with 'J' (J i j a b value) or 'h' (h i a value)"
            )

    def arrays(self, device) -> tuple[np.ndarray, np.ndarray]:
        """The dense ``h`` ``(L, q)`` and symmetric ``J`` ``(L, L, q, q)``; refused when there are no
        parameters, one state, or more than memory holds."""
        src = self.src
        if not self.h and not self.J:
            raise ModelFileError(
                f"{src}: no parameters: no 'J' or 'h' lines (the file is empty or holds only comments and blank "
                "lines); not a Potts parameter file"
            )
        L, q = self.top_site[0] + 1, self.top_state[0] + 1
        if q < 2:
            raise ModelFileError(f"{src}: every state index is 0; a Potts model has at least 2 states")
        _check_dense_memory(L, q, src, self.top_site[1], self.top_state[1], device)
        h = np.zeros((L, q))
        J = np.zeros((L, L, q, q))
        for (i, a), v in self.h.items():
            h[i, a] = v
        for (i, j, a, b), (v, _, _) in self.J.items():
            J[i, j, a, b] = v
            J[j, i, b, a] = v
        return h, J


def read_potts_text(path: str | os.PathLike, device=None, alphabet: str = DEFAULT_ALPHABET) -> PottsModel:
    """Read a plain-text Potts parameter file (adabmDCA / bmDCA ``J i j a b value`` / ``h i a value``;
    module docstring).

    Parameters
    ----------
    path : path-like
    device : optional
        Where the model lives.
    alphabet : str
        Maps states written as letters to indices (position in the string); numeric states are used
        as they are.

    Returns
    -------
    PottsModel

    Raises
    ------
    ModelFileError
        ``"PATH, line N: ..."`` for a malformed line; ``"PATH: ..."`` for an unreadable or empty file.
    """
    src = str(path)
    params = _Parameters(src, alphabet)
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise ModelFileError(f"{src}: cannot read the Potts parameter file ({exc.strerror or exc})") from None
    with fh:
        for n, f in _content_lines(_text_lines(fh, src)):
            params.add(f, n)
    h, J = params.arrays(device)
    with errors_named(src):
        return PottsModel(h, J, device=device)


def write_potts_text(model: PottsModel, path: str | os.PathLike) -> None:
    """Write ``model`` as a plain-text parameter file (numeric 0-based states, ``J`` for ``i < j`` then
    ``h``; 17 significant digits), atomically (:func:`logzbench.utils.io.atomic_path`)."""
    from ..utils.io import atomic_path

    h = model.h.cpu().numpy()
    J = model.J.cpu().numpy()
    L, q = h.shape
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            for i in range(L):
                for j in range(i + 1, L):
                    block = J[i, j]
                    fh.writelines(f"J {i} {j} {a} {b} {block[a, b]:.17g}\n" for a in range(q) for b in range(q))
            for i in range(L):
                fh.writelines(f"h {i} {a} {h[i, a]:.17g}\n" for a in range(q))
