"""Compiling ``bernoulli.c`` into the shared library that :mod:`._native` loads (standard library only).

``setup.py`` runs :func:`compile_kernel` when the package is installed (``pip install .``, or
``pip install -e .``, whose build puts the library next to this file): its ``build_ext`` loads this
file by path, before the package can be imported.  The library is a plain shared object loaded with
:mod:`ctypes` (no Python API), under the extension-module file name of the installing interpreter
so that :func:`importlib.util.find_spec` finds it in regular and editable installs alike.

**Flags.**  ``-O3 -march=native`` with OpenMP, falling back to the same without OpenMP and then to
a portable ``-O3`` (no AVX2 paths): the first set the compiler accepts is used.  No fast-math and
no contraction into fused multiply-adds (``-ffp-contract=off``): every floating-point operation
stays one IEEE operation, so every build gives the NumPy twin's bits; ``-fno-trapping-math`` only
lets the vectoriser turn comparisons into selects.  ``-march=native`` tunes the library to the
installing machine's CPU, so a native build records that CPU's feature flags in the library
(``lz_build_cpu``, from :func:`cpu_signature`), and the loader refuses it on a CPU that lacks one
of them (an installation shared by machines of different CPUs: reinstall there, or set
``LOGZBENCH_PORTABLE_BUILD=1`` at installation for the portable flags).  The library also records
the digest of the source it was built from (``lz_source_digest``, :func:`source_digest`): an
in-place build of an editable install that is older than ``bernoulli.c`` is not used.  The compiler is ``$CC``,
else ``cc``, ``gcc`` or ``clang`` from the ``PATH``.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

#: The kernel's C source.
SOURCE = Path(__file__).with_name("bernoulli.c")
#: The dotted name under which the library is built and found (a plain shared object).
EXTENSION = "logzbench.kernels._bernoulli"
#: Environment variable at installation: ``1`` builds with :data:`PORTABLE_FLAGS` only.
ENV_PORTABLE = "LOGZBENCH_PORTABLE_BUILD"
#: Seconds one compiler run may take.
COMPILE_TIMEOUT = 300.0
_COMMON = ["-ffp-contract=off", "-fno-trapping-math", "-fno-strict-aliasing"]
#: The flags without ``-march``: no AVX2 paths, runs on every CPU of the architecture.
PORTABLE_FLAGS = ["-O3", "-ffp-contract=off", "-fno-strict-aliasing"]
#: Compiler flags, best first (see the module docstring).
FLAG_SETS = (
    ["-O3", "-march=native", *_COMMON, "-fopenmp"],
    ["-O3", "-march=native", *_COMMON],
    PORTABLE_FLAGS,
)


def cpu_signature() -> str:
    """What ``-march=native`` depends on: the platform, the machine and its CPU feature flags."""
    flags = ""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith(("flags", "Features")):
                    flags = line.split(":", 1)[-1].strip()
                    break
    except OSError:
        flags = platform.processor()
    sig = f"{sys.platform} {platform.machine()} : {flags}"
    return "".join(c if c.isalnum() or c in " _.:-" else "_" for c in sig)  # safe in a C string literal


#: x86 flags of /proc/cpuinfo that name instruction-set extensions (a compiler may use them under
#: -march=native); the others (``hypervisor``, ``constant_tsc``, ...) do not matter to the code.
_X86_ISA = (
    "3dnow",
    "abm",
    "adx",
    "aes",
    "amx",
    "avx",
    "bmi",
    "cx16",
    "f16c",
    "fma",
    "gfni",
    "lahf_lm",
    "lzcnt",
    "mmx",
    "movbe",
    "movdir",
    "pclmul",
    "pni",
    "popcnt",
    "prfchw",
    "sha",
    "sse",
    "ssse3",
    "tbm",
    "vaes",
    "vpclmul",
    "xop",
)


def _isa_flag(machine: str, flag: str) -> bool:
    """Whether ``flag`` of a signature's CPU flags names instructions (on other than x86, all do)."""
    if not machine.endswith(("x86_64", "AMD64", "i386", "i686", "x86")):
        return True
    return flag.startswith(_X86_ISA)


def cpu_mismatch(built: str, here: str | None = None) -> str | None:
    """Why a library built on a CPU of signature ``built`` (empty: a portable build) must not run
    on this one (``here``, default :func:`cpu_signature`), or ``None``: the platform and machine
    must agree and this CPU must have every instruction-set flag of the building one."""
    if not built:
        return None
    here = cpu_signature() if here is None else here
    b_machine, _, b_flags = built.partition(" : ")
    h_machine, _, h_flags = here.partition(" : ")
    if b_machine != h_machine:
        return f"built on {b_machine}, running on {h_machine}"
    missing = sorted(f for f in set(b_flags.split()) - set(h_flags.split()) if _isa_flag(b_machine, f))
    if missing:
        return f"built for a CPU with {' '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}, which this one lacks"
    return None


def source_digest(source: Path = SOURCE) -> str:
    """The first 16 hex digits of the SHA-256 of ``source`` (recorded in the library at its build)."""
    return hashlib.sha256(Path(source).read_bytes()).hexdigest()[:16]


def find_compiler() -> list[str] | None:
    """The C compiler command: ``$CC`` (split like a shell word list), else ``cc``, ``gcc`` or ``clang``."""
    env = os.environ.get("CC", "").strip()
    if env:
        return shlex.split(env)
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    return [cc] if cc else None


def flag_sets() -> tuple[list[str], ...]:
    """:data:`FLAG_SETS`, or only :data:`PORTABLE_FLAGS` when ``$LOGZBENCH_PORTABLE_BUILD`` is set."""
    if os.environ.get(ENV_PORTABLE, "").strip().lower() in ("1", "true", "yes", "on"):
        return (PORTABLE_FLAGS,)
    return FLAG_SETS


def _shown(cmd: list[str]) -> str:
    """``cmd`` for a message, the recorded CPU flags abbreviated."""
    return shlex.join(a if not a.startswith("-DLZ_BUILD_CPU=") else "-DLZ_BUILD_CPU=..." for a in cmd)


def compile_kernel(
    target: str | os.PathLike, sets=None, cc: list[str] | None = None, log=print, source: Path = SOURCE
) -> list[str] | None:
    """Compile ``source`` into the shared library ``target`` with the first flag set of ``sets``
    (default :func:`flag_sets`) that works; returns the flags used, or ``None`` (each failure passed
    to ``log``) when there is no compiler or no set works.  ``target`` appears only when complete."""
    cc = cc or find_compiler()
    if not cc:
        log(
            "logzbench: no C compiler found ($CC, cc, gcc, clang): the sampler kernel is not built, "
            "the NumPy implementation will be used"
        )
        return None
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    for flags in sets or flag_sets():
        defines = [f'-DLZ_SOURCE_DIGEST="{source_digest(source)}"']
        if "-march=native" in flags:
            defines.append(f'-DLZ_BUILD_CPU="{cpu_signature()}"')
        cmd = [*cc, *flags, *defines, "-fPIC", "-shared", "-o", str(tmp), str(source), "-lm"]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log(f"logzbench: {_shown(cmd)}: {exc}")
            break
        if res.returncode == 0:
            os.chmod(tmp, 0o755)
            os.replace(tmp, target)
            return flags
        log(f"logzbench: {_shown(cmd)} failed:\n{res.stderr[-2000:]}")
        tmp.unlink(missing_ok=True)
    log("logzbench: the sampler kernel could not be built: the NumPy implementation will be used")
    return None
