"""The ``logzbench`` command line: ``prepare``, ``train``, ``estimate``, ``sample``, ``report``.

Every subcommand is a thin layer over a documented Python function; bad input ends with a
one-line error naming the problem and exit status 2.  Each subcommand is a module of this package
with ``HELP`` (and ``DESCRIPTION``), ``add(parser)``, which declares its flags, and ``run(args)``, which
runs it.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import sys

from ..errors import LogzbenchError
from . import estimate, prepare, report, sample, train
from .outputs import stdout_to_stderr
from .threads import MAX_THREADS, THREADS_ENV

__all__ = ["MAX_THREADS", "build_parser", "main"]

_log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = argparse.ArgumentParser(prog="logzbench", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"logzbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, command in _COMMANDS.items():
        command.add(sub.add_parser(name, help=command.HELP, description=getattr(command, "DESCRIPTION", None)))
    return parser


_COMMANDS = {"prepare": prepare, "train": train, "estimate": estimate, "sample": sample, "report": report}
#: subcommands that run torch work, and take --threads
_THREADED = ("train", "estimate", "sample")


def _run(args) -> int:
    """Run the subcommand; one that computes runs with the thread count of ``--threads`` (see
    ``logzbench.utils.choose_threads``), which replaces ``args.threads`` and is logged once."""
    if args.command not in _THREADED:
        return _COMMANDS[args.command].run(args)
    from ..utils import using_threads

    if args.threads is not None:
        source = "--threads"
    elif os.environ.get(THREADS_ENV, "").strip():
        source = THREADS_ENV
        value = os.environ[THREADS_ENV].strip()
        if value.lstrip("+").isdigit() and int(value) > MAX_THREADS:  # (not an integer: refused by choose_threads)
            raise ValueError(f"{THREADS_ENV} must be at most {MAX_THREADS} (torch threads), got {value}")
    else:
        source = "automatic"
    with using_threads(args.threads) as n:
        _log.info("logzbench %s: %d torch thread%s (%s)", args.command, n, "" if n == 1 else "s", source)
        args.threads = n
        return _COMMANDS[args.command].run(args)


#: subcommands that may run a user's code (FILE.py:NAME): its stdout goes to stderr
#: (:func:`~logzbench.cli.outputs.stdout_to_stderr`)
_USER_CODE = ("estimate", "sample")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with stdout_to_stderr(args.command in _USER_CODE):
            return _run(args)
    except KeyboardInterrupt:  # Ctrl-C: one line (outputs are written in transactions: none half-written)
        print(f"logzbench {args.command}: interrupted", file=sys.stderr)
        return 130
    except SystemExit as exc:  # sys.exit() in a user's code that no narrower check named
        print(f"logzbench {args.command}: error: user code raised SystemExit({exc.code!r})", file=sys.stderr)
        return 2
    except (LogzbenchError, ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"logzbench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a write outside logzbench.utils.atomic_path on a full or read-only disk
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS):
            raise
        where = f" {exc.filename}" if exc.filename else " an output"
        print(f"logzbench {args.command}: error: cannot write{where}: {exc.strerror or exc}", file=sys.stderr)
        return 2
