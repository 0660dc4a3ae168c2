"""retrieval/caching.py: the one helper behind every process-local copy (no engine needed)."""

import pytest

from retrieval import caching
from retrieval.caching import TtlCache


def reader(answers):
    calls = []

    def read():
        calls.append(1)
        return answers[len(calls) - 1]

    return read, calls


def test_a_fresh_copy_is_served_without_reading_again():
    cache = TtlCache(60)
    read, calls = reader(["a", "b"])
    assert cache.get("k", read) == "a" and cache.get("k", read) == "a" and len(calls) == 1


def test_an_expired_copy_is_read_again_and_the_age_may_come_from_a_setting():
    seconds = [60]
    cache = TtlCache(lambda: seconds[0])
    read, calls = reader(["a", "b"])
    cache.get("k", read)
    seconds[0] = 0  # the setting changed: every copy is now too old
    assert cache.get("k", read) == "b" and len(calls) == 2


def test_a_failed_read_keeps_nothing_and_the_last_copy_stays_available():
    cache = TtlCache(0)
    cache.put("k", "old")

    def failing():
        raise ConnectionError("down")

    with pytest.raises(ConnectionError):
        cache.get("k", failing)
    assert cache.last("k") == "old" and cache.last("other", "none") == "none"


def test_forget_all_drops_every_cache_copies():
    first, second = TtlCache(60), TtlCache(60)
    first.put("k", 1)
    second.put("k", 2)
    caching.forget_all()
    read, calls = reader([3, 4])
    assert first.get("k", read) == 3 and second.get("k", read) == 4 and len(calls) == 2


def test_a_read_under_way_as_the_copies_are_dropped_keeps_nothing():
    """A change that drops the copies (`forget`) while another thread's read is under way: that read's answer may be
    from before the change, so it is returned but not kept (the stored cells' versions, read as a training ended,
    were kept stale for RECHECK_S, and a batch then found no cells ready)."""
    cache = TtlCache(60)
    answers = iter(["before the change", "after it"])

    def read_across_a_change():
        answer = next(answers)
        cache.forget()  # another thread's change lands while this read is under way
        return answer

    assert cache.get("k", read_across_a_change) == "before the change"
    assert cache.get("k", lambda: next(answers)) == "after it"
