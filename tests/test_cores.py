"""retrieval/cores.py: a serving process's Python threads on one CPU, the native work they start on every CPU. Real
affinities, set and read through the OS, each test in a thread of its own (the test process itself stays where it
was)."""

import os
import threading

import pytest

from retrieval import cores

ALLOWED = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()

pytestmark = pytest.mark.skipif(len(ALLOWED) < 2, reason="pinning needs per-thread affinity and two CPUs")


def in_thread(fn):
    """fn() in a fresh thread (which inherits this one's affinity); its answer."""
    answer = []
    thread = threading.Thread(target=lambda: answer.append(fn()))
    thread.start()
    thread.join(timeout=10)
    return answer[0]


def affinity_of_a_thread_started_here() -> set[int]:
    return in_thread(lambda: os.sched_getaffinity(0))


@pytest.fixture(autouse=True)
def _unpinned(monkeypatch):
    monkeypatch.setattr(cores, "_pinned", None)


def test_a_pinned_thread_and_the_threads_it_starts_keep_one_cpu():
    def serve():
        cores.pin(1)
        return os.sched_getaffinity(0), affinity_of_a_thread_started_here(), cores.pinned()

    mine, started, chosen = in_thread(serve)
    assert mine == started == chosen == {sorted(ALLOWED)[1]}
    assert os.sched_getaffinity(0) == ALLOWED  # another thread's pin leaves this one alone


def test_workers_take_the_cpus_in_turn():
    def chosen(worker):
        return in_thread(lambda: cores.pin(worker) or os.sched_getaffinity(0))

    assert [chosen(worker) for worker in range(len(ALLOWED) + 1)] == [
        {cpu} for cpu in [*sorted(ALLOWED), sorted(ALLOWED)[0]]
    ]


def test_native_work_runs_anywhere_and_the_threads_it_starts_keep_every_cpu():
    def serve():
        cores.pin(0)
        with cores.anywhere():
            inside, started_inside = os.sched_getaffinity(0), affinity_of_a_thread_started_here()
            with cores.anywhere():  # nested: still everywhere, and the outer exit puts it back
                nested = os.sched_getaffinity(0)
            after_nested = os.sched_getaffinity(0)
        with cores.anywhere(when=False):
            short = os.sched_getaffinity(0)
        return inside, started_inside, nested, after_nested, os.sched_getaffinity(0), short

    inside, started_inside, nested, after_nested, after, short = in_thread(serve)
    assert inside == started_inside == nested == after_nested == ALLOWED
    assert after == short == {sorted(ALLOWED)[0]}


def test_a_failure_inside_puts_the_thread_back():
    def serve():
        cores.pin(0)
        with pytest.raises(RuntimeError), cores.anywhere():
            raise RuntimeError("the engine refused")
        with cores.anywhere():  # and the next native work leaves again
            again = os.sched_getaffinity(0)
        return os.sched_getaffinity(0), again

    assert in_thread(serve) == ({sorted(ALLOWED)[0]}, ALLOWED)


def test_nothing_moves_until_a_process_pins():
    def serve():
        with cores.anywhere():
            return os.sched_getaffinity(0), cores.pinned()

    assert in_thread(serve) == (ALLOWED, None)


def test_one_cpu_is_left_alone():
    def serve():
        os.sched_setaffinity(0, {min(ALLOWED)})
        cores.pin(1)
        with cores.anywhere():
            return os.sched_getaffinity(0), cores.pinned()

    assert in_thread(serve) == ({min(ALLOWED)}, None)


def test_an_os_that_refuses_or_lacks_the_call_leaves_the_threads_unpinned(monkeypatch, caplog):
    """A sandbox that refuses affinities, or macOS, which has no per-thread ones: the worker serves unpinned."""

    def refused(pid, mask):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setaffinity", refused)
    assert in_thread(lambda: cores.pin(0) or (os.sched_getaffinity(0), cores.pinned())) == (ALLOWED, None)
    assert "stay unpinned (" in caplog.text
    monkeypatch.delattr(os, "sched_setaffinity")
    assert in_thread(lambda: cores.pin(0) or cores.pinned()) is None
    with cores.anywhere():  # native work runs as it would have: no affinity to change, and no call made to change it
        assert os.sched_getaffinity(0) == ALLOWED
