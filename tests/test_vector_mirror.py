"""The in-process vector mirror answers as the ClickHouse scan does (its floats to a unit of their sixth decimal), and
never serves a stale row."""

import time

import pytest

from retrieval import index, knobs
from retrieval.index import growth, postings, reading, scan
from retrieval.store import clickhouse

pytestmark = pytest.mark.cluster  # these ops run on a two-shard cluster too

ROWS = [
    {"memory_key": f"k{i:02d}", "value": text}
    for i, text in enumerate(
        [
            "production deploys run on tuesday",
            "deploys to staging run daily",
            "the cafeteria serves soup",
            "backups run nightly at two",
            "production database lives in frankfurt",
            "deploy freeze in december",
            "a note about reflections",
            "tuesday standup moved to ten",
        ]
    )
]
# The last reads its rows by date: the temporal leg, from the mirror too.
QUERIES = ["when do production deploys run", "what runs nightly", "soup", "deploy freeze", "what ran on 2 March 2026"]


def wait_for_mirror(agent):
    """The first search starts the load in the background; poll until it is in."""
    org = agent_org(agent)
    agent.search("start the load")
    wait_until(lambda: index.loaded(org, agent.namespace, "fake-ngram-384"))


def approx(answer):
    """An answer whose floats compare within a unit of their sixth decimal: the mirror's float32 dot products and
    ClickHouse's sum in different orders (each as wide as the CPU's SIMD), so a similarity may round either way."""
    if isinstance(answer, float):
        return pytest.approx(answer, abs=1.5e-6)
    if isinstance(answer, list):
        return [approx(item) for item in answer]
    if isinstance(answer, dict):
        return {name: approx(value) for name, value in answer.items()}
    return answer


def answers(agent, **fields):
    """Every field of every hit: the mirror serves the window's rows too, so they must read as ClickHouse's."""
    fields = {"top_k": 8, "min_similarity": 0, "bodies": "full", **fields}
    return [agent.search(query, **fields).json["hits"] for query in QUERIES]


def test_the_mirror_answers_as_the_scan_does(backend, agent, settings):
    dated = {
        "memory_key": "dated",
        "value": "the audit ran on monday",
        "valid_at": "2026-03-02T10:00:00.123Z",
        "tags": ["ops"],
        "entities": ["Audit"],
    }
    agent.set(
        *ROWS, dated, {"memory_key": "thought", "value": "production deploys feel slow", "memory_type": "reflection"}
    )
    settings.LOOM_VECTOR_MIRROR = False
    scanned = answers(agent)
    settings.LOOM_VECTOR_MIRROR = True
    wait_for_mirror(agent)
    assert answers(agent) == approx(scanned)
    assert all("thought" not in [hit["memory_key"] for hit in window] for window in scanned)
    assert scanned[0][0]["value"] == "production deploys run on tuesday" and scanned[0][0]["valid_at"] is None


@pytest.mark.parametrize("mode, component", [("hybrid", "lexical"), ("bm25_hybrid", "bm25")])
def test_the_mirror_answers_the_lexical_legs_as_the_postings_do(backend, agent, call, settings, mode, component):
    """The lexical and BM25 legs read the mirror's postings, with no statement: every candidate's scores and order
    as memory_terms and corpus_stats give them, over two namespaces (their statistics summed), with reflections,
    duplicates and retired rows among the postings."""
    from tests.conftest import Agent

    other = Agent(call, agent.token, namespace="second")
    agent.set(
        *ROWS,
        {"memory_key": "thought", "value": "production deploys feel slow", "memory_type": "reflection"},
        {"memory_key": "again", "value": "production deploys run on tuesday"},  # the write gates' duplicate
        {"memory_key": "k\u00e9", "value": "deploys run nightly on tuesday at two"},  # ties break by name as stored
        {"memory_key": "old", "value": "deploys ran on mondays"},
        {"memory_key": "loud", "value": "deploys, deploys and more deploys on fridays"},  # a term's frequency counts
    )
    agent.set({"memory_key": "old", "value": "deploys now run on wednesdays"})  # supersedes
    agent.call("memory.delete", {"memory_key": "k03"}, agent.token)
    other.set({"memory_key": "s1", "value": "staging deploys run hourly"}, {"memory_key": "s2", "value": "the soup"})
    fields = {"search_mode": mode, "explain": True, "top_k": 20, "namespace_scope": "all_mine"}
    settings.LOOM_VECTOR_MIRROR = False
    scanned = answers(agent, **fields)
    settings.LOOM_VECTOR_MIRROR = True
    wait_for_mirror(agent)
    other.search("start the load")
    wait_until(lambda: index.loaded(agent_org(agent), "second", "fake-ngram-384"))
    with clickhouse.recorded() as statements:
        mirrored = answers(agent, **fields)
    assert mirrored == approx(scanned)
    assert not [statement for statement in statements if "memory_terms" in statement or "corpus_stats" in statement]
    lexical = [hit for window in scanned for hit in window if hit["score_components"][component] > 0]
    assert {hit["namespace"] for hit in lexical} == {"default", "second"}


def test_a_large_namespace_is_loaded_range_by_range_and_answers_as_the_scan_does(backend, agent, settings, monkeypatch):
    """A load reads about LOAD_STEP rows at a time, split between keys: every live row once, whichever range."""
    monkeypatch.setattr(reading, "LOAD_STEP", 3)
    settings.LOOM_VECTOR_MIRROR = False  # no load before every row is in
    sessions = [{**row, "session_id": "s2", "value": row["value"] + " again"} for row in ROWS[:4]]
    agent.set(*ROWS, *sessions, {"memory_key": "zz", "value": "deploys run on fridays"})
    agent.set({"memory_key": "zz", "value": "deploys run on saturdays"})  # its first version is retired
    fields = {"search_mode": "hybrid", "explain": True, "top_k": 20}
    scanned = answers(agent, **fields)
    settings.LOOM_VECTOR_MIRROR = True
    reads, ranges_of = [], reading.key_ranges
    monkeypatch.setattr(reading, "key_ranges", lambda *args: reads.append(ranges_of(*args)) or reads[-1])
    wait_for_mirror(agent)
    assert answers(agent, **fields) == approx(scanned)
    [ranges] = reads
    # 14 rows written active (13 live, zz's first since retired), 3 a range, from "" on and no gap
    assert len(ranges) == 5 and ranges[0][0] == "" and ranges[-1][1] is None
    mirror = index.get(agent_org(agent), agent.namespace, "fake-ngram-384")
    assert mirror.live[: len(mirror.ids)].sum() == 13 and len(set(mirror.ids)) == len(mirror.ids)


def test_a_write_is_searchable_at_once_and_a_retired_row_is_gone_at_once(backend, agent):
    agent.set(*ROWS)
    wait_for_mirror(agent)
    agent.set({"memory_key": "fresh", "value": "the quarterly offsite is in lisbon"})
    assert agent.search("where is the quarterly offsite").json["hits"][0]["memory_key"] == "fresh"
    agent.set({"memory_key": "fresh", "value": "the quarterly offsite moved to porto"})
    hits = agent.search("where is the quarterly offsite", min_similarity=0, top_k=10).json["hits"]
    assert [h["content_excerpt"] for h in hits if h["memory_key"] == "fresh"] == [
        "the quarterly offsite moved to porto"
    ]
    agent.call("memory.delete", {"memory_key": "fresh"}, agent.token)
    keys = [h["memory_key"] for h in agent.search("quarterly offsite porto", min_similarity=0, top_k=10).json["hits"]]
    assert "fresh" not in keys


def test_a_namespace_alone_over_the_byte_budget_is_read_from_clickhouse(backend, agent, settings):
    settings.LOOM_VECTOR_MIRROR_MAX_BYTES = 3 * index.Vectors.row_bytes(384, keyed=False)
    agent.set(*ROWS)
    wait_for_mirror(agent)  # loaded as "too large": None
    assert index.get(agent_org(agent), "default", "fake-ngram-384") is None
    assert agent.search("production deploys").json["hits"][0]["memory_key"] == "k00"


