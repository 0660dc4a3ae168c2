"""The write gates: a value this close to a live row of another key duplicates it, or conflicts with it."""

import re
import threading
import time

import pytest

from retrieval import knobs
from retrieval.index import reading
from tests import events
from tests.test_vector_mirror import agent_org, wait_for_mirror

pytestmark = pytest.mark.cluster  # these ops run on a two-shard cluster too

DARK = "The user prefers a dark theme in the editor"
LIGHT = "The user prefers a light theme in the editor"


def stored(agent, *items, **common):
    return agent.set(*items, **common).json["items"]


@pytest.fixture(params=["scan", "mirror", "cells", "stored"])
def path(request, backend, agent, settings, monkeypatch):
    """Judged by a ClickHouse scan, by the loaded vector mirror, by the mirror's cells (retrieval/index/cells.py:
    here from the first row, as a namespace past knobs.GATES_EXACT_ROWS is), or by the namespace's cells stored
    in ClickHouse (retrieval/index/stored_cells.py: here with no mirror and no scan, as a namespace past its compact
    mirror's bytes is)."""
    if request.param == "cells":
        monkeypatch.setattr(knobs, "GATES_EXACT_ROWS", 1)
    if request.param in ("mirror", "cells"):
        agent.set({"memory_key": "seed", "value": "an unrelated note about lunch"})
        wait_for_mirror(agent)
    if request.param == "stored":
        settings.LOOM_VECTOR_MIRROR, settings.LOOM_WRITE_GATES_MAX_PAIRS = False, 0
        wait_for_stored_cells(agent, settings.LOOM_EMBEDDING_MODEL)
    return request.param


def wait_for_stored_cells(agent, model):
    """Two unrelated rows: the second's batch finds no stored cells, begins their training and waits for it (up to
    LOOM_WRITE_GATES_LOAD_WAIT_S); poll until ready."""
    from retrieval.index import stored_cells

    org = agent_org(agent)
    reply = agent.set({"memory_key": "seed", "value": "an unrelated note about lunch"})
    assert reply.status == 201, reply.json
    [second] = stored(agent, {"memory_key": "seed-2", "value": "the parking garage closes at nine"})
    assert (second["write_gates"], second["duplicate_of"]) == ("judged", None)
    deadline = time.monotonic() + 30
    while stored_cells.ready(org, agent.namespace, model) is None:
        assert time.monotonic() < deadline, "the stored cells were not ready within 30 s"
        time.sleep(0.05)


def test_a_duplicate_is_stored_and_hidden_unless_asked_for(path, agent):
    from tests.test_metrics import sample

    stored(agent, {"memory_key": "a", "value": DARK})
    judged = sample("loom_write_gates_total", outcome="judged")
    result = stored(agent, {"memory_key": "b", "value": DARK})[0]
    assert result["duplicate_of"] == "a" and result["conflict_verdict"] is None
    assert sample("loom_write_gates_total", outcome="judged") == judged + 1
    assert "b" not in agent.hits("which theme does the user prefer", min_similarity=0)
    assert {"a", "b"} <= set(agent.hits("which theme does the user prefer", min_similarity=0, include_duplicates=True))
    got = agent.call("memory.get", {"memory_key": "b"}, agent.token).json
    assert (got["duplicate_of"], got["value"]) == ("a", DARK)


def test_a_close_value_carries_a_conflict_verdict(path, agent, settings):
    settings.LOOM_CONFLICT_THRESHOLD, settings.LOOM_DUPLICATE_THRESHOLD = 0.5, 0.99
    stored(agent, {"memory_key": "a", "value": DARK})
    verdict = stored(agent, {"memory_key": "b", "value": LIGHT})[0]["conflict_verdict"]
    assert verdict["memory_key"] == "a" and 0.5 <= verdict["similarity"] < 0.99
    assert (verdict["threshold"], verdict["tier"]) == (0.5, "scalar")
    assert agent.call("memory.get", {"memory_key": "b"}, agent.token).json["conflict_verdict"] == verdict
    bulk = agent.call("memory.bulk_get", {"memory_keys": ["b"]}, agent.token).json["memories"][0]
    assert "conflict_verdict" not in bulk and bulk["value"] == LIGHT  # as the spec has it: memory.get's alone
    assert "b" in agent.hits("light theme editor", min_similarity=0)  # a conflict is not hidden


