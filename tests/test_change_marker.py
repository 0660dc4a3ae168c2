"""The engine's write counts, shared by the searches of a process that queue behind one read."""

import threading
import time

import pytest

from retrieval.store import change_marker


def test_searches_queued_behind_a_count_read_share_the_next_and_never_an_older_one():
    """A search that began while a read was under way cannot take that read's answer (a write acknowledged just
    before the search may be missing from it): it takes the next read's, which it may share with any search queued
    meanwhile."""
    shared, reads = change_marker._Counts(), []
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
    shared, reads = change_marker._Counts(), []

    def count():
        reads.append(time.monotonic())
        return {"default": (len(reads), 0)}

    assert shared.since(time.monotonic(), count)[0] == {"default": (1, 0)}
    assert shared.since(time.monotonic(), count)[0] == {"default": (2, 0)}


def test_a_failed_read_is_no_answer_for_the_searches_after_it():
    shared = change_marker._Counts()

    def failing():
        raise change_marker.clickhouse.ClickHouseUnavailable("down")

    with pytest.raises(change_marker.clickhouse.ClickHouseUnavailable):
        shared.since(time.monotonic(), failing)
    assert shared.since(time.monotonic(), lambda: {"default": (7, 0)})[0] == {"default": (7, 0)}
