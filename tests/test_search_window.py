"""memory.search: filters, hidden rows, the per-key cap, the floor, bodies and the window."""

import pytest

pytestmark = pytest.mark.cluster  # these ops run on a two-shard cluster too

SAME = "the quarterly report is due on friday"


def keys(reply):
    assert reply.status == 200, reply.json
    return [hit["memory_key"] for hit in reply.json["hits"]]


def test_filters_narrow_the_window(backend, ranker):
    ranker.set(
        {
            "memory_key": "fact",
            "value": SAME,
            "memory_type": "fact",
            "tags": ["a"],
            "category": "work",
            "user_id": "u1",
            "session_id": "s1",
            "run_id": "r1",
        },
        {
            "memory_key": "pref",
            "value": SAME,
            "memory_type": "preference",
            "tags": ["b"],
            "category": "home",
            "user_id": "u2",
            "session_id": "s2",
            "run_id": "r2",
        },
        {"memory_key": "thought", "value": SAME, "memory_type": "reflection"},
    )
    assert keys(ranker.search("report")) == ["fact", "pref"]  # reflections only when asked
    assert keys(ranker.search("report", memory_type="reflection")) == ["thought"]
    assert keys(ranker.search("report", memory_type="preference")) == ["pref"]
    assert keys(ranker.search("report", tags=["b", "zzz"])) == ["pref"]
    assert keys(ranker.search("report", category="work")) == ["fact"]
    assert keys(ranker.search("report", user_id="u2")) == ["pref"]
    assert keys(ranker.search("report", user_id="-")) == ["fact", "pref"]
    assert keys(ranker.search("report", session_id="s1")) == ["fact"]
    assert keys(ranker.search("report", run_id="r2")) == ["pref"]
    assert keys(ranker.search("report", exclude_keys=["fact"])) == ["pref"]


def test_filters_hold_for_rows_only_a_lexical_leg_found(backend, ranker):
    ranker.set(
        {"memory_key": "mine", "value": "zebra notes", "user_id": "u1"},
        {"memory_key": "theirs", "value": "zebra notes", "user_id": "u2"},
    )
    for mode in ("lexical", "rrf", "bm25_hybrid"):
        reply = ranker.search("zebra", search_mode=mode, user_id="u1")
        assert keys(reply) == ["mine"] and reply.json["candidates_total"] == 1, mode


def test_agent_narrows_to_one_writer(backend, ranker):
    ranker.set({"memory_key": "k", "value": SAME}, agent="bot-a")
    ranker.set({"memory_key": "k2", "value": SAME}, agent="bot-b")
    assert keys(ranker.search("report", agent="bot-b")) == ["k2"]
    assert keys(ranker.search("report")) == ["k", "k2"]


def test_superseded_and_deleted_rows_are_hidden_unless_asked(backend, ranker, call):
    first = ranker.set({"memory_key": "k", "value": "the report is due on monday"}).json["items"][0]
    ranker.set({"memory_key": "k", "value": "the report is due on friday"})
    hits = ranker.search("report due").json["hits"]
    assert [(h["memory_key"], h["status"]) for h in hits] == [("k", "active")]
    both = ranker.search("report due", include_superseded=True).json["hits"]
    old = [h for h in both if h["status"] == "superseded"][0]
    assert old["version"] == first["version"] and old["superseded_by"] == hits[0]["version"]
    call("memory.delete", {"memory_key": "k"}, ranker.token)
    assert keys(ranker.search("report due", include_superseded=True)) == []


def test_high_sensitivity_rows_are_never_served(backend, ranker):
    ranker.set(
        {"memory_key": "secret", "value": "the deploy password: hunter2hunter2"},
        {"memory_key": "open", "value": "the deploy checklist"},
    )
    assert keys(ranker.search("deploy password", search_mode="rrf")) == ["open"]


