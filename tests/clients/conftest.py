"""Fixtures for the end-to-end client tests: a real `sundial serve` process per test.

The server binary is `$SUNDIAL_BIN` (default `target/debug/sundial` under the repository root).
While `serve` runs it holds the data directory, so tests verify what arrived by stopping the
server gracefully (SIGTERM commits everything received) and then running `sundial sql`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
READY_PREFIX = "sundial serving:"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
SQL_TIMEOUT_S = 120.0


def sundial_bin() -> Path:
    path = Path(os.environ.get("SUNDIAL_BIN", "target/debug/sundial"))
    if not path.is_absolute():
        path = REPO_ROOT / path
    return path


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port the kernel just handed out on 127.0.0.1 (for TCP or UDP)."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n: int) -> list[int]:
    """`n` distinct TCP ports that are also free for UDP (the UDP one gets checked again)."""
    ports: list[int] = []
    while len(ports) < n:
        p = free_port()
        if p not in ports:
            ports.append(p)
    return ports


class SqlError(AssertionError):
    pass


@dataclass
class Server:
    """A running (or stopped) `sundial serve` process."""

    binary: Path
    data_dir: Path
    log_path: Path
    http_port: int
    tcp_port: int
    udp_port: int
    pg_port: int = 0
    proc: subprocess.Popen | None = None
    exit_code: int | None = None
    extra_args: list[str] = field(default_factory=list)

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def dsn(self) -> str:
        """libpq connection string for the PostgreSQL listener (default user admin/quest)."""
        return f"host=127.0.0.1 port={self.pg_port} user=admin password=quest dbname=qdb"

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def start(self) -> None:
        args = [
            str(self.binary),
            "serve",
            "--data-dir", str(self.data_dir),
            "--http-addr", f"127.0.0.1:{self.http_port}",
            "--ilp-tcp-addr", f"127.0.0.1:{self.tcp_port}",
            "--ilp-udp-addr", f"127.0.0.1:{self.udp_port}",
            "--pg-addr", f"127.0.0.1:{self.pg_port}",
            "--ilp-commit-interval-ms", "100",
            *self.extra_args,
        ]
        env = dict(os.environ)
        # The flags above win over SUNDIAL_* variables anyway; keep logging at info so the
        # captured stderr says why a line was rejected.
        env.setdefault("SUNDIAL_LOG", "info")
        # Most tests are about other things than logging in: their HTTP and ILP clients send no
        # credentials. Security tests pass `--auth required`, which wins over this variable.
        env["SUNDIAL_AUTH"] = "off"
        env["NO_COLOR"] = "1"
        self._log_file = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=env,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if any(line.startswith(READY_PREFIX) for line in self.log().splitlines()):
                return
            code = self.proc.poll()
            if code is not None:
                pytest.fail(
                    f"sundial serve exited with {code} before it was ready;\n"
                    f"command: {' '.join(args)}\noutput:\n{self.log()}"
                )
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(
                    f"sundial serve printed no '{READY_PREFIX}' line within "
                    f"{START_TIMEOUT_S:.0f} s;\ncommand: {' '.join(args)}\noutput:\n{self.log()}"
                )
            time.sleep(0.02)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM, wait, and require a clean exit (0): everything received is committed."""
        assert self.proc is not None, "server was never started"
        if self.exit_code is None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.exit_code = self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.kill()
                pytest.fail(
                    f"sundial serve did not exit within {STOP_TIMEOUT_S:.0f} s of SIGTERM;"
                    f"\noutput:\n{self.log()}"
                )
            self._log_file.close()
        assert self.exit_code == 0, (
            f"sundial serve exited with {self.exit_code} after SIGTERM; output:\n{self.log()}"
        )

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        if hasattr(self, "_log_file") and not self._log_file.closed:
            self._log_file.close()

    def sql_raw(self, query: str, fmt: str = "json") -> subprocess.CompletedProcess:
        assert not self.running, "stop() the server first: serve holds the data directory"
        return subprocess.run(
            [str(self.binary), "sql", "--data-dir", str(self.data_dir), "--format", fmt, query],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=SQL_TIMEOUT_S,
        )

    def sql(self, query: str) -> list[dict]:
        """Runs one query with `sundial sql --format json` and returns its rows.

        The JSON format prints one array of objects per statement; NULL columns are left out of
        an object, so use `row.get(col)`.
        """
        done = self.sql_raw(query)
        if done.returncode != 0:
            raise SqlError(
                f"sundial sql failed ({done.returncode}) for {query!r}:\n"
                f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
            )
        arrays = [line for line in done.stdout.splitlines() if line.startswith("[")]
        if len(arrays) != 1:
            raise SqlError(
                f"expected exactly one JSON result for {query!r}, got:\n{done.stdout}"
            )
        return json.loads(arrays[0])

    def columns(self, table: str) -> dict[str, str]:
        """Column name → Sundial type name (`SHOW COLUMNS`)."""
        return {r["column"]: r["type"] for r in self.sql(f"SHOW COLUMNS FROM {table}")}

    def designated(self, table: str) -> str | None:
        rows = [r for r in self.sql(f"SHOW COLUMNS FROM {table}") if r.get("designated")]
        return rows[0]["column"] if rows else None


@pytest.fixture
def start_server(tmp_path: Path, request: pytest.FixtureRequest):
    """Starts servers with extra `serve` flags: `start_server(["--pg-auth-method", "md5"])`."""
    binary = sundial_bin()
    if not binary.is_file():
        pytest.fail(f"sundial binary not found at {binary} (set SUNDIAL_BIN)")
    started: list[Server] = []

    def start(extra_args: list[str] | None = None) -> Server:
        http_port, tcp_port, pg_port = free_ports(3)
        udp_port = free_port(socket.SOCK_DGRAM)
        n = len(started)
        srv = Server(
            binary=binary,
            data_dir=tmp_path / f"data{n}",
            log_path=tmp_path / f"serve{n}.log",
            http_port=http_port,
            tcp_port=tcp_port,
            udp_port=udp_port,
            pg_port=pg_port,
            extra_args=list(extra_args or []),
        )
        started.append(srv)
        srv.start()
        return srv

    try:
        yield start
    finally:
        for srv in started:
            srv.kill()


@pytest.fixture
def server(start_server):
    return start_server()
