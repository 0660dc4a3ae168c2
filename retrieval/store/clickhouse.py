"""The one execution path to ClickHouse.

Every statement the service runs goes through `query`, `insert` or `command`.
Values are always bound as typed server-side parameters (`{org:String}`);
identifiers come only from code. The engine is embedded chDB in
LOOM_DATA_DIR unless LOOM_CLICKHOUSE_URL names a server; either way the
client is clickhouse-connect, opened lazily (after Django's autoreloader has
forked) and shared by the process's threads.
"""

import atexit
import ctypes
import fcntl
import logging
import math
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from queue import SimpleQueue
from typing import Any

import clickhouse_connect
from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError, ProgrammingError
from django.conf import settings
from urllib3 import Timeout

from retrieval import cores, metrics
from retrieval.store import native, outages, tenants

log = logging.getLogger(__name__)

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ClickHouseUnavailable(Exception):
    """ClickHouse cannot be reached (server down, data directory held by another process)."""


class ClickHouseError(Exception):
    """ClickHouse refused a statement: a bug on our side, never the caller's input."""


_lock = threading.Lock()
_local = threading.local()  # each thread its own client: the embedded engine serialises one connection
_target: str | None = None


def target() -> str:
    """Where statements go: a chdb:// DSN or the server URL."""
    pinned = getattr(_local, "target", None)
    if pinned:
        return pinned
    if _target:
        return _target
    if settings.LOOM_CLICKHOUSE_URL:
        return settings.LOOM_CLICKHOUSE_URL
    return f"chdb://{settings.LOOM_DATA_DIR}"


def use(dsn: str | None) -> str | None:
    """Point this process at another engine (tests run every op on both); returns the previous."""
    global _target
    previous, _target = _target, dsn
    return previous


def use_target_in_thread(dsn: str) -> None:
    """Pin this thread to an engine (a background job keeps the engine it was started for)."""
    _local.target = dsn


def release_thread() -> None:
    """Close this thread's clients (a short-lived background thread, before it ends)."""
    for opened in getattr(_local, "clients", {}).values():
        opened.close()
    _local.clients = {}


# Statements run side by side in these threads (the engine releases the GIL while it works).
_side = ThreadPoolExecutor(max_workers=8, thread_name_prefix="loom-side")


class _Statement(BaseException):
    """Work tried in line (`on_the_side`) began a statement: it goes to a worker thread. Not an Exception, so the
    work's own fail-open `except Exception` lets it through."""


def on_the_side(fn, *args) -> Future:
    """`fn(*args)`, beside the caller's work. While it reads only memory (the mirrors, the caches: most reads of a
    search on a warm process) it runs here at once: a hand-off to a worker thread costs more than most of these
    reads (docs/benchmarks.md). At its first statement it starts over in a worker thread, against the engine this
    thread uses (into its recording, within its request's budget), so that the statements of a search run side by
    side. `fn` must be safe to start over: it writes nothing before a statement."""
    done = Future()
    previous, _local.in_line = getattr(_local, "in_line", False), True
    try:
        done.set_result(fn(*args))
    except _Statement:
        return beside(fn, *args)
    except Exception as exc:  # raised by `result()`, as from a worker thread
        done.set_exception(exc)
    finally:
        _local.in_line = previous
    return done


def beside(fn, *args) -> Future:
    """`fn(*args)` in a worker thread, against the engine this thread uses (into its recording, within its request's
    budget): statements that run while the caller works on."""
    return _side.submit(
        _pinned, target(), getattr(_local, "recording", None), getattr(_local, "budget", None), fn, args
    )


@contextmanager
def at(dsn: str) -> Iterator[None]:
    """Run this thread's statements on another engine meanwhile (a cluster's DDL, node by node)."""
    previous, _local.target = getattr(_local, "target", None), dsn
    try:
        yield
    finally:
        _local.target = previous


def _pinned(dsn: str, recording: list[str] | None, spent: "_Budget | None", fn, args: tuple):
    _local.target, _local.recording, _local.budget = dsn, recording, spent
    try:
        return fn(*args)
    finally:
        _local.target = _local.recording = _local.budget = None


