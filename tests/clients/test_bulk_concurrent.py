"""A large bulk load (`POST /imp`, PostgreSQL `COPY t FROM STDIN`) and an ILP sender writing the
same table at the same time: the sender must see no error or disconnect, and after both finish
the table holds every row of both.

Bulk loads commit through the table's sink (in chunks), so they never hold the table's writer
between commits; before, an ILP commit to the table waited for the whole load and failed after
30 s. The CSV is generated on the fly and streamed, never held in memory. Its size is
`SUNDIAL_BULK_TEST_BYTES` (default 200 MB) for `/imp` and a quarter of it for COPY.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time
import urllib.parse
import urllib.request
import uuid

import psycopg

BULK_BYTES = int(os.environ.get("SUNDIAL_BULK_TEST_BYTES", 200_000_000))
CREATE = ("CREATE TABLE t (timestamp TIMESTAMP, sym SYMBOL, v LONG, src VARCHAR) "
          "TIMESTAMP(timestamp) PARTITION BY DAY")
# CSV rows are in 2024, one second (1000 rows) per block; ILP rows carry the current time.
CSV_START_S = 1_704_067_200
ROWS_PER_BLOCK = 1000
ILP_LINES_PER_SEND = 200
ILP_SEND_INTERVAL_S = 0.01


def csv_blocks(total_bytes: int, stats: dict):
    """CSV rows (no header) of about `total_bytes`, one block per second of data; counts them."""
    sent = 0
    second = 0
    while sent < total_bytes:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(CSV_START_S + second))
        base = second * ROWS_PER_BLOCK
        block = "".join(
            f"{prefix}{i:03d}000Z,s{i & 7},{base + i},csv\n" for i in range(ROWS_PER_BLOCK)
        ).encode()
        sent += len(block)
        stats["rows"] = stats.get("rows", 0) + ROWS_PER_BLOCK
        second += 1
        yield block


class IlpSender(threading.Thread):
    """Sends rows `t,sym=ilp v=<n>i,src="ilp"` over TCP until stopped; records any failure."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.port = port
        self.sent = 0
        self.error: str | None = None
        self.stop_requested = threading.Event()

    def run(self) -> None:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=60) as s:
                while not self.stop_requested.is_set():
                    self.send_some(s)
                    self.check_open(s)
                    time.sleep(ILP_SEND_INTERVAL_S)
                self.send_some(s)
                s.shutdown(socket.SHUT_WR)
                s.settimeout(60)
                if s.recv(1) != b"":
                    self.error = "the server answered ILP over TCP"
        except OSError as e:
            self.error = f"after {self.sent} rows: {e!r}"

    def send_some(self, s: socket.socket) -> None:
        now_ns = time.time_ns()
        lines = "".join(
            f't,sym=ilp v={self.sent + i}i,src="ilp" {now_ns + i}\n'
            for i in range(ILP_LINES_PER_SEND)
        )
        s.sendall(lines.encode())
        self.sent += ILP_LINES_PER_SEND

    @staticmethod
    def check_open(s: socket.socket) -> None:
        """Raises if the server closed the connection (it never writes to a healthy one)."""
        s.setblocking(False)
        try:
            data = s.recv(1)
        except BlockingIOError:
            return
        finally:
            s.setblocking(True)
            s.settimeout(60)
        raise ConnectionError(f"server closed the ILP connection ({data!r})")


def peak_rss_mib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    return 0


def exec_query(server, query: str) -> dict:
    url = f"{server.http_url}/exec?{urllib.parse.urlencode({'query': query})}"
    with urllib.request.urlopen(url, timeout=120) as response:
        return json.loads(response.read())


def ilp_count(server) -> int:
    return exec_query(server, "SELECT count(*) FROM t WHERE src = 'ilp'")["dataset"][0][0]