def test_a_namespace_whose_mirror_would_not_fit_keeps_a_compact_one_that_judges_its_writes(backend, agent, settings):
    """Past LOOM_VECTOR_MIRROR_MAX_BYTES a namespace keeps a compact mirror, its rows' int8 codes alone: its writes
    are judged, each candidate rescored from ClickHouse (the cosine the scan gives), and its searches read
    ClickHouse."""
    # A byte short of the full mirror's estimate when its load begins; room for the compact one's rows and centroids.
    settings.LOOM_VECTOR_MIRROR_MAX_BYTES = len(ROWS) * index.Vectors.row_bytes(384, keyed=False) - 1
    settings.LOOM_WRITE_GATES = False  # (their read would begin the load now, before the rows are in)
    agent.set(*ROWS)
    settings.LOOM_WRITE_GATES = True
    wait_for_mirror(agent)
    org = agent_org(agent)
    compact = index.peek(org, agent.namespace, "fake-ngram-384", compact=True)
    assert compact.compact and compact.values is None and len(compact.ids) == len(ROWS)
    assert index.get(org, agent.namespace, "fake-ngram-384") is None  # for the gates alone
    found = agent.search("production deploys", explain=True).json
    assert found["hits"][0]["memory_key"] == "k00" and found["retrieval_work"]["vector_read"] == "clickhouse"
    [copy] = agent.set({"memory_key": "copy", "value": ROWS[0]["value"]}).json["items"]
    assert (copy["write_gates"], copy["duplicate_of"]) == ("judged", "k00")
    near = "production deploys run on tuesday at 9"  # another number: not a duplicate, a conflict
    [judged] = agent.set({"memory_key": "near", "value": near}).json["items"]
    agent.call("memory.delete", {"memory_key": "near"}, agent.token)
    # The copy (a duplicate) and the deleted row: held, never a candidate.
    assert len(compact.ids) == len(ROWS) + 2 and not compact.visible[len(ROWS) : len(ROWS) + 2].any()
    settings.LOOM_VECTOR_MIRROR = False
    [scanned] = agent.set({"memory_key": "near2", "value": near}).json["items"]
    assert judged["write_gates"] == scanned["write_gates"] == "judged"
    verdict, expected = judged["conflict_verdict"], scanned["conflict_verdict"]
    assert verdict["memory_key"] == "k00" and verdict["similarity"] == pytest.approx(expected["similarity"], abs=1e-4)


def test_a_mirror_holds_key_vectors_once_a_search_scores_on_the_key_axis(backend, agent, settings, monkeypatch):
    """A namespace whose searches never score keys is mirrored without key vectors (as large as the values). The
    first key-axis search loads it again with them; meanwhile the mirror without them goes on judging writes, and
    key-axis searches read ClickHouse."""
    import threading

    settings.LOOM_MEMORY_SEARCH_KEY_AXIS = "off"
    agent.set(*ROWS, {"memory_key": "office.city", "value": "lisbon"})
    wait_for_mirror(agent)
    org = agent_org(agent)
    keyless = index.get(org, agent.namespace, "fake-ngram-384")
    assert keyless.keys is None
    settings.LOOM_MEMORY_SEARCH_KEY_AXIS = "on"
    release, original = threading.Event(), reading.load
    monkeypatch.setattr(reading, "load", lambda *args: (original(*args), release.wait(10))[0])
    assert agent.search("office city", explain=True).json["retrieval_work"]["vector_read"] == "clickhouse"
    [copy] = agent.set({"memory_key": "copy", "value": ROWS[0]["value"]}).json["items"]
    assert (copy["write_gates"], copy["duplicate_of"]) == ("judged", "k00")
    assert index.peek(org, agent.namespace, "fake-ngram-384") is keyless
    release.set()
    wait_until(lambda: index.loaded(org, agent.namespace, "fake-ngram-384"))
    keyed = index.get(org, agent.namespace, "fake-ngram-384", keys=True)
    assert keyed.keys is not None and keyless.nbytes < keyed.nbytes
    assert keyed.holds(keyless.ids[-1], 0)  # the write made while it loaded
    settings.LOOM_VECTOR_MIRROR = False
    scanned = answers(agent, explain=True) + [agent.search("office city", explain=True, min_similarity=0).json["hits"]]
    settings.LOOM_VECTOR_MIRROR = True
    found = agent.search("office city", explain=True, min_similarity=0).json
    assert answers(agent, explain=True) + [found["hits"]] == approx(scanned)  # key similarities as the scan gives them
    assert found["hits"][0]["memory_key"] == "office.city" and found["retrieval_work"]["vector_read"] == "mirror"


def test_a_namespace_whose_key_vectors_would_not_fit_is_mirrored_without_them(backend, agent, settings):
    """Key vectors nearly double a row: where they would put the namespace over the byte budget, it is mirrored
    without them for the write gates and value-only searches, and key-axis searches read ClickHouse (once, not a
    load each time)."""
    settings.LOOM_MEMORY_SEARCH_KEY_AXIS = "on"
    settings.LOOM_VECTOR_MIRROR_MAX_BYTES = (len(ROWS) + 1) * index.Vectors.row_bytes(384, keyed=False) * 3 // 2
    agent.set(*ROWS, {"memory_key": "office.city", "value": "lisbon"})
    wait_for_mirror(agent)
    org = agent_org(agent)
    mirror = index.peek(org, agent.namespace, "fake-ngram-384")
    assert mirror is not None and mirror.keys is None
    wait_until(lambda: index.loading() == 0)  # (its words are counted after it is in)
    found = agent.search("office city", explain=True).json
    assert found["hits"][0]["memory_key"] == "office.city" and found["retrieval_work"]["vector_read"] == "clickhouse"
    assert index.loading() == 0  # no second load begun
    [copy] = agent.set({"memory_key": "copy", "value": ROWS[0]["value"]}).json["items"]
    assert (copy["write_gates"], copy["duplicate_of"]) == ("judged", "k00")


def agent_org(agent):
    from tenancy.models import ApiToken

    return ApiToken.verify(agent.token).org.name


def test_writes_made_while_the_mirror_loads_are_applied_on_top_of_it(backend, agent, monkeypatch):
    import threading

    agent.set(*ROWS)
    release, original = threading.Event(), reading.load

    def slow_load(*args):
        rows = original(*args)  # the load's snapshot is taken now...
        release.wait(10)  # ...and the writes below land before it is installed
        return rows

    monkeypatch.setattr(reading, "load", slow_load)
    agent.search("start the load")
    agent.set({"memory_key": "during", "value": "the quarterly offsite is in lisbon"})
    agent.call("memory.delete", {"memory_key": "k00"}, agent.token)
    release.set()
    wait_for_mirror(agent)
    keys = [h["memory_key"] for h in agent.search("quarterly offsite lisbon", min_similarity=0, top_k=10).json["hits"]]
    assert keys[0] == "during"
    assert "k00" not in [
        h["memory_key"] for h in agent.search("production deploys run", min_similarity=0, top_k=10).json["hits"]
    ]


