"""Output files written whole or not at all.

:func:`atomic_path` writes through a temporary file renamed into place; :func:`output_transaction`
groups such writes so that a command leaves all its outputs or none; :func:`output_target` refuses
special files and writes through symlinks; JSON, CSV and ``.npz`` writers build on them.  The file
mode follows the umask as ``open(path, "w")`` would.  ``_replace`` is a function of its own so that
tests can make a rename fail here.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import functools
import json
import os
import stat
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..errors import OutputError

_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process's file-creation mask, read without changing it where possible.

    From ``Umask:`` in ``/proc/self/status`` (Linux >= 4.7); elsewhere by setting and restoring
    :func:`os.umask` under a lock (``os.umask`` is process-wide: threads of this package that read
    it go through the lock, so none sees the temporary value).
    """
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


def default_file_mode() -> int:
    """The permissions ``open(path, "w")`` gives a new file: ``0o666 & ~umask``."""
    return 0o666 & ~current_umask()


#: errno values of an OSError raised while writing an output that mean "this output cannot be written"
#: (inside :func:`atomic_path`'s block other OSErrors -- a failed download, say -- pass unchanged)
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})


def _file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words (for error messages)."""
    for test, words in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO or pipe"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return words
    return "not a regular file"


def _cannot_write(path: str | os.PathLike, exc: BaseException | str) -> OutputError:
    """``OutputError("cannot write PATH: reason")``, with the errno of ``exc`` when it has one."""
    reason = exc if isinstance(exc, str) else (getattr(exc, "strerror", None) or str(exc) or type(exc).__name__)
    err = OutputError(f"cannot write {path}: {reason}")
    err.errno = getattr(exc, "errno", None)
    err.reason = reason
    return err


def output_target(path: str | os.PathLike) -> Path:
    """The file a write to ``path`` replaces: ``path`` itself, or where ``path`` is a symlink the file
    it resolves to (the link is kept and written through, as ``open(path, "w")`` would).

    A dangling symlink's target is created (its directory must exist, as for ``open``).  Raises
    :class:`~logzbench.errors.OutputError` for a special file (a device, FIFO or socket, also behind
    a symlink such as ``/dev/stdout`` -> ``/proc/self/fd/1`` -> a pipe or terminal), a directory, a
    symlink loop, or a link whose target has no name of its own (``/proc/self/fd/N`` of a deleted file).
    """
    path = Path(path)
    try:
        st = os.stat(path)  # follows links, the kernel's way (also /proc/self/fd magic links)
    except FileNotFoundError:
        st = None
    except OSError as exc:  # ELOOP, ENOTDIR, EACCES, ...
        raise _cannot_write(path, exc) from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise _cannot_write(path, f"{_file_kind(st.st_mode)}, not a regular file")
    if not os.path.islink(path):
        return path
    target = Path(os.path.realpath(path))
    if st is None:  # dangling: create the target, in a directory that exists
        if not target.parent.is_dir():
            raise _cannot_write(path, f"dangling symlink to {target}, whose directory does not exist")
        return target
    try:
        same = os.path.samestat(os.stat(target), st)
    except OSError:
        same = False
    if not same:
        raise _cannot_write(path, f"symlink does not resolve to a file name (it resolves to {target})")
    return target


def _make_parents(directory: Path) -> list[Path]:
    """Create ``directory`` and its missing parents; return those created, outermost first."""
    missing = []
    d = Path(os.path.abspath(directory))
    while not os.path.lexists(d) and d != d.parent:
        missing.append(d)
        d = d.parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except BaseException:
        _remove_dirs(missing[::-1])
        raise
    return missing[::-1]


def _remove_dirs(created: list[Path]) -> None:
    """Remove the directories of :func:`_make_parents` that are still empty, innermost first."""
    for d in reversed(created):
        with contextlib.suppress(OSError):
            os.rmdir(d)


def _replace(src: Path, dst: Path) -> None:
    """``os.replace`` (a function of its own, for tests to make fail)."""
    os.replace(src, dst)


class OutputTransaction:
    """Outputs written together: all of them, or none (see :func:`output_transaction`)."""

    def __init__(self) -> None:
        self._staged: dict[str, tuple[Path, Path, str]] = {}  # target -> (temporary, target, path as given)
        self._published: list[tuple[Path, Path | None]] = []  # (target, backup of the file it replaced)
        self._dirs: list[Path] = []  # directories created, outermost first

    def watch_dir(self, path: str | os.PathLike) -> None:
        """Remove ``path`` (and its parents that do not exist now) on rollback, if then empty: for a
        directory the block creates itself (``mkdir``) rather than through :func:`atomic_path`."""
        d = Path(os.path.abspath(path))
        missing = []
        while not os.path.lexists(d) and d != d.parent:
            missing.append(d)
            d = d.parent
        self._dirs.extend(missing[::-1])

    def _stage(self, tmp: Path, target: Path, shown: str, created: list[Path]) -> None:
        self._dirs.extend(created)
        old = self._staged.pop(str(target), None)
        if old is not None:  # written twice in one transaction: the last one counts
            with contextlib.suppress(OSError):
                old[0].unlink()
        self._staged[str(target)] = (tmp, target, shown)

    def publish(self) -> None:
        """Rename the outputs written so far into place (e.g. before another tool reads them); the
        files they replace are kept aside until the transaction ends, and restored on rollback."""
        staged = list(self._staged.values())
        self._staged.clear()
        for i, (tmp, target, shown) in enumerate(staged):
            try:
                backup = self._backup(target)
                self._published.append((target, backup))
                _replace(tmp, target)
            except OSError as exc:
                self._staged = {str(t[1]): t for t in staged[i:]}  # their temporaries go on rollback
                raise _cannot_write(shown, exc) from exc

    @staticmethod
    def _backup(target: Path) -> Path | None:
        """A second name of ``target``'s current file (a hard link; else ``target`` renamed), or None."""
        if not os.path.lexists(target):
            return None
        for _ in range(100):
            backup = target.with_name(f".{target.name}.{os.urandom(4).hex()}.bak")
            try:
                os.link(target, backup, follow_symlinks=False)
                return backup
            except FileExistsError:
                continue
            except OSError:  # no hard links here: move the old file aside
                if not os.path.lexists(backup):
                    os.rename(target, backup)
                    return backup
        raise FileExistsError(errno.EEXIST, "no free backup name", str(target))

    def commit(self) -> None:
        """Publish what is left and drop the backups."""
        self.publish()
        for _, backup in self._published:
            if backup is not None:
                with contextlib.suppress(OSError):
                    backup.unlink()
        self._published.clear()
        self._dirs.clear()

    def rollback(self) -> None:
        """Remove every temporary, put back the files replaced, remove the directories created."""
        for tmp, _, _ in self._staged.values():
            with contextlib.suppress(OSError):
                tmp.unlink()
        self._staged.clear()
        for target, backup in reversed(self._published):
            with contextlib.suppress(OSError):
                if backup is None:
                    target.unlink()
                else:
                    os.replace(backup, target)
            if backup is not None:  # (rename does nothing where both names are links of one file)
                with contextlib.suppress(OSError):
                    if os.path.samefile(backup, target):
                        backup.unlink()
        self._published.clear()
        _remove_dirs(self._dirs)
        self._dirs.clear()