def test_as_of_replays_knowledge_time_and_valid_time(backend, ranker, call):
    import time
    from datetime import UTC, datetime

    ranker.set({"memory_key": "k", "value": "the office is in Berlin", "valid_at": "2024-01-01T00:00:00Z"})
    between = datetime.now(UTC).isoformat()
    time.sleep(0.01)
    ranker.set({"memory_key": "k", "value": "the office is in Lisbon", "valid_at": "2024-06-01T00:00:00Z"})
    ranker.set({"memory_key": "later", "value": "the office has a roof garden", "valid_at": "2025-01-01T00:00:00Z"})
    then = ranker.search("where is the office", as_of=between, as_of_basis="knowledge_time").json["hits"]
    assert [(h["memory_key"], h["content_excerpt"]) for h in then] == [("k", "the office is in Berlin")]
    valid = ranker.search("where is the office", as_of="2024-12-31T00:00:00Z").json["hits"]
    assert [(h["memory_key"], h["content_excerpt"]) for h in valid] == [("k", "the office is in Lisbon")]


def test_the_per_key_cap_bounds_rows_of_one_key(backend, ranker, settings):
    for session in ("s1", "s2", "s3"):
        ranker.set({"memory_key": "k", "value": SAME, "session_id": session})
    ranker.set({"memory_key": "other", "value": "unrelated words entirely"})
    assert keys(ranker.search("quarterly report")) == ["k", "k", "other"]  # default cap 2
    settings.LOOM_MEMORY_SEARCH_PER_KEY_CAP = 0
    assert keys(ranker.search("quarterly report")) == ["k", "k", "k", "other"]


def test_the_floor_readmits_tags_or_drops_weak_rows(backend, agent):
    agent.set(
        {"memory_key": "weak", "value": "lunch menu for the offsite"},
        {"memory_key": "strong", "value": "quarterly finance report due friday"},
    )
    readmit = agent.search("quarterly finance report", min_similarity=0.5).json["hits"]
    assert [(h["memory_key"], h["below_threshold"]) for h in readmit] == [("strong", False), ("weak", True)]
    assert readmit[1]["content_excerpt"]
    ids_only = agent.search("quarterly finance report", min_similarity=0.5, floor_mode="ids_only").json["hits"]
    assert ids_only[1]["memory_key"] == "weak" and ids_only[1]["content_excerpt"] == "" and ids_only[1]["value"] is None
    assert ids_only[0]["content_excerpt"]
    dropped = agent.search("quarterly finance report", min_similarity=0.5, floor_mode="drop").json["hits"]
    assert [h["memory_key"] for h in dropped] == ["strong"]


def test_a_readmitted_row_never_sits_above_a_confident_one(backend, agent):
    agent.set(
        {"memory_key": "weak", "value": "lunch menu", "confidence": 1.0, "tags": ["t"]},
        {"memory_key": "strong", "value": "quarterly finance report", "confidence": 0.0},
    )
    hits = agent.search("quarterly finance report", min_similarity=0.3, tags_soft=["t"], search_mode="lexical").json
    assert [h["memory_key"] for h in hits["hits"]] == ["strong", "weak"]


def test_top_k_candidates_total_and_bodies(backend, ranker):
    long_value = "quarterly report " + "details " * 100
    ranker.set(*[{"memory_key": f"k{i}", "value": f"{long_value} {i}"} for i in range(8)])
    reply = ranker.search("quarterly report", top_k=3)
    assert len(reply.json["hits"]) == 3 and reply.json["candidates_total"] == 8
    hit = reply.json["hits"][0]
    assert hit["value"] is None and len(hit["content_excerpt"]) <= 320 and hit["content_excerpt"].endswith("…")
    full = ranker.search("quarterly report", top_k=1, bodies="full").json["hits"][0]
    assert full["value"].startswith(long_value)
    none = ranker.search("quarterly report", top_k=1, bodies="none").json["hits"][0]
    assert none["value"] is None and none["content_excerpt"] == ""


def test_body_budget_tokens_bounds_the_text_of_the_whole_window(backend, ranker):
    ranker.set(*[{"memory_key": f"k{i}", "value": "quarterly report " + "x" * 200} for i in range(4)])
    hits = ranker.search("quarterly report", top_k=4, bodies="full", body_budget_tokens=100).json["hits"]
    served = sum(len(h["value"] or "") for h in hits)
    assert served == 400  # 100 tokens ~ 400 characters
    assert [h["body_truncated"] for h in hits] == [False, True, True, True]


