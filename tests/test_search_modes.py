"""memory.search: each search_mode on a namespace where that mode decides the order."""

import math

import pytest

from retrieval import knobs
from retrieval.knobs import RRF_K

pytestmark = pytest.mark.cluster  # these ops run on a two-shard cluster too


def by_key(reply):
    return {hit["memory_key"]: hit for hit in reply.json["hits"]}


def test_semantic_orders_by_cosine_and_relevance_is_the_similarity(backend, ranker):
    ranker.set(
        {"memory_key": "near", "value": "production deploys run on tuesday mornings"},
        {"memory_key": "mid", "value": "production database backups run nightly"},
        {"memory_key": "far", "value": "the cafeteria serves soup on fridays"},
    )
    reply = ranker.search("when do production deploys run", search_mode="semantic", explain=True)
    keys = [hit["memory_key"] for hit in reply.json["hits"]]
    assert keys[:2] == ["near", "mid"] and keys[-1] == "far"
    for hit in reply.json["hits"]:
        assert hit["score_components"]["relevance"] == pytest.approx(hit["similarity"], abs=1e-5)
    sims = [hit["similarity"] for hit in reply.json["hits"]]
    assert sims == sorted(sims, reverse=True)
    assert reply.json["search_mode"] == "semantic"


def test_rrf_lifts_the_row_holding_the_word_over_a_cosine_lookalike(backend, ranker):
    ranker.set(
        {"memory_key": "lookalike", "value": "zebrafish zebrafish"},
        {
            "memory_key": "holder",
            "value": "quarterly planning notes mention a zebra once among budgets hiring and offsites",
        },
    )
    semantic = ranker.search("zebra", search_mode="semantic")
    assert [h["memory_key"] for h in semantic.json["hits"]] == ["lookalike", "holder"]
    rrf = ranker.search("zebra", search_mode="rrf", explain=True)
    assert [h["memory_key"] for h in rrf.json["hits"]] == ["holder", "lookalike"]
    holder = by_key(rrf)["holder"]["score_components"]
    assert holder["semantic_rank"] == 2 and holder["lexical_rank"] == 1
    assert holder["rrf_score"] == pytest.approx(1 / (RRF_K + 2) + 1 / (RRF_K + 1), abs=1e-6)
    assert holder["rrf_weight_lexical"] == 1.0
    lookalike = by_key(rrf)["lookalike"]["score_components"]
    assert "lexical_rank" not in lookalike and lookalike["rrf_score"] == pytest.approx(1 / (RRF_K + 1), abs=1e-6)


def test_rrf_lowers_the_lexical_weight_for_a_path_shaped_query(backend, ranker):
    ranker.set({"memory_key": "f", "value": "fusion lives in src/app/retrieval/fusion.py"})
    reply = ranker.search("src/app/retrieval/fusion.py", search_mode="rrf", explain=True)
    assert reply.json["hits"][0]["score_components"]["rrf_weight_lexical"] == 0.5


def test_hybrid_weighs_lexical_by_alpha(backend, ranker):
    ranker.set(
        {"memory_key": "lookalike", "value": "zebrafish zebrafish"},
        {
            "memory_key": "holder",
            "value": "quarterly planning notes mention a zebra once among budgets hiring and offsites",
        },
    )
    lexical_heavy = ranker.search("zebra", search_mode="hybrid", alpha=0.9, explain=True)
    assert lexical_heavy.json["hits"][0]["memory_key"] == "holder"
    cosine_heavy = ranker.search("zebra", search_mode="hybrid", alpha=0.0, explain=True)
    assert cosine_heavy.json["hits"][0]["memory_key"] == "lookalike"
    for hit in lexical_heavy.json["hits"]:
        parts = hit["score_components"]
        assert parts["relevance"] == pytest.approx(0.9 * parts["lexical"] + 0.1 * hit["similarity"], abs=1e-5)


def test_bm25_hybrid_weights_the_rare_word(backend, ranker):
    common = [{"memory_key": f"apple.{i}", "value": f"apple harvest report number {i}"} for i in range(8)]
    ranker.set(*common, {"memory_key": "rare", "value": "the zygote count from the lab"})
    reply = ranker.search("apple zygote", search_mode="bm25_hybrid", alpha=1.0, explain=True)
    hits = reply.json["hits"]
    assert hits[0]["memory_key"] == "rare"
    assert hits[0]["score_components"]["bm25"] == 1.0  # normalised: the best BM25 in the pool
    assert all(h["score_components"]["bm25"] < 1.0 for h in hits[1:])


def test_bm25_counts_a_row_written_a_moment_ago(backend, ranker):
    ranker.set({"memory_key": "old", "value": "alpha beta"})
    ranker.set({"memory_key": "new", "value": "gamma delta gamma"})
    reply = ranker.search("gamma", search_mode="bm25_hybrid", alpha=1.0, explain=True)
    assert reply.json["hits"][0]["memory_key"] == "new" and reply.json["hits"][0]["score_components"]["bm25"] == 1.0