class _Budget:
    """The ClickHouse time one request may still spend, over all its statements (side by side ones too)."""

    def __init__(self, seconds: float):
        self.left = seconds
        self.lock = threading.Lock()

    def spend(self, seconds: float) -> None:
        with self.lock:
            self.left -= seconds

    @staticmethod
    def spent(waiting: str = "") -> "ClickHouseUnavailable":
        return ClickHouseUnavailable(
            f"the request spent its ClickHouse budget{waiting} (LOOM_CLICKHOUSE_REQUEST_BUDGET_S="
            f"{settings.LOOM_CLICKHOUSE_REQUEST_BUDGET_S:g})"
        )

    def timeout(self, method: str) -> Timeout:
        """A statement's limit: its kind's timeout, or what is left of the budget."""
        kind = (
            settings.LOOM_CLICKHOUSE_WRITE_TIMEOUT_S
            if method == "raw_insert"
            else settings.LOOM_CLICKHOUSE_QUERY_TIMEOUT_S
        )
        limit = min(kind, self.left)
        if limit <= 0:
            raise self.spent()
        return Timeout(connect=min(_BACKGROUND_TIMEOUT.connect_timeout, limit), read=limit)


@contextmanager
def budget() -> Iterator[None]:
    """This request's statements share LOOM_CLICKHOUSE_REQUEST_BUDGET_S, and each waits at most
    LOOM_CLICKHOUSE_QUERY_TIMEOUT_S (an insert LOOM_CLICKHOUSE_WRITE_TIMEOUT_S): a request that meets a frozen engine
    answers 503 within seconds instead of waiting statement after statement, and frees its thread. Background work
    (a mirror's load, the commands) runs without one, each statement bounded by the client's own timeout."""
    previous, _local.budget = getattr(_local, "budget", None), _Budget(settings.LOOM_CLICKHOUSE_REQUEST_BUDGET_S)
    try:
        yield
    finally:
        _local.budget = previous


def wait_for(ready: Callable[[float | None], bool]) -> None:
    """Wait as this thread's next statement would, for `ready(timeout)` (another request's statement to end): the
    wait is charged to the request's budget, and one the budget cannot cover fails as an unanswered statement does.
    Background work waits as long as it takes (the statement it waits for is bounded)."""
    spent = getattr(_local, "budget", None)
    if spent is None:
        ready(None)
        return
    start = time.monotonic()
    try:
        done = spent.left > 0 and ready(spent.left)
    finally:
        spent.spend(time.monotonic() - start)
    if not done:
        raise spent.spent(" waiting for another's statement")


@contextmanager
def recorded() -> Iterator[list[str]]:
    """The statements this thread runs meanwhile, and the work it starts on the side, as written (before their
    parameters are bound): what the SQL snapshot tests compare."""
    statements: list[str] = []
    previous, _local.recording = getattr(_local, "recording", None), statements
    try:
        yield statements
    finally:
        _local.recording = previous


def backend() -> str:
    """embedded, server, or cluster (a server whose tables are sharded over LOOM_CLICKHOUSE_CLUSTER)."""
    if target().startswith("chdb://"):
        return "embedded"
    return "cluster" if settings.LOOM_CLICKHOUSE_CLUSTER else "server"


def database() -> str:
    name = settings.LOOM_CLICKHOUSE_DATABASE
    if not _IDENTIFIER.match(name):
        raise ClickHouseError(f"LOOM_CLICKHOUSE_DATABASE={name!r} is not a plain identifier")
    return name


# Statements outside a request (a mirror's load, the commands) may read a namespace's every vector.
_BACKGROUND_TIMEOUT = Timeout(connect=5, read=60)


def _connect(dsn: str, timeout: Timeout = None):
    try:
        if dsn.startswith("chdb://"):
            client = clickhouse_connect.get_client(dsn=dsn, tz_mode="aware", chdb_options=_EMBEDDED_ENGINE)
        else:
            client = clickhouse_connect.get_client(
                dsn=dsn,
                tz_mode="aware",  # every timestamp is UTC; hand them out as aware datetimes
                # One client serves many threads; a server session would serialise them.
                autogenerate_session_id=False,
                connect_timeout=math.ceil(timeout.connect_timeout),  # whole seconds here; `_run` sets the exact one
                send_receive_timeout=math.ceil(timeout.read_timeout),
                settings=_CLUSTER_SETTINGS if settings.LOOM_CLICKHOUSE_CLUSTER else {},
            )
    except ProgrammingError as exc:
        if (owner := _owner(dsn.removeprefix("chdb://"))) is not None:
            raise ClickHouseUnavailable(
                f"The ClickHouse data directory {dsn.removeprefix('chdb://')} is in use by another "
                f"process ({owner}; is `make run` serving it?). Stop that process first, or set "
                "LOOM_CLICKHOUSE_URL to share a ClickHouse server."
            ) from None
        raise ClickHouseUnavailable(f"Cannot open the embedded ClickHouse engine: {exc}") from None
    except (OperationalError, OSError) as exc:
        _outage.began(target(), outages.reason(exc))
        raise ClickHouseUnavailable(
            f"Cannot reach ClickHouse at {outages.redact(dsn)}: {outages.reason(exc)}"
        ) from None
    client.command(f"CREATE DATABASE IF NOT EXISTS {database()}")
    client.database = database()
    return client


