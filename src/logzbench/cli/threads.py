"""The ``--threads`` flag of the subcommands that run torch work, and its limit."""

from __future__ import annotations

import argparse
import os

#: environment variable of the default thread count (the same name as ``logzbench.utils.THREADS_ENV``;
#: not imported from there: ``utils`` imports torch, and importing the command line must not)
THREADS_ENV = "LOGZBENCH_THREADS"


#: the most torch threads ``--threads`` (and ``$LOGZBENCH_THREADS`` on the command line) may ask for: far more
#: than any machine this runs on has CPUs to use (threads beyond the free CPUs only slow a run down), and far
#: below the counts that crash torch's thread pool (100,000 threads: interrupted; 99,999,999: a segfault)
MAX_THREADS = 256


def thread_count(text: str) -> int:
    """``--threads`` value: an integer from 1 to :data:`MAX_THREADS`."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects an integer >= 1 (torch threads), got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expects an integer >= 1 (torch threads), got {n}")
    if n > MAX_THREADS:
        raise argparse.ArgumentTypeError(
            f"expects at most {MAX_THREADS} torch threads (this machine has {os.cpu_count()} CPUs), got {n}"
        )
    return n


def add_threads(p) -> None:
    p.add_argument(
        "--threads",
        type=thread_count,
        metavar="N",
        help=f"torch threads (default: ${THREADS_ENV} if set, else automatic: the CPUs this process "
        "may use minus those other processes keep busy right now, at least 1 and at most torch's "
        f"default; more threads than free CPUs slow a run down many times); at most {MAX_THREADS}",
    )
