"""One read of engine state at a time, its outcome shared by the searches of a process queued behind it (the
engine's write counts, a vector mirror's delta): retrieval/store/shared_read.py."""

import sys
import threading
import time

import pytest

from retrieval.store import clickhouse
from retrieval.store.shared_read import SharedRead
from tests.test_vector_mirror import wait_until


def test_searches_queued_behind_a_count_read_share_the_next_and_never_an_older_one():
    """A search that began while a read was under way cannot take that read's answer (a write acknowledged just
    before the search may be missing from it): it takes the next read's, which it may share with any search queued
    meanwhile."""
    shared, reads = SharedRead(), []
    in_flight, finish = threading.Event(), threading.Event()

    def count():
        reads.append(time.monotonic())
        if len(reads) == 1:  # the read under way as the others come
            in_flight.set()
            assert finish.wait(10)
        return {"default": (len(reads), 0)}

    answers = {}

    def search(name: str, asked: float) -> None:
        answers[name] = shared.since(asked, count)

    first = threading.Thread(target=search, args=("first", time.monotonic()))
    first.start()
    assert in_flight.wait(10)
    queued = [threading.Thread(target=search, args=(name, time.monotonic())) for name in ("second", "third")]
    for thread in queued:
        thread.start()
    finish.set()
    for thread in (first, *queued):
        thread.join(10)
    assert answers["first"][0] == {"default": (1, 0)}
    assert answers["second"] == answers["third"] and answers["second"][0] == {"default": (2, 0)}
    assert len(reads) == 2 and answers["first"][1] < answers["second"][1] <= reads[1]  # one more, as it began


def test_a_search_after_the_last_read_ended_reads_again():
    shared, reads = SharedRead(), []

    def count():
        reads.append(time.monotonic())
        return {"default": (len(reads), 0)}

    assert shared.since(time.monotonic(), count)[0] == {"default": (1, 0)}
    assert shared.since(time.monotonic(), count)[0] == {"default": (2, 0)}


def test_a_failed_read_is_no_answer_for_the_searches_after_it():
    shared = SharedRead()

    def failing():
        raise clickhouse.ClickHouseUnavailable("down")

    with pytest.raises(clickhouse.ClickHouseUnavailable):
        shared.since(time.monotonic(), failing)
    assert shared.since(time.monotonic(), lambda: {"default": (7, 0)})[0] == {"default": (7, 0)}


def test_a_failed_read_fails_the_searches_queued_behind_it_at_once():
    """With the engine frozen, the searches waiting on a read that fails take its failure as it comes, instead of
    each running its own statement into the freeze in turn."""
    shared, reads, in_flight, finish = SharedRead(), [], threading.Event(), threading.Event()

    def failing():
        reads.append(time.monotonic())
        in_flight.set()
        assert finish.wait(10)
        raise clickhouse.ClickHouseUnavailable("frozen")

    asked = time.monotonic()
    outcomes = []

    def search():
        try:
            shared.since(asked, failing)
        except clickhouse.ClickHouseUnavailable as exc:
            outcomes.append((str(exc), time.monotonic()))

    searches = [threading.Thread(target=search) for _ in range(4)]
    searches[0].start()
    assert in_flight.wait(10)
    for thread in searches[1:]:
        thread.start()
    wait_until(lambda: all(sys._current_frames()[thread.ident].f_code.co_name == "wait" for thread in searches[1:]))
    failed_at = time.monotonic()
    finish.set()
    for thread in searches:
        thread.join(10)
    assert len(reads) == 1 and [said for said, _ in outcomes] == ["frozen"] * 4
    assert max(at for _, at in outcomes) - failed_at < 1.0


def test_a_wait_is_charged_to_the_requests_budget(settings):
    """A request queued behind another's statement answers within its own ClickHouse budget, not the statement's."""
    settings.LOOM_CLICKHOUSE_REQUEST_BUDGET_S = 0.3
    shared, in_flight, finish = SharedRead(), threading.Event(), threading.Event()

    def slow():
        in_flight.set()
        assert finish.wait(10)
        return "late"

    reader = threading.Thread(target=shared.since, args=(time.monotonic(), slow))
    reader.start()
    assert in_flight.wait(10)
    start = time.monotonic()
    with clickhouse.budget(), pytest.raises(clickhouse.ClickHouseUnavailable, match="REQUEST_BUDGET_S"):
        shared.since(time.monotonic(), lambda: "mine")
    took = time.monotonic() - start
    finish.set()
    reader.join(10)
    assert 0.3 <= took < 1.0
