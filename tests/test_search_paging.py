"""memory.search paging: a larger pool parked, served a window at a time."""

import pytest

from retrieval import knobs
from retrieval.search import paging

pytestmark = pytest.mark.cluster  # these ops run on a two-shard cluster too


def test_paging_serves_the_parked_pool_window_by_window(backend, ranker):
    ranker.set(*[{"memory_key": f"k{i:02d}", "value": "identical quarterly report"} for i in range(12)])
    first = ranker.search("quarterly report", top_k=5, paging=True).json
    seen = [h["memory_key"] for h in first["hits"]]
    handle = first["next"]
    while handle:
        page = ranker.call("memory.search", {"page": handle}, ranker.token).json
        assert page["abstain"] is False
        seen += [h["memory_key"] for h in page["hits"]]
        handle = page["next"]
    assert seen == [f"k{i:02d}" for i in range(12)]  # every row once, in rank order


def test_without_paging_there_is_no_next(backend, ranker):
    ranker.set(*[{"memory_key": f"k{i}", "value": "quarterly report"} for i in range(8)])
    assert ranker.search("quarterly report", top_k=3).json["next"] is None


def test_a_handle_expires_and_belongs_to_its_namespace(backend, ranker, call, monkeypatch):
    ranker.set(*[{"memory_key": f"k{i}", "value": "quarterly report"} for i in range(8)])
    handle = ranker.search("quarterly report", top_k=3, paging=True).json["next"]
    other = call("memory.search", {"namespace": "elsewhere", "page": handle}, ranker.token).json
    assert other["abstain_code"] == "page_expired"
    monkeypatch.setattr(knobs, "PAGE_TTL_SECONDS", 0)
    expired = ranker.search("quarterly report", top_k=3, paging=True).json["next"]
    assert call("memory.search", {"page": expired}, ranker.token).json["abstain_code"] == "page_expired"


def test_a_page_parked_a_moment_ago_is_served_by_a_process_that_did_not_park_it(backend, ranker, monkeypatch):
    """The pool is written off the request path; another worker asked for its next page at once waits for it."""
    ranker.set(*[{"memory_key": f"k{i:02d}", "value": "identical quarterly report"} for i in range(12)])
    first = ranker.search("quarterly report", top_k=5, paging=True).json
    monkeypatch.setattr(paging, "_fresh", {})  # as another process: none of this one's fresh pools
    page = ranker.call("memory.search", {"page": first["next"]}, ranker.token).json
    assert page["abstain"] is False
    assert [h["memory_key"] for h in page["hits"]] == [f"k{i:02d}" for i in range(5, 10)]
