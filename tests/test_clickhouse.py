"""The execution path: typed parameter binding, the schema ledger, and clear failures."""

import os
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime

import pytest

from retrieval.store import clickhouse, schema


def test_values_are_bound_not_formatted(backend):
    hostile = "x') OR 1=1; DROP TABLE memories; --"
    assert clickhouse.query_value("SELECT {v:String}", {"v": hostile}) == hostile
    rows = clickhouse.query("SELECT count() AS n FROM memories WHERE org = {org:String}", {"org": hostile})
    assert rows == [{"n": 0}]
    assert clickhouse.query_value("SELECT count() FROM system.tables WHERE name = 'memories'") >= 1


def test_schema_apply_is_idempotent_and_recorded(backend):
    assert schema.apply() == []
    names = [name for name, _ in schema.migrations()]
    assert names[0] == "0001_memories"
    assert set(names) <= schema.applied()


def test_the_tables_every_write_appends_to_merge_ten_parts_at_a_time(backend):
    """Wider merges than the engine's default (0022_wider_merges): a row is rewritten fewer times as its parts grow."""
    for table in ("memories", "memory_embeddings", "memory_terms", "memory_chunks"):
        created = clickhouse.query_value(
            "SELECT create_table_query FROM system.tables WHERE database = currentDatabase() AND name = {table:String}",
            {"table": table},
        )
        assert "merge_selector_base = 10" in created, table


def test_the_embedded_engines_merges_run_at_the_lowest_cpu_priority():
    """They share the service's cores: a merge takes them when the service leaves them idle (clickhouse.py)."""
    assert clickhouse.backend() == "embedded"
    nice = "SELECT value FROM system.server_settings WHERE name = 'os_threads_nice_value_merge_mutate'"
    assert clickhouse.query_value(nice) == "19"


@pytest.mark.skipif(sys.platform != "linux", reason="a thread's name is read from /proc")
@pytest.mark.parametrize("backend", ["embedded"], indirect=True)
def test_an_insert_the_embedded_engine_runs_with_its_views_leaves_the_threads_name(backend):
    """The engine renames the thread that pushes an insert into views ("Unknown"): put back, so a request thread is
    found by its name in top, py-spy and /proc."""
    assert clickhouse.backend() == "embedded"
    comm = f"/proc/self/task/{threading.get_native_id()}/comm"
    with open(comm, "w") as named:
        named.write("loom-test")
    clickhouse.insert("namespaces", [{"org": f"org-{uuid.uuid4().hex}", "namespace": "default", "revision": 1}])
    with open(comm) as named:
        assert named.read().strip() == "loom-test"


def test_a_second_process_on_the_same_data_directory_is_told_why_and_by_whom(tmp_path):
    """The embedded engine allows one process per directory: the second gets a clear error naming the owner, not a
    hang."""
    from django.conf import settings

    code = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'loom_site.settings'; django.setup()\n"
        "from retrieval.store import clickhouse\n"
        "try:\n    clickhouse.ping()\nexcept clickhouse.ClickHouseUnavailable as exc:\n    print('REFUSED', exc)\n"
    )
    clickhouse.ping()  # this process holds the directory
    env = {"PATH": "/usr/bin:/bin", "LOOM_VAR_DIR": str(tmp_path), "LOOM_DATA_DIR": settings.LOOM_DATA_DIR}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert "REFUSED" in done.stdout, done.stderr[-2000:]
    assert f"in use by another process (PID {os.getpid()}, started " in done.stdout


def test_bulk_decoding_matches_the_driver(backend):
    import numpy as np

    sql = (
        "SELECT {s:String} AS s, toUInt64(18446744073709551615) AS u, [0.5, -1.25]::Array(Float32) AS v, "
        "['x', {s:String}] AS a, toDateTime64('2024-05-07 10:11:12.345', 3, 'UTC') AS d, toFloat32(0.25) AS f, "
        "CAST('active' AS LowCardinality(String)) AS st, if(number = 1, NULL, d) AS maybe, "
        "arrayMap(x -> toFloat32(x * number), range(number + 1)) AS ragged "
        "FROM numbers(3)"
    )
    params = {"s": "ünïcode " + "long " * 40}
    decoded = clickhouse.query_decoded(sql, params)
    expected = clickhouse.query_rows(sql, params)
    assert len(decoded) == 3
    for got, want in zip(decoded, expected):
        assert isinstance(got[2], np.ndarray) and got[2].dtype == np.float32 and got[2].tolist() == list(want[2])
        assert got[8].tolist() == list(want[8])  # each row's own slice of the column's floats
        assert got[4].tzinfo is UTC and (got[7] is None or got[7].tzinfo is UTC)
        assert [got[0], got[1], got[3], *got[4:8]] == [want[0], want[1], list(want[3]), *want[4:8]]
    assert clickhouse.query_decoded("SELECT 1 AS x FROM numbers(0)", {}) == []


