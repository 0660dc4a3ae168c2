"""memory.search_trace (the vector leg alone) and the search trace log."""

import pytest

pytestmark = pytest.mark.cluster  # these ops run on a two-shard cluster too


def test_search_trace_scores_the_vector_leg_alone(backend, agent, call):
    agent.set(
        {"memory_key": "deploy", "value": "production deploys run on tuesday", "entities": ["prod"]},
        {"memory_key": "food", "value": "the cafeteria serves soup"},
    )
    reply = call(
        "memory.search_trace", {"query": "production deploys", "entity_filter": ["prod"], "top_k": 5}, agent.token
    )
    assert reply.status == 200
    [hit] = reply.json["hits"]  # entity_filter filters here too
    assert (hit["memory_key"], hit["rank"], hit["source"]) == ("deploy", 1, "fact")
    assert hit["distance"] == pytest.approx(1 - hit["similarity"], abs=1e-6)
    assert hit["entity_boost"] == 0.5 and hit["rank_score"] == pytest.approx(hit["similarity"] + 0.5, abs=1e-6)
    assert reply.json["embedding_model"] == "fake-ngram-384"
    plain = call("memory.search_trace", {"query": "production deploys"}, agent.token).json["hits"]
    assert [h["rank"] for h in plain] == [1, 2] and plain[0]["similarity"] > plain[1]["similarity"]


def test_search_trace_needs_a_query(backend, agent, call):
    reply = call("memory.search_trace", {}, agent.token)
    assert (reply.status, reply.error, reply.json["error"]["field"]) == (422, "MISSING_FIELD", "query")


def test_no_trace_log_rows_unless_enabled(backend, agent, call):
    agent.set({"memory_key": "k", "value": "v"})
    agent.search("v")
    assert call("memory.search_trace_log", {}, agent.token).json == {"rows": [], "next_before": None, "enabled": False}


def test_every_search_appends_a_trace_row_when_enabled(backend, agent, call, settings):
    from retrieval.store import clickhouse

    settings.LOOM_SEARCH_TRACE_LOG_ENABLED = True
    agent.set({"memory_key": "deploy", "value": "production deploys run on tuesday", "run_id": "run-7"})
    with clickhouse.recorded() as statements:
        found = agent.search("when do production deploys run", run_id="run-7").json
    assert "INSERT INTO search_trace_log" not in statements  # written off the request path...
    agent.search("quantum chromodynamics")
    rows = call("memory.search_trace_log", {}, agent.token).json["rows"]  # ...and in before the log is read
    assert len(rows) == 2
    newest, oldest = rows
    assert (newest["abstain"], newest["abstain_code"], newest["retrieval_risk"]) == (True, "below_threshold", "abstain")
    assert oldest["keys"] == ["deploy"] and oldest["scores"] == [
        pytest.approx(found["hits"][0]["rank_score"], abs=1e-6)
    ]
    assert oldest["run_id"] == "run-7" and oldest["op"] == "memory.search" and oldest["trace_id"] == found["trace_id"]
    assert oldest["latency_ms"] > 0 and "embed" in oldest["stage_ms"] and "leg_vector" in oldest["stage_ms"]
    assert oldest["query"] == "" and oldest["query_captured"] is False  # no consent, no text
    filtered = call("memory.search_trace_log", {"abstain": True}, agent.token).json["rows"]
    assert [r["trace_id"] for r in filtered] == [newest["trace_id"]]
    assert call("memory.search_trace_log", {"risk": "low", "op": "nope"}, agent.token).json["rows"] == []


def test_query_text_is_kept_only_with_the_namespaces_consent(backend, agent, call, settings):
    settings.LOOM_SEARCH_TRACE_LOG_ENABLED = True
    call("namespace.register", {"namespace": "default", "text_capture": True}, agent.token)
    agent.search("what did we decide about pricing")
    [row] = call("memory.search_trace_log", {}, agent.token).json["rows"]
    assert row["query"] == "what did we decide about pricing" and row["query_captured"] is True


def test_a_non_admin_reads_only_its_own_trace_rows_and_pages_back(backend, alice, call, settings):
    settings.LOOM_SEARCH_TRACE_LOG_ENABLED = True
    viewer_a, viewer_b, admin = alice.token("viewer"), alice.token("viewer"), alice.token("admin")
    for i in range(3):
        call("memory.search", {"query": f"question {i}"}, viewer_a)
    call("memory.search", {"query": "b's question"}, viewer_b)
    assert len(call("memory.search_trace_log", {}, viewer_a).json["rows"]) == 3
    assert len(call("memory.search_trace_log", {}, viewer_b).json["rows"]) == 1
    assert len(call("memory.search_trace_log", {}, admin).json["rows"]) == 4
    page = call("memory.search_trace_log", {"limit": 2}, admin).json
    rest = call("memory.search_trace_log", {"limit": 2, "before": page["next_before"]}, admin).json
    assert len(page["rows"]) == 2 and len(rest["rows"]) == 2
    assert rest["next_before"] is None  # an exactly full last page leads nowhere
    assert not {r["trace_id"] for r in page["rows"]} & {r["trace_id"] for r in rest["rows"]}


def test_a_trace_row_is_read_only_by_a_token_that_may_read_every_namespace_its_search_did(
    backend, alice, call, settings
):
    """A search fanned out (namespace_scope all_mine) is logged under the namespace it addressed, with keys from the
    others. A token granted that namespace alone must not learn the others' keys from the log (the isolation
    property found it: an admin scoped to ops read hr's keys in an ops trace row)."""
    settings.LOOM_SEARCH_TRACE_LOG_ENABLED = True
    admin = alice.token("admin")
    for namespace in ("ops", "hr"):
        body = {"namespace": namespace, "memory_key": f"{namespace}.plan", "value": f"the {namespace} quarterly plan"}
        assert call("memory.set", body, admin).status == 201
    fanned = {"namespace": "ops", "query": "quarterly plan", "namespace_scope": "all_mine", "min_similarity": 0}
    assert {hit["namespace"] for hit in call("memory.search", fanned, admin).json["hits"]} == {"ops", "hr"}
    alone = {"namespace": "ops", "query": "quarterly plan", "min_similarity": 0}
    assert call("memory.search", alone, admin).status == 200

    everywhere = call("memory.search_trace_log", {"namespace": "ops"}, admin).json["rows"]
    assert [sorted(row["keys"]) for row in everywhere] == [["ops.plan"], ["hr.plan", "ops.plan"]]
    ops_only = alice.token("admin", namespaces=("ops",))
    rows = call("memory.search_trace_log", {"namespace": "ops"}, ops_only).json["rows"]
    assert [row["keys"] for row in rows] == [["ops.plan"]]  # the fanned-out search is not its to read
