"""A throwaway PostgreSQL cluster for tests, started from the installed binaries (no running service).

``initdb`` into a fresh directory, ``pg_ctl start`` on a free loopback port (trust authentication,
no fsync), ``createdb`` per test database, ``pg_ctl stop`` and removal at the end.  PostgreSQL
refuses to run as root: as root (here and in CI) the server runs as the ``postgres`` user where it
exists (Debian's package creates it), else as ``nobody``; its directory is then a fresh one under
the system's temporary directory (pytest's are private to root), owned by that user.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

#: superuser of the throwaway cluster (trust authentication on loopback, no password)
PG_USER = "mlflow"


def find_bin_dir() -> Path | None:
    """Directory of ``initdb`` and ``pg_ctl``: ``$LOGZBENCH_PG_BIN``, the newest
    ``/usr/lib/postgresql/<version>/bin``, else the ``PATH``'s."""
    candidates = [os.environ.get("LOGZBENCH_PG_BIN")]
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
        reverse=True,
    )
    candidates += versions
    which = shutil.which("pg_ctl")
    candidates.append(str(Path(which).parent) if which else None)
    for c in candidates:
        if c and (Path(c) / "initdb").is_file() and (Path(c) / "pg_ctl").is_file():
            return Path(c)
    return None


def _unprivileged_user() -> pwd.struct_passwd | None:
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    return None


def unavailable_reason() -> str | None:
    """Why no throwaway cluster can be started here, else ``None``."""
    if find_bin_dir() is None:
        return (
            "PostgreSQL binaries (initdb, pg_ctl) not found under /usr/lib/postgresql/*/bin, $LOGZBENCH_PG_BIN "
            "or PATH: install postgresql-15 (Debian: apt-get install postgresql-15)"
        )
    if os.geteuid() == 0 and _unprivileged_user() is None:
        return "running as root and no 'postgres' or 'nobody' user to run PostgreSQL as (it refuses root)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresCluster:
    """One throwaway PostgreSQL server; :meth:`createdb` gives a database's SQLAlchemy URI."""

    def __init__(self) -> None:
        self.bin = find_bin_dir()
        assert self.bin is not None, unavailable_reason()
        self.user = _unprivileged_user() if os.geteuid() == 0 else None
        self.dir = Path(tempfile.mkdtemp(prefix="logzbench-pg-"))
        if self.user is not None:
            os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)
        self.data = self.dir / "data"
        self.port = _free_port()
        self.started = False

    def _run(self, tool: str, *args: str, as_owner: bool = True) -> subprocess.CompletedProcess:
        kw = {}
        if as_owner and self.user is not None:
            kw = dict(user=self.user.pw_uid, group=self.user.pw_gid, extra_groups=[])
        proc = subprocess.run(
            [str(self.bin / tool), *args], capture_output=True, text=True, timeout=120, cwd=self.dir, **kw
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def start(self) -> "PostgresCluster":
        self._run("initdb", "-D", str(self.data), "-U", PG_USER, "--auth=trust", "-E", "UTF8", "--no-sync")
        opts = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
            f"-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        try:
            self._run(
                "pg_ctl",
                "-D",
                str(self.data),
                "-o",
                opts,
                "-l",
                str(self.dir / "postgres.log"),
                "-w",
                "-t",
                "60",
                "start",
            )
        except RuntimeError as exc:
            log = self.dir / "postgres.log"
            raise RuntimeError(f"{exc}\n{log.read_text() if log.is_file() else ''}") from None
        self.started = True
        return self

    def createdb(self, name: str) -> str:
        """Create database ``name``; its URI ``postgresql://mlflow@127.0.0.1:<port>/<name>``."""
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", PG_USER, name, as_owner=False)
        return f"postgresql://{PG_USER}@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        if self.started:
            with contextlib.suppress(Exception):
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
            self.started = False
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "PostgresCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
