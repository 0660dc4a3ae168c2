"""memory.search: a version, a ticket or a code the question names puts the row holding it, as written, first in
every mode (retrieval/search/legs/exact.py)."""

import pytest

from retrieval.search.legs.exact import holds

pytestmark = pytest.mark.cluster  # these ops run on a two-shard cluster too

MODES = ["semantic", "rrf", "hybrid", "bm25_hybrid", "lexical", "graph", "temporal", "related"]
RELEASES = [
    {"memory_key": "release.a", "value": "billing service shipped version 1.6.4 to production on a tuesday"},
    {"memory_key": "release.b", "value": "billing service shipped version 1.4.60 to production on a tuesday"},
    {"memory_key": "release.c", "value": "billing service shipped version 1.4.6.2 to production on a tuesday"},
    {"memory_key": "release.d", "value": "rollback notes: 1.4.6 broke the invoice export"},
    {"memory_key": "release.e", "value": "billing service shipped a hotfix to production on a tuesday"},
]


@pytest.mark.parametrize("mode", MODES)
def test_a_version_puts_the_row_holding_it_first_in_every_mode(backend, ranker, mode):
    ranker.set(*RELEASES)
    reply = ranker.search("which billing service version 1.4.6 shipped to production", search_mode=mode, explain=True)
    hits = reply.json["hits"]
    assert hits[0]["memory_key"] == "release.d", [h["memory_key"] for h in hits]
    assert hits[0]["score_components"]["exact_identifier"] == 1.0
    assert all("exact_identifier" not in h["score_components"] for h in hits[1:])  # 1.6.4, 1.4.60, 1.4.6.2
    assert reply.json["abstain"] is False


def test_a_ticket_code_is_served_under_a_floor_its_cosine_misses(backend, ranker):
    ranker.set(
        {"memory_key": "ticket.long", "value": "PROJ-12345 is the duplicate we closed"},
        {"memory_key": "ticket.asked", "value": "PROJ-1234: flaky login on safari, owned by dana"},
        {"memory_key": "other", "value": "the quarterly planning offsite moved to march"},
    )
    reply = ranker.search("status of PROJ-1234", min_similarity=0.99, floor_mode="drop", top_k=3)
    assert [h["memory_key"] for h in reply.json["hits"]] == ["ticket.asked"]
    assert reply.json["abstain"] is False


def test_a_question_without_an_identifier_runs_no_exact_read(backend, ranker):
    ranker.set(*RELEASES)
    reply = ranker.search("which billing version shipped", explain=True)
    assert all("exact_identifier" not in h["score_components"] for h in reply.json["hits"])


@pytest.mark.parametrize(
    "value, identifier, held",
    [
        ("shipped 1.4.6.", "1.4.6", True),  # the sentence's full stop is not part of it
        ("shipped v1.4.6 today", "1.4.6", False),
        ("shipped 11.4.6", "1.4.6", False),
        ("shipped 1.4.6.2", "1.4.6", False),
        ("see proj-1234 now", "PROJ-1234", True),
        ("see PROJ-12345", "PROJ-1234", False),
        ("path a/b/c.py", "a/b/c.py", True),
    ],
)
def test_holds_reads_an_identifier_between_word_boundaries(value, identifier, held):
    assert holds(value, identifier) is held