def test_hybrid_counts_a_rows_words_whatever_its_name(backend, ranker, monkeypatch):
    """The lexical leg keeps its pool's best rows, and rows holding the same words tie, so its cut falls among them by
    name; a row another leg found past the cut still has its words weighed (legs/lexical.py, `complete`)."""
    monkeypatch.setattr(knobs, "POOL_MIN", 1)  # a pool of top_k x 4 = 4 rows per leg
    fillers = [{"memory_key": f"a{n}", "value": f"zebra quarterly budget {word}"} for n, word in enumerate("abcdef")]
    ranker.set(*fillers, {"memory_key": "zz", "value": "zebras zebra"})
    reply = ranker.search("zebras", search_mode="hybrid", top_k=1, explain=True)
    top = reply.json["hits"][0]
    assert top["memory_key"] == "zz"
    assert top["score_components"]["lexical"] == pytest.approx(1.0, abs=1e-5)  # its one word, the query's only


def test_lexical_is_token_overlap_only(backend, ranker):
    ranker.set(
        {"memory_key": "both", "value": "kafka retention is seven days, set by the platform team for every cluster"},
        {"memory_key": "one", "value": "kafka"},
    )
    reply = ranker.search("kafka retention", search_mode="lexical", explain=True)
    hits = reply.json["hits"]
    assert [h["memory_key"] for h in hits] == ["both", "one"]
    # Each query word counts by its idf over the namespace (2 rows): kafka is in both, retention in one.
    kafka, retention = math.log(1 + 0.5 / 2.5), math.log(1 + 1.5 / 1.5)
    assert hits[0]["score_components"]["lexical"] == 1.0
    assert hits[1]["score_components"]["lexical"] == pytest.approx(kafka / (kafka + retention), abs=1e-5)
    assert hits[1]["similarity"] > hits[0]["similarity"]  # the cosine did not decide


def test_a_rare_query_word_outweighs_a_common_one(backend, ranker):
    ranker.set(
        {"memory_key": "sunrise", "value": "Melanie: I painted a sunrise over the lake"},
        {"memory_key": "m1", "value": "Melanie: the kids loved the museum"},
        {"memory_key": "m2", "value": "Melanie: work has been busy lately"},
        {"memory_key": "m3", "value": "Melanie: we went camping with the kids"},
    )
    hits = ranker.search("Melanie sunrise", search_mode="lexical", explain=True).json["hits"]
    assert hits[0]["memory_key"] == "sunrise"
    assert hits[1]["score_components"]["lexical"] < 0.25  # only the common word


def test_graph_lifts_rows_one_hop_from_the_query_entity(backend, ranker):
    value = "owns the ingestion pipeline and its on-call rotation"
    ranker.set(
        {"memory_key": "dana", "value": "Dana leads the platform team", "entities": ["Dana", "Platform"]},
        {"memory_key": "linked", "value": value, "entities": ["Platform"]},
        {"memory_key": "unlinked", "value": value, "entities": ["Marketing"]},
    )
    reply = ranker.search("what does Dana own", search_mode="graph", explain=True)
    hits = by_key(reply)
    assert reply.json["query_entities"] == ["dana"]
    assert hits["linked"]["score_components"]["graph_hop"] == 1.0
    assert hits["unlinked"]["score_components"]["graph_hop"] == 0.0
    keys = [h["memory_key"] for h in reply.json["hits"]]
    assert keys.index("linked") < keys.index("unlinked")


def test_graph_matches_triples_by_entity_and_relation(backend, ranker):
    ranker.set(
        {
            "memory_key": "owner",
            "value": "service record",
            "triples": [{"subject": "Billing", "relation": "owned by", "object": "Team Kite"}],
        },
        {
            "memory_key": "other",
            "value": "service record",
            "triples": [{"subject": "Billing", "relation": "deployed on", "object": "k8s"}],
        },
        {"memory_key": "none", "value": "service record"},
    )
    reply = ranker.search("who owned billing", search_mode="graph", explain=True)
    hits = by_key(reply)
    assert hits["owner"]["score_components"]["graph_triple"] == 1.0
    assert hits["other"]["score_components"]["graph_triple"] == 0.5
    assert hits["none"]["score_components"]["graph_triple"] == 0.0
    assert [h["memory_key"] for h in reply.json["hits"]] == ["owner", "other", "none"]


def test_temporal_serves_rows_dated_near_the_asked_date(backend, ranker):
    ranker.set(
        {"memory_key": "may7", "value": "went hiking with the team", "valid_at": "2023-05-07T10:00:00Z"},
        {"memory_key": "may9", "value": "went hiking with the team", "valid_at": "2023-05-09T10:00:00Z"},
        {"memory_key": "june", "value": "went hiking with the team", "valid_at": "2023-06-20T10:00:00Z"},
    )
    reply = ranker.search("where did we go hiking on 7 May 2023", search_mode="temporal", explain=True)
    assert [h["memory_key"] for h in reply.json["hits"]] == ["may7", "may9"]
    assert reply.json["hits"][0]["score_components"]["temporal"] > reply.json["hits"][1]["score_components"]["temporal"]