_TRANSACTION: contextvars.ContextVar[OutputTransaction | None] = contextvars.ContextVar(
    "logzbench_output_transaction", default=None
)


@contextlib.contextmanager
def output_transaction() -> Iterator[OutputTransaction]:
    """Every :func:`atomic_path` write in the block (and :func:`save_npz_atomic`,
    :func:`write_json_atomic`, :func:`write_csv_atomic`, the figures) goes to a temporary file; they
    are renamed into place together when the block ends without an exception.  On an exception
    nothing is written or changed: the temporaries are removed, any file already published
    (:meth:`OutputTransaction.publish`, for a tool that must read an output before the block ends) is
    put back as it was, and the directories the block created are removed.

    A transaction inside another joins it (the outer one commits).  Writes from other threads are not
    part of it (the transaction is a context variable).
    """
    outer = _TRANSACTION.get()
    if outer is not None:
        yield outer
        return
    tx = OutputTransaction()
    token = _TRANSACTION.set(tx)
    try:
        yield tx
        tx.commit()
    except BaseException:
        tx.rollback()
        raise
    finally:
        _TRANSACTION.reset(token)


def publish_outputs() -> None:
    """Rename the outputs of the current :func:`output_transaction` written so far into place (no-op
    outside one); they are still undone if the transaction fails later."""
    tx = _TRANSACTION.get()
    if tx is not None:
        tx.publish()