def test_a_loaded_mirror_serves_its_vectors_while_it_counts_its_words(backend, agent, settings, monkeypatch):
    """A load's vectors serve searches as soon as they are in; its rows' words (the lexical legs' postings) are counted
    after, the lexical legs reading ClickHouse meanwhile, with the same answers. A row written meanwhile is counted
    as it comes, and one retired meanwhile is never counted in."""
    import threading

    settings.LOOM_VECTOR_MIRROR = False  # no load before every row is in
    agent.set(*ROWS)
    fields = {"search_mode": "hybrid", "explain": True}
    scanned = answers(agent, **fields)
    settings.LOOM_VECTOR_MIRROR = True
    counting, go, count_words = threading.Event(), threading.Event(), index.Vectors.count_words

    def paused(mirror, rows):
        counting.set()
        go.wait(30)
        count_words(mirror, rows)

    monkeypatch.setattr(index.Vectors, "count_words", paused)
    org = agent_org(agent)
    agent.search("start the load")
    assert counting.wait(30) and not index.loaded(org, agent.namespace, "fake-ngram-384")
    with clickhouse.recorded() as statements:
        assert answers(agent, **fields) == approx(scanned)
        assert agent.search("production deploys").json["retrieval_work"]["vector_read"] == "mirror"
    assert [statement for statement in statements if "memory_terms" in statement]
    agent.set({"memory_key": "during", "value": "the quarterly offsite is in lisbon"})
    agent.call("memory.delete", {"memory_key": "k03"}, agent.token)
    go.set()
    wait_until(lambda: index.loaded(org, agent.namespace, "fake-ngram-384"))
    with clickhouse.recorded() as statements:
        lisbon = agent.search("quarterly offsite lisbon", **fields, min_similarity=0).json["hits"]
        nightly = agent.search("backups nightly", **fields, min_similarity=0, top_k=10).json["hits"]
    assert not [statement for statement in statements if "memory_terms" in statement]
    assert lisbon[0]["memory_key"] == "during" and lisbon[0]["score_components"]["lexical"] > 0
    assert "k03" not in [hit["memory_key"] for hit in nightly]


def test_a_write_is_held_hidden_in_the_mirror_until_memories_holds_it(backend, agent, monkeypatch):
    """The mirror takes a write's rows while the engine stores them, hidden from every read as a retired row is: a
    write that fails after its vectors are stored, before `memories` (the commit point), is served by no leg the
    mirror answers (vector, lexical, entity check) and read by no `memory.get`; the same write then succeeds."""
    from retrieval.ingest import write

    agent.set(*ROWS)
    wait_for_mirror(agent)
    mirror = index.peek(agent_org(agent), agent.namespace, "fake-ngram-384")
    stored = write.retire_side_rows

    def broken(*args):  # runs between the vectors' insert and the memories'
        raise RuntimeError("the engine went away")

    monkeypatch.setattr(write, "retire_side_rows", broken)
    zeppelin = {"memory_key": "airship", "value": "the zeppelin hangar opens on friday", "entities": ["Zeppelin"]}
    reply = agent.call("memory.set", {"namespace": agent.namespace, "items": [zeppelin]}, agent.token)
    assert (reply.status, reply.error) == (500, "INTERNAL_ERROR")
    [held] = [at for at, rid in enumerate(mirror.ids) if rid.memory_key == "airship"]  # it got as far as the mirror
    assert not mirror.live[held] and not mirror.visible[held]
    fields = {"search_mode": "hybrid", "min_similarity": 0, "top_k": 10, "explain": True}
    found = agent.search("zeppelin hangar friday", **fields).json
    assert found["retrieval_work"]["vector_read"] == "mirror"
    assert "airship" not in [hit["memory_key"] for hit in found["hits"]]
    assert mirror.mentions(["zeppelin", "\0zeppelin"]) == ([False, False], True)
    assert agent.call("memory.get", {"namespace": agent.namespace, "memory_key": "airship"}, agent.token).status == 404
    monkeypatch.setattr(write, "retire_side_rows", stored)
    agent.set(zeppelin)
    [hit, *_] = agent.search("zeppelin hangar friday", **fields).json["hits"]
    assert hit["memory_key"] == "airship" and hit["score_components"]["lexical"] > 0
    assert mirror.mentions(["zeppelin", "\0zeppelin"]) == ([True, True], True)


def test_a_long_value_written_after_the_load_is_found_by_its_chunk(backend, agent, settings):
    settings.LOOM_MEMORY_EMBED_HEAD_CHARS = 200
    settings.LOOM_MEMORY_CHUNK_CHARS = 150
    agent.set(*ROWS)
    wait_for_mirror(agent)  # a namespace without chunks: the chunk leg skips its statement
    filler = " ".join(f"routine paragraph {i} about office plants and coffee." for i in range(20))
    agent.set({"memory_key": "runbook", "value": filler + " To roll back a release run kubectl rollout undo."})
    hit = agent.search("roll back a release kubectl rollout undo").json["hits"][0]
    assert (hit["memory_key"], hit["source"]) == ("runbook", "chunk")


def test_rows_written_after_the_load_read_as_clickhouse_keeps_them(backend, agent, settings):
    agent.set({"memory_key": "seed", "value": "an unrelated note about lunch"})
    wait_for_mirror(agent)
    agent.set(
        *ROWS, {"memory_key": "dated", "value": "the audit ran on monday", "valid_at": "2026-03-02T10:00:00.123456Z"}
    )
    mirrored = answers(agent)  # served from the write notices: value and dates held in process
    settings.LOOM_VECTOR_MIRROR = False
    assert answers(agent) == approx(mirrored)  # created_at and valid_at at ClickHouse's millisecond, not the notice's


def test_a_mirror_grown_alone_past_the_byte_budget_is_loaded_again_compact(backend, agent, settings, monkeypatch):
    """A full mirror that outgrows LOOM_VECTOR_MIRROR_MAX_BYTES is loaded again compact, for the write gates; it
    serves the namespace's searches and writes until that is in. Searches read ClickHouse from then on."""
    import threading

    # Room for two rows' full mirror, not for eight; for the compact one of every row written (and its centroids).
    settings.LOOM_VECTOR_MIRROR_MAX_BYTES = 13 * index.Vectors.row_bytes(384, keyed=False, compact=True)
    agent.set(*ROWS[:2])
    wait_for_mirror(agent)
    org = agent_org(agent)
    full = index.get(org, "default", "fake-ngram-384")
    release, original = threading.Event(), reading.load
    monkeypatch.setattr(reading, "load", lambda *args: (original(*args), release.wait(10))[0])
    agent.set(*ROWS[2:])
    assert index.get(org, "default", "fake-ngram-384") is full
    assert full.nbytes > settings.LOOM_VECTOR_MIRROR_MAX_BYTES
    found = agent.search("production deploys", explain=True).json
    assert found["hits"][0]["memory_key"] == "k00" and found["retrieval_work"]["vector_read"] == "mirror"
    [copy] = agent.set({"memory_key": "copy", "value": ROWS[3]["value"]}).json["items"]
    assert (copy["write_gates"], copy["duplicate_of"]) == ("judged", "k03")
    release.set()
    wait_until(lambda: index.loaded(org, agent.namespace, "fake-ngram-384"))
    compact = index.peek(org, "default", "fake-ngram-384", compact=True)
    assert compact.compact and compact.holds(full.ids[-1], 0)  # with the write made while it loaded
    assert index.get(org, "default", "fake-ngram-384") is None
    assert agent.search("production deploys", explain=True).json["retrieval_work"]["vector_read"] == "clickhouse"
    [again] = agent.set({"memory_key": "again", "value": ROWS[4]["value"]}).json["items"]
    assert (again["write_gates"], again["duplicate_of"]) == ("judged", "k04")


def test_the_least_recently_searched_mirror_is_dropped_to_stay_within_the_byte_budget(backend, agent, call, settings):
    from tests.conftest import Agent

    settings.LOOM_WRITE_GATES = False  # the gates' reads would start both loads now, in a race for the one place
    other = Agent(call, agent.token, namespace="second")
    agent.set(*ROWS)
    other.set(*ROWS)
    wait_for_mirror(agent)
    org = agent_org(agent)
    # Room for one of the two same-sized mirrors, not both.
    settings.LOOM_VECTOR_MIRROR_MAX_BYTES = index.get(org, agent.namespace, "fake-ngram-384").nbytes * 3 // 2
    other.search("start the load")
    wait_until(lambda: index.loaded(org, "second", "fake-ngram-384"))
    assert not index.loaded(org, "default", "fake-ngram-384")  # dropped, not marked too large
    assert agent.search("production deploys").json["hits"][0]["memory_key"] == "k00"  # ClickHouse answers meanwhile
    wait_until(lambda: index.loaded(org, agent.namespace, "fake-ngram-384"))  # that search loaded it again
    assert not index.loaded(org, "second", "fake-ngram-384")