def test_rows_of_another_writer_user_or_session_are_never_the_canonical(path, agent):
    stored(agent, {"memory_key": "a", "value": DARK, "user_id": "u1"})
    assert stored(agent, {"memory_key": "b", "value": DARK, "user_id": "u2"})[0]["duplicate_of"] is None
    assert (
        stored(agent, {"memory_key": "c", "value": DARK, "user_id": "u1", "session_id": "s9"})[0]["duplicate_of"]
        is None
    )
    assert agent.hits("dark theme", user_id="u2", read_scope="own_user", min_similarity=0) == ["b"]


def test_a_key_is_not_judged_against_its_own_rows_nor_unrelated_ones(path, agent):
    stored(agent, {"memory_key": "a", "value": DARK})
    again = stored(agent, {"memory_key": "a", "value": DARK + "."})[0]
    assert again["outcome"] == "updated" and again["duplicate_of"] is None
    other = stored(agent, {"memory_key": "z", "value": "Backups run nightly at two"})[0]
    assert (other["duplicate_of"], other["conflict_verdict"]) == (None, None)


def test_a_batch_over_the_pair_budget_is_stored_unjudged_and_says_so(backend, agent, settings, caplog):
    from tests.test_metrics import sample

    settings.LOOM_VECTOR_MIRROR = False  # the scan path, whichever engine
    settings.LOOM_WRITE_GATES_MAX_PAIRS = 3
    settings.LOOM_WRITE_GATES_LOAD_WAIT_S = 0  # no wait for the stored cells' training the batch begins
    stored(agent, {"memory_key": "a", "value": DARK}, {"memory_key": "x", "value": "x"})
    judged, skipped = (sample("loom_write_gates_total", outcome=outcome) for outcome in ("judged", "skipped"))
    result = stored(agent, {"memory_key": "b", "value": DARK}, {"memory_key": "c", "value": LIGHT})
    assert [(r["write_gates"], r["duplicate_of"]) for r in result] == [("skipped", None), ("skipped", None)]
    # An operator's alert counts them: rows stored unjudged, by outcome.
    assert sample("loom_write_gates_total", outcome="skipped") == skipped + 2
    assert sample("loom_write_gates_total", outcome="judged") == judged
    # The operator's log says why, and what would judge them: the counts, the budget, the mirror.
    warning = next(r.getMessage() for r in caplog.records if "write gates skipped" in r.getMessage())
    # The stored rows are counted from the corpus statistics, which the batch's own term rows, stored beside the
    # gates, may have reached already.
    assert re.search(r"\b2 new x [24] stored rows\b", warning) and "LOOM_WRITE_GATES_MAX_PAIRS (3)" in warning
    assert "LOOM_VECTOR_MIRROR_MAX_BYTES" in warning


def test_a_batch_too_large_to_scan_with_no_mirror_waits_for_the_stored_cells_it_begins(backend, agent, settings):
    """No mirror to load (LOOM_VECTOR_MIRROR off, or a namespace past even its compact bytes): the first batch over
    LOOM_WRITE_GATES_MAX_PAIRS begins the namespace's stored cells and waits for their training (seconds at most for a
    namespace just past the budget) instead of going unjudged."""
    settings.LOOM_VECTOR_MIRROR, settings.LOOM_WRITE_GATES_MAX_PAIRS = False, 0
    settings.LOOM_WRITE_GATES = False
    stored(agent, {"memory_key": "a", "value": DARK})
    settings.LOOM_WRITE_GATES = True
    [copy] = stored(agent, {"memory_key": "b", "value": DARK})
    assert (copy["write_gates"], copy["duplicate_of"]) == ("judged", "a")