def post_imp(server, stats: dict) -> tuple[int, bytes]:
    """POST /imp?name=t with the generated CSV as a streamed multipart body (chunked)."""
    boundary = uuid.uuid4().hex

    def body():
        yield (f'--{boundary}\r\nContent-Disposition: form-data; name="data"; '
               f'filename="t.csv"\r\nContent-Type: text/csv\r\n\r\n'
               "timestamp,sym,v,src\n").encode()
        yield from csv_blocks(BULK_BYTES, stats)
        yield f"\r\n--{boundary}--\r\n".encode()

    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=3600)
    conn.request(
        "POST",
        "/imp?" + urllib.parse.urlencode({"name": "t", "fmt": "json", "atomicity": "abort"}),
        body=body(),
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        encode_chunked=True,
    )
    response = conn.getresponse()
    return response.status, response.read()


def copy_in(server, stats: dict) -> int:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        with conn.cursor() as cur:
            with cur.copy("COPY t (timestamp, sym, v, src) FROM STDIN (FORMAT csv)") as copy:
                for block in csv_blocks(BULK_BYTES // 4, stats):
                    copy.write(block)
            return cur.rowcount


def watch_ilp(server, done: threading.Event, seen: list) -> None:
    """Records the ILP rows visible while the bulk load runs."""
    while not done.wait(1.0):
        seen.append(ilp_count(server))


def run_with_ilp(server, load) -> dict:
    """Runs `load(stats)` while an ILP sender writes t; checks the sender and the counts."""
    exec_query(server, CREATE)
    sender = IlpSender(server.tcp_port)
    sender.start()
    time.sleep(0.5)
    stats: dict = {}
    done = threading.Event()
    seen: list = []
    watcher = threading.Thread(target=watch_ilp, args=(server, done, seen), daemon=True)
    watcher.start()
    started = time.monotonic()
    result = load(stats)
    load_s = time.monotonic() - started
    done.set()
    watcher.join()
    time.sleep(0.5)
    sender.stop_requested.set()
    sender.join(timeout=120)
    assert not sender.is_alive(), "the ILP sender hung"
    assert sender.error is None, sender.error
    peak_mib = peak_rss_mib(server.proc.pid)
    server.stop()
    ilp = server.sql("SELECT count(*) AS n, min(v) AS lo, max(v) AS hi FROM t WHERE src = 'ilp'")
    assert ilp == [{"n": sender.sent, "lo": 0, "hi": sender.sent - 1}], (ilp, sender.sent)
    sample = [0, sender.sent // 3, sender.sent // 2, sender.sent - 1]
    found = server.sql(
        f"SELECT v FROM t WHERE src = 'ilp' AND v IN ({', '.join(map(str, sample))}) ORDER BY v")
    assert [r["v"] for r in found] == sample
    total = server.sql("SELECT count(*) AS n FROM t")[0]["n"]
    assert total == stats["rows"] + sender.sent, (total, stats["rows"], sender.sent)
    timings = {"load_s": round(load_s, 1), "csv_rows": stats["rows"], "ilp_rows": sender.sent,
               "ilp_seen_during_load": seen[:3] + ["..."] + seen[-3:] if len(seen) > 6 else seen,
               "result": result,
               "server_peak_rss_mib": peak_mib}
    print(f"\nbulk timings: {timings}")
    # Long enough for the watcher to look: ILP rows were committed while the load ran.
    if len(seen) >= 3:
        assert seen[-1] > seen[0] > 0, seen
    return timings


def big_server(start_server):
    """A server whose `/imp` takes the whole generated file."""
    return start_server(["--http-import-bytes-max", str(2 * BULK_BYTES + (1 << 20))])


def test_imp_and_ilp_to_the_same_table(start_server):
    server = big_server(start_server)

    def load(stats):
        status, body = post_imp(server, stats)
        assert status == 200, body[:2000]
        report = json.loads(body)
        assert report["rowsImported"] == stats["rows"], report
        return report["rowsImported"]

    run_with_ilp(server, load)


def test_copy_and_ilp_to_the_same_table(server):
    def load(stats):
        rows = copy_in(server, stats)
        assert rows == stats["rows"]
        return rows

    run_with_ilp(server, load)
