"""ClickHouse faults on a server of the test's own. Frozen (SIGSTOP: connections accepted, nothing answered): each
request answers 503 within its ClickHouse limits instead of waiting statement after statement, and the service
answers again by itself once the engine resumes; the outage is logged as it begins and as it ends, not once per
request. Killed mid-load: no acknowledged write is lost."""

import io
import logging
import os
import re
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from retrieval.store import clickhouse, schema
from retrieval.store.clickhouse import OutageLogged
from tests.chserver import Server


@pytest.fixture
def own_server(tmp_path):
    """A ClickHouse server of this test's own: freezing it stalls no other test."""
    server = Server(str(tmp_path))
    previous = clickhouse.use(server.url)
    schema.apply()
    yield server
    os.kill(server.process.pid, signal.SIGCONT)
    clickhouse.flush_later()  # the usage rows of its ops, before the server goes
    clickhouse.use(previous)
    server.stop()


def assert_outage_said_once(console: io.StringIO, url: str) -> None:
    """The console's warnings and errors: the outage as it began and as it ended, nothing else (no line per failed
    read, none with the driver's request URL, whose query string carries the statement's bound parameters)."""
    said = [
        line.split(" ", 2)[2] for line in console.getvalue().splitlines() if " WARNING " in line or " ERROR " in line
    ]
    assert len(said) == 2, said
    assert re.fullmatch(
        rf"ERROR retrieval.store.clickhouse: ClickHouse at {re.escape(url)} is unavailable: [a-z ]+", said[0]
    )
    assert re.fullmatch(
        rf"WARNING retrieval.store.clickhouse: ClickHouse at {re.escape(url)} answers again, after [\d.]+ s "
        r"\(\d+ statements refused meanwhile\)",
        said[1],
    ), said


def test_a_frozen_server_answers_503_within_the_limits_and_the_service_recovers(
    own_server, alice, call, settings, console
):
    settings.LOOM_CLICKHOUSE_QUERY_TIMEOUT_S = settings.LOOM_CLICKHOUSE_WRITE_TIMEOUT_S = 1.0
    settings.LOOM_CLICKHOUSE_REQUEST_BUDGET_S = 1.5
    token = alice.token("writer")
    assert call("memory.set", {"memory_key": "before", "value": "stored before the freeze"}, token).status == 201

    os.kill(own_server.process.pid, signal.SIGSTOP)
    for op, body, method in (
        ("memory.set", {"memory_key": "during", "value": "sent while frozen"}, "post"),
        ("memory.search", {"query": "freeze"}, "post"),
        ("memory.ask", {"query": "when is the freeze?"}, "post"),
        ("memory.list", {}, "post"),
        ("health", None, "get"),
    ):
        start = time.monotonic()
        reply = call(op, body, token, method=method)
        took = time.monotonic() - start
        assert (reply.status, reply.error) == (503, "CLICKHOUSE_UNAVAILABLE"), (op, reply.json)
        assert took < 1.5 + 1.0, (op, took)  # the budget, and a margin for this busy box
    os.kill(own_server.process.pid, signal.SIGCONT)

    deadline = time.monotonic() + 30
    while (got := call("memory.get", {"memory_key": "before"}, token)).status != 200:
        assert time.monotonic() < deadline, got.json
        time.sleep(0.1)
    assert got.json["value"] == "stored before the freeze"
    assert_outage_said_once(console, own_server.url)
    assert call("memory.get", {"memory_key": "during"}, token).status == 404  # refused, so nothing of it is stored
    for table in ("memories", "memory_embeddings", "memory_terms"):  # not even a side row a sweep would retire
        assert not clickhouse.query_value(
            f"SELECT count() FROM {table} WHERE org = {{org:String}} AND memory_key = {{key:String}}",
            {"org": alice.org.name, "key": "during"},
        ), table
    assert call("memory.set", {"memory_key": "after", "value": "stored after the freeze"}, token).status == 201