def test_a_batch_too_large_to_scan_does_not_wait_for_a_training_its_pace_says_will_be_late(
    backend, agent, settings, monkeypatch, caplog
):
    """A batch waits for the stored cells only while their training's pace so far (the rows it has indexed) says
    they will be ready within the wait: a million rows train for ~45 s."""
    from retrieval.index import stored_training

    settings.LOOM_VECTOR_MIRROR, settings.LOOM_WRITE_GATES_MAX_PAIRS = False, 0
    settings.LOOM_WRITE_GATES = False
    stored(agent, *({"memory_key": f"k{i}", "value": f"a note about lunch number {i}"} for i in range(8)))
    stored(agent, {"memory_key": "a", "value": DARK})
    settings.LOOM_WRITE_GATES = True
    # Nine rows indexed one a page, each page read in 0.5 s: ~4.5 s in all.
    monkeypatch.setattr(stored_training, "PAGE", 1)
    page = stored_training._page
    monkeypatch.setattr(stored_training, "_page", lambda *args: (time.sleep(0.5), page(*args))[1])
    settings.LOOM_WRITE_GATES_LOAD_WAIT_S = 3.0  # its first row indexed in 0.5 s or more: nine would take 4.5 s
    started = time.monotonic()
    [copy] = stored(agent, {"memory_key": "b", "value": DARK})
    assert time.monotonic() - started < 2.5 and (copy["write_gates"], copy["duplicate_of"]) == ("skipped", None)
    warning = next(r.getMessage() for r in caplog.records if "write gates skipped" in r.getMessage())
    assert "neither the cells nor its load were in within LOOM_WRITE_GATES_LOAD_WAIT_S, 3 s" in warning
    wait_for_training()  # (and then they judge: the test of the stored path's gates, above)


@pytest.fixture
def slow_training(monkeypatch):
    """Stored cells' trainings that sample the namespace, then wait for the event returned before they fit: a
    namespace whose training takes a while, as a large one's does."""
    from retrieval.index import stored_training

    release, original = threading.Event(), stored_training._sample
    monkeypatch.setattr(stored_training, "_sample", lambda *args: (original(*args), release.wait(10))[0])
    yield release
    release.set()


@pytest.fixture
def slow_load(monkeypatch):
    """Mirror loads that read the namespace, then wait for the event returned before they install it: a namespace
    whose load takes a while, as a large one's does after a start."""

    release, original = threading.Event(), reading.load
    monkeypatch.setattr(reading, "load", lambda *args: (original(*args), release.wait(10))[0])
    yield release
    release.set()


def test_a_batch_too_large_to_scan_waits_for_the_mirror_loading_and_is_judged_by_it(
    backend, agent, settings, slow_load
):
    """The first write after a start finds its namespace's mirror loading; a batch over LOOM_WRITE_GATES_MAX_PAIRS
    waits for it (up to LOOM_WRITE_GATES_LOAD_WAIT_S) instead of going unjudged."""
    settings.LOOM_WRITE_GATES_MAX_PAIRS = 0  # no scan: the mirror judges, or none does
    settings.LOOM_WRITE_GATES = False
    stored(agent, {"memory_key": "a", "value": DARK})
    settings.LOOM_WRITE_GATES = True
    threading.Timer(0.3, slow_load.set).start()
    started = time.monotonic()
    [copy] = stored(agent, {"memory_key": "b", "value": DARK})
    assert time.monotonic() - started >= 0.3  # it waited for the load...
    assert (copy["write_gates"], copy["duplicate_of"]) == ("judged", "a")  # ...and the loaded mirror judged it


def test_a_batch_too_large_to_scan_is_stored_unjudged_when_the_load_and_the_training_outlast_the_wait(
    backend, agent, settings, slow_load, slow_training, caplog
):
    settings.LOOM_WRITE_GATES_MAX_PAIRS = 0
    settings.LOOM_WRITE_GATES_LOAD_WAIT_S = 0.2
    settings.LOOM_WRITE_GATES = False
    stored(agent, {"memory_key": "a", "value": DARK})
    settings.LOOM_WRITE_GATES = True
    started = time.monotonic()
    [copy] = stored(agent, {"memory_key": "b", "value": DARK})
    assert 0.2 <= time.monotonic() - started < 5
    assert (copy["write_gates"], copy["duplicate_of"]) == ("skipped", None)
    warning = next(r.getMessage() for r in caplog.records if "write gates skipped" in r.getMessage())
    assert "neither the cells nor its load were in within LOOM_WRITE_GATES_LOAD_WAIT_S, 0.2 s" in warning
    # The skipped batch began training the namespace's stored cells: once they are in, a batch is judged by them,
    # with no wait for the load (held here for up to 10 s).
    slow_training.set()
    wait_for_training()
    settings.LOOM_WRITE_GATES_LOAD_WAIT_S = 5
    started = time.monotonic()
    [again] = stored(agent, {"memory_key": "c", "value": DARK})
    assert (again["write_gates"], again["duplicate_of"]) == ("judged", "a") and time.monotonic() - started < 2


