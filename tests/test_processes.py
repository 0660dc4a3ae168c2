"""Two app processes on one ClickHouse server, or on two nodes of a cluster: what one acknowledges, the other's next
search reads at once, though its vector mirror was loaded before: whether searches ask the engine what changed
(LOOM_CHANGE_MARKER=engine) or read the host's stamps (`host`)."""

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from retrieval import index
from retrieval.index import reading, registry
from retrieval.store import clickhouse
from tests.test_vector_mirror import agent_org, wait_for_mirror, wait_until

ROOT = Path(__file__).resolve().parent.parent

# The other process: the real write path, the test settings, the same ClickHouse server (argv[1]) or a node of the
# cluster whose nodes argv[2] lists (the test settings ignore LOOM_ variables in the environment).
OTHER = """
import sys
import django
django.setup()
from django.conf import settings
from retrieval.ingest import retire, write
from retrieval.store import clickhouse
from tenancy.access import Scope
from tenancy.roles import Role

clickhouse.use(sys.argv.pop(1))
settings.VAR_DIR, settings.LOOM_CHANGE_MARKER = sys.argv.pop(1), sys.argv.pop(1)  # the host's stamps, or not
if nodes := sys.argv.pop(1):
    settings.LOOM_CLICKHOUSE_CLUSTER, settings.LOOM_CLICKHOUSE_CLUSTER_NODES = "loom", nodes.split(",")
scope = Scope(org=sys.argv[1], namespace="default", role=Role.ADMIN, subject="process:other")
if sys.argv[2] == "record":
    from retrieval.ingest import records

    records.set_records(scope, [records.RecordInput(sys.argv[3], "customer", {"plan": sys.argv[4]})])
elif sys.argv[2] == "register":
    import json
    from retrieval.store import namespaces

    namespaces.register(scope, {"retrieval_defaults": json.loads(sys.argv[3])})
elif sys.argv[2] == "set":
    settings.LOOM_MEMORY_EMBED_HEAD_CHARS, settings.LOOM_MEMORY_CHUNK_CHARS = 200, 150
    write.set_memories(scope, [write.MemoryInput(memory_key=sys.argv[3], value=sys.argv[4])])
else:
    retire.delete_memory(scope, sys.argv[3])
"""


@pytest.fixture(params=["engine", "host"])
def marker(request, settings):
    settings.LOOM_CHANGE_MARKER = request.param
    return request.param


