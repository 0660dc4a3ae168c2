"""Stored cells: the write gates of a namespace no vector mirror holds read its cells from ClickHouse
(retrieval/index/stored_cells.py), so a batch too large to scan is judged at any size instead of stored unjudged."""

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from retrieval import index, knobs
from retrieval.index import cells, reading, registry, stored_cells, stored_training, stored_versions
from retrieval.store import clickhouse
from tests.test_sql_snapshots import normalised
from tests.test_vector_mirror import agent_org
from tests.test_write_gates import DARK, stored, wait_for_training

pytestmark = pytest.mark.cluster

# Facts of one template (their cells are near one another) and of others: forty rows, ten cells.
FACTS = (
    [
        f"{name} moved to {city} in {year}"
        for name, city, year in zip(
            ["Ana", "Ben", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun"],
            ["Lisbon", "Oslo", "Quito", "Hanoi", "Cairo", "Perth", "Lima", "Riga", "Kyoto", "Accra"],
            range(2011, 2021),
        )
    ]
    + [
        f"The {thing} in the {room} is {colour}"
        for thing, room, colour in zip(
            ["lamp", "rug", "sofa", "clock", "vase", "desk", "shelf", "chair", "mirror", "bench"],
            ["hall", "study", "attic", "garage", "kitchen", "porch", "cellar", "loft", "den", "nursery"],
            ["teal", "amber", "olive", "crimson", "ivory", "navy", "coral", "mauve", "khaki", "plum"],
        )
    ]
    + [f"Backup job {n} runs every {n + 3} hours on host db-{n}" for n in range(10)]
    + [
        f"Ticket {n} about {topic} was closed by {who}"
        for n, topic, who in zip(
            range(100, 110),
            ["billing", "login", "search", "export", "uploads", "emails", "themes", "alerts", "sync", "reports"],
            ["Omar", "Pia", "Quinn", "Rosa", "Sami", "Tara", "Umar", "Vera", "Wen", "Yara"],
        )
    ]
)


@pytest.fixture
def unscanned(backend, agent, settings, monkeypatch):
    """A namespace of FACTS that no mirror holds and no batch may scan (as one past its compact mirror's bytes), in
    cells of ~4 rows; returns (org, namespace, model)."""
    monkeypatch.setattr(cells, "ROWS_PER_CELL", 4)
    settings.LOOM_VECTOR_MIRROR, settings.LOOM_WRITE_GATES_MAX_PAIRS = False, 0
    settings.LOOM_WRITE_GATES = False
    agent.set(*({"memory_key": f"f{i}", "value": fact} for i, fact in enumerate(FACTS)))
    settings.LOOM_WRITE_GATES = True
    return agent_org(agent), agent.namespace, settings.LOOM_EMBEDDING_MODEL


def cell_rows(org: str, trained_at: datetime | None = None) -> int:
    return clickhouse.query_value(
        "SELECT count() FROM vector_cells FINAL WHERE org = {org:String}"
        + (" AND trained_at = {at:DateTime64(6, 'UTC')}" if trained_at else ""),
        {"org": org, "at": trained_at},
    )


def test_rows_stored_before_the_training_are_indexed_and_judge_their_copies(unscanned, agent):
    version = stored_training.train(*unscanned)
    assert version.rows == len(FACTS) == cell_rows(unscanned[0])
    assert len(stored_versions.cells_of(*unscanned, version.trained_at).fine) >= 5  # many cells, not one
    copies = stored(
        agent,
        *({"memory_key": f"c{i}", "value": FACTS[i]} for i in (0, 13, 27, 39)),
        {"memory_key": "new", "value": "The user prefers tea to coffee"},
    )
    assert [(r["write_gates"], r["duplicate_of"]) for r in copies] == [
        *(("judged", f"f{i}") for i in (0, 13, 27, 39)),
        ("judged", None),
    ]


def test_the_stored_cells_find_what_the_exact_scan_finds(unscanned):
    from retrieval.ingest import write_gates
    from tenancy.access import Role, Scope

    org, namespace, model = unscanned
    stored_training.train(*unscanned)
    values = [FACTS[i].replace(" in ", " during ") for i in range(0, 40, 3)]
    vectors, scopes = embedded(org, namespace, values), [DEFAULT_SCOPE] * len(values)
    keys = [f"n{i}" for i in range(len(values))]
    by_cells = stored_cells.nearest(org, namespace, model, vectors, keys, scopes, len(FACTS))
    by_scan = write_gates._nearest_in_clickhouse(
        Scope(org, namespace, Role.ADMIN, "test"), model, vectors, keys, scopes
    )
    assert [hit[0] for hit in by_cells] == [hit[0] for hit in by_scan]
    assert [hit[1] for hit in by_cells] == pytest.approx([hit[1] for hit in by_scan], abs=1e-5)


def embedded(org: str, namespace: str, values: list[str]):
    import numpy as np

    from retrieval.providers import customer
    from retrieval.providers.embedders import get_embedder

    with customer.for_org(org, namespace, "test", "memory.set"):
        return np.asarray([get_embedder().embed(value) for value in values], dtype=np.float32)


DEFAULT_SCOPE = ("default", "", "", "", "fact")  # an item's write scope when it names none (agent "default")


def test_rows_written_since_are_indexed_by_their_write(unscanned, agent):
    stored_training.train(*unscanned)
    stored(agent, {"memory_key": "later", "value": DARK})
    assert cell_rows(unscanned[0]) == len(FACTS) + 1
    [copy] = stored(agent, {"memory_key": "copy", "value": DARK})
    assert (copy["write_gates"], copy["duplicate_of"]) == ("judged", "later")


def test_a_superseded_value_is_no_canonical_and_the_new_one_is(unscanned, agent):
    stored_training.train(*unscanned)
    stored(agent, {"memory_key": "f5", "value": DARK})  # f5 was FACTS[5]
    old, new = stored(agent, {"memory_key": "a", "value": FACTS[5]}, {"memory_key": "b", "value": DARK})
    assert (old["duplicate_of"], new["duplicate_of"]) == (None, "f5")


def test_the_cells_are_trained_again_once_the_rows_doubled_and_the_old_ones_dropped(unscanned, agent, settings):
    org = unscanned[0]
    first = stored_training.train(*unscanned)
    settings.LOOM_WRITE_GATES = False
    stored(agent, *({"memory_key": f"g{i}", "value": f"{fact} (again, {i})"} for i, fact in enumerate(FACTS)))
    settings.LOOM_WRITE_GATES = True
    [judged] = stored(agent, {"memory_key": "x", "value": FACTS[7]})  # by the first cells, as the next are trained
    assert (judged["write_gates"], judged["duplicate_of"]) == ("judged", "f7")
    wait_for_training()
    caught_up = stored_cells.ready(*unscanned)
    # x, a duplicate, is never a canonical: not indexed.
    assert caught_up.trained_at > first.trained_at and caught_up.rows == 2 * len(FACTS)
    assert cell_rows(org, first.trained_at) == 0 and cell_rows(org) == 2 * len(FACTS)
    [copy] = stored(agent, {"memory_key": "y", "value": f"{FACTS[3]} (again, 3)"})
    assert copy["duplicate_of"] == "g3"


def test_of_two_trainings_begun_at_once_the_earlier_goes_on(unscanned):
    target, results = clickhouse.target(), []

    def train():
        clickhouse.use_target_in_thread(target)
        results.append(stored_training.train(*unscanned))
        clickhouse.release_thread()

    threads = [threading.Thread(target=train) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(result is None for result in results) == [False, True]
    done = [version for version in stored_versions.listed(*unscanned) if "ready" in version.states]
    assert [version.trained_at for version in done] == [next(r for r in results if r).trained_at]


def test_a_training_abandoned_by_its_process_gives_way_and_a_live_one_does_not(unscanned, agent):
    from retrieval import caching

    org, namespace, model = unscanned

    def claimed(moved: datetime):
        """Another process's claim, last moved then."""
        row = {"org": org, "namespace": namespace, "embedding_model": model, "state": "training"}
        clickhouse.insert("vector_centroids", [{**row, "trained_at": moved, "updated_at": moved}])
        caching.forget_all()

    claimed(datetime.now(UTC) - timedelta(seconds=stored_versions.ABANDONED_S + 60))  # its process died long ago
    # The batch's own training goes on, and the batch waits for it: judged.
    assert stored(agent, {"memory_key": "a", "value": DARK})[0]["write_gates"] == "judged"
    wait_for_training()
    assert stored_cells.ready(*unscanned).rows >= len(FACTS)  # (and "a", if in as it began)
    # A training still moving in another process holds back this one's next, due once the rows doubled.
    claimed(datetime.now(UTC))
    more = stored(agent, *({"memory_key": f"m{i}", "value": f"note {i}: order {i * 7} shipped"} for i in range(45)))
    assert {r["write_gates"] for r in more} == {"judged"}  # by the ready cells meanwhile
    # No training began here: the versions are this one's, ready (the abandoned claim went with the versions before
    # it), and the other process's.
    listed = stored_versions.listed(*unscanned)
    assert stored_training.training() == 0 and [version.states for version in listed] == [
        {"training", "filling", "ready"},
        {"training"},
    ]


def test_a_training_that_did_not_move_through_a_whole_wait_is_waited_for_again_only_once_it_moves(
    unscanned, agent, settings
):
    """A claim whose process died looks alive for ABANDONED_S (10 min): one batch waits it out, not every batch."""
    from retrieval import caching

    org, namespace, model = unscanned
    settings.LOOM_WRITE_GATES_LOAD_WAIT_S = 2
    claim = {"org": org, "namespace": namespace, "embedding_model": model, "state": "training"}
    claim["trained_at"] = datetime.now(UTC)

    def moved():
        """The other process's training moves (its heartbeat)."""
        clickhouse.insert("vector_centroids", [{**claim, "updated_at": datetime.now(UTC)}])
        caching.forget_all()

    def write(key: str) -> tuple[str, float]:
        began = time.monotonic()
        [item] = stored(agent, {"memory_key": key, "value": f"{DARK} ({key})"})
        return item["write_gates"], time.monotonic() - began

    moved()
    gates, took = write("a")
    assert gates == "skipped" and took >= 2  # waited for it in vain
    gates, took = write("b")
    assert gates == "skipped" and took < 2  # it has not moved since
    moved()
    gates, took = write("c")
    assert gates == "skipped" and took >= 2  # it moved: waited for again


def test_a_training_watched_for_less_than_half_a_wait_is_not_taken_for_stalled(unscanned, settings):
    """A batch whose wait for a loading mirror took most of its deadline watched the training a moment: too short to
    say it stalled."""
    from retrieval import caching

    org, namespace, model = unscanned
    settings.LOOM_WRITE_GATES_LOAD_WAIT_S = 2
    now = datetime.now(UTC)
    claim = {"org": org, "namespace": namespace, "embedding_model": model, "state": "training"}
    clickhouse.insert("vector_centroids", [{**claim, "trained_at": now, "updated_at": now}])
    caching.forget_all()
    assert not stored_cells.awaited(org, namespace, model, time.monotonic() + 0.3)
    began = time.monotonic()
    assert not stored_cells.awaited(org, namespace, model, began + 1)
    assert time.monotonic() - began >= 1  # waited for it again


def test_another_orgs_cells_never_judge_a_write(unscanned, agent, bob, call):
    from tests.conftest import Agent

    stored_training.train(*unscanned)
    other = Agent(call, bob.token("admin"))
    other.set(*({"memory_key": f"f{i}", "value": fact} for i, fact in enumerate(FACTS)))
    stored_training.train(bob.name, other.namespace, unscanned[2])
    [copy] = stored(other, {"memory_key": "c", "value": FACTS[1]})
    assert copy["duplicate_of"] == "f1" and cell_rows(unscanned[0]) == len(FACTS)  # its own f1; alice's untouched
    [fresh] = stored(other, {"memory_key": "d", "value": DARK})
    stored(agent, {"memory_key": "dark", "value": DARK})
    assert fresh["duplicate_of"] is None and stored(other, {"memory_key": "e", "value": DARK})[0]["duplicate_of"] == "d"


@pytest.mark.parametrize("backend", ["embedded"], indirect=True)
def test_the_batch_read_sends_the_statements_of_its_snapshot(unscanned, snapshot):
    org, namespace, model = unscanned
    stored_training.train(*unscanned)
    vectors = embedded(org, namespace, [FACTS[2]])
    with clickhouse.recorded() as statements:
        found = stored_cells.nearest(org, namespace, model, vectors, ["new"], [DEFAULT_SCOPE], len(FACTS))
    assert normalised(statements) == snapshot and found[0][0] == "f2"


def test_a_large_namespaces_cells_are_kept_so_a_restarts_batches_are_judged_at_once(
    backend, agent, settings, monkeypatch
):
    """A namespace whose mirror holds knobs.STORED_CELLS_FROM rows keeps stored cells too: after a restart,
    a batch too large to scan reads them at once instead of waiting for the load (a minute at 1M rows)."""
    from retrieval import index
    from tests.test_vector_mirror import wait_for_mirror

    org, model = agent_org(agent), settings.LOOM_EMBEDDING_MODEL
    settings.LOOM_WRITE_GATES_MAX_PAIRS, settings.LOOM_WRITE_GATES = 0, False
    agent.set(*({"memory_key": f"f{i}", "value": fact} for i, fact in enumerate(FACTS)))
    settings.LOOM_WRITE_GATES = True
    wait_for_mirror(agent)
    monkeypatch.setattr(knobs, "STORED_CELLS_FROM", len(FACTS) + 1)
    assert stored(agent, {"memory_key": "c0", "value": FACTS[0]})[0]["duplicate_of"] == "f0"  # the mirror's verdict
    assert stored_training.training() == 0 and stored_versions.versions(org, agent.namespace, model) == []  # too small
    monkeypatch.setattr(knobs, "STORED_CELLS_FROM", len(FACTS))
    stored(agent, {"memory_key": "c1", "value": FACTS[1]})
    wait_for_training()
    assert stored_cells.ready(org, agent.namespace, model).rows == len(FACTS)
    # A restart: a process that holds no mirror, and whose load of this namespace takes a while.
    release, load = threading.Event(), reading.load
    monkeypatch.setattr(reading, "load", lambda *args: (load(*args), release.wait(10))[0])
    monkeypatch.setattr(registry, "mirrors_held", {})
    try:
        started = time.monotonic()
        [copy] = stored(agent, {"memory_key": "c2", "value": FACTS[2]})
        assert (copy["write_gates"], copy["duplicate_of"]) == ("judged", "f2") and time.monotonic() - started < 5
        assert not index.loaded(org, agent.namespace, model)  # judged by the stored cells
    finally:
        release.set()


def test_centroids_fitted_on_a_sample_leave_two_cells_worth_of_strays_at_most():
    """Every value reads the strays: fitted on a quarter of 100k rows (as stored cells are, half of it unseen by the
    k-means), the worst-fitting of the quarter stand for four times as many of the rows (the stored cells read ~4,000
    strays a value at 1M rows before)."""
    import numpy as np

    from tests.synthetic import vectors

    rows = vectors(100_000, np.random.default_rng(7))
    fitted = cells.Cells.fitted(rows[::4], len(rows))
    strays = int((fitted.home(rows) == fitted.stray).sum())
    assert 0 < strays <= 1.5 * cells.STRAYS_TRAINED[1]


def test_a_row_another_process_stored_before_it_listed_the_new_cells_is_indexed_after_all(
    unscanned, agent, monkeypatch
):
    """A process lists a namespace's versions every RECHECK_S: until it lists a new one it stores rows unindexed. The
    training indexes the rows stored since its centroids came again, SETTLE_S after it is ready."""
    monkeypatch.setattr(stored_training, "SETTLE_S", 1.5)
    target, training = clickhouse.target(), threading.Thread(target=lambda: trained_on(target, unscanned))
    training.start()
    deadline = time.monotonic() + 30
    while stored_cells.ready(*unscanned) is None:  # ready: the settle has begun
        assert time.monotonic() < deadline
        time.sleep(0.02)
    with monkeypatch.context() as unaware:  # a writer that has not listed the version yet
        unaware.setattr(index, "stored_cell_rows", lambda *args: [])
        stored(agent, {"memory_key": "late", "value": DARK})
    assert cell_rows(unscanned[0]) == len(FACTS)  # not indexed by its write
    training.join(30)
    assert cell_rows(unscanned[0]) == len(FACTS) + 1
    [copy] = stored(agent, {"memory_key": "copy", "value": DARK})
    assert (copy["write_gates"], copy["duplicate_of"]) == ("judged", "late")


def test_a_batch_that_listed_only_the_older_cells_reads_them_until_every_process_lists_the_newer(
    unscanned, agent, monkeypatch
):
    """A process's list of versions may be RECHECK_S old: the older version's rows are dropped SETTLE_S after the newer
    one is ready, not at once, so a batch that listed only the older one meanwhile still finds its rows."""
    org, namespace, model = unscanned
    first = stored_training.train(*unscanned)
    held = (clickhouse.target(), org, namespace, model, first.trained_at)
    centroids = stored_versions.centroids[held]
    monkeypatch.setattr(stored_training, "SETTLE_S", 1.5)
    target, training = clickhouse.target(), threading.Thread(target=lambda: trained_on(target, unscanned))
    training.start()
    deadline = time.monotonic() + 30
    while stored_cells.ready(*unscanned).trained_at == first.trained_at:  # the newer is ready: the settle has begun
        assert time.monotonic() < deadline
        time.sleep(0.02)
    time.sleep(0.5)  # (well past a drop at once, well within the settle)
    # A process unaware of it, which holds the older one's centroids.
    stored_versions.versions_listed.put((clickhouse.target(), org, namespace, model), [first])
    stored_versions.centroids[held] = centroids
    [copy] = stored(agent, {"memory_key": "copy", "value": FACTS[4]})
    assert (copy["write_gates"], copy["duplicate_of"]) == ("judged", "f4")
    training.join(30)
    assert cell_rows(org, first.trained_at) == 0  # dropped once the settle was past


def trained_on(target: str, namespace: tuple) -> None:
    clickhouse.use_target_in_thread(target)
    try:
        stored_training.train(*namespace)
    finally:
        clickhouse.release_thread()


def test_a_write_listing_a_version_dropped_since_is_stored(unscanned, agent):
    """A process's list of versions may be RECHECK_S old: a write that names one a newer training dropped (as another
    process that never read its centroids) stores its rows, and the newer version is read next."""
    org, namespace, model = unscanned
    first = stored_training.train(*unscanned)
    second = stored_training.train(*unscanned)
    stored_cells.forget()  # this process never read the first version's centroids
    stored_versions.versions_listed.put(
        (clickhouse.target(), org, namespace, model), [first]
    )  # nor heard of the second
    result = stored(agent, {"memory_key": "during", "value": DARK})[0]
    # Its version's cells are gone: the batch asks the engine again, finds the newer one ready, and is judged by it.
    assert result["outcome"] == "created" and result["write_gates"] == "judged"
    from retrieval import caching

    caching.forget_all()
    assert stored_cells.ready(*unscanned).trained_at == second.trained_at
    [copy] = stored(agent, {"memory_key": "copy", "value": FACTS[4]})
    assert (copy["write_gates"], copy["duplicate_of"]) == ("judged", "f4")


def test_writes_to_namespaces_without_stored_cells_read_one_list_of_them(backend, alice, call):
    """Most namespaces never need stored cells: a process reads which have any in one statement every RECHECK_S, not
    a statement a write per namespace."""
    from tests.conftest import Agent

    token = alice.token("admin")
    with clickhouse.recorded() as statements:
        for namespace in ("a", "b", "c"):
            Agent(call, token, namespace).set({"memory_key": "k", "value": f"a note in {namespace}"})
    assert sum("FROM vector_centroids" in statement for statement in statements) == 1