def wait_for_training():
    from retrieval.index import stored_training

    deadline = time.monotonic() + 30
    while stored_training.training():
        assert time.monotonic() < deadline, "the stored cells' training did not end within 30 s"
        time.sleep(0.05)


def test_a_batch_too_large_to_scan_does_not_wait_for_a_load_its_pace_says_will_be_late(
    backend, agent, settings, monkeypatch
):
    """A batch waits for the mirror only while the load's pace so far says it will be in within the wait: a million
    rows' load takes a minute, and each write during it would wait the whole time, to be stored unjudged after all."""

    settings.LOOM_WRITE_GATES_MAX_PAIRS = 0
    settings.LOOM_WRITE_GATES = False
    stored(
        agent, {"memory_key": "a", "value": DARK}, *({"memory_key": f"k{i}", "value": f"lunch {i}"} for i in range(8))
    )
    settings.LOOM_WRITE_GATES = True
    # Nine rows loaded in four ranges (one row, then three at a time), each read in 0.5 s: ~2 s in all.
    monkeypatch.setattr(reading, "FIRST_LOAD_STEP", 1)
    monkeypatch.setattr(reading, "LOAD_STEP", 3)
    read = reading.live_memory_columns
    monkeypatch.setattr(reading, "live_memory_columns", lambda *args, **kw: (time.sleep(0.5), read(*args, **kw))[1])
    settings.LOOM_WRITE_GATES_LOAD_WAIT_S = 3.0  # its first row read in 0.5 s: nine would take 4.5 s
    started = time.monotonic()
    [copy] = stored(agent, {"memory_key": "b", "value": DARK})
    # It did not wait for the load (3 s), and was judged by the stored cells it began, which a few rows' training
    # readies in well under a second.
    assert time.monotonic() - started < 2.5 and (copy["write_gates"], copy["duplicate_of"]) == ("judged", "a")
    settings.LOOM_WRITE_GATES_LOAD_WAIT_S = 10.0  # the rest of it does fit this wait
    [later] = stored(agent, {"memory_key": "c", "value": DARK})
    assert (later["write_gates"], later["duplicate_of"]) == ("judged", "a")


def test_of_two_copies_in_one_batch_the_first_is_the_canonical(path, agent):
    first, second, third = stored(
        agent,
        {"memory_key": "a", "value": DARK},
        {"memory_key": "b", "value": DARK},
        {"memory_key": "c", "value": DARK},
    )
    assert (first["duplicate_of"], second["duplicate_of"], third["duplicate_of"]) == (None, "a", "a")
    assert "a" in agent.hits("dark theme", min_similarity=0)


def test_a_copy_of_a_duplicate_names_the_visible_canonical(path, agent):
    stored(agent, {"memory_key": "a", "value": DARK})
    results = stored(agent, {"memory_key": "b", "value": DARK}, {"memory_key": "c", "value": DARK})
    assert [r["duplicate_of"] for r in results] == ["a", "a"]


def test_the_gates_can_be_switched_off(backend, agent, settings):
    settings.LOOM_WRITE_GATES = False
    stored(agent, {"memory_key": "a", "value": DARK})
    assert [(r["write_gates"], r["duplicate_of"]) for r in stored(agent, {"memory_key": "b", "value": DARK})] == [
        ("off", None)
    ]
    assert {"a", "b"} <= set(agent.hits("dark theme", min_similarity=0))


def test_a_failed_scan_stores_the_write_unjudged(backend, agent, settings, monkeypatch):
    from retrieval.ingest import write_gates
    from retrieval.store import clickhouse

    settings.LOOM_VECTOR_MIRROR = False
    stored(agent, {"memory_key": "a", "value": DARK})

    def refused(*args):
        raise clickhouse.ClickHouseError("simulated refusal")

    monkeypatch.setattr(write_gates, "_nearest_in_clickhouse", refused)
    result = stored(agent, {"memory_key": "b", "value": DARK})[0]
    assert (result["write_gates"], result["duplicate_of"]) == ("skipped", None)
    assert agent.call("memory.get", {"memory_key": "b"}, agent.token).json["value"] == DARK