def transactional(func):
    """Decorator: run ``func`` inside an :func:`output_transaction` (all its outputs, or none)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with output_transaction():
            return func(*args, **kwargs)

    return wrapper


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the destination directory; rename it onto ``path`` on success.

    Nothing half-written is left behind: on any exception the temporary file is removed, the
    directories created for it are removed, and ``path`` is untouched.  The file gets the
    permissions a plain ``open(path, "w")`` of a new file would (``0o666 & ~umask``,
    :func:`default_file_mode`), also when ``path`` already exists: an existing file's own mode is not
    kept (it is replaced by a new file).  A symlink ``path`` is written through: the file it resolves
    to is replaced and the link kept (:func:`output_target`, which also refuses special files).
    Inside an :func:`output_transaction` the rename waits for the end of the transaction.

    Raises :class:`~logzbench.errors.OutputError` ("cannot write PATH: reason") when the output
    cannot be created or written: a full disk or quota, a read-only file system, a special file; an
    OSError of another kind raised by the block itself passes unchanged.
    """
    shown = str(path)
    target = output_target(path)
    tx = _TRANSACTION.get()
    try:
        created = _make_parents(target.parent)
    except OSError as exc:
        raise _cannot_write(shown, exc) from exc
    tmp_path = None
    try:
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp" + target.suffix, dir=target.parent)
            os.close(fd)
        except OSError as exc:
            raise _cannot_write(shown, exc) from exc
        tmp_path = Path(tmp)
        try:
            yield tmp_path
        except OSError as exc:
            if exc.errno in _WRITE_ERRNOS and not isinstance(exc, OutputError):
                raise _cannot_write(shown, exc) from exc
            raise
        try:
            os.chmod(tmp_path, default_file_mode())  # mkstemp creates 0600 whatever the umask
            if tx is None:
                _replace(tmp_path, target)
        except OSError as exc:
            raise _cannot_write(shown, exc) from exc
        if tx is not None:
            tx._stage(tmp_path, target, shown, created)
    except BaseException:
        if tmp_path is not None:
            with contextlib.suppress(OSError):
                tmp_path.unlink()
        _remove_dirs(created)
        raise


def save_npz_atomic(path: str | os.PathLike, **arrays: Any) -> None:
    """``np.savez_compressed`` written atomically (the file name is kept exactly)."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, **arrays)


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def write_csv_atomic(path: str | os.PathLike, df: Any, **to_csv_kwargs: Any) -> Path:
    """``df.to_csv(path, index=False, **to_csv_kwargs)`` written atomically; returns ``Path(path)``."""
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, **to_csv_kwargs)
    return Path(path)


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of a file's content (hex), read in 1 MiB blocks: a model file's identity in its records."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def archive_refusal(path: str | os.PathLike, peak_factor: float = 1.0, max_ratio: float | None = None) -> str | None:
    """Why the zip archive ``path`` (an ``.npz``, a TorchScript ``.pt``) should not be unpacked, or ``None``.

    Reads only the archive's directory: the entries' uncompressed sizes add up to what loading it
    allocates (times ``peak_factor``), checked against the memory available
    (:func:`logzbench.utils.devices.memory_shortfall`); with ``max_ratio``, more than ``max_ratio`` times
    the file's own size (plus 1 MiB) is refused too, whatever the memory (a zip bomb: a small file of
    a huge compressed entry).  ``OSError`` / ``zipfile.BadZipFile`` for a file that cannot be read as
    a zip archive.
    """
    import zipfile

    from .devices import format_bytes, memory_shortfall

    with zipfile.ZipFile(path) as zf:
        total = sum(info.file_size for info in zf.infolist())
    size = os.path.getsize(path)
    if max_ratio is not None and total > max_ratio * size + (1 << 20):
        return (
            f"its entries unpack to {format_bytes(total)} from a file of {format_bytes(size)} (more than "
            f"{max_ratio:g} times its size: a zip bomb, not an archive of the model's tensors)"
        )
    short = memory_shortfall(int(total * peak_factor))
    return None if short is None else f"its entries unpack to {format_bytes(total)}; loading them needs {short}"
