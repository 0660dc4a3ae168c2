"""A frozen ClickHouse server (SIGSTOP: connections accepted, nothing answered): each request answers 503 within its
ClickHouse limits instead of waiting statement after statement, and the service answers again by itself once the
engine resumes. The outage is logged as it begins and as it ends, not once per request."""

import logging
import os
import signal
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
