"""Concurrent clients against the served app over HTTP: requests/s, latency, errors, and every acknowledged write
read back.

    .venv/bin/python bench/http_load.py [--clients 8] [--seconds 20] [--memories 2000] [--configs embedded server:4]
                                        [--write-every 5] [--threads 8] [--pinned true false]

Each config is served by `make run` itself (gunicorn, `--threads` threads per worker, 8 as `make run`'s default, each
count in turn when several are given; with `--pinned`, LOOM_PIN_PYTHON_THREADS each way in turn; the fake 384-d
embedder):
`embedded` on the embedded engine (one worker), `server:N` with N workers on a ClickHouse HTTP server on loopback
(tests/chserver.py), `server:N:host` the same with LOOM_CHANGE_MARKER=host (the workers share the host's stamps
instead of asking the engine what changed on every search). The namespace is preloaded with LoCoMo turns; then each client loops for the duration: searches
(LoCoMo questions, `fast` budget) and every `--write-every`th request (5; 0: none) a write of a fresh key, as fast
as answers come. After the run every
acknowledged write is read back (memory.bulk_get, through any worker). The baseline, timed in the same run against
the same server: `GET /v1/health`, the cheapest request the app answers. `client ms` is the load generator's own CPU
a request: it shares the box's two cores with what it measures.
"""

import argparse
import http.client
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from locomo import corpus

from tests.chserver import Server, free_port
from tests.scratch import scratch_dir


class Connection:
    """One keep-alive connection of the standard library's client: a load generator on the box it measures should
    take little of it (httpx spent ~1.45 ms of CPU a search request here, this ~0.6)."""

    def __init__(self, url: str, headers: dict | None = None, timeout: float = 30):
        parts = urllib.parse.urlsplit(url)
        self.http = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
        self.headers = {"Content-Type": "application/json", **(headers or {})}

    def call(self, path: str, body: dict | None = None) -> tuple[int, object]:
        """POST `body` (GET without one); the status and the decoded answer. A connection that failed is closed,
        and the next call opens another."""
        try:
            self.http.request(
                "GET" if body is None else "POST", path, None if body is None else json.dumps(body), self.headers
            )
            answer = self.http.getresponse()
            return answer.status, json.loads(answer.read() or b"null")
        except (OSError, http.client.HTTPException):
            self.http.close()
            raise

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc) -> None:
        self.http.close()