def test_a_chunk_hit_folds_onto_its_parent(backend, ranker, settings):
    settings.LOOM_MEMORY_EMBED_HEAD_CHARS = 200
    settings.LOOM_MEMORY_CHUNK_CHARS = 150
    filler = " ".join(f"routine paragraph {i} about office plants and coffee." for i in range(20))
    ranker.set(
        {"memory_key": "runbook", "value": filler + " To roll back a release run kubectl rollout undo deployment web."}
    )
    hit = ranker.search("roll back a release kubectl rollout undo", explain=True).json["hits"][0]
    assert (hit["memory_key"], hit["source"], hit["parent_memory_key"]) == ("runbook", "chunk", "runbook")
    assert "kubectl rollout undo" in hit["content_excerpt"]
    assert hit["similarity"] > 0.5
    capped = ranker.search("roll back a release kubectl rollout undo", chunk_max_share=0).json["hits"]
    assert capped == []


def test_all_mine_searches_the_callers_other_namespaces_up_to_the_cap(backend, alice, call, settings):
    token = alice.token("writer", namespaces=["home", "n1", "n2"])
    for namespace in ("home", "n1", "n2"):
        call("memory.set", {"namespace": namespace, "memory_key": f"{namespace}.k", "value": SAME}, token)
    reply = call(
        "memory.search",
        {
            "namespace": "home",
            "query": "quarterly report",
            "namespace_scope": "all_mine",
            "min_similarity": 0,
            "explain": True,
        },
        token,
    )
    assert reply.json["namespaces_searched"] == ["home", "n1", "n2"]
    foreign = {h["memory_key"]: h["score_components"].get("foreign") for h in reply.json["hits"]}
    assert foreign == {"home.k": None, "n1.k": 1.0, "n2.k": 1.0}
    assert {h["namespace"] for h in reply.json["hits"]} == {"home", "n1", "n2"}
    settings.LOOM_MEMORY_SEARCH_FANOUT_MAX_NAMESPACES = 1
    capped = call("memory.search", {"namespace": "home", "query": "report", "namespace_scope": "all_mine"}, token)
    assert capped.json["namespaces_searched"] == ["home", "n1"] and capped.json["namespaces_skipped"] == ["n2"]
    this = call("memory.search", {"namespace": "home", "query": "report"}, token)
    assert this.json["namespaces_searched"] == ["home"]


def test_namespace_defaults_shape_the_window(backend, agent, call, settings):
    settings.LOOM_WRITE_GATES = False  # five copies of one value, all served
    agent.set(*[{"memory_key": f"k{i}", "value": SAME} for i in range(5)])
    call(
        "namespace.register",
        {"namespace": "default", "retrieval_defaults": {"top_k": 2, "bodies": "full"}},
        agent.token,
    )
    hits = agent.search("quarterly report").json["hits"]
    assert len(hits) == 2 and hits[0]["value"] == SAME
    assert len(agent.search("quarterly report", top_k=3).json["hits"]) == 3


def test_render_reader_returns_the_window_as_one_text_block(backend, ranker):
    ranker.set(
        {
            "memory_key": "deploy",
            "value": "quarterly report deploys run on tuesdays",
            "valid_at": "2026-03-02T00:00:00Z",
        },
        {"memory_key": "soup", "value": "the cafeteria serves soup", "valid_at": "2026-01-09T00:00:00Z"},
    )
    reply = ranker.search("quarterly report deploys", render="reader", bodies="full", top_k=2).json
    order = [hit["memory_key"] for hit in reply["hits"]]
    assert order[0] == "deploy"
    blocks = reply["reader_block"].split("\n\n")
    assert blocks[0] == "[1] deploy · 2026-03-02\nquarterly report deploys run on tuesdays"
    assert blocks[1].startswith(f"[2] {order[1]} · ")
    assert ranker.search("quarterly report deploys").json["reader_block"] is None  # only when asked for


def test_an_abstained_search_reads_as_no_answer(backend, agent):
    reply = agent.search("anything at all", render="reader").json
    assert reply["abstain"] and reply["reader_block"].startswith("No memory answers this (no_match)")


def test_render_takes_only_reader(backend, agent):
    reply = agent.search("anything", render="markdown")
    assert (reply.status, reply.error, reply.json["error"]["field"]) == (422, "INVALID_VALUE", "render")