def test_a_start_warms_the_mirrors_of_the_namespaces_written_last_as_many_as_fit(backend, agent, call, settings):
    """A restart left every namespace to load on its first search (which read ClickHouse meanwhile) or large write
    (which waited for it): a serving process loads the most recently written ones at its start (loom_site/wsgi.py)."""
    from tests.conftest import Agent

    settings.LOOM_VECTOR_MIRROR = False  # nothing loads as they are written
    older, newer = Agent(call, agent.token, namespace="older"), Agent(call, agent.token, namespace="newer")
    older.set(*ROWS[:4])
    newer.set(*ROWS)
    settings.LOOM_VECTOR_MIRROR = True
    org, model, unkeyed = agent_org(agent), "fake-ngram-384", lambda *_: False
    settings.LOOM_VECTOR_MIRROR_WARM = 0
    assert index.warm(model, unkeyed) == [] and index.loading() == 0
    settings.LOOM_VECTOR_MIRROR_WARM = 2  # (the engine holds earlier tests' namespaces too)
    # Room for the newer namespace's eight rows, not for the older one's four beside them.
    settings.LOOM_VECTOR_MIRROR_MAX_BYTES = 11 * index.Vectors.row_bytes(384, keyed=False)
    assert index.warm(model, unkeyed) == [(org, "newer")]
    assert index.loaded(org, "newer", model) and not index.loaded(org, "older", model)
    assert newer.search("production deploys", explain=True).json["retrieval_work"]["vector_read"] == "mirror"
    # With room for both, the smaller loads first; the older's searches score keys, so it holds key vectors.
    settings.LOOM_VECTOR_MIRROR_MAX_BYTES = 4 << 30
    held = index.warm(model, lambda org, namespace, model: namespace == "older")
    assert held == [(org, "older"), (org, "newer")]
    assert index.get(org, "older", model).keyed and not index.get(org, "newer", model).keyed


def test_an_operator_sees_the_loads_under_way(agent, settings, monkeypatch):
    """After a restart the mirrors load in the background: /metrics says how many are loading until they are in."""
    import threading

    from retrieval import metrics

    settings.LOOM_VECTOR_MIRROR = False  # no load before every row is in
    agent.set(*ROWS)
    settings.LOOM_VECTOR_MIRROR = True
    release, original = threading.Event(), reading.load
    monkeypatch.setattr(reading, "load", lambda *args: release.wait(10) and original(*args))
    agent.search("start the load")
    assert metrics.REGISTRY.get_sample_value("loom_vector_mirror_loading") == 1
    release.set()
    wait_until(lambda: index.loaded(agent_org(agent), agent.namespace, "fake-ngram-384"))
    assert metrics.REGISTRY.get_sample_value("loom_vector_mirror_loading") == 0


