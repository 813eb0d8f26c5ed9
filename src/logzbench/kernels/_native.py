"""Loading the compiled kernel (``bernoulli.c``, built at installation) and checking it first.

The library is found where the installation put it, next to this file (a regular install, or
``pip install -e .``'s in-place build), by :func:`importlib.util.find_spec` under
``logzbench.kernels._bernoulli`` (nothing is imported: the library has no Python API).  Before its
first use in a process it must pass three checks, else CPU draws use the NumPy twin (bit for bit
the same samples and increments, only slower) and :func:`kernel_status` says why:

* a library built with ``-march=native`` runs only on a CPU with every feature flag of the CPU that
  built it (read from its data, without running its code: :func:`._build.cpu_mismatch`), and only
  when it was built from the ``bernoulli.c`` beside it (an editable install's in-place build
  goes stale when the source changes);
* it loads with every entry point;
* it agrees with Philox4x32-10's published known answer and with the NumPy twin on random bytes
  and on the float64 sigmoid of the ties (:func:`_self_check`).

Setting ``LOGZBENCH_NO_COMPILE=1`` uses the NumPy twin without looking for the library.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import threading
from pathlib import Path

import numpy as np

from . import _build
from ._constants import CHUNK
from ._numpy import _random_bytes_np, _sigmoid64

#: Environment variable: ``1`` forces the NumPy implementation (the compiled kernel is not loaded).
ENV_NO_COMPILE = "LOGZBENCH_NO_COMPILE"
_NOT_BUILT = (
    "the compiled kernel was not built at installation (no C compiler, or its build failed); "
    "reinstall with a C compiler to build it"
)

_kernel_state: dict = {}
_lock = threading.Lock()


def _library_path() -> Path | None:
    """Where the installation put the compiled kernel, or ``None`` when it did not build one."""
    try:
        spec = importlib.util.find_spec(_build.EXTENSION)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return None
    return Path(spec.origin)


def _recorded(path: Path) -> tuple[str, str]:
    """The CPU signature (``lz_build_cpu``; empty for a portable build) and the source digest
    (``lz_source_digest``) recorded in the library at ``path``, read as data: loading the library
    runs none of its code (it has no constructors)."""
    lib = ctypes.CDLL(str(path))

    def string(name: str) -> str:
        return ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, name))).decode("ascii", "replace")

    return string("lz_build_cpu"), string("lz_source_digest")


def _load(path: Path):
    """The library at ``path`` with the argument and result types of its entry points."""
    lib = ctypes.CDLL(str(path))
    P, I64, U32, INT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint32, ctypes.c_int
    lib.lz_bernoulli_f32.argtypes = [P, ctypes.c_float, INT, P, U32, U32, P, P, I64, INT]
    lib.lz_bernoulli_f32.restype = None
    lib.lz_bernoulli_f64.argtypes = [P, ctypes.c_double, INT, P, U32, U32, P, P, I64, INT]
    lib.lz_bernoulli_f64.restype = None
    # lz_hidden_step_f32 takes lz_softplus_diff_f32's arguments, with the draw's (table, k0, k1, h) before nthreads
    softplus_diff = [P, I64, I64, ctypes.c_float, ctypes.c_float, P, I64, P, ctypes.c_double, P]
    lib.lz_softplus_diff_f32.argtypes = [*softplus_diff, INT]
    lib.lz_softplus_diff_f32.restype = INT
    lib.lz_hidden_step_f32.argtypes = [*softplus_diff, P, U32, U32, P, INT]
    lib.lz_hidden_step_f32.restype = INT
    lib.lz_philox.argtypes = [ctypes.c_uint64, I64, U32, U32, U32, P]
    lib.lz_philox.restype = None
    lib.lz_random_bytes.argtypes = [I64, U32, U32, P]
    lib.lz_random_bytes.restype = None
    lib.lz_sigmoid_f32.argtypes = [P, P, I64]
    lib.lz_sigmoid_f32.restype = None
    lib.lz_sigmoid64_arr.argtypes = [P, P, I64]
    lib.lz_sigmoid64_arr.restype = None
    lib.lz_avx2.argtypes = []
    lib.lz_avx2.restype = INT
    return lib


def _self_check(lib) -> str | None:
    """Compare the loaded kernel with known answers and the NumPy twin; a message on mismatch."""
    out = np.empty(4, np.uint32)
    lib.lz_philox(0, 1, 0, 0, 0, out.ctypes.data)
    if out.tolist() != [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]:
        return "Philox4x32-10 known-answer test failed"
    b = np.empty(CHUNK + 100, np.uint8)
    lib.lz_random_bytes(b.size, 7, 9, b.ctypes.data)
    if not np.array_equal(b, _random_bytes_np(b.size, 7, 9)):
        return "random bytes differ from the NumPy implementation"
    x = np.linspace(-40, 40, 801)
    s = np.empty_like(x)
    lib.lz_sigmoid64_arr(x.ctypes.data, s.ctypes.data, x.size)
    if not np.array_equal(s, _sigmoid64(x)):
        return "float64 sigmoid differs from the NumPy implementation"
    return None


def _open(path: Path | None):
    """The checked library at ``path`` (default: the installed one) and a status line; the library
    is ``None``, and the line says why, when the NumPy implementation is to be used."""
    if os.environ.get(ENV_NO_COMPILE, "").strip().lower() in ("1", "true", "yes", "on"):
        return None, f"NumPy implementation (${ENV_NO_COMPILE} is set)"
    path = _library_path() if path is None else path
    if path is None:
        return None, f"NumPy implementation ({_NOT_BUILT})"
    try:
        cpu, digest = _recorded(path)
    except (OSError, ValueError) as exc:
        return None, f"NumPy implementation (cannot load {path}: {exc})"
    if _build.SOURCE.is_file() and digest != _build.source_digest():
        return None, (
            f"NumPy implementation (not loading {path}: it was built from another version of "
            f"{_build.SOURCE.name}; reinstall to rebuild it)"
        )
    mismatch = _build.cpu_mismatch(cpu)
    if mismatch:
        return None, (
            f"NumPy implementation (not loading {path}: {mismatch}; reinstall on this machine, or "
            f"with ${_build.ENV_PORTABLE}=1 for every CPU)"
        )
    try:
        lib = _load(path)
    except (OSError, AttributeError) as exc:
        return None, f"NumPy implementation (cannot load {path}: {exc})"
    problem = _self_check(lib)
    if problem:
        return None, f"NumPy implementation ({path}: {problem})"
    return lib, f"compiled kernel {path}" + (" (AVX2)" if lib.lz_avx2() else "")


def _kernel():
    """The loaded C kernel, or ``None`` for the NumPy implementation (decided once per process)."""
    if "lib" not in _kernel_state:
        with _lock:
            if "lib" not in _kernel_state:
                lib, status = _open(None)
                _kernel_state["status"] = status
                _kernel_state["lib"] = lib
    return _kernel_state["lib"]


def kernel_status() -> str:
    """Which implementation CPU draws use: the compiled kernel (its path), or why NumPy is used."""
    _kernel()
    return _kernel_state["status"]