# The embedded engine's startup settings. Its background merges run at the lowest CPU priority: they share the
# service's cores, and a write waits for its own statements, never for a merge, so a merge should take the cores only
# when the service leaves them idle. Grows to 400k rows ran 2,181-2,255 writes a second with it, 2,037-2,113 at the
# engine's default (docs/benchmarks.md). The engine applies it only with CAP_SYS_NICE (as root, or in a container
# granted it); without, merges run at the service's priority.
_EMBEDDED_ENGINE = {"os_threads_nice_value_merge_mutate": 19}


# On a cluster (retrieval/store/cluster.py): an insert returns once its shard holds it, so it is read back at once
# from any node; a statement over one namespace reads only its shard; a subquery over the namespace's rows reads
# the shard's local table (the namespace is wholly there) instead of the cluster again.
_CLUSTER_SETTINGS = {
    "distributed_foreground_insert": 1,
    "optimize_skip_unused_shards": 1,
    "distributed_product_mode": "local",
}


def _owner(path: str) -> str | None:
    """The process holding this data directory ("PID 6436, started 2026-12-01 05:02:37"), or None when none does:
    the engine flocks `status` in its directory while it runs, and writes its PID there (chdb's error text says
    neither)."""
    try:
        with open(os.path.join(path, "status"), "rb") as status:
            try:
                fcntl.flock(status, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                said = dict(line.partition(": ")[::2] for line in status.read().decode(errors="replace").splitlines())
                return f"PID {said.get('PID', '?')}, started {said.get('Started at', '?')}"
            fcntl.flock(status, fcntl.LOCK_UN)
            return None
    except OSError:
        return None


def client(timeout: Timeout = None):
    """This thread's client for the current target, opened on first use (within `timeout`, on a server)."""
    dsn = target()
    clients = getattr(_local, "clients", None)
    if clients is None:
        clients = _local.clients = {}
    if dsn not in clients:
        if dsn.startswith("chdb://"):
            # The engine is opened, and the database created, one thread at a time; its threads, started here, run
            # on every CPU (retrieval/cores.py).
            with _lock, cores.anywhere():
                clients[dsn] = _connect(dsn)
        else:  # each thread its own connections; a thread opening one waits for no other
            clients[dsn] = _connect(dsn, timeout or _BACKGROUND_TIMEOUT)
    return clients[dsn]


# The embedded engine renames the thread that runs an insert into a table with views ("Unknown"), and leaves it so:
# a request thread would show under the engine's name in top, py-spy and /proc. Its name is put back (Linux: prctl).
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None
_PR_SET_NAME, _PR_GET_NAME = 15, 16


@contextmanager
def _named_as_before(embedded: bool) -> Iterator[None]:
    if not embedded or _libc is None:
        yield
        return
    name = ctypes.create_string_buffer(16)
    _libc.prctl(_PR_GET_NAME, name)
    try:
        yield
    finally:
        _libc.prctl(_PR_SET_NAME, name)


def _run(method: str, *args, **kwargs):
    if getattr(_local, "in_line", False):
        raise _Statement
    if (recording := getattr(_local, "recording", None)) is not None:
        recording.append(f"INSERT INTO {args[0]}" if method == "raw_insert" else args[0])
    if kwargs.get("parameters"):
        args, kwargs = native.bind_vectors(args, kwargs)
    spent, start = getattr(_local, "budget", None), time.monotonic()
    timeout = _BACKGROUND_TIMEOUT if spent is None else spent.timeout(method)
    if spent is not None:  # the engine stops the statement at the limit too
        kwargs = {
            **kwargs,
            "settings": {**kwargs.get("settings", {}), "max_execution_time": math.ceil(timeout.read_timeout)},
        }
    try:
        engine, embedded = client(timeout), backend() == "embedded"  # (opening this thread's client is the request's)
        if hasattr(engine, "timeout"):  # an HTTP client (this thread's own): its read waits no longer than the limit
            engine.timeout = timeout
        # The embedded engine runs in this process, on its own threads too.
        with cores.anywhere(embedded), _named_as_before(embedded):
            answer = getattr(engine, method)(*args, **kwargs)
    except OperationalError as exc:
        _outage.began(target(), outages.reason(exc))
        raise ClickHouseUnavailable(f"ClickHouse is unavailable: {outages.reason(exc)}") from None
    except DatabaseError as exc:
        if spent is not None and "TIMEOUT_EXCEEDED" in str(exc):
            _outage.began(target(), "no answer within the request's limit")
            raise ClickHouseUnavailable(f"ClickHouse did not answer within the request's limit: {exc}") from None
        log.error("ClickHouse refused a statement: %s", exc)
        raise ClickHouseError(str(exc)) from None
    finally:
        took = time.monotonic() - start
        metrics.statement_seconds.labels(_KINDS.get(method, "query")).observe(took)
        if spent is not None:
            spent.spend(took)
    _outage.ended(target())
    return answer


class OutageLogged(logging.Filter):
    """Drops a record that only repeats an outage already logged as it began (`outages.Outages`): a failed read that fails
    open, a cache miss, a skipped check, each citing the ClickHouseUnavailable it met. Without it an outage logged
    a line per read of every request it met (docs/benchmarks.md). On the console handler (settings)."""

    def filter(self, record: logging.LogRecord) -> bool:
        cited = record.args if isinstance(record.args, tuple) else ()
        raised = record.exc_info[1] if record.exc_info else None
        return not any(isinstance(said, ClickHouseUnavailable) for said in (*cited, raised))


_KINDS = {"raw_insert": "insert", "command": "command"}
_outage = outages.Outages()


def query(sql: str, params: dict[str, Any] | None = None, every_org: bool = False) -> list[dict[str, Any]]:
    """Rows as dicts, column name to value. `every_org`: the statement reads across orgs on purpose (tenants.py)."""
    result = _run("query", _named(sql, every_org), parameters=params or {})
    names = result.column_names
    return [dict(zip(names, row)) for row in result.result_rows]


def query_rows(sql: str, params: dict[str, Any] | None = None, every_org: bool = False) -> list[tuple]:
    return list(_run("query", _named(sql, every_org), parameters=params or {}).result_rows)


def query_decoded(sql: str, params: dict[str, Any], every_org: bool = False) -> list[tuple]:
    """Rows decoded a column at a time from Arrow (vectors as numpy arrays): for bulk reads of vectors."""
    return native.decode_arrow(_run("raw_query", _named(sql, every_org), parameters=params, fmt="ArrowStream"))


def query_value(sql: str, params: dict[str, Any] | None = None, every_org: bool = False):
    rows = query_rows(sql, params, every_org)
    return rows[0][0] if rows else None


def _named(sql: str, every_org: bool) -> str:
    """The statement, once it names the org of every org-keyed table it reads (checked under the tests)."""
    if tenants.checked:
        tenants.check(sql, every_org)
    return sql


def insert(table: str, rows: Iterable[dict[str, Any]]) -> int:
    """Insert dict rows as one Native block, the columns the first row's keys. Returns the row count.

    Vectors may be numpy arrays: they are written as they lie in memory (retrieval/store/native.py).
    """
    return insert_encoded(encoded(table, list(rows)))


def inserting(steps: Iterable[tuple[str, list[dict[str, Any]]] | Callable[[], Any]]) -> Future:
    """Run each step, in this order, beside the caller's work: a (table, rows) is encoded here and inserted by a
    worker thread; a callable (a statement of its own) runs in the worker as it is. Encoding is Python, which in the
    worker would contend with the caller's for the GIL; the engine's insert releases it. Each table is encoded while
    the worker stores the step before it: a write's vectors are in the engine while its `memories` rows are still
    being encoded. A step whose encoding raises is not run, nor any after it; the caller gets the error once the
    steps before it are done."""
    queue: SimpleQueue = SimpleQueue()

    def each() -> list:
        done = []
        while (step := queue.get()) is not _NO_MORE:
            done.append(step() if callable(step) else insert_encoded(step))
        return done

    worker = beside(each)
    try:
        for step in steps:
            queue.put(step if callable(step) else encoded(*step))
    except BaseException:
        queue.put(_NO_MORE)
        wait([worker])  # nothing of the caller's left running once it fails
        raise
    queue.put(_NO_MORE)
    return worker


_NO_MORE = object()


def encoded(table: str, rows: list[dict[str, Any]]) -> tuple[str, list[str], bytes, int] | None:
    """`insert` in two steps: the rows encoded (Python, on the caller's thread), then `insert_encoded` (the engine,
    wherever the caller likes: `inserting`, `beside`)."""
    if not rows:
        return None
    columns = list(rows[0].keys())
    types = column_types(table)
    block = native.encode_block([(name, types[name], [row[name] for row in rows]) for name in columns])
    return table, columns, block, len(rows)


# Settings of every insert into a table. term_input: its view fans a row out into a memory_terms row per term, and
# ReplacingMergeTree's pass over an insert block for rows of one key finds none there (a version's terms are
# distinct, and every read is FINAL anyway): a write batch's postings insert took 52.8 ms with the pass here, 36.7
# without it (`docs/benchmarks.md`). Its two views (postings, corpus statistics) make their parts side by side, not
# one after the other: a batch's insert took 45.2 ms so, against 55.4 (median of 16 batches each, alternated).
_INSERT_SETTINGS = {"term_input": {"optimize_on_insert": 0, "parallel_view_processing": 1}}


def insert_encoded(rows: tuple[str, list[str], bytes, int] | None) -> int:
    if rows is None:
        return 0
    table, columns, block, count = rows
    _run("raw_insert", table, columns, block, fmt="Native", settings=_INSERT_SETTINGS.get(table, {}))
    return count


# Rows no request waits on (an op's usage row, retrieval/providers/costs.py): one thread inserts them in batches,
# off the request path, where a statement per op cost ~17 ms on the embedded engine and ~10 ms on a server. A row
# waits at most LATER_SECONDS (or until `flush_later`, or the process's exit); it is lost only if the process dies
# meanwhile.
LATER_SECONDS = 0.5
_later: dict[tuple[str, str], list[dict[str, Any]]] = {}
_later_lock = threading.Lock()
_flushing = threading.Lock()  # one flush at a time: a caller's waits for the flusher's rows under way to be in
_flusher: threading.Thread | None = None


def insert_later(table: str, rows: list[dict[str, Any]]) -> None:
    """Insert these rows soon, in a batch with others, from a thread of their own. A value may be a function of no
    arguments: it is called then, so work only the stored row needs (a parked page's JSON) is done there too."""
    global _flusher
    with _later_lock:
        _later.setdefault((target(), table), []).extend(rows)
        if _flusher is None or not _flusher.is_alive():  # started lazily: after a server has forked its workers
            _flusher = threading.Thread(target=_flush_forever, name="loom-insert-later", daemon=True)
            _flusher.start()


def flush_later() -> None:
    """Insert every row waiting now (before reading them back, and at exit): when it returns, they are in."""
    with _flushing:
        _flush()


def _flush() -> None:
    global _later
    with _later_lock:
        waiting, _later = _later, {}
    for (dsn, table), rows in waiting.items():
        # A block carries one set of columns: rows naming different ones (a column left to its default) go apart.
        blocks: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for row in rows:
            row = {name: value() if callable(value) else value for name, value in row.items()}
            blocks.setdefault(tuple(row), []).append(row)
        for block in blocks.values():
            try:
                with at(dsn):
                    insert(table, block)
            except (ClickHouseError, ClickHouseUnavailable) as exc:
                log.warning("%d %s rows lost: %s", len(block), table, exc)


def _flush_forever() -> None:
    while True:
        time.sleep(LATER_SECONDS)
        flush_later()


atexit.register(flush_later)

_types: dict[tuple[str, str], dict[str, str]] = {}


def column_types(table: str) -> dict[str, str]:
    """A table's column types, read once per engine (schema.apply forgets them). A table the engine does not hold
    now is refused, not remembered as having no columns: every later insert into it would fail once it is back."""
    key = (target(), table)
    if key not in _types:
        types = dict(
            query_rows(
                "SELECT name, type FROM system.columns WHERE database = {db:String} AND table = {table:String}",
                {"db": database(), "table": table},
            )
        )
        if not types:
            raise ClickHouseError(f"the engine holds no table {database()}.{table}")
        _types[key] = types
    return _types[key]


def forget_column_types() -> None:
    _types.clear()


def command(sql: str, params: dict[str, Any] | None = None, every_org: bool = False):
    return _run("command", _named(sql, every_org), parameters=params or {})


def ping() -> str:
    """The engine's version; raises ClickHouseUnavailable when it cannot answer."""
    return str(query_value("SELECT version()"))
