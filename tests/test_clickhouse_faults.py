"""ClickHouse faults on a server of the test's own. Frozen (SIGSTOP: connections accepted, nothing answered): each
request answers 503 within its ClickHouse limits instead of waiting statement after statement, and the service
answers again by itself once the engine resumes; the outage is logged as it begins and as it ends, not once per
request. Killed mid-load: no acknowledged write is lost."""

import logging
import os
import signal
import threading
import time

import pytest

from retrieval.store import clickhouse, schema
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


def test_a_frozen_server_answers_503_within_the_limits_and_the_service_recovers(
    own_server, alice, call, settings, caplog
):
    settings.LOOM_CLICKHOUSE_QUERY_TIMEOUT_S = settings.LOOM_CLICKHOUSE_WRITE_TIMEOUT_S = 1.0
    settings.LOOM_CLICKHOUSE_REQUEST_BUDGET_S = 1.5
    token = alice.token("writer")
    assert call("memory.set", {"memory_key": "before", "value": "stored before the freeze"}, token).status == 201

    os.kill(own_server.process.pid, signal.SIGSTOP)
    caplog.set_level(logging.WARNING)
    for op, body, method in (
        ("memory.set", {"memory_key": "during", "value": "sent while frozen"}, "post"),
        ("memory.search", {"query": "freeze"}, "post"),
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
    assert call("memory.get", {"memory_key": "during"}, token).status == 404  # refused, so nothing of it is stored
    for table in ("memories", "memory_embeddings", "memory_terms"):  # not even a side row a sweep would retire
        assert not clickhouse.query_value(
            f"SELECT count() FROM {table} WHERE memory_key = {{key:String}}", {"key": "during"}
        ), table
    assert call("memory.set", {"memory_key": "after", "value": "stored after the freeze"}, token).status == 201
    said = [record.getMessage() for record in caplog.records if record.name == "retrieval.store.clickhouse"]
    assert [line.split(": ")[0] for line in said if " is unavailable" in line] == [
        f"ClickHouse at {own_server.url} is unavailable"
    ]
    assert len([line for line in said if "answers again" in line]) == 1
    assert not [record for record in caplog.records if record.name.startswith(("urllib3", "clickhouse_connect"))]


def test_a_server_killed_mid_load_loses_no_acknowledged_write(tmp_path, alice, call, settings):
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
        got = call("memory.bulk_get", {"memory_keys": acknowledged}, token).json
        assert got["missing"] == [] and len(got["memories"]) == len(acknowledged)
        for key in (acknowledged[0], acknowledged[-2]):  # the first, and the last before the kill
            hits = call("memory.search", {"query": f"ticket {key} closed", "top_k": 3}, token).json["hits"]
            assert key in [hit["memory_key"] for hit in hits], key
    finally:
        clickhouse.flush_later()
        clickhouse.use(previous)
        server.stop()
