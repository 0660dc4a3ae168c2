"""The SQL each retrieval leg sends, as snapshots (PostHog-style): a change to a statement shows in review.

Each leg runs against the embedded engine with the vector mirror off, so every leg speaks SQL. The statements are
compared as written (parameters unbound), whitespace normalised. After an intended change:
`pytest tests/test_sql_snapshots.py --snapshot-update -n 0`, and review the diff of tests/__snapshots__/.
"""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from retrieval.ingest import entities
from retrieval.language.query import analyse
from retrieval.providers import customer
from retrieval.providers.embedders import get_embedder
from retrieval.search import evidence, legs, mentions, records
from retrieval.search.legs import Context, lexical, vector
from retrieval.search.plan import SearchRequest, resolve
from retrieval.search.pool import Candidate
from retrieval.search.result import hydrate
from retrieval.store import clickhouse, eligibility, reads

QUERY = 'When did Jonas Berg deploy "web-app" v4.2.3 in May 2025?'
LEGS = legs.by_name()


def normalised(statements: list[str]) -> list[str]:
    return ["\n".join(line.strip() for line in sql.strip().splitlines() if line.strip()) for sql in statements]


@pytest.fixture
def ctx(backend, alice, agent, settings):
    settings.LOOM_VECTOR_MIRROR = False
    agent.set(
        {
            "memory_key": "deploy.web-app",
            "value": "Jonas Berg deployed web-app v4.2.3 on 12 May 2025.",
            "tags": ["ops"],
            "entities": ["Jonas Berg"],
            "valid_at": "2025-05-12T09:00:00Z",
            "session_id": "s-7",
        }
    )
    digest = {"session_id": "s-7", "summary": "Jonas Berg deployed web-app v4.2.3 in May."}
    agent.call("session_summary.set", {"namespace": "default", "items": [digest]}, agent.token)
    request = SearchRequest(query=QUERY, tags_soft=["ops"], entity_filter=["Jonas Berg"], memory_type="fact")
    shape = analyse(QUERY, datetime(2025, 6, 1, tzinfo=UTC))
    plan = resolve(request, {}, shape)
    embedder = get_embedder()
    with customer.for_org(alice.name, "default", "test", "memory.search"):
        vector = np.asarray(embedder.embed(QUERY), dtype=np.float32)
    at = shape.date.at
    return Context(
        alice.name,
        ["default"],
        embedder.model_name,
        vector,
        shape,
        plan,
        request,
        eligibility.build(request, None, None, None),
        entities=["jonas berg"],
        key_axis=True,
        window=(at - timedelta(days=7), at + timedelta(days=7)),
        side_held=frozenset({"session_summaries"}),
    )


@pytest.mark.parametrize("backend", ["embedded"], indirect=True)
@pytest.mark.parametrize("leg", sorted(LEGS))
def test_each_leg_sends_the_statements_of_its_snapshot(ctx, leg, snapshot):
    with clickhouse.recorded() as statements:
        hits = LEGS[leg](ctx)
    assert normalised(statements) == snapshot
    if leg not in ("chunks", "graph"):  # the row is too short to chunk; it has no edge to hop
        assert "deploy.web-app" in [hit[0].memory_key for hit in hits]


@pytest.mark.parametrize("backend", ["embedded"], indirect=True)
def test_rescoring_hydrating_and_the_entity_check_send_the_statements_of_their_snapshot(ctx, snapshot):
    row = vector.run(ctx)[0][0]
    with clickhouse.recorded() as statements:
        rescored = vector.rescore(ctx, [row])
    assert normalised(statements) == snapshot(name="rescore") and rescored[0][0] == row
    with clickhouse.recorded() as statements:
        completed = lexical.complete(ctx, [row])
    assert normalised(statements) == snapshot(name="lexical_completion") and completed[0][0] == row
    candidate = Candidate(row)
    with clickhouse.recorded() as statements:
        hydrate(ctx.org, [candidate])
    assert normalised(statements) == snapshot(name="hydrate") and candidate.row["memory_key"] == "deploy.web-app"
    with clickhouse.recorded() as statements:
        checked = mentions.check(ctx.org, ["default"], ctx.model, QUERY)
    assert normalised(statements) == snapshot(name="entity_check") and "Jonas Berg" in checked.found


@pytest.mark.parametrize("backend", ["embedded"], indirect=True)
def test_the_side_reads_send_the_statements_of_their_snapshot(ctx, agent, snapshot):
    """Computed evidence, typed records and entity summaries: each a statement of its own beside the legs."""
    agent.call(
        "record.set",
        {"items": [{"record_key": "service:web-app", "record_type": "service", "fields": {"owner": "Jonas Berg"}}]},
        agent.token,
    )
    agent.call("entity_summary.set", {"items": [{"entity": "Jonas Berg", "summary": "the ops lead"}]}, agent.token)
    counting = replace(ctx, shape=analyse("How many times did Jonas Berg deploy web-app?"))
    with clickhouse.recorded() as statements:
        counted = evidence.compute(counting, [], datetime(2025, 6, 1, tzinfo=UTC))
    assert normalised(statements) == snapshot(name="count") and counted[0]["value"] == 1
    summing = replace(ctx, shape=analyse("How many hours did Jonas Berg spend on web-app?"))
    with clickhouse.recorded() as statements:
        summed = evidence.compute(summing, [], datetime(2025, 6, 1, tzinfo=UTC))
    assert normalised(statements) == snapshot(name="sum") and summed == []  # its row states no hours
    with clickhouse.recorded() as statements:
        found = records.matching(
            replace(
                ctx,
                eligible=eligibility.build(SearchRequest(query=QUERY), None, None, None),
                side_held=frozenset({"memory_records"}),
            )
        )
    assert normalised(statements) == snapshot(name="records") and found[0]["record_key"] == "service:web-app"
    with clickhouse.recorded() as statements:
        like = entities.nearest(ctx.org, ["default"], ctx.model, ctx.vector, 0.0, 2)
    assert normalised(statements) == snapshot(name="entity_nearest") and like == ["jonas berg"]
    with clickhouse.recorded() as statements:
        held, _ = reads.side_tables_held(ctx.org, ["default"])
    assert normalised(statements) == snapshot(name="side_tables") and held == set(reads.SIDE_KEYS)
