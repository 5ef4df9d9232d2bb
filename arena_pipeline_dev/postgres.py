"""A throwaway PostgreSQL server (Debian's ``postgresql`` binaries): initdb into a temporary folder, started
on 127.0.0.1 and a free port, stopped by ``pg_ctl``; what the DuckLake tests and bench_lake.py share."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

#: The database user the cluster is created with (trust authentication on loopback).
USER = "arena"


def postgres_bin() -> Path | None:
    """The folder of PostgreSQL's server binaries (Debian's ``postgresql`` package, else ``pg_config``), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[4]))
    if found:
        return Path(found[-1]).parent
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=False).stdout.strip()
        if out and (Path(out) / "initdb").is_file():
            return Path(out)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class PostgresServer:
    """A running cluster: its folder, binaries and port."""

    folder: Path
    bin: Path
    port: int

    def _run(self, *args: str) -> subprocess.CompletedProcess:
        command = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=True, timeout=120)

    def create_database(self, name: str | None = None) -> str:
        """A new empty database; returns its DuckLake attach string."""
        name = name or f"lake_{uuid.uuid4().hex[:10]}"
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, name)
        return f"ducklake:postgres:dbname={name} host=127.0.0.1 port={self.port} user={USER}"

    def pid(self) -> int:
        return int((self.folder / "data" / "postmaster.pid").read_text().split()[0])

    def database_bytes(self, name: str) -> int:
        """The size of database ``name`` on disk (``pg_database_size``): a lake's catalog."""
        out = self._run("psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, "-d", name, "-Atc",
                        f"SELECT pg_database_size('{name}')")
        return int(out.stdout.strip())

    def stop(self) -> None:
        """Stop the server (``pg_ctl stop``, fast mode), then remove its folder."""
        try:
            self._run("pg_ctl", "-D", str(self.folder / "data"), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def start_postgres() -> PostgresServer:
    """initdb a cluster into a new temporary folder (owned by ``postgres`` when run as root) and start it on
    127.0.0.1 and a free port, its socket in that folder."""
    binaries = postgres_bin()
    if binaries is None:
        raise RuntimeError("PostgreSQL's server binaries are not installed (Debian: apt-get install postgresql)")
    folder = Path(tempfile.mkdtemp(prefix="arena-pg-"))  # not under pytest's 0700 root folder: postgres reads it
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    server = PostgresServer(folder, binaries, _free_port())
    try:
        server._run("initdb", "-D", str(folder / "data"), "-U", USER, "--auth=trust", "-E", "UTF8", "--no-sync")
        server._run("pg_ctl", "-D", str(folder / "data"), "-l", str(folder / "server.log"), "-w", "-o",
                    f"-h 127.0.0.1 -p {server.port} -k {folder} -c fsync=off", "start")
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"PostgreSQL did not start: {exc.stderr or exc.stdout}") from exc
    return server