def wait_until(condition, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_search_gets_in_between_the_steps_of_a_loaded_mirrors_word_count(monkeypatch):
    """A loaded mirror counts its rows' words a step at a time under its lock, so that its searches and the write
    gates wait for a step, not for the whole count. Python's lock is not fair: taken again at once, a 100k-row
    namespace's first write after a start waited 3.9 s for the count after the load."""
    import threading

    import numpy as np

    from tests.synthetic import mirror, vectors

    monkeypatch.setattr(postings, "WORDS_STEP", 50)
    rng = np.random.default_rng(17)
    values = vectors(8000, rng)
    texts = [f"note {i} about the {['deploy', 'backup', 'offsite', 'standup'][i % 4]} schedule" for i in range(8000)]
    built = mirror("ns", values, None, texts=texts)
    counting = threading.Thread(target=built.count_words, args=(8000,))
    counting.start()
    wait_until(lambda: built.worded[:8000].any())
    built.top(values[0], False, 10)  # takes the lock
    counted = int(built.worded[:8000].sum())
    counting.join()
    assert counted < 8000 and built.worded[:8000].all()


def test_a_large_mirror_scans_codes_first_and_answers_as_the_exact_scan(monkeypatch):
    """From knobs.CODES_MIN_ROWS rows the int8 codes pick the candidates, rescored at full precision:
    the same top rows, the same similarities, as the float32 scan."""
    import numpy as np

    from tests.synthetic import mirror, vectors

    rng = np.random.default_rng(7)
    values = vectors(5000, rng)
    built = mirror("ns", values, vectors(5000, rng))
    built.retire([built.ids[3]])  # a retired row stays out of either read
    queries = values[rng.integers(0, 5000, 20)] + 0.3 * rng.standard_normal((20, 384)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    monkeypatch.setattr(knobs, "CODES_MIN_ROWS", 0)
    exact = [built.top(q, False, 50) for q in queries]
    monkeypatch.setattr(knobs, "CODES_MIN_ROWS", 1000)
    monkeypatch.setattr(knobs, "CODES_CANDIDATES", 200)
    coded = [built.top(q, False, 50) for q in queries]
    assert [[hit[0] for hit in top[:10]] for top in coded] == [[hit[0] for hit in top[:10]] for top in exact]
    assert all(abs(a[1] - b[1]) < 1e-6 for top, other in zip(coded, exact) for a, b in zip(top[:10], other[:10]))
    assert all(built.ids[3] not in [hit[0] for hit in top] for top in coded)


@pytest.mark.parametrize("noise, read", [(0.05, "bits"), (0.6, "codes")])
def test_past_the_bits_rows_a_mirror_reads_bits_first_while_they_keep_its_queries_nearest_rows(
    noise, read, monkeypatch
):
    """From knobs.BITS_MIN_ROWS rows the codes pass reads only the rows whose sign bits are nearest the
    query's, once a check on the mirror's recent queries found that the bits keep their nearest rows: queries near
    some row pass, queries near none (their "nearest" barely above noise) do not, and the codes of every row serve
    them. Either way the top rows are the exact scan's."""
    import numpy as np

    from tests.synthetic import mirror, unit, vectors

    rng = np.random.default_rng(7)
    values = vectors(20_000, rng)
    built = mirror("ns", values, values)
    queries = unit(values[rng.integers(0, 20_000, 80)] + noise * rng.standard_normal((80, 384)).astype(np.float32))
    monkeypatch.setattr(knobs, "CODES_MIN_ROWS", 1000)
    monkeypatch.setattr(knobs, "CODES_CANDIDATES", 200)
    monkeypatch.setattr(knobs, "BITS_MIN_ROWS", 10_000)
    monkeypatch.setattr(knobs, "BITS_KEEP", 0.05)
    assert built.first_read(False) == "codes"  # the bits are not checked yet (the check runs once it has queries)
    exact = [built.top(query, False, 50) for query in queries]
    wait_until(lambda: built.bits_checked is not None)
    assert built.first_read(False) == read
    found = [built.top(query, False, 50) for query in queries]
    assert [[hit[0] for hit in top[:10]] for top in found] == [[hit[0] for hit in top[:10]] for top in exact]


def test_past_the_exact_rows_the_write_gates_read_cells_and_find_what_the_exact_comparison_finds(monkeypatch):
    """From knobs.GATES_EXACT_ROWS rows a batch is compared with the rows of the cells nearest each value
    (retrieval/index/cells.py): a near copy's nearest row is the one the exact comparison names, rows written after
    the cells were trained are found too (nearly all of those of a topic the training never saw), and a retired
    row, another scope's row or the key's own row never is."""
    import numpy as np

    from tests.synthetic import mirror, unit, vectors

    rng = np.random.default_rng(11)
    values = vectors(20_000, rng)
    built = mirror("ns", values, values)
    scope = [("default", "", "", "", "fact")]
    picked = rng.choice(20_000, 200, replace=False)
    copies = unit(values[picked] + 0.01 * rng.standard_normal((200, 384)).astype(np.float32))
    new_keys = [f"new{i}" for i in range(200)]
    monkeypatch.setattr(knobs, "GATES_EXACT_ROWS", 10**9)
    exact = built.nearest(copies, new_keys, scope * 200)
    monkeypatch.setattr(knobs, "GATES_EXACT_ROWS", 1000)
    found = built.nearest(copies, new_keys, scope * 200)
    assert [hit[0] for hit in found] == [hit[0] for hit in exact]
    assert np.allclose([hit[1] for hit in found], [hit[1] for hit in exact], atol=1e-6)
    assert [hit[0] for hit in exact] == [f"m{i}" for i in picked] and len(built.cells.fine) >= 64

    later = np.concatenate([values[rng.choice(20_000, 150)], vectors(150, rng)])  # known topics, and new ones
    later = unit(later + 0.02 * rng.standard_normal(later.shape).astype(np.float32))
    mirror("ns", later, later, built, name="later")  # placed in the trained cells as they come
    close = unit(later + 0.01 * rng.standard_normal((300, 384)).astype(np.float32))
    found = [hit[0] for hit in built.nearest(close, [f"new{i}" for i in range(300)], scope * 300)]
    assert found[:150] == [f"later{i}" for i in range(150)]
    # A new topic's rows fit no centroid; most are strays, which every batch reads (without them, ~135 are found).
    assert sum(key == f"later{i}" for i, key in enumerate(found[150:], 150)) >= 145

    built.retire([built.ids[picked[0]]])
    assert built.nearest(copies[:1], ["new0"], scope)[0][0] != f"m{picked[0]}"
    assert built.nearest(copies[1:2], [f"m{picked[1]}"], scope)[0][0] != f"m{picked[1]}"
    assert built.nearest(copies[:2], new_keys[:2], [("other", "", "", "", "fact")] * 2) == [None, None]


def test_a_compact_mirror_finds_what_the_full_one_finds(monkeypatch):
    """A compact mirror (each value vector as two int8 codes) trains and fills its cells, and rescores its
    candidates, with what its codes give: the same nearest rows as the full mirror's, at cosines within 1e-5, in half
    the bytes."""
    import numpy as np

    from retrieval.index import Vectors
    from tests.synthetic import mirror, unit, vectors

    monkeypatch.setattr(knobs, "GATES_EXACT_ROWS", 1000)
    rng = np.random.default_rng(13)
    values = vectors(20_000, rng)
    full = mirror("ns", values, None, sessions=7)
    compact = mirror("ns", values, None, Vectors(keyed=False, compact=True), sessions=7)
    picked = rng.choice(20_000, 300, replace=False)
    copies = unit(values[picked] + 0.03 * rng.standard_normal((300, 384)).astype(np.float32))
    keys, scopes = [f"new{i}" for i in range(300)], [("default", "", f"s{i % 7}", "", "fact") for i in picked]
    expected, found = full.nearest(copies, keys, scopes), compact.nearest(copies, keys, scopes)
    assert [hit[0] for hit in found] == [hit[0] for hit in expected] == [f"m{i}" for i in picked]
    assert np.allclose([hit[1] for hit in found], [hit[1] for hit in expected], atol=1e-5)
    assert compact.values is None and compact.nbytes < full.nbytes / 1.9


def test_a_compact_mirrors_two_codes_give_each_component_within_a_step_of_the_second():
    """`_residuals`: what the first int8 code leaves over, coded again, brings each component within half a step of
    the second code (1/254 of the first's), for spread vectors and for spiky ones (a few large components: the
    coarsest first codes)."""
    import numpy as np

    from retrieval.index.scan import RESIDUAL_STEPS, Decoded, coded, residuals
    from tests.synthetic import unit

    rng = np.random.default_rng(3)
    rows = unit(np.concatenate([rng.standard_normal((300, 384)), rng.standard_normal((300, 384)) ** 5]))
    codes, scales = coded(rows)
    twice = Decoded(codes, residuals(rows, codes, scales), scales)[:]
    once = codes * scales[:, None]
    assert (np.abs(twice - rows) <= scales[:, None] / (2 * RESIDUAL_STEPS) * 1.01).all()  # (float32 rounding)
    assert np.abs(twice - rows).max() < np.abs(once - rows).max() / 100


def test_a_vectors_probes_are_the_nearest_fine_centroids_of_its_nearest_coarse_cells():
    """The gates' cells (retrieval/index/cells.py) read, for each value, the PROBES fine centroids nearest it among
    those of its COARSE_PROBES nearest coarse cells, and the cell it would be placed in: compared with every
    candidate at once, here in a plain loop."""
    import numpy as np

    from retrieval.index import cells as cells_module
    from tests.synthetic import unit, vectors

    rng = np.random.default_rng(5)
    # Topics of subtopics: a value's nearest fine centroids are mostly its topic's, in one coarse cell of many.
    topics = rng.standard_normal((12, 384)).astype(np.float32)
    subtopics = topics[np.arange(240) % 12] + 0.5 * rng.standard_normal((240, 384)).astype(np.float32)
    rows = unit(subtopics[rng.integers(0, 240, 60_000)] + 0.3 * rng.standard_normal((60_000, 384)).astype(np.float32))
    codes, scales = np.zeros(rows.shape, dtype=np.int8), np.ones(60_000, dtype=np.float32)  # probes never read them
    cells = cells_module.Cells.trained(rows, codes, scales, np.zeros(60_000, dtype=np.int32))
    sizes = np.diff(cells.starts)
    assert len(cells.coarse) > cells_module.COARSE_PROBES and sizes.min() < sizes.max()  # coarse cells of unequal sizes
    queries = np.concatenate([vectors(150, rng), rows[:150]])  # new values, and values near rows' cells
    probes, own = cells.probed(queries)
    placed, fit = cells.cell_of(queries)  # the placement `probed` kept for these vectors (a write places them next)
    cells.placed = None
    found, found_fit = cells.cell_of(queries)
    assert (own == found).all() and (placed == found).all() and np.allclose(fit, found_fit, atol=1e-5)
    for query, found in zip(queries, probes):
        coarse_fits = cells_module._fit(query[None], cells.coarse, cells.coarse_half)[0]
        coarse = np.argsort(-coarse_fits)[: cells_module.COARSE_PROBES]
        candidates = np.concatenate([np.arange(cells.starts[c], cells.starts[c + 1]) for c in coarse])
        fits = cells_module._fit(query[None], cells.fine[candidates], cells.fine_half[candidates])[0]
        assert set(found.tolist()) == set(candidates[np.argsort(-fits)[: cells_module.PROBES]].tolist())


@pytest.mark.parametrize("recent_share", [10.0, 0.0], ids=["recent", "merged"])
def test_the_write_gates_cells_compare_a_value_with_the_rows_of_its_own_write_scope(monkeypatch, recent_share):
    """A namespace written in many sessions: the cells keep their rows in order of (cell, write scope) and a value is
    compared with its own scope's slice only. What the cells find equals the exact comparison, rows added after
    training included, whether they are still kept apart or merged with the rest; a copy of another session's row
    finds that row only from that session."""
    import numpy as np

    from retrieval.index import cells as cells_module
    from tests.synthetic import mirror, unit, vectors

    monkeypatch.setattr(cells_module, "RECENT_SHARE", recent_share)

    from retrieval.index.cells import SCOPE_BITS

    rng = np.random.default_rng(3)
    values = vectors(12_000, rng)
    built = mirror("ns", values[:10_000], values[:10_000], sessions=40)
    monkeypatch.setattr(knobs, "GATES_EXACT_ROWS", 1000)
    built.nearest(values[:1], ["x"], [("default", "", "s0", "", "fact")])  # trains the cells
    mirror("ns", values[10_000:], values[10_000:], built, name="later", sessions=40)  # interleaved sessions
    cells = built.cells
    assert len(cells.recent_keys) == (2000 if recent_share else 0) and cells.merged == 12_000 - len(cells.recent_keys)
    for keys, members in ((cells.keys, cells.members), (cells.recent_keys, cells.recent_members)):
        assert (np.diff(keys) >= 0).all()
        placed, fit = cells.cell_of(built.values[members])
        placed[fit < cells.fit_floor] = cells.stray
        assert (keys >> SCOPE_BITS == placed).all()
        assert (built.scope_codes[members] == keys & (2**SCOPE_BITS - 1)).all()
    merged = cells.members
    assert (cells.codes == built.codes[merged]).all() and (cells.scales == built.scales[merged]).all()

    picked = rng.choice(12_000, 300, replace=False)
    copies = unit(values[picked] + 0.01 * rng.standard_normal((300, 384)).astype(np.float32))
    own = [("default", "", f"s{i % 40}" if i < 10_000 else f"s{(i - 10_000) % 40}", "", "fact") for i in picked]
    other = [("default", "", f"s{(int(session[1:]) + 1) % 40}", "", "fact") for _, _, session, _, _ in own]
    keys = [f"new{i}" for i in range(300)]
    for scopes in (own, other):
        found = built.nearest(copies, keys, scopes)
        monkeypatch.setattr(knobs, "GATES_EXACT_ROWS", 10**9)
        exact = built.nearest(copies, keys, scopes)
        monkeypatch.setattr(knobs, "GATES_EXACT_ROWS", 1000)
        agree = sum(hit[0] == best[0] for hit, best in zip(found, exact))
        assert agree >= (300 if scopes is own else 270)  # another scope's nearest is no near copy: cells may miss it
    names = [f"m{i}" if i < 10_000 else f"later{i - 10_000}" for i in picked]
    assert [hit[0] for hit in built.nearest(copies, keys, own)] == names
    assert all(hit[0] != name for hit, name in zip(built.nearest(copies, keys, other), names))


def test_a_value_whose_scope_holds_only_retired_rows_finds_none_from_the_cells(monkeypatch):
    """The cells keep a retired row in place (it is only no longer live): a value of a session whose one row was
    retired reads that row's block alone, and finds nothing, rather than failing the write."""
    import numpy as np

    from tests.synthetic import mirror, vectors

    values = vectors(3000, np.random.default_rng(5))
    built = mirror("ns", values, None)
    monkeypatch.setattr(knobs, "GATES_EXACT_ROWS", 1000)
    built.nearest(values[:1], ["x"], [("default", "", "", "", "fact")])  # trains the cells
    mirror("ns", values[:1], None, built, name="lone", sessions=1)  # session s0's one row
    lone = ("default", "", "s0", "", "fact")
    assert built.nearest(values[:1], ["x"], [lone])[0][0] == "lone0"
    built.retire([built.ids[-1]])
    assert built.nearest(values[:1], ["x"], [lone]) == [None]


def test_a_mirror_weighs_its_rows_and_the_gates_cells_not_its_arrays_capacity(monkeypatch):
    """What the byte budget counts: each row's value vector, codes and bits (key vectors only when held), and the
    cells once trained; the arrays' room for rows to come is never written, so never resident."""
    import numpy as np

    from tests.synthetic import mirror, vectors

    values = vectors(1500, np.random.default_rng(4))
    keyless, keyed = mirror("ns", values[:1000], None), mirror("ns", values[:1000], values[:1000])
    mirror("ns", values[1000:], None, keyless, name="later")  # the arrays doubled: room for 2,048 rows
    mirror("ns", values[1000:], values[1000:], keyed, name="later")
    assert len(keyless.values) == len(keyed.keys) == 2048
    assert keyless.nbytes == 1500 * (384 * 4 + 384 + 48)
    assert keyed.nbytes == 1500 * (384 * 8 + 384 + 48)
    monkeypatch.setattr(knobs, "GATES_EXACT_ROWS", 1000)
    keyless._gate_cells()
    assert keyless.nbytes - 1500 * (384 * 4 + 384 + 48) == keyless.cells.nbytes > 1500 * 384


@pytest.mark.parametrize("backend", ["embedded"], indirect=True)
def test_a_loaded_mirror_has_room_for_the_writes_after_it(backend, agent, settings):
    """A load sizes the arrays a quarter over its rows: the first write after it appends in place instead of
    reallocating every array under the lock (seconds at a million rows, the namespace's searches waiting)."""
    settings.LOOM_WRITE_GATES = False  # (the rows only need to be there)
    for start in range(0, 1200, 400):
        agent.set(
            *({"memory_key": f"row.{i}", "value": f"note {i} on the plant rota"} for i in range(start, start + 400))
        )
    wait_for_mirror(agent)
    mirror = index.peek(agent_org(agent), agent.namespace, "fake-ngram-384")
    values, codes = mirror.values, mirror.codes
    agent.set(*({"memory_key": f"after.{i}", "value": f"late note {i} about the boiler"} for i in range(200)))
    assert len(mirror.ids) == 1400
    assert mirror.values is values and mirror.codes is codes, "the write reallocated the arrays"
    assert agent.hits("late note 7 about the boiler", min_similarity=0)[0] == "after.7"


def test_a_large_mirror_grows_its_arrays_ahead_of_its_writes_and_keeps_every_change_made_meanwhile(monkeypatch):
    """Once its rows fill 7/8 of its room, a mirror grows its arrays in the background, the rows held then copied
    outside its lock: a search and writes go on while it copies, and rows added, re-embedded and retired meanwhile
    are all in the grown arrays."""
    import threading

    import numpy as np

    from tests.synthetic import mirror, vectors

    monkeypatch.setattr(growth, "BACKGROUND_MIN_ROWS", 1024)
    monkeypatch.setattr(growth, "GROW_AHEAD_LAST_ROWS", 10)  # the rows added meanwhile: copied outside too
    copying, go, grown = threading.Event(), threading.Event(), index.Vectors._grown

    def paused(self, *args):  # the background copy, held until the changes below are made
        arrays = grown(self, *args)
        if threading.current_thread().name == "loom-mirror-grow":
            copying.set()
            go.wait(30)
        return arrays

    monkeypatch.setattr(index.Vectors, "_grown", paused)
    values = vectors(1100, np.random.default_rng(11))
    built = mirror("ns", values[:900], None)  # room for 1,024 rows: 900 is past 7/8 of it
    assert copying.wait(30)
    before = built.values
    assert built.top(values[3], False, 1)[0][0].memory_key == "m3"  # searched while it copies
    mirror("ns", values[1050:1055], None, built)  # m0-m4 re-embedded
    mirror("ns", values[900:1000], None, built, name="later")
    built.retire([built.ids[7]])
    go.set()
    wait_until(lambda: built.touched is None)
    assert len(built.values) == 2048 and built.values is not before
    assert np.array_equal(built.values[:1000], np.concatenate([values[1050:1055], values[5:1000]]))
    monkeypatch.setattr(knobs, "CODES_MIN_ROWS", 100)
    monkeypatch.setattr(knobs, "CODES_CANDIDATES", 50)
    for query, key in ((values[1052], "m2"), (values[950], "later50"), (values[300], "m300")):
        assert built.top(query, False, 1)[0][0].memory_key == key  # (the codes copied too: read first here)
    assert "m7" not in [hit[0].memory_key for hit in built.top(values[7], False, 10)]


def test_rows_written_while_the_cells_train_join_them_from_the_arrays_as_they_are_then(monkeypatch):
    """The cells train outside the mirror's lock. A write meanwhile may outgrow the mirror's arrays (they are
    reallocated); its rows still join the new cells, so a copy of one finds it."""
    import numpy as np

    from retrieval.index import cells
    from tests.synthetic import mirror, vectors

    rng = np.random.default_rng(9)
    values = vectors(3000, rng)
    monkeypatch.setattr(knobs, "GATES_EXACT_ROWS", 1000)
    built = mirror("ns", values[:2048], values[:2048])  # arrays of exactly 2,048 rows
    trained = cells.Cells.trained

    def written_meanwhile(*parts):
        done = trained(*parts)
        mirror("ns", values[2048:], values[2048:], built, name="later")  # past 2,048: the arrays are reallocated
        return done

    monkeypatch.setattr(cells.Cells, "trained", staticmethod(written_meanwhile))
    built._train_cells()
    assert built.cells.rows == 3000
    found = built.nearest(values[2048:], [f"new{i}" for i in range(952)], [("default", "", "", "", "fact")] * 952)
    assert [hit[0] for hit in found] == [f"later{i}" for i in range(952)]


def test_a_large_mirror_merges_its_cells_in_the_background_and_keeps_the_rows_placed_meanwhile(monkeypatch):
    """The gates' cells of a large mirror merge their recent rows into their first run outside the mirror's lock: a
    write and the gates' reads go on while it builds the run, and the rows that write placed stay recent, found by
    the gates, after it."""
    import threading

    import numpy as np

    from retrieval.index import cells
    from tests.synthetic import mirror, unit, vectors

    monkeypatch.setattr(growth, "BACKGROUND_MIN_ROWS", 1024)
    building, go, merged = threading.Event(), threading.Event(), cells._merged

    def paused(*args):  # the background build, held until the write below is made
        run = merged(*args)
        if threading.current_thread().name == "loom-cells-merge":
            building.set()
            go.wait(30)
        return run

    monkeypatch.setattr(cells, "_merged", paused)
    rng = np.random.default_rng(13)
    values = vectors(4000, rng)
    monkeypatch.setattr(knobs, "GATES_EXACT_ROWS", 1000)
    built = mirror("ns", values[:3000], None, sessions=4)
    scope = [("default", "", "s0", "", "fact")]
    built.nearest(values[:1], ["x"], scope)  # trains the cells on 3,000 rows
    mirror("ns", values[3000:3400], None, built, name="recent", sessions=4)  # 400 recent: past 1/8 of 3,000
    assert building.wait(30)
    wrote = threading.Thread(target=mirror, args=("ns", values[3400:3500], None, built, "later", 4))
    wrote.start()
    wrote.join(10)
    assert not wrote.is_alive()  # the write did not wait for the merge
    assert built.cells.merged == 3000 and built.cells.rows == 3500
    go.set()
    wait_until(lambda: not built.cells.merging)
    placed = built.cells
    assert placed.merged == 3400 and sorted(placed.recent_members.tolist()) == list(range(3400, 3500))
    assert (np.diff(placed.keys) >= 0).all() and (np.diff(placed.recent_keys) >= 0).all()
    assert sorted(placed.members.tolist()) == list(range(3400))
    assert (placed.codes == built.codes[placed.members]).all() and (placed.scales == built.scales[placed.members]).all()
    picked = [5, 3100, 3450]  # of the first run, merged in, placed meanwhile (sessions s1, s0, s2)
    copies = unit(values[picked] + 0.01 * rng.standard_normal((3, 384)).astype(np.float32))
    scopes = [("default", "", session, "", "fact") for session in ("s1", "s0", "s2")]
    found = built.nearest(copies, ["a", "b", "c"], scopes)
    assert [hit[0] for hit in found] == ["m5", "recent100", "later50"]


def test_the_write_gates_cells_are_retrained_as_the_mirror_grows_by_half_or_its_strays_grow(monkeypatch):
    """Rows join the trained cells as they come; the centroids are trained again (in the background, the old cells
    serving meanwhile) once the rows have grown by half (RETRAIN_GROWTH), or once many rows of topics the training
    never saw (strays, read by every batch) have come."""
    import numpy as np

    from tests.synthetic import mirror, unit, vectors

    rng = np.random.default_rng(5)
    monkeypatch.setattr(knobs, "GATES_EXACT_ROWS", 1000)
    topic = rng.standard_normal(384).astype(np.float32)
    first, more = (unit(topic + 0.8 * rng.standard_normal((n, 384)).astype(np.float32)) for n in (2000, 900))
    built = mirror("ns", first, first)
    built.nearest(first[:1], ["x"], [("default", "", "", "", "fact")])
    trained = built.cells
    mirror("ns", more, more, built, name="more")
    built.nearest(first[:1], ["x"], [("default", "", "", "", "fact")])
    assert built.cells is trained and trained.rows == 2900  # grown in place
    mirror("ns", more, more, built, name="again")
    built.nearest(first[:1], ["x"], [("default", "", "", "", "fact")])
    wait_until(lambda: built.cells is not trained)
    assert built.cells.rows == 3800 and len(built.cells.fine) > len(trained.fine)
    from retrieval.index import cells

    monkeypatch.setattr(cells, "STRAYS_GROWN", 1000)  # a few cells' worth, at this size
    strays = vectors(1100, rng)  # other topics
    mirror("ns", strays, strays, built, name="strays")
    assert set(range(3800, 4900)) <= set(built.cells.held(built.cells.stray).tolist()) and built.cells.due()
    built.nearest(first[:1], ["x"], [("default", "", "", "", "fact")])
    wait_until(lambda: built.cells.trained_on == 4900)
    assert not built.cells.due()


def test_the_search_says_which_read_its_vector_leg_made(backend, agent, settings, monkeypatch):
    agent.set(*ROWS)
    settings.LOOM_VECTOR_MIRROR = False
    assert agent.search("production deploys").json["retrieval_work"]["vector_read"] == "clickhouse"
    settings.LOOM_VECTOR_MIRROR = True
    wait_for_mirror(agent)
    assert agent.search("production deploys").json["retrieval_work"]["vector_read"] == "mirror"
    monkeypatch.setattr(knobs, "CODES_MIN_ROWS", 1)
    coded = agent.search("production deploys").json
    assert coded["retrieval_work"]["vector_read"] == "codes" and coded["hits"][0]["memory_key"] == "k00"
    traced = agent.call("memory.search_trace", {"query": "production deploys"}, agent.token).json
    assert traced["vector_read"] == "codes"
    monkeypatch.setattr(knobs, "BITS_MIN_ROWS", 1)
    mirror = index.get(agent_org(agent), agent.namespace, "fake-ngram-384")

    def checked():  # once the mirror has been sent enough queries, it asks whether the bits keep their nearest rows
        agent.search("production deploys")
        return mirror.bits_checked is not None

    wait_until(checked)
    bits = agent.search("production deploys").json
    assert bits["retrieval_work"]["vector_read"] == "bits" and bits["hits"][0]["memory_key"] == "k00"


@pytest.mark.parametrize("backend", ["server"], indirect=True)
def test_a_search_reads_no_vectors_the_mirror_holds_already(backend, agent):
    """On a server a search first reads what reached the engine lately; this process's own write is among it for a
    while, and in the mirror already: only which rows came is read again, not their vectors."""
    agent.set(*ROWS)
    wait_for_mirror(agent)
    agent.set({"memory_key": "canteen", "value": "the canteen opens at eight"})
    with clickhouse.recorded() as statements:
        hits = agent.hits("when does the canteen open")
    assert hits[0] == "canteen"
    assert not [statement for statement in statements if "value_vector" in statement]


def test_rescoring_from_the_mirror_says_what_its_scan_says_of_each_live_row():
    """A hybrid search's lexical-only rows are rescored from the mirror (`Vectors.scored`): the similarities its scan
    gives them, and nothing for a retired row."""
    import numpy as np

    from tests.synthetic import mirror, vectors

    rng = np.random.default_rng(3)
    built = mirror("ns", vectors(300, rng), vectors(300, rng))
    query = vectors(1, rng)[0]
    top = {hit[0]: hit[1:3] for hit in built.top(query, True, 300)}
    asked = built.ids[10:20]
    built.retire([asked[0]])
    scored = built.scored(asked, query, True)
    assert [hit[0] for hit in scored] == asked[1:]
    assert all(np.allclose(hit[1:3], top[hit[0]], atol=1e-6) for hit in scored)


@pytest.mark.parametrize("shape", ["spread", "ties", "mostly_hidden", "half_hidden", "ascending"])
def test_the_candidates_chosen_are_the_largest_scores(shape):
    """The codes pass keeps the `count` best rows by a sampled cut (`_largest`): the same scores as a full
    partition, whatever the scores' shape, also when the cut keeps too few; never a row scored -inf (not
    eligible), and every eligible row when they are fewer."""
    import numpy as np

    rng = np.random.default_rng(7)
    scores = {
        "spread": rng.normal(size=200_000),
        "ties": rng.integers(0, 5, size=200_000),
        "mostly_hidden": np.where(rng.random(200_000) < 0.999, -np.inf, rng.normal(size=200_000)),
        "half_hidden": np.where(rng.random(200_000) < 0.5, -np.inf, rng.normal(size=200_000)),
        "ascending": np.arange(200_000),  # the sample then sees only the low end of each stride
    }[shape].astype(np.float32)
    eligible = np.sort(scores[scores > -np.inf])
    for count in (1, 132, 1000, 5000):
        chosen = scan.largest(scores, count)
        assert len(chosen) == len(set(chosen.tolist())) == min(count, len(eligible))
        assert sorted(scores[chosen]) == sorted(eligible[-count:])


@pytest.mark.parametrize("read", ["codes", "bits", "gate cells"])
def test_the_mirrors_reads_leave_nones_reference_count_as_it_was(read, monkeypatch):
    """simsimd's cdist, given an `out` array, returns None without taking a reference to it: each call took one
    from None, and a long-running server would die ("deallocating None") once a few thousand searches had
    spent them all."""
    import sys

    import numpy as np

    from tests.synthetic import mirror, vectors

    rng = np.random.default_rng(5)
    built = mirror("ns", vectors(2_000, rng), vectors(2_000, rng))
    monkeypatch.setattr(knobs, "CODES_MIN_ROWS", 1)
    monkeypatch.setattr(knobs, "BITS_MIN_ROWS", 1 if read == "bits" else 0)
    monkeypatch.setattr(knobs, "GATES_EXACT_ROWS", 1)
    built.bits_checked = (2_000, 0, True)  # as if checked: bits serve
    queries = vectors(300, rng)
    before = sys.getrefcount(None)
    for query in queries:
        if read == "gate cells":
            built.nearest(query[None, :], ["new"], [("default", "", "", "", "fact")])
        else:
            built.top(query, False, 10)
    assert sys.getrefcount(None) > before - 100  # 300 calls: one reference lost each, before the fix


def test_a_loaded_mirror_keeps_one_copy_of_the_strings_its_rows_share(backend, agent):
    """A decoded row brings its own copy of its namespace, agent, session and rank columns' strings; the mirror keeps
    one of each (~450 bytes a row otherwise), for rows loaded and rows written after the load alike."""
    agent.set(*[{**row, "session_id": "weekly-sync", "tags": ["ops"]} for row in ROWS])
    wait_for_mirror(agent)
    agent.set({"memory_key": "canteen", "value": "the canteen opens at eight", "session_id": "weekly-sync"})
    mirror = index.get(agent_org(agent), agent.namespace, "fake-ngram-384")
    for column in ("namespace", "agent", "session_id"):
        assert len({id(getattr(rid, column)) for rid in mirror.ids}) == 1, column
    assert len({id(meta["tags"][0]) for meta in mirror.meta[: len(ROWS)]}) == 1
    assert len({id(meta["source_class"]) for meta in mirror.meta}) == 1


def test_a_loaded_mirror_leaves_the_garbage_collector_nothing_to_walk_per_row(backend, agent):
    """A full collection walks every object the collector tracks, holding every thread meanwhile: with each row's
    rank columns tracked (a dict, its tags and entities lists) it took 0.23 s at 200k rows. Rows loaded and rows
    written after the load keep only immutable values, which the collector stops tracking."""
    import gc

    agent.set(*[{**row, "tags": ["ops", "weekly"], "entities": ["Acme"]} for row in ROWS])
    wait_for_mirror(agent)
    agent.set({"memory_key": "canteen", "value": "the canteen opens at eight", "tags": ["food"], "entities": ["Bo"]})
    mirror = index.get(agent_org(agent), agent.namespace, "fake-ngram-384")
    gc.collect()
    assert len(mirror.meta) == len(ROWS) + 1
    assert {tag for meta in mirror.meta for tag in meta["tags"]} == {"ops", "weekly", "food"}
    assert not [meta for meta in mirror.meta if gc.is_tracked(meta)]
    hit = agent.search("when does the canteen open").json["hits"][0]
    assert (hit["memory_key"], hit["tags"], hit["entities"]) == ("canteen", ["food"], ["Bo"])


def test_the_entities_a_query_names_are_read_from_a_loaded_mirror(backend, agent, settings):
    """A `standard` search starts its entity leg from the names in the query that a live row mentions (an entity, or
    a triple's subject or object): a loaded mirror holding every row answers as entity_mentions does, unasked."""
    triple = {"subject": "Gina", "relation": "badges_at", "object": "the front desk"}
    agent.set(
        {"memory_key": "numbers", "value": "the quarterly numbers are in", "entities": ["Acme Corp"]},
        {"memory_key": "badge", "value": "badge in at the front desk", "triples": [triple]},
    )
    wait_for_mirror(agent)
    query = "Did Acme Corp and Gina meet at the front desk?"
    with clickhouse.recorded() as statements:
        mirrored = agent.search(query, retrieval_budget="standard").json["query_entities"]
    assert mirrored == ["acme corp", "gina", "the front desk"]
    assert not [sql for sql in statements if "DISTINCT entity FROM entity_mentions" in " ".join(sql.split())]
    settings.LOOM_VECTOR_MIRROR = False
    assert agent.search(query, retrieval_budget="standard").json["query_entities"] == mirrored


def test_the_entity_leg_reads_a_loaded_mirror_as_it_reads_entity_mentions(backend, agent, settings):
    """The rows mentioning the query's entities (as entities, or a triple's subject or object), by how many of them
    each mentions: the mirror's postings answer with no statement, hit for hit as entity_mentions does. (Graph mode
    shows the entity signal: its `graph` component less the hop's and the triple's.)"""
    from retrieval import knobs

    triple = {"subject": "Gina", "relation": "badges_at", "object": "the front desk"}
    agent.set(
        {"memory_key": "both", "value": "the quarterly numbers are in", "entities": ["Acme Corp", "Gina"]},
        {"memory_key": "triple", "value": "badge in at the front desk", "triples": [triple]},
        {"memory_key": "one", "value": "the renewal was signed", "entities": ["ACME Corp"]},
        {"memory_key": "none", "value": "the cafeteria serves soup on fridays"},
    )
    wait_for_mirror(agent)
    query = "What did Acme Corp and Gina agree?"
    fields = {"retrieval_budget": "standard", "search_mode": "graph", "explain": True, "min_similarity": 0, "top_k": 8}
    with clickhouse.recorded() as statements:
        mirrored = agent.search(query, **fields).json["hits"]
    assert not [sql for sql in statements if "uniqExact(entity) AS matched" in sql]  # the entity leg's statement
    parts = {hit["memory_key"]: hit["score_components"] for hit in mirrored}
    entity = {
        key: round(c["graph"] - knobs.GRAPH_HOP * c["graph_hop"] - knobs.GRAPH_TRIPLE * c["graph_triple"], 6)
        for key, c in parts.items()
    }
    assert entity == {
        key: knobs.GRAPH_ENTITY * share for key, share in [("both", 1), ("triple", 0.5), ("one", 0.5), ("none", 0)]
    }
    settings.LOOM_VECTOR_MIRROR = False
    assert agent.search(query, **fields).json["hits"] == mirrored
