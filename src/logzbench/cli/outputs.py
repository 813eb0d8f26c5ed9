"""What a subcommand reads and writes: its output paths checked before any work, its input paths
pinned before a user's code runs, and its result kept off stdout while that code runs.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from pathlib import Path


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (``os.path.samefile`` where both exist, else equal resolved paths)."""
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


def check_outputs(outputs=(), inputs=(), dirs=()) -> None:
    """Refuse, before anything is loaded or computed, an output the command could not or must not write.

    ``outputs``: ``(option, file path or None)``; ``dirs``: ``(option, output directory or None)``;
    ``inputs``: ``(name, path or None)`` of the command's input files.  An output file must not be a
    directory, an existing non-regular file, one of the inputs or another output; an output directory
    must not be an existing non-directory; and the nearest existing directory above (the output
    directory itself, when it exists) must be a writable directory, where the missing folders are
    created.  An output file that is a symlink is written through (the file it resolves to is replaced,
    the link kept; a dangling link's target is created in its existing directory); one resolving to a
    special file (``/dev/stdout`` -> a pipe or terminal, a device, a FIFO, a socket) is refused.  Raises
    ValueError naming the option and the path.
    """
    done: list[tuple[str, Path]] = []
    for option, path, is_dir in [*((o, q, False) for o, q in outputs), *((o, q, True) for o, q in dirs)]:
        if path is None or str(path) == "":
            continue
        p, what = Path(path), f"{option} {path}"
        if is_dir and p.exists() and not p.is_dir():
            raise ValueError(f"{what}: exists and is not a directory (an output directory is expected)")
        if not is_dir and (p.is_dir() or str(path).endswith(("/", os.sep))):
            raise ValueError(f"{what}: is a directory; give a file name")
        if not is_dir and os.path.lexists(p):  # a symlink is written through; a special file is refused
            from ..errors import OutputError
            from ..utils import output_target

            try:
                p = output_target(p)
            except OutputError as exc:
                raise ValueError(f"{what}: {exc.reason}") from None
        base = Path(os.path.abspath(p if is_dir else p.parent))
        while not base.exists() and base != base.parent:
            base = base.parent
        if not base.is_dir():
            raise ValueError(f"{what}: cannot be created, {base} is not a directory")
        if not os.access(base, os.W_OK | os.X_OK):
            raise ValueError(f"{what}: directory {base} is not writable")
        if is_dir:
            continue
        for name, src in inputs:
            if src is not None and str(src) != "" and same_file(p, Path(src)):
                raise ValueError(f"{what}: is the {name} file {src}; refusing to overwrite an input")
        for other, q in done:
            if same_file(p, q):
                raise ValueError(f"{what}: {other} names the same file")
        done.append((option, p))


def model_path(spec: str) -> Path:
    """The file of a model argument (:func:`logzbench.sources.parse_source`: FILE.py of ``FILE.py:NAME``);
    ValueError (one line) for a ``.py`` without ``:NAME`` and for a file that does not exist, before anything
    is imported or computed."""
    from ..sources import parse_source

    try:
        path = Path(parse_source(spec).path)
    except ValueError as exc:
        raise ValueError(f"model {exc}") from None
    if not path.exists():
        raise ValueError(f"model file not found: {path}")
    if path.is_dir():
        raise ValueError(f"model {path}: a directory, not a model file")
    return path.absolute()  # hashed after the user's code ran, which may chdir


def pin_paths(args, *names: str) -> None:
    """Make the path options ``names`` of ``args`` that were given absolute, after :func:`check_outputs`
    (which sees them as given) and before the model is loaded: a user's FILE.py:NAME runs code (at import,
    in NAME(), in log_f) that may ``os.chdir``, and must not move what the command reads or writes later."""
    for name in names:
        value = getattr(args, name, None)
        if value is not None and str(value) != "":
            setattr(args, name, os.path.abspath(value))


#: the buffer a subcommand prints its result to while :func:`stdout_to_stderr` holds stdout
_RESULT: io.StringIO | None = None


def result_stream():
    """The stream a subcommand prints its result to: ``sys.stdout``, or while :func:`stdout_to_stderr`
    holds it, a buffer written to the real stdout when the command has succeeded."""
    return sys.stdout if _RESULT is None else _RESULT


def flush_all(*streams) -> None:
    """Flush Python ``streams`` and C stdio's buffers (a C extension's ``printf``), ignoring failures."""
    for s in streams:
        with contextlib.suppress(Exception):
            s.flush()
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).fflush(None)


@contextlib.contextmanager
def stdout_to_stderr(active: bool = True):
    """While the block runs, everything written to stdout goes to stderr: ``print`` (``sys.stdout`` is
    ``sys.stderr``) and file descriptor 1 itself (``os.write(1, ...)``, C code; fd 1 is a duplicate of fd
    2), so that a user's FILE.py:NAME -- at import, in ``NAME()``, in ``log_f`` -- cannot put text before
    the command's JSON on stdout.  What the command prints to :func:`result_stream` is written to the real
    stdout after the block, only when it ends without an exception."""
    global _RESULT
    if not active or _RESULT is not None:
        yield
        return
    out, buf = sys.stdout, io.StringIO()
    flush_all(out, sys.stderr)
    saved = None
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # fd 1 or 2 closed: the Python-level redirect only
        if saved is not None:
            os.close(saved)
            saved = None
    sys.stdout, _RESULT = sys.stderr, buf
    try:
        yield
    finally:
        flush_all(sys.stdout, out, sys.__stdout__, sys.stderr)  # the user's buffered text still goes to stderr
        sys.stdout, _RESULT = out, None
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)
    if out is not None:
        out.write(buf.getvalue())
        out.flush()
