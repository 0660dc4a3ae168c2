"""loom_repair: a write that failed before its `memories` row (its commit) left side rows; the sweep retires them,
and takes their terms out of the BM25 statistics, touching nothing else."""

import time
from io import StringIO

from django.core.management import call_command

from retrieval.store import clickhouse
from tests.test_vector_mirror import agent_org


def live(org: str, key: str, table: str) -> int:
    return clickhouse.query_value(
        f"SELECT count() FROM {table} FINAL WHERE org = {{org:String}} AND memory_key = {{key:String}}"
        " AND status = 'active'",
        {"org": org, "key": key},
    )


def documents(org: str) -> int:
    return clickhouse.query_value(
        "SELECT sum(docs) FROM corpus_stats WHERE org = {org:String} AND field = 'value'", {"org": org}
    )


def repair(org: str, *options: str) -> str:
    out = StringIO()
    call_command("loom_repair", "--org", org, *options, stdout=out)
    return out.getvalue().strip()


def failed_write(agent, monkeypatch, key: str, value: str, at: str = "memories") -> None:
    """memory.set of this value failing at its insert into `at` (by default `memories`, its commit), as when
    ClickHouse goes mid-batch."""
    stored = clickhouse.insert_encoded  # (every insert's last step)

    def insert(rows):
        if rows is not None and rows[0] == at:
            raise clickhouse.ClickHouseUnavailable("ClickHouse is unavailable: gone mid-batch")
        return stored(rows)

    monkeypatch.setattr(clickhouse, "insert_encoded", insert)
    body = {"namespace": "default", "items": [{"memory_key": key, "value": value}]}
    assert agent.call("memory.set", body, agent.token).error == "CLICKHOUSE_UNAVAILABLE"
    monkeypatch.undo()


def test_a_write_that_failed_before_its_memories_row_is_swept(backend, agent, monkeypatch):
    org = agent_org(agent)
    agent.set({"memory_key": "kept", "value": "Backups run nightly at two"})
    before = documents(org)
    failed_write(agent, monkeypatch, "lost", "Backups are copied to Frankfurt")
    assert live(org, "lost", "memory_embeddings") == 1 and live(org, "lost", "memory_terms") > 0
    assert documents(org) == before + 1  # counted, though never stored
    assert agent.hits("backups copied to frankfurt", min_similarity=0) == ["kept"]

    assert repair(org, "--grace-minutes", "0") == "swept 1 row versions a failed write left behind"
    assert live(org, "lost", "memory_embeddings") == 0 and live(org, "lost", "memory_terms") == 0
    assert documents(org) == before
    assert live(org, "kept", "memory_embeddings") == 1 and live(org, "kept", "memory_terms") > 0
    assert repair(org, "--grace-minutes", "0") == "nothing to sweep"
    agent.set({"memory_key": "lost", "value": "Backups are copied to Frankfurt"})  # the write, again, stands
    assert agent.hits("backups copied to frankfurt", min_similarity=0)[0] == "lost"


def test_a_write_whose_term_rows_failed_stores_no_memories_row_though_its_vectors_went_in_beside(
    backend, agent, monkeypatch
):
    """The term rows are stored beside the gates and the vectors, and `memories` waits for both: a write whose term
    rows failed is never committed, and what it left is swept."""
    org = agent_org(agent)
    failed_write(agent, monkeypatch, "lost", "Backups are copied to Frankfurt", at="term_input")
    assert live(org, "lost", "memories") == 0 and live(org, "lost", "memory_terms") == 0
    assert agent.hits("backups copied to frankfurt", min_similarity=0) == []
    assert repair(org, "--grace-minutes", "0") == "swept 1 row versions a failed write left behind"
    assert live(org, "lost", "memory_embeddings") == 0


def test_a_write_still_in_flight_is_left_alone(backend, agent, monkeypatch):
    org = agent_org(agent)
    failed_write(agent, monkeypatch, "fresh", "a row a write is storing")
    assert repair(org) == "nothing to sweep"  # the default grace: ten minutes
    assert live(org, "fresh", "memory_embeddings") == 1


def test_the_servers_worker_sweeps_by_itself(backend, agent, monkeypatch, settings):
    """The server process's background worker (wsgi.py starts it) sweeps every LOOM_REPAIR_INTERVAL_S: what a
    failed write left is retired without anyone running loom_repair."""
    from retrieval.ingest import embed_pending

    org = agent_org(agent)
    failed_write(agent, monkeypatch, "lost", "Backups are copied to Frankfurt")
    assert live(org, "lost", "memory_embeddings") == 1
    settings.LOOM_EMBEDDING_WORKER, settings.LOOM_EMBEDDING_WORKER_INTERVAL_S = "on", 0.05
    settings.LOOM_REPAIR_INTERVAL_S, settings.LOOM_REPAIR_GRACE_S = 0.05, 0
    assert embed_pending.start_worker()
    try:
        deadline = time.monotonic() + 30
        while live(org, "lost", "memory_embeddings"):
            assert time.monotonic() < deadline, "the worker did not sweep"
            time.sleep(0.05)
    finally:
        embed_pending.stop_worker()
    assert live(org, "lost", "memory_terms") == 0


def test_a_write_that_failed_before_its_vectors_is_swept(backend, agent, monkeypatch):
    """A write whose vector rows failed (the engine frozen mid-batch) may have stored its term rows beside them:
    they count in the BM25 statistics until the sweep retires them, though no vector row names the version."""
    org = agent_org(agent)
    agent.set({"memory_key": "kept", "value": "Backups run nightly at two"})
    before = documents(org)
    failed_write(agent, monkeypatch, "lost", "Backups are copied to Frankfurt", at="memory_embeddings")
    assert live(org, "lost", "memory_embeddings") == 0 and live(org, "lost", "memory_terms") > 0
    assert documents(org) == before + 1

    assert repair(org, "--grace-minutes", "0") == "swept 1 row versions a failed write left behind"
    assert live(org, "lost", "memory_terms") == 0 and documents(org) == before
    assert live(org, "kept", "memory_terms") > 0 and live(org, "kept", "memory_embeddings") == 1
    assert repair(org, "--grace-minutes", "0") == "nothing to sweep"