def test_a_server_killed_mid_load_loses_no_acknowledged_write(tmp_path, alice, call, settings, console):
    """SIGKILL while writes stream in, the same data restarted on the same ports: refusals are fast 503s, the
    service answers again by itself, and every write it acknowledged (before, around and after) is read and
    searched."""
    settings.LOOM_CLICKHOUSE_QUERY_TIMEOUT_S = settings.LOOM_CLICKHOUSE_WRITE_TIMEOUT_S = 2.0
    root = str(tmp_path / "clickhouse")
    server = Server(root)
    previous = clickhouse.use(server.url)
    try:
        schema.apply()
        token = alice.token("writer")
        acknowledged, refused = [], []

        deadline = time.monotonic() + 60

        def kill_once_loaded():  # lands mid-request, while the loop below writes
            while len(acknowledged) < 20 and time.monotonic() < deadline:
                time.sleep(0.005)
            server.process.kill()

        killer = threading.Thread(target=kill_once_loaded)
        killer.start()
        n = 0
        while len(refused) < 5:
            assert time.monotonic() < deadline, (len(acknowledged), len(refused))
            key, n = f"load.{n}", n + 1
            sent = time.monotonic()
            reply = call("memory.set", {"memory_key": key, "value": f"ticket {key} was closed on friday"}, token)
            if reply.status == 201:
                acknowledged.append(key)
            else:
                assert (reply.status, reply.error) == (503, "CLICKHOUSE_UNAVAILABLE"), reply.json
                refused.append(time.monotonic() - sent)
        killer.join()
        server.process.wait(timeout=10)
        assert acknowledged and refused, (len(acknowledged), len(refused))
        assert max(refused) < 2.0 + 1.0  # a dead server refuses at once; the write timeout bounds the worst case

        server.log.close()
        server = Server(root, ports=(server.http_port, server.tcp_port))  # the same data, the same address
        deadline = time.monotonic() + 30
        while (
            after := call("memory.set", {"memory_key": "after", "value": "written once it is back"}, token)
        ).status != 201:
            assert time.monotonic() < deadline, after.json
            time.sleep(0.1)
        acknowledged.append("after")
        assert_outage_said_once(console, server.url)
        got = call("memory.bulk_get", {"memory_keys": acknowledged}, token).json
        assert got["missing"] == [] and len(got["memories"]) == len(acknowledged)
        for key in (acknowledged[0], acknowledged[-2]):  # the first, and the last before the kill
            hits = call("memory.search", {"query": f"ticket {key} closed", "top_k": 3}, token).json["hits"]
            assert key in [hit["memory_key"] for hit in hits], key
    finally:
        clickhouse.flush_later()
        clickhouse.use(previous)
        server.stop()


@pytest.fixture
def console():
    """What the service's console log handler (settings.LOGGING) writes meanwhile, from WARNING up."""
    handler = next(h for h in logging.getLogger().handlers if any(isinstance(f, OutageLogged) for f in h.filters))
    written = io.StringIO()
    previous, level = handler.setStream(written), logging.getLogger().level
    logging.getLogger().setLevel(logging.WARNING)
    yield written
    handler.setStream(previous)
    logging.getLogger().setLevel(level)


def test_searches_queued_on_a_frozen_server_each_answer_within_the_budget(
    own_server, alice, call, settings, console, transactional_db
):
    """Eight searches at once in one process meet a frozen engine: each answers 503 within its request's budget,
    however long it queued behind the others (a wait for a lock is the request's time too), and the first search
    after the engine thaws is served. The log says the outage once as it begins and once as it ends: no line per
    failed read, and none with the driver's request URL (its query string carries the bound parameters)."""
    settings.LOOM_CLICKHOUSE_QUERY_TIMEOUT_S = settings.LOOM_CLICKHOUSE_WRITE_TIMEOUT_S = 1.0
    settings.LOOM_CLICKHOUSE_REQUEST_BUDGET_S = 1.5
    token = alice.token("writer")
    assert call("memory.set", {"memory_key": "before", "value": "the freeze drill is on friday"}, token).status == 201
    assert call("memory.search", {"query": "freeze drill"}, token).status == 200  # warm: the copies are loaded

    # Eight request threads, each with its client to the engine open, as a server's worker keeps them.
    pool, warm = ThreadPoolExecutor(8), threading.Barrier(8)
    assert all(
        pool.map(
            lambda n: warm.wait(30) >= 0 and call("memory.get", {"memory_key": "before"}, token).status == 200, range(8)
        )
    )
    os.kill(own_server.process.pid, signal.SIGSTOP)

    def search(n: int) -> tuple[int, str | None, float]:
        start = time.monotonic()
        reply = call("memory.search", {"query": f"when is drill {n}"}, token)
        return reply.status, reply.error, time.monotonic() - start

    with pool:
        answers = list(pool.map(search, range(8)))
    os.kill(own_server.process.pid, signal.SIGCONT)
    assert {(status, error) for status, error, _ in answers} == {(503, "CLICKHOUSE_UNAVAILABLE")}, answers
    assert max(took for *_, took in answers) < 1.5 + 0.5, answers  # the budget, and a margin for this busy box

    after = call("memory.search", {"query": "freeze drill"}, token)
    assert after.status == 200, after.json
    assert [hit["memory_key"] for hit in after.json["hits"]][:1] == ["before"]
    assert_outage_said_once(console, own_server.url)