@pytest.fixture
def other_process(request, backend, marker, settings):
    """Runs OTHER in a new process on this host (this process's LOOM_VAR_DIR): on the test's server, or on the
    cluster's second node (this process uses the first). `host=` names another host's var dir instead."""
    if backend == "cluster":
        nodes = request.getfixturevalue("clickhouse_cluster").urls
        url, listed = nodes[1], ",".join(nodes)
    else:
        url, listed = request.getfixturevalue("clickhouse_server").url, ""

    def run(*args: str, host: str = str(settings.VAR_DIR)) -> None:
        done = subprocess.run(
            [sys.executable, "-c", OTHER, url, host, marker, listed, *args],
            cwd=ROOT,
            env={"DJANGO_SETTINGS_MODULE": "tests.settings", "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]

    return run


@pytest.mark.parametrize("backend", ["server", "cluster"], indirect=True)
def test_another_processs_write_and_delete_are_in_the_next_search(backend, agent, other_process):
    agent.set({"memory_key": "seed", "value": "the cafeteria serves soup on fridays"})
    wait_for_mirror(agent)  # this process's mirror holds the namespace as it was
    agent.search("what does the cafeteria serve")  # ...and has asked what changed since
    org = agent_org(agent)
    other_process(org, "set", "offsite", "the quarterly offsite is in lisbon")
    hit = agent.search("where is the quarterly offsite").json["hits"][0]
    assert (hit["memory_key"], hit["content_excerpt"]) == ("offsite", "the quarterly offsite is in lisbon")
    other_process(org, "set", "offsite", "the quarterly offsite moved to porto")
    hits = agent.search("where is the quarterly offsite", min_similarity=0, top_k=10).json["hits"]
    assert [hit["content_excerpt"] for hit in hits if hit["memory_key"] == "offsite"] == [
        "the quarterly offsite moved to porto"
    ]
    other_process(org, "delete", "offsite")
    hits = agent.search("quarterly offsite porto", min_similarity=0, top_k=10).json["hits"]
    assert "offsite" not in [hit["memory_key"] for hit in hits]


@pytest.mark.parametrize("backend", ["server"], indirect=True)
def test_another_processs_write_is_scored_by_the_next_searchs_lexical_legs(backend, agent, other_process, settings):
    """The write reaches this process's postings with its vectors: the lexical leg reads the mirror, as memory_terms
    would answer."""
    agent.set({"memory_key": "seed", "value": "the cafeteria serves soup on fridays"})
    wait_for_mirror(agent)
    agent.search("what does the cafeteria serve")
    other_process(agent_org(agent), "set", "offsite", "the quarterly offsite is in lisbon")
    fields = {"search_mode": "hybrid", "explain": True, "min_similarity": 0}
    with clickhouse.recorded() as statements:
        mirrored = agent.search("quarterly offsite lisbon", **fields).json["hits"]
    assert not [statement for statement in statements if "memory_terms" in statement]
    assert (mirrored[0]["memory_key"], mirrored[0]["score_components"]["lexical"]) == ("offsite", 1.0)
    settings.LOOM_VECTOR_MIRROR = False
    assert agent.search("quarterly offsite lisbon", **fields).json["hits"] == mirrored


@pytest.mark.parametrize("backend", ["server"], indirect=True)
def test_a_row_read_before_its_memory_row_gets_its_words_once_that_comes(backend, agent, monkeypatch):
    """Another process's write stores its vector rows before its memory row: a search between the two finds a row
    with nothing to show and no words, and the lexical legs read ClickHouse while it lasts. Its memory row is asked
    for again, and the legs read the mirror once it came (before, never again: a row held is not read again)."""
    monkeypatch.setattr(reading, "SHOWN_RETRY_S", 0)
    agent.set({"memory_key": "seed", "value": "the cafeteria serves soup on fridays"})
    wait_for_mirror(agent)
    agent.search("what does the cafeteria serve")
    # The half of a write another process stored first: a vector row under a new key, and no memory row yet.
    copy_of_seed(agent, "memory_embeddings", "'gym' AS memory_key")
    fields = {"search_mode": "hybrid", "min_similarity": 0}
    with clickhouse.recorded() as statements:
        agent.search("cafeteria soup", **fields)
    assert [sql for sql in statements if "memory_terms" in sql], "the row has no words here: ClickHouse answers"
    copy_of_seed(agent, "memories", "'gym' AS memory_key, 'the gym opens at six' AS value")
    agent.search("cafeteria soup", **fields)  # asks for the memory row again
    # Its words are held once that answer is in (counted beside the search that asked).
    org = agent_org(agent)
    wait_until(lambda: index.mentioned(org, [agent.namespace], "fake-ngram-384", ["gym"]) == ([True], True))
    with clickhouse.recorded() as statements:
        hits = agent.search("gym opens six", **fields).json["hits"]
    assert not [sql for sql in statements if "memory_terms" in sql], statements
    assert hits[0]["memory_key"] == "gym"


@pytest.mark.parametrize("backend", ["server"], indirect=True)
def test_a_row_loaded_before_its_memory_row_gets_its_words_once_that_comes(backend, agent, monkeypatch):
    """The same window around a mirror's load: the load leaves out a row whose vector is in and whose value is not
    yet, and the first delta read after it finds the row, without its value."""
    monkeypatch.setattr(reading, "SHOWN_RETRY_S", 0)
    agent.set({"memory_key": "seed", "value": "the cafeteria serves soup on fridays"})
    wait_for_mirror(agent)  # (the write's gates began a load: in, so that it cannot read the copy below)
    copy_of_seed(agent, "memory_embeddings", "'gym' AS memory_key")
    monkeypatch.setattr(registry, "mirrors_held", {})  # a restart: this load reads the row, without its value
    wait_for_mirror(agent)
    copy_of_seed(agent, "memories", "'gym' AS memory_key, 'the gym opens at six' AS value")
    fields = {"search_mode": "hybrid", "min_similarity": 0}
    agent.search("cafeteria soup", **fields)  # asks for the memory row again
    # Its words are held once that answer is in (counted beside the search that asked).
    org = agent_org(agent)
    wait_until(lambda: index.mentioned(org, [agent.namespace], "fake-ngram-384", ["gym"]) == ([True], True))
    with clickhouse.recorded() as statements:
        hits = agent.search("gym opens six", **fields).json["hits"]
    assert not [sql for sql in statements if "memory_terms" in sql], statements
    assert hits[0]["memory_key"] == "gym"


def copy_of_seed(agent, table: str, replaced: str) -> None:
    """Half of a write another process is making, by hand: the agent's `seed` row copied in `table` alone."""
    # From a subquery: with REPLACE in the same SELECT, its WHERE would compare the replaced key.
    clickhouse.command(
        f"INSERT INTO {table} SELECT * REPLACE ({replaced}) FROM (SELECT * FROM {table} "
        "WHERE org = {org:String} AND namespace = {namespace:String} AND memory_key = 'seed')",
        {"org": agent_org(agent), "namespace": agent.namespace},
    )


@pytest.mark.parametrize("backend", ["server", "cluster"], indirect=True)
def test_another_processs_row_without_a_vector_is_read_by_the_entity_check(backend, agent, other_process):
    """Stored while the org's model calls are off, the row has no vector, so this process's mirror cannot hold its
    words: the next search's entity check asks ClickHouse for the name the mirror lacks."""
    agent.set({"memory_key": "seed", "value": "the cafeteria serves soup on fridays"})
    wait_for_mirror(agent)
    assert agent.search("Where is Gina?").json["abstain_code"] == "entity_absent"
    assert agent.call("org.set_model_calls", {"enabled": False, "reason": "audit"}, agent.token).status == 200
    other_process(agent_org(agent), "set", "gina", "Gina joined the Berlin office in May")
    assert agent.search("Where is Gina?").json["retrieval_work"]["names_found"] == ["Gina"]


@pytest.mark.parametrize("backend", ["server", "cluster"], indirect=True)
def test_another_processs_long_value_is_found_by_its_chunk(backend, agent, other_process, settings):
    settings.LOOM_MEMORY_EMBED_HEAD_CHARS, settings.LOOM_MEMORY_CHUNK_CHARS = 200, 150
    agent.set({"memory_key": "seed", "value": "the cafeteria serves soup on fridays"})
    wait_for_mirror(agent)  # a namespace without chunks: the chunk leg skips its statement
    filler = " ".join(f"routine paragraph {i} about office plants and coffee." for i in range(20))
    other_process(agent_org(agent), "set", "runbook", filler + " To roll back a release run kubectl rollout undo.")
    hit = agent.search("roll back a release kubectl rollout undo").json["hits"][0]
    assert (hit["memory_key"], hit["source"]) == ("runbook", "chunk")


@pytest.mark.parametrize("backend", ["server", "cluster"], indirect=True)
def test_another_processs_record_is_in_the_next_search(backend, agent, other_process):
    agent.set({"memory_key": "seed", "value": "the cafeteria serves soup on fridays"})
    assert agent.search("Which plan is Acme on?").json["records"] == []  # the namespace held no record
    other_process(agent_org(agent), "record", "customer:acme", "Enterprise")
    found = agent.search("Which plan is Acme on?").json["records"]
    assert [(record["record_key"], record["fields"]) for record in found] == [("customer:acme", {"plan": "Enterprise"})]


@pytest.mark.parametrize("backend", ["server", "cluster"], indirect=True)
def test_another_processs_namespace_configuration_is_in_the_next_search(backend, agent, other_process):
    agent.set(*[{"memory_key": f"k{i}", "value": f"the offsite plan, item {i}"} for i in range(3)])
    assert len(agent.hits("the offsite plan", min_similarity=0)) == 3  # this process has read the configuration
    other_process(agent_org(agent), "register", '{"top_k": 1}')
    assert len(agent.hits("the offsite plan", min_similarity=0)) == 1


@pytest.mark.parametrize("backend", ["server", "cluster"], indirect=True)
def test_a_search_after_no_write_reads_no_change(backend, agent, marker):
    """With `engine` it asks for the namespace's write count alone; with `host` it asks the engine nothing."""
    agent.set({"memory_key": "seed", "value": "the cafeteria serves soup on fridays"})
    wait_for_mirror(agent)
    agent.search("what does the cafeteria serve")  # asks once: the mirror was just loaded
    with clickhouse.recorded() as statements:
        assert agent.hits("what does the cafeteria serve")[0] == "seed"
    assert not [sql for sql in statements if "inserted_at >" in sql or "FROM session_summaries" in sql], statements
    assert len([sql for sql in statements if "FROM namespace_writes" in sql]) == (marker == "engine"), statements


@pytest.mark.parametrize("backend", ["server"], indirect=True)
@pytest.mark.parametrize("marker", ["engine"], indirect=True)
def test_with_the_engine_marker_a_memory_write_sends_the_next_search_to_the_vector_rows_alone(
    backend, agent, other_process
):
    """The vector rows are counted apart from the side tables: a memory write moves one count, a record the other."""
    agent.set({"memory_key": "seed", "value": "the cafeteria serves soup on fridays"})
    wait_for_mirror(agent)
    agent.search("what does the cafeteria serve")
    other_process(agent_org(agent), "set", "gym", "the gym opens at six")
    with clickhouse.recorded() as statements:
        assert agent.hits("when does the gym open")[0] == "gym"
    assert [sql for sql in statements if "inserted_at >" in sql], statements
    assert not [sql for sql in statements if "FROM session_summaries" in sql], statements
    other_process(agent_org(agent), "record", "customer:acme", "Enterprise")
    with clickhouse.recorded() as statements:
        assert agent.search("Which plan is Acme on?").json["records"][0]["record_key"] == "customer:acme"
    assert [sql for sql in statements if "FROM session_summaries" in sql], statements
    assert not [sql for sql in statements if "inserted_at >" in sql], statements


@pytest.mark.parametrize("backend", ["server", "cluster"], indirect=True)
@pytest.mark.parametrize("marker", ["engine"], indirect=True)
def test_with_the_engine_marker_a_write_on_another_host_is_in_the_next_search(backend, agent, other_process, tmp_path):
    """No host file is shared, and no max age waited for: the engine counted the other host's write."""
    agent.set({"memory_key": "offsite", "value": "the quarterly offsite is in lisbon"})
    wait_for_mirror(agent)
    agent.search("where is the quarterly offsite")
    other_process(agent_org(agent), "set", "gym", "the gym opens at six", host=str(tmp_path))
    assert agent.hits("when does the gym open")[0] == "gym"
    other_process(agent_org(agent), "delete", "offsite", host=str(tmp_path))
    assert "offsite" not in agent.hits("where is the quarterly offsite", min_similarity=0)


@pytest.mark.parametrize("backend", ["server", "cluster"], indirect=True)
@pytest.mark.parametrize("marker", ["host"], indirect=True)
def test_with_the_host_marker_a_delete_on_another_host_is_read_within_the_max_age(
    backend, agent, other_process, settings, tmp_path
):
    settings.LOOM_CHANGE_MARKER_MAX_AGE_S = 1.0
    agent.set({"memory_key": "offsite", "value": "the quarterly offsite is in lisbon"})
    wait_for_mirror(agent)
    assert agent.hits("where is the quarterly offsite")[0] == "offsite"
    other_process(agent_org(agent), "delete", "offsite", host=str(tmp_path))  # stamps another host's file
    wait_until(lambda: "offsite" not in agent.hits("where is the quarterly offsite", min_similarity=0), timeout=10)


@pytest.mark.parametrize("backend", ["server", "cluster"], indirect=True)
@pytest.mark.parametrize("marker", ["host"], indirect=True)
def test_with_the_host_marker_a_search_after_this_processs_own_write_asks_the_engine_nothing(
    backend, agent, other_process
):
    """Its mirror took the write from the write path itself, and a memory write stores no side-table row; only another
    writer's stamp between its last read and its own write sends it to the engine again."""
    agent.set({"memory_key": "seed", "value": "the cafeteria serves soup on fridays"})
    wait_for_mirror(agent)
    agent.search("what does the cafeteria serve")  # asks once: the mirror was just loaded
    agent.set({"memory_key": "canteen", "value": "the canteen opens at eight"})
    with clickhouse.recorded() as statements:
        assert agent.hits("when does the canteen open")[0] == "canteen"
    assert not [sql for sql in statements if "inserted_at >" in sql or "FROM session_summaries" in sql], statements
    other_process(agent_org(agent), "set", "gym", "the gym opens at six")
    agent.set({"memory_key": "desk", "value": "hot desks are booked a day ahead"})
    assert agent.hits("when does the gym open")[0] == "gym"


@pytest.mark.parametrize("backend", ["server"], indirect=True)
def test_searches_queued_behind_a_delta_read_take_its_answer(backend, agent, other_process):
    """With writes coming, every search finds its namespace changed; those that began before a delta read began wait
    for it and read nothing themselves (each read its own, queued on the engine, before)."""
    agent.set({"memory_key": "seed", "value": "the cafeteria serves soup on fridays"})
    wait_for_mirror(agent)
    org = agent_org(agent)
    other_process(org, "set", "offsite", "the quarterly offsite is in lisbon")
    mirror = index.get(org, agent.namespace, "fake-ngram-384")
    delta_reads = []

    def search_begins():
        with clickhouse.recorded() as statements:
            index.sync(org, [agent.namespace], "fake-ngram-384")
        delta_reads.extend(sql for sql in statements if "inserted_at >" in sql)

    under_way, done = threading.Event(), threading.Event()

    def read_under_way():  # a delta read the searches find under way: each begins, then waits on it
        under_way.set()
        assert done.wait(30)

    reading = threading.Thread(target=mirror.delta.since, args=(time.monotonic(), read_under_way))
    reading.start()
    assert under_way.wait(30)
    searches = [threading.Thread(target=search_begins) for _ in range(4)]
    for search in searches:
        search.start()
    waiting = {search.ident for search in searches}
    wait_until(lambda: all(sys._current_frames()[ident].f_code.co_name == "wait" for ident in waiting))
    done.set()
    for thread in (reading, *searches):
        thread.join(timeout=30)
    assert len(delta_reads) == 1
    assert agent.hits("where is the quarterly offsite")[0] == "offsite"