def test_timestamps_are_stored_to_the_millisecond_whether_a_block_holds_one_moment_or_many(backend):
    """A write's rows share one moment (encoded once for the block); rows of different moments, and a naive
    timestamp (UTC here), are each stored as given (to the millisecond, which these are)."""
    from datetime import timedelta

    org = f"ts-{uuid.uuid4().hex[:8]}"
    moment = datetime(2026, 5, 7, 10, 11, 12, 345000, tzinfo=UTC)
    blocks = {
        "same": [moment, moment, moment],
        "apart": [moment, moment + timedelta(days=1, milliseconds=7), moment.replace(tzinfo=None)],
    }
    for op, moments in blocks.items():
        rows = [
            {"org": org, "namespace": "n", "op": op, "actor": f"a{i}", "created_at": m} for i, m in enumerate(moments)
        ]
        clickhouse.insert("agent_events", rows)
    for op, moments in blocks.items():
        stored = clickhouse.query_rows(
            "SELECT created_at FROM agent_events WHERE org = {org:String} AND op = {op:String} ORDER BY actor",
            {"org": org, "op": op},
        )
        assert [row[0] for row in stored] == [m.replace(tzinfo=UTC) for m in moments]


def test_rows_inserted_later_arrive_on_their_own(backend):
    """An op's usage row is inserted off the request path, by a thread that flushes every LATER_SECONDS."""
    from datetime import UTC, datetime

    from tests.test_vector_mirror import wait_until

    org = f"later-{uuid.uuid4().hex[:8]}"
    row = {"org": org, "namespace": "n", "op": "memory.search", "actor": "t", "created_at": datetime.now(UTC)}
    clickhouse.insert_later("agent_events", [row, {**row, "op": "memory.ask"}])
    count = "SELECT count() FROM agent_events WHERE org = {org:String}"
    wait_until(lambda: clickhouse.query_value(count, {"org": org}) == 2, timeout=10)


def test_rows_inserted_later_with_different_columns_all_arrive(backend):
    """Rows of one table that name different columns (one leaves a column to its default) wait together and are
    inserted apart: one set of columns per block (mixed, the whole batch was once lost, other ops' rows with it)."""
    from datetime import UTC, datetime

    org = f"later-{uuid.uuid4().hex[:8]}"
    row = {"org": org, "namespace": "n", "op": "memory.search", "actor": "t", "created_at": datetime.now(UTC)}
    clickhouse.insert_later("agent_events", [row])
    clickhouse.insert_later("agent_events", [{**row, "op": "memory.ask", "upstream_cost_usd": 0.25}])
    clickhouse.flush_later()
    rows = clickhouse.query_rows(
        "SELECT op, upstream_cost_usd FROM agent_events WHERE org = {org:String} ORDER BY op", {"org": org}
    )
    assert rows == [("memory.ask", 0.25), ("memory.search", 0.0)]


def test_a_flush_waits_for_one_already_under_way(backend, monkeypatch):
    """flush_later() promises the rows waiting are in when it returns. The background flusher may have taken them a
    moment before and still be inserting: the caller waits for it (it once returned at once, and a test reading its
    usage row back found none)."""
    import threading
    from datetime import UTC, datetime

    org = f"later-{uuid.uuid4().hex[:8]}"
    row = {"org": org, "namespace": "n", "op": "memory.ask", "actor": "t", "created_at": datetime.now(UTC)}
    inserting, release, stored = threading.Event(), threading.Event(), clickhouse.insert

    def slow_insert(table, rows):
        inserting.set()
        release.wait(10)
        return stored(table, rows)

    monkeypatch.setattr(clickhouse, "insert", slow_insert)
    clickhouse.insert_later("agent_events", [row])
    under_way = threading.Thread(target=clickhouse.flush_later)  # as the background flusher would
    under_way.start()
    assert inserting.wait(10)
    caller = threading.Thread(target=clickhouse.flush_later)
    caller.start()
    caller.join(0.3)
    assert caller.is_alive()  # still waiting for the insert under way
    release.set()
    caller.join(10)
    under_way.join(10)
    assert clickhouse.query_value("SELECT count() FROM agent_events WHERE org = {org:String}", {"org": org}) == 1