def test_conversation_turns_and_unembedded_values_are_exempt(backend, agent):
    stored(agent, {"memory_key": "q", "value": DARK, "memory_type": "turn"})
    turn = stored(agent, {"memory_key": "a", "value": DARK, "memory_type": "turn"})[0]
    assert (turn["write_gates"], turn["duplicate_of"]) == ("exempt", None)
    fact = stored(agent, {"memory_key": "f", "value": DARK})[0]  # a fact is judged against facts, not turns
    assert (fact["write_gates"], fact["duplicate_of"]) == ("judged", None)
    secret = stored(agent, {"memory_key": "s", "value": DARK, "sensitivity": "high"})[0]
    assert (secret["write_gates"], secret["duplicate_of"]) == ("exempt", None)


def test_forty_templated_deploy_events_are_forty_searchable_rows(path, agent, settings):
    """Near-identical wording, distinct facts: another version, person or date is never a duplicate."""
    settings.LOOM_DUPLICATE_THRESHOLD = 0.5  # a gate that every pair of these events clears on cosine alone
    deploys = events.deploys()
    results = stored(agent, *deploys[:20]) + stored(agent, *deploys[20:])  # judged in a batch, then against stored
    assert [r["duplicate_of"] for r in results] == [None] * 40
    found = agent.hits("deploys of web-app, billing-service, search-api and auth-gateway", top_k=40, min_similarity=0)
    assert sorted(found) == sorted(e["memory_key"] for e in deploys)


@pytest.mark.parametrize(
    "copy",
    [
        "web-app v4.2.3 deployed by Jonas Berg on 2026-10-27; rolled back",  # the same fact, word for word
        "Jonas Berg deployed web-app v4.2.3 on 2026-10-27 and it was rolled back",  # reworded, same markers
    ],
)
def test_a_copy_with_the_same_numbers_and_names_is_still_a_duplicate(path, agent, settings, copy):
    settings.LOOM_DUPLICATE_THRESHOLD = 0.5
    stored(agent, {"memory_key": "d1", "value": "web-app v4.2.3 deployed by Jonas Berg on 2026-10-27; rolled back"})
    assert stored(agent, {"memory_key": "d2", "value": copy})[0]["duplicate_of"] == "d1"


def test_the_loaded_mirror_judges_a_copy_with_no_statement_for_its_value(path, agent, settings):
    """The mirror holds the value of the row it names, so the markers are compared without a ClickHouse read."""
    from retrieval.store import clickhouse

    settings.LOOM_DUPLICATE_THRESHOLD = 0.5
    stored(agent, {"memory_key": "d1", "value": "web-app v4.2.3 deployed by Jonas Berg on 2026-10-27; rolled back"})
    with clickhouse.recorded() as statements:
        result = stored(agent, {"memory_key": "d2", "value": "Jonas Berg deployed web-app v4.2.3 on 2026-10-27"})[0]
    assert result["duplicate_of"] == "d1"
    if path in ("mirror", "cells"):  # (a scan's namespace may have been loaded meanwhile: the mirror judged it too)
        assert not [statement for statement in statements if "SELECT memory_key, agent" in statement]


@pytest.mark.parametrize(
    "other",
    [
        "web-app v4.2.4 deployed by Jonas Berg on 2026-10-27; rolled back",  # version
        "web-app v4.2.3 deployed by Jonas Berg on 2026-10-28; rolled back",  # date
        "web-app v4.2.3 deployed by Lena Berg on 2026-10-27; rolled back",  # name
        "web-app v4.2.3 deployed by Jonas Berg on 2026-10-27; rolled back 2 times",  # number
        "web-app v4.2.3 deployed by Jonas Berg on 2026-10-27 from build_7731; rolled back",  # identifier
    ],
)
def test_one_marker_apart_is_another_fact(path, agent, settings, other):
    settings.LOOM_DUPLICATE_THRESHOLD = 0.5
    stored(agent, {"memory_key": "d1", "value": "web-app v4.2.3 deployed by Jonas Berg on 2026-10-27; rolled back"})
    result = stored(agent, {"memory_key": "d2", "value": other})[0]
    assert result["duplicate_of"] is None
    assert result["conflict_verdict"]["memory_key"] == "d1"  # close enough to say so, not to hide it
