"""Builds the sampler's compiled kernel (``src/logzbench/kernels/bernoulli.c``) at installation.

Everything else about the package is declared in ``pyproject.toml``.  The kernel is a plain shared
library that ``logzbench.kernels`` loads with ctypes; it is built by
``src/logzbench/kernels/_build.py`` (loaded here by path: the package is not importable during
its own build), which picks the compiler and flags.  The build is optional: without a C compiler,
or when the compilation fails, the installation still succeeds, and the package uses the NumPy
implementation of the same arithmetic (``logzbench.kernels.kernel_status()`` says so).
"""

import importlib.util
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

_spec = importlib.util.spec_from_file_location(
    "_logzbench_kernel_build", Path(__file__).resolve().parent / "src" / "logzbench" / "kernels" / "_build.py"
)
kernel_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kernel_build)


class OptionalKernelBuild(build_ext):
    """``build_ext`` that compiles the kernel with :func:`kernel_build.compile_kernel` (its own
    compiler command and flags, not Python's) and never fails the installation over it."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # a broken toolchain setup: the NumPy implementation serves instead
            self.warn(f"logzbench: the sampler kernel was not built ({exc}); the NumPy implementation will be used")

    def build_extension(self, ext):
        if ext.name != kernel_build.EXTENSION:
            return super().build_extension(ext)
        target = Path(self.get_ext_fullpath(ext.name))
        flags = kernel_build.compile_kernel(target, log=self.warn)
        if flags is not None:
            self.announce(f"logzbench: built the sampler kernel with {' '.join(flags)}", level=2)
        else:  # never ship a library left in the build directory by an earlier build
            target.unlink(missing_ok=True)


setup(
    ext_modules=[Extension(kernel_build.EXTENSION, sources=["src/logzbench/kernels/bernoulli.c"], optional=True)],
    cmdclass={"build_ext": OptionalKernelBuild},
)
