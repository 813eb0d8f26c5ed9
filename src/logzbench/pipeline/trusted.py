"""Which directories and files the workflow may trust with code or secrets (standard library only).

The warm server's directory holds what another local user must not control: its socket receives a
job's environment (:mod:`logzbench.pipeline.warm`).  It lives by default under a predictable name
(``$TMPDIR/logzbench-<uid>``), which anyone with write access to the parent could create first.
A path is trusted here only when no other user can have put it there or change it:

* the directory itself is a real directory (not a symbolic link), owned by the current user, and
  not writable by group or others (``private=True``: no access for them at all, mode ``0700``);
* every directory above it (after resolving links) is owned by the current user or by root, and
  is not writable by group or others unless its sticky bit is set (as on ``/tmp``), so nobody
  else can rename or replace an entry on the way;
* a file in it is a regular file (not a link), owned by the current user and not writable by
  group or others.

The functions return the reason a path is not trusted (one phrase naming the path), or ``None``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

try:
    import pwd
except ImportError:  # not on every platform; only names owners in messages
    pass

__all__ = ["untrusted_dir", "untrusted_file", "private_dir"]


def _who(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except (NameError, KeyError):
        return f"uid {uid}"


def _ancestors_problem(path: Path) -> str | None:
    me = os.getuid()
    for parent in Path(os.path.realpath(path.parent)).resolve().joinpath("x").parents:
        try:
            st = os.stat(parent)
        except OSError as exc:
            return f"{parent} cannot be read ({exc.strerror})"
        if st.st_uid not in (me, 0):
            return f"{parent} above it is owned by {_who(st.st_uid)}"
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
            return f"{parent} above it is writable by other users (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def untrusted_dir(path: str | os.PathLike, *, private: bool = False) -> str | None:
    """Why directory ``path`` cannot be trusted, or ``None`` (see the module docstring)."""
    path = Path(os.path.abspath(path))
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid != os.getuid():
        return f"{path} is owned by {_who(st.st_uid)}, not by you"
    mode = stat.S_IMODE(st.st_mode)
    if private and mode & 0o077:
        return f"{path} has mode {mode:04o}, not 0700"
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by other users (mode {mode:04o})"
    return _ancestors_problem(path)


def untrusted_file(path: str | os.PathLike) -> str | None:
    """Why file ``path`` cannot be trusted (its directory is checked by :func:`untrusted_dir`), or ``None``."""
    path = Path(os.path.abspath(path))
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file"
    if st.st_uid != os.getuid():
        return f"{path} is owned by {_who(st.st_uid)}, not by you"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by other users (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def private_dir(path: str | os.PathLike, *, private: bool = True) -> Path:
    """Create ``path`` (mode ``0700``; missing parents ``0755``) unless it exists, then
    check it with :func:`untrusted_dir`; raises :class:`PermissionError` naming the reason, or
    :class:`OSError` when it cannot be created.  An existing directory's mode is never changed:
    somebody else's directory stays refused."""
    path = Path(os.path.abspath(path))
    missing = [q for q in (path, *path.parents) if not os.path.lexists(q)]
    for q in reversed(missing):  # not writable by others whatever the umask (0700 for the directory itself)
        try:
            os.mkdir(q, 0o700 if q == path else 0o755)
        except FileExistsError:
            pass  # created concurrently: checked below like any existing directory
    problem = untrusted_dir(path, private=private)
    if problem:
        raise PermissionError(problem)
    return path
