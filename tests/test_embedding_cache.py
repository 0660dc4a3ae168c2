"""Query embeddings are cached per org: LRU, in-flight sharing, the shared table; never past the switch."""

import threading
from datetime import UTC, datetime

import numpy as np
import pytest

from retrieval.providers import embedding_cache
from retrieval.store import clickhouse
from tests.conftest import Agent
from tests.model_server import Answer


def queries_sent(model_server) -> list[str]:
    return [text for seen in model_server.embedding_requests() for text in seen.body["input"]]


def test_a_repeated_query_is_embedded_once_per_org(backend, openai_embedder, model_server, alice, bob, call):
    alices, bobs = Agent(call, alice.token("admin")), Agent(call, bob.token("admin"))
    for _ in range(3):
        alices.search("where is the  offsite")  # whitespace is normalised away
    alices.search("where is the offsite")
    assert queries_sent(model_server).count("where is the offsite") == 1
    bobs.search("where is the offsite")  # another org never shares a vector with alice
    assert queries_sent(model_server).count("where is the offsite") == 2


def test_another_process_is_served_from_the_shared_table(backend, openai_embedder, model_server, agent):
    if backend == "embedded":
        pytest.skip("one process owns the embedded engine: no other process to share with")
    agent.search("what runs nightly")
    clickhouse.flush_later()  # the vector's row is written in a batch, within LATER_SECONDS
    embedding_cache.queries.clear()  # this process forgets: as a second replica would start
    agent.search("what runs nightly")
    assert queries_sent(model_server).count("what runs nightly") == 1


def test_concurrent_asks_for_one_text_share_one_call(openai_embedder, model_server):
    model_server.script(Answer(delay_s=0.3))
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(embedding_cache.queries.vector("acme", openai_embedder, "same")))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 4 and all((r == results[0]).all() for r in results)
    assert queries_sent(model_server).count("same") == 1


def test_a_switched_off_org_is_not_served_its_cached_vector(backend, openai_embedder, model_server, agent):
    agent.set({"memory_key": "train", "value": "the release train leaves on thursdays"})
    assert agent.hits("when does the release train leave") == ["train"]
    agent.call("org.set_model_calls", {"enabled": False, "reason": "audit"}, agent.token)
    reply = agent.search("when does the release train leave")
    assert "leg:vector:model_calls_off" in reply.json["degraded"] and reply.json["search_mode"] == "lexical"


def test_a_lookup_reads_a_granule_of_rows_however_many_are_cached(backend):
    """A lookup is one key's row, and the engine reads whole granules of 1.5 KB vectors: small granules keep a
    lookup's read small as the cache fills (the default granule holds 8,192 rows)."""
    vector = np.zeros(384, dtype=np.float32)
    now = datetime.now(UTC)
    clickhouse.insert(
        "embedding_cache",
        [{"key": f"{i:064x}", "model": "fake", "vector": vector, "created_at": now} for i in range(3000)],
    )
    estimate = clickhouse.query(
        "EXPLAIN ESTIMATE SELECT vector FROM embedding_cache WHERE key = {key:String}", {"key": f"{1234:064x}"}
    )
    assert 0 < sum(row["rows"] for row in estimate) <= 128
