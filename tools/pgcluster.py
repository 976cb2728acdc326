"""A private PostgreSQL server, made for one test or chaos run and removed afterwards.

Recovery tests stop and restart the database under running services (an outage, a restart that drops every
session and with them every advisory lock). They must never do that to a PostgreSQL server someone else
uses, so each one makes its own: ``initdb`` into a fresh folder, a server on a free port of its own
(127.0.0.1 only, trust authentication), stopped and started at will, and removed with its folder at the end.

PostgreSQL refuses to run as root; when this process is root the server runs as the ``postgres`` user
(``runuser``), and its folder is made under ``/tmp`` and given to that user.

    with PrivatePostgres.create() as cluster:
        url = cluster.url("postgres")      # postgresql+asyncpg://postgres@127.0.0.1:<port>/postgres
        cluster.stop(mode="immediate")     # an outage (a crash: no checkpoint)
        cluster.start()                    # on the same port
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Literal

StopMode = Literal["smart", "fast", "immediate"]


class PostgresUnavailable(RuntimeError):
    """PostgreSQL's server programs (initdb, pg_ctl) are not installed here."""


def server_bin() -> Path:
    """The folder of PostgreSQL's server programs (the newest installed version; ``PG_BIN`` overrides)."""
    configured = os.environ.get("PG_BIN", "").strip()
    candidates = [configured] if configured else sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for folder in candidates:
        if folder and (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    raise PostgresUnavailable(
        "PostgreSQL's server programs (initdb, pg_ctl) are not installed: apt-get install postgresql, "
        "or set PG_BIN to their folder"
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PrivatePostgres:
    """One private PostgreSQL server: its folder, port and state."""

    def __init__(self, folder: Path, port: int, bin_dir: Path, run_as: str | None) -> None:
        self.folder = folder
        self.port = port
        self._bin = bin_dir
        self._run_as = run_as
        self.data = folder / "data"
        self.log = folder / "server.log"

    @classmethod
    def create(cls, port: int | None = None) -> PrivatePostgres:
        """``initdb`` a new cluster in a fresh folder and start it on ``port`` (a free one by default)."""
        bin_dir = server_bin()
        run_as = "postgres" if os.geteuid() == 0 else None
        folder = Path(tempfile.mkdtemp(prefix="skillclassics-pg-", dir="/tmp"))
        if run_as is not None:
            shutil.chown(folder, user=run_as)
        cluster = cls(folder, port or _free_port(), bin_dir, run_as)
        try:
            cluster._run(
                "initdb", "-D", str(cluster.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"
            )
            cluster.start()
        except BaseException:
            cluster.remove()
            raise
        return cluster

    def __enter__(self) -> PrivatePostgres:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def url(self, database: str = "postgres", driver: str = "postgresql+asyncpg") -> str:
        return f"{driver}://postgres@127.0.0.1:{self.port}/{database}"

    def _command(self, program: str, *args: str) -> list[str]:
        command = [str(self._bin / program), *args]
        if self._run_as is not None:
            command = ["runuser", "-u", self._run_as, "--", *command]
        return command

    def _run(self, program: str, *args: str) -> None:
        result = subprocess.run(self._command(program, *args), capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(
                f"{program} failed ({result.returncode}): {result.stderr.strip() or result.stdout}"
            )

    def start(self, within_s: float = 30.0) -> None:
        """Start the server (on its port) and wait until it accepts connections."""
        options = (
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c max_connections=300 -c shared_buffers=32MB"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.log), "-w", "-t", "60", "start"
        )
        self.wait_accepting(within_s)

    def stop(self, mode: StopMode = "fast") -> None:
        """Stop the server: ``fast`` as an operator's restart does (every session ends), ``immediate`` as a
        crash (no checkpoint; recovery on the next start)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def restart(self, down_s: float = 0.0, mode: StopMode = "fast") -> None:
        """Stop, stay down for ``down_s`` seconds, start again on the same port."""
        self.stop(mode)
        time.sleep(down_s)
        self.start()

    @property
    def running(self) -> bool:
        result = subprocess.run(
            self._command("pg_ctl", "-D", str(self.data), "status"), capture_output=True, check=False
        )
        return result.returncode == 0

    def wait_accepting(self, within_s: float = 30.0) -> None:
        deadline = time.monotonic() + within_s
        while True:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"private PostgreSQL on port {self.port} did not come up; see {self.log}")
            time.sleep(0.05)

    def create_database(self, name: str) -> str:
        """Create database ``name`` (its URL for the services)."""
        psql = shutil.which("psql") or str(self._bin / "psql")
        subprocess.run(
            [
                psql,
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-v",
                "ON_ERROR_STOP=1",
                "-qc",
                f'CREATE DATABASE "{name}"',
            ],
            check=True,
            capture_output=True,
        )
        return self.url(name)

    def remove(self) -> None:
        """Stop the server (if it runs) and delete its folder."""
        if self.data.exists():
            with contextlib.suppress(Exception):
                if self.running:
                    self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)


__all__ = ["PostgresUnavailable", "PrivatePostgres", "server_bin"]