def test_temporal_resolves_relative_dates_against_observation_date(backend, ranker):
    ranker.set(
        {"memory_key": "then", "value": "standup moved to 9:30", "valid_at": "2024-03-04T09:00:00Z"},
        {"memory_key": "later", "value": "standup moved to 9:30", "valid_at": "2024-04-20T09:00:00Z"},
    )
    keys = ranker.hits("what changed last week", search_mode="temporal", observation_date="2024-03-11")
    assert keys == ["then"]


def test_related_orders_by_tag_and_entity_overlap(backend, ranker):
    ranker.set(
        {"memory_key": "two", "value": "a", "tags": ["billing"], "entities": ["Acme"]},
        {"memory_key": "one", "value": "b", "tags": ["billing"]},
        {"memory_key": "zero", "value": "c", "tags": ["other"]},
    )
    reply = ranker.search(
        "anything", search_mode="related", tags_soft=["billing"], entity_filter=["Acme"], explain=True
    )
    # entity_filter also filters: only rows naming Acme are served.
    assert [h["memory_key"] for h in reply.json["hits"]] == ["two"]
    reply = ranker.search("anything", search_mode="related", tags_soft=["billing", "acme-tag"], explain=True)
    related = {h["memory_key"]: h["score_components"]["related"] for h in reply.json["hits"]}
    assert related == {"one": 0.5, "two": 0.5, "zero": 0.0}
    assert [h["memory_key"] for h in reply.json["hits"]][-1] == "zero"


def test_mode_resolution_request_then_recipe_then_namespace_then_default(backend, ranker, call, settings):
    ranker.set({"memory_key": "k", "value": "some value"})
    assert ranker.search("value").json["search_mode"] == "semantic"
    assert ranker.search("value").json["mode_source"] == "default"
    call("namespace.register", {"namespace": "default", "retrieval_defaults": {"search_mode": "hybrid"}}, ranker.token)
    assert (ranker.search("value").json["search_mode"], ranker.search("value").json["mode_source"]) == (
        "hybrid",
        "namespace",
    )
    recipe = ranker.search("value", recipe="verbatim").json
    assert (recipe["search_mode"], recipe["mode_source"], recipe["recipe"]) == ("lexical", "recipe", "verbatim")
    asked = ranker.search("value", recipe="verbatim", search_mode="semantic").json
    assert (asked["search_mode"], asked["mode_source"]) == ("semantic", "request")


def test_default_mode_setting_and_the_identifier_rule(backend, ranker, settings):
    ranker.set({"memory_key": "k", "value": "ERR_CONN_RESET means the balancer dropped us"})
    planned = ranker.search("what is ERR_CONN_RESET").json
    assert (planned["search_mode"], planned["mode_source"]) == ("rrf", "planner")
    assert "ERR_CONN_RESET" in planned["notes"][0]
    assert ranker.search("what is ERR_CONN_RESET", search_mode="semantic").json["search_mode"] == "semantic"
    settings.LOOM_MEMORY_SEARCH_DEFAULT_MODE = "lexical"
    assert ranker.search("plain words").json["search_mode"] == "lexical"


def test_a_recipe_fills_only_fields_the_caller_left_unset(backend, ranker):
    ranker.set({"memory_key": "k", "value": "v"})
    quality = ranker.search("an unrelated question", recipe="quality").json  # a weak first pass asks for HyDE
    assert quality["search_mode"] == "bm25_hybrid" and "hyde:fake_llm" in quality["degraded"]
    no_hyde = ranker.search("an unrelated question", recipe="quality", hyde=False).json
    assert "hyde:fake_llm" not in no_hyde["degraded"]
    fast = ranker.search("v", recipe="fast").json
    assert fast["retrieval_budget"] == "fast" and fast["search_mode"] == "semantic"


@pytest.mark.parametrize(
    "mode", ["semantic", "rrf", "hybrid", "bm25_hybrid", "lexical", "graph", "temporal", "related"]
)
def test_identical_searches_serve_identical_windows(backend, ranker, mode):
    # Ten rows with the same value: every score ties, so only the tie-break orders them.
    ranker.set(*[{"memory_key": f"twin.{i:02d}", "value": "identical twin value", "tags": ["t"]} for i in range(10)])
    body = {"search_mode": mode, "top_k": 6, "tags_soft": ["t"]}
    first, second = ranker.search("twin value", **body).json, ranker.search("twin value", **body).json
    assert [h["memory_key"] for h in first["hits"]] == [h["memory_key"] for h in second["hits"]]
    assert [h["rank_score"] for h in first["hits"]] == [h["rank_score"] for h in second["hits"]]
    assert [h["memory_key"] for h in first["hits"]] == sorted(h["memory_key"] for h in first["hits"])