class Served:
    """`make run` itself (PORT, WORKERS, THREADS), in a scratch var/ directory, with the fake embedder."""

    def __init__(
        self, workers: int, threads: int, clickhouse_url: str | None, marker: str = "engine", pinned: bool = True
    ):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        var = scratch_dir("loom-bench-http-")
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("LOOM_", "DJANGO_"))},
            "LOOM_VAR_DIR": var,
            "LOOM_EMBEDDING_MODEL": "fake-ngram-384",
            "LOOM_CHANGE_MARKER": marker,
            "LOOM_PIN_PYTHON_THREADS": str(pinned).lower(),
            **({"LOOM_CLICKHOUSE_URL": clickhouse_url} if clickhouse_url else {}),
        }
        self.process = subprocess.Popen(
            ["make", "--no-print-directory", "run", f"PORT={self.port}", f"WORKERS={workers}", f"THREADS={threads}"],
            cwd=ROOT,
            env=env,
            stdout=open(Path(var) / "make-run.log", "wb"),  # noqa: SIM115 -- make run's, read if it fails
            stderr=subprocess.STDOUT,
            start_new_session=True,  # stop() signals make and the gunicorn it runs together
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                with Connection(self.url, timeout=2) as connection:
                    if connection.call("/v1/health")[0] == 200:
                        credentials = json.loads((Path(var) / "demo-credentials.json").read_text())
                        self.headers = {"Authorization": f"Bearer {credentials['token']}"}
                        return
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.2)
        self.stop()
        tail = (Path(var) / "make-run.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"make run did not answer /v1/health within 120 s:\n{tail}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(timeout=30)


def preload(served: Served, turns: list[str], count: int) -> None:
    with Connection(served.url, served.headers, timeout=120) as connection:
        for start in range(0, count, 500):
            items = [
                {"memory_key": f"m{i}", "value": turns[i % len(turns)]} for i in range(start, min(start + 500, count))
            ]
            status, answer = connection.call("/v1/memory.set", {"items": items})
            if status != 201:
                raise RuntimeError(f"preload refused ({status}): {str(answer)[:500]}")


def note(key: str, questions: list[str]) -> str:
    """What the load writes under `key` (load-<client>-<step>)."""
    _, number, step = key.split("-")
    return f"client {number} wrote note {step}: {questions[int(step) % len(questions)]}"


def load(served: Served, questions: list[str], clients: int, seconds: float, write_every: int) -> dict:
    latencies, errors, acknowledged = [], [], []
    lock, deadline = threading.Lock(), time.monotonic() + seconds

    def client_loop(number: int) -> None:
        with Connection(served.url, served.headers) as connection:
            step = 0
            while time.monotonic() < deadline:
                step += 1
                writing = bool(write_every) and step % write_every == 0
                key = f"load-{number}-{step}"
                body = (
                    {"memory_key": key, "value": note(key, questions)}
                    if writing
                    else {"query": questions[(number * 7 + step) % len(questions)], "retrieval_budget": "fast"}
                )
                started = time.perf_counter()
                try:
                    status = str(connection.call("/v1/memory.set" if writing else "/v1/memory.search", body)[0])
                except (OSError, http.client.HTTPException) as exc:
                    status = repr(exc)
                spent = (time.perf_counter() - started) * 1000
                with lock:
                    latencies.append(spent)
                    if status not in ("200", "201"):
                        errors.append(status)
                    elif writing:
                        acknowledged.append(key)

    started, cpu = time.monotonic(), time.process_time()
    threads = [threading.Thread(target=client_loop, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed, cpu = time.monotonic() - started, time.process_time() - cpu
    missing = 0
    with Connection(served.url, served.headers, timeout=60) as connection:
        for start in range(0, len(acknowledged), 1000):
            _, answer = connection.call("/v1/memory.bulk_get", {"memory_keys": acknowledged[start : start + 1000]})
            missing += len(answer["missing"])
    return {
        "rps": len(latencies) / elapsed,
        "client_ms": cpu * 1000 / max(len(latencies), 1),
        "latencies": latencies,
        "errors": errors,
        "writes": len(acknowledged),
        "keys": acknowledged,
        "missing": missing,
    }


def baseline(served: Served, clients: int, seconds: float) -> float:
    """Health checks per second with the same clients: what the server answers when the app does no work."""
    count, lock, deadline = [0], threading.Lock(), time.monotonic() + seconds

    def loop() -> None:
        with Connection(served.url) as connection:
            while time.monotonic() < deadline:
                connection.call("/v1/health")
                with lock:
                    count[0] += 1

    threads = [threading.Thread(target=loop) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return count[0] / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--configs", nargs="+", default=["embedded", "server:4"])
    parser.add_argument("--write-every", type=int, default=5, help="every Nth request writes (0: searches only)")
    parser.add_argument("--threads", type=int, nargs="+", default=[8], help="gunicorn threads a worker (THREADS)")
    parser.add_argument(
        "--pinned", choices=["true", "false"], nargs="+", default=["true"], help="LOOM_PIN_PYTHON_THREADS, each in turn"
    )
    args = parser.parse_args()
    turns, questions = corpus()
    mix = f"1 write in {args.write_every}" if args.write_every else "searches only"
    print(f"{args.clients} clients, {args.seconds:g} s, {args.memories} memories preloaded; {mix}; ms")
    print(
        f"{'config':>13} {'threads':>7} {'pinned':>6} {'req/s':>7} {'p50':>7} {'p95':>7} {'p99':>7} {'errors':>7} {'writes':>7} {'lost':>5} "
        f"{'client ms':>10} {'health/s':>9}"
    )
    for config, threads, pinned in itertools.product(args.configs, args.threads, args.pinned):
        backend, _, rest = config.partition(":")
        workers, _, marker = rest.partition(":")
        server = Server(scratch_dir("loom-bench-http-ch-")) if backend == "server" else None
        served = Served(
            int(workers or 1), threads, server.url if server else None, marker or "engine", pinned == "true"
        )
        try:
            preload(served, turns, args.memories)
            result = load(served, questions, args.clients, args.seconds, args.write_every)
            health = baseline(served, args.clients, min(args.seconds, 5))
        finally:
            served.stop()
            if server:
                server.stop()
        cuts = statistics.quantiles(result["latencies"], n=100)
        print(
            f"{config:>13} {threads:>7} {pinned:>6} {result['rps']:>7.1f} {cuts[49]:>7.1f} {cuts[94]:>7.1f} {cuts[98]:>7.1f} "
            f"{len(result['errors']):>7} {result['writes']:>7} {result['missing']:>5} {result['client_ms']:>10.2f} "
            f"{health:>9.1f}"
        )
        if result["errors"]:
            print(f"{'':>13} errors: {sorted(set(result['errors']))}")


if __name__ == "__main__":
    main()
