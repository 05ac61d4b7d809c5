"""A release `sundial serve` for the Python benchmarks (bench/security.py, bench/fairness.py):
started on loopback ports in a data directory of its own, with `--durability none`, and
stopped with SIGTERM. `SUNDIAL_BIN` names the binary (default target/release/sundial)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(os.environ.get("SUNDIAL_BIN", ROOT / "target" / "release" / "sundial"))


class Server:
    def __init__(self, work: Path, name: str, ports: tuple[int, int, int], flags: list[str]):
        self.http, self.pg, self.ilp = ports
        self.log = work / f"{name}.log"
        args = [str(BIN), "serve", "--data-dir", str(work / name), "--http-addr",
                f"127.0.0.1:{self.http}", "--pg-addr", f"127.0.0.1:{self.pg}", "--ilp-tcp-addr",
                f"127.0.0.1:{self.ilp}", "--durability", "none", *flags]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(self.log, "wb"))
        deadline = time.monotonic() + 30
        while "sundial serving" not in self.log.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"server {name} did not start:\n{self.log.read_text()}")
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