def test_side_work_that_reads_only_memory_runs_in_the_callers_thread(backend):
    """No hand-off for work without a statement: its answer, or its error, is in the future at once."""
    ran_in = []
    done = clickhouse.on_the_side(lambda: ran_in.append(threading.current_thread()) or "from memory")
    assert (done.done(), done.result(), ran_in) == (True, "from memory", [threading.current_thread()])
    failed = clickhouse.on_the_side(lambda: 1 / 0)
    assert failed.done() and isinstance(failed.exception(), ZeroDivisionError)


def test_side_work_that_runs_a_statement_starts_over_in_a_worker_and_runs_beside_the_others(backend):
    """Each statement runs in a worker thread (into the caller's recording), two side by side: each waits for the
    other to begin before it answers."""
    began = [threading.Event(), threading.Event()]
    threads = []

    def work(mine: int):
        answer = clickhouse.query_value("SELECT {n:UInt8}", {"n": mine})
        threads.append(threading.current_thread())  # where the statement ran
        began[mine].set()
        assert began[1 - mine].wait(timeout=10), "the other statement never ran beside this one"
        return answer

    with clickhouse.recorded() as statements:
        futures = [clickhouse.on_the_side(work, n) for n in (0, 1)]
        assert [future.result(timeout=30) for future in futures] == [0, 1]
    assert statements == ["SELECT {n:UInt8}"] * 2  # each once: the start in line ran none
    assert threading.current_thread() not in threads and len(set(threads)) == 2


def test_rows_inserted_beside_the_caller_are_in_once_its_future_is_done_table_by_table_in_order(backend):
    """`inserting` encodes here and inserts in a worker (into the caller's recording); a table with no rows is no
    statement."""
    key = f"beside-{uuid.uuid4().hex}"
    mention = {"org": key, "namespace": "default", "entity": "ada", "memory_key": "k", "agent": "a", "session_id": ""}
    mention |= {"version": 1, "revision": 1, "status": "active", "created_at": datetime.now(UTC)}
    edge = {k: v for k, v in mention.items() if k != "entity"} | {"src": "ada", "dst": "bob", "relation": "knows"}
    with clickhouse.recorded() as statements:
        done = clickhouse.inserting([("entity_mentions", [mention]), ("entity_triples", []), ("entity_edges", [edge])])
        assert done.result(timeout=30) == [1, 0, 1]
    inserts = [statement for statement in statements if statement.startswith("INSERT")]  # (after the column types)
    assert inserts == ["INSERT INTO entity_mentions", "INSERT INTO entity_edges"]
    for table in ("entity_mentions", "entity_edges"):
        assert clickhouse.query_value(f"SELECT count() FROM {table} WHERE org = {{org:String}}", {"org": key}) == 1


def mentions_of(org: str) -> int:
    return clickhouse.query_value("SELECT count() FROM entity_mentions WHERE org = {org:String}", {"org": org})


def a_mention(org: str, entity: str) -> dict:
    row = {"org": org, "namespace": "default", "entity": entity, "memory_key": entity, "agent": "a", "session_id": ""}
    return row | {"version": 1, "revision": 1, "status": "active", "created_at": datetime.now(UTC)}


def test_a_table_is_stored_while_the_caller_still_encodes_the_next_and_a_callable_runs_in_its_turn(backend):
    """A write's vectors go into the engine while its `memories` rows are still being encoded. Here the caller's next
    step waits until the first table is in: encoding every step before storing any would never get there."""
    org = f"stream-{uuid.uuid4().hex[:8]}"
    seen = []

    def steps():
        yield "entity_mentions", [a_mention(org, "ada")]
        deadline = time.monotonic() + 30
        while mentions_of(org) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert mentions_of(org) == 1, "the first table was not stored before the next was encoded"
        yield lambda: seen.append(mentions_of(org)) or "ran"
        yield "entity_mentions", [a_mention(org, "bob")]

    assert clickhouse.inserting(steps()).result(timeout=30) == [1, "ran", 1]
    assert seen == [1] and mentions_of(org) == 2  # the callable ran after the table before it, before the next


def test_a_step_that_cannot_be_encoded_stops_the_steps_after_it_and_nothing_is_left_running(backend):
    org = f"stream-{uuid.uuid4().hex[:8]}"
    ran = []
    steps = [
        ("entity_mentions", [a_mention(org, "ada")]),
        ("entity_mentions", [a_mention(org, "bob") | {"version": "not a number"}]),
        lambda: ran.append(True),
    ]
    with pytest.raises(ValueError, match="not a number"):
        clickhouse.inserting(steps)
    # The step before it is in, already (the caller waited for the worker); nothing after it ran.
    assert mentions_of(org) == 1 and ran == []
