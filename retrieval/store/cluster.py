"""The schema on a ClickHouse cluster (LOOM_CLICKHOUSE_CLUSTER): each table sharded by tenant.

Every table of the migrations becomes two: `<name>_local`, where a shard keeps
its rows, and `<name>`, a Distributed table over the cluster's `<name>_local`s
that every statement of the service reads and writes as it does the single
table. A tenant table is sharded by sipHash64(org, namespace), so all of a
namespace's rows live on one shard: FINAL, a subquery over the same namespace
(distributed_product_mode = 'local') and a search's reads stay on that shard
(optimize_skip_unused_shards), and a shard's outage touches only its
namespaces. Tables without a namespace shard by what their ORDER BY starts with.

The DDL reaches the nodes one of two ways:
- `ON CLUSTER`, run once (the default): needs Keeper, and the local tables are
  Replicated*MergeTree at /clickhouse/tables/{shard}/{database}/{table} with
  replica '{replica}' (each node defines the `shard` and `replica` macros);
- LOOM_CLICKHOUSE_CLUSTER_NODES lists every node's URL: each statement is run
  on each node, and the local tables are plain (shards without replicas, no
  Keeper needed).

Why rewrite the migrations rather than write them twice: one schema, one
history of it; a cluster differs only in where tables live.
"""

import re
from contextlib import nullcontext

from django.conf import settings

from retrieval.store import clickhouse

_CREATE_TABLE = re.compile(
    r"^\s*CREATE TABLE (IF NOT EXISTS )?(\w+) (\(.*\))\s*ENGINE = (\w+)(?:\((.*?)\))?(\s.*)?$", re.S
)
_CREATE_VIEW = re.compile(r"^\s*CREATE MATERIALIZED VIEW (IF NOT EXISTS )?(\w+) TO (\w+) AS\s+(.*)$", re.S)
_ALTER = re.compile(r"^\s*ALTER TABLE (\w+)\s+(.*)$", re.S)
_DROP = re.compile(r"^\s*DROP (TABLE|VIEW) (IF EXISTS )?(\w+)( SYNC)?\s*$", re.S)
_TRUNCATE = re.compile(r"^\s*TRUNCATE TABLE (\w+)\s*$")
_ORDER_BY = re.compile(r"ORDER BY \(?([\w, ]+)\)?")
_FROM = re.compile(r"\bFROM (\w+)")
# Changes a Distributed table takes too (the columns it sends); the rest (data, indexes) are the local table's own.
_COLUMN_CHANGE = re.compile(r"^(ADD|MODIFY|DROP|RENAME|COMMENT) COLUMN")
_SETTINGS = re.compile(r"\s+SETTINGS .*$", re.S)  # a mutation's settings, which a Distributed table has no use for


def name() -> str:
    return settings.LOOM_CLICKHOUSE_CLUSTER


def local(table: str) -> str:
    return f"{table}_local"


def _on_cluster() -> str:
    """The ON CLUSTER clause: only when the DDL goes to the nodes through Keeper."""
    return "" if settings.LOOM_CLICKHOUSE_CLUSTER_NODES else f" ON CLUSTER {name()}"


def _replicated() -> bool:
    return not settings.LOOM_CLICKHOUSE_CLUSTER_NODES


def statements(ddl: str) -> list[str]:
    """One migration statement as the cluster runs it."""
    if not name():
        return [ddl]
    on = _on_cluster()
    if created := _CREATE_TABLE.match(ddl):
        exists, table, columns, engine, args, rest = created.groups()
        exists, rest = exists or "", rest or ""
        if _replicated() and engine.endswith("MergeTree"):
            path = f"'/clickhouse/tables/{{shard}}/{{database}}/{local(table)}', '{{replica}}'"
            engine, args = f"Replicated{engine}", f"{path}, {args}" if args else path
        engine = f"{engine}({args})" if args is not None else engine
        return [
            f"CREATE TABLE {exists}{local(table)}{on} {columns} ENGINE = {engine}{rest}",
            f"CREATE TABLE {exists}{table}{on} AS {local(table)} "
            f"ENGINE = Distributed({name()}, currentDatabase(), {local(table)}, {_sharding_key(columns, rest)})",
        ]
    if view := _CREATE_VIEW.match(ddl):
        # A view fires on inserts into the local table a shard receives, into that shard's local target.
        exists, view_name, target, select = view.groups()
        select = _FROM.sub(lambda found: f"FROM {local(found.group(1))}", select)
        return [f"CREATE MATERIALIZED VIEW {exists or ''}{view_name}{on} TO {local(target)} AS {select}"]
    if altered := _ALTER.match(ddl):
        table, change = altered.groups()
        both = [f"ALTER TABLE {local(table)}{on} {change}"]
        if _COLUMN_CHANGE.match(change):
            both.append(f"ALTER TABLE {table}{on} {_SETTINGS.sub('', change)}")
        return both
    if dropped := _DROP.match(ddl):
        kind, exists, table, sync = dropped.groups()
        exists, sync = exists or "", sync or ""
        if kind == "VIEW":
            return [f"DROP VIEW {exists}{table}{on}{sync}"]
        return [f"DROP TABLE {exists}{table}{on}{sync}", f"DROP TABLE {exists}{local(table)}{on}{sync}"]
    if truncated := _TRUNCATE.match(ddl):  # a Distributed table's TRUNCATE drops only its unsent inserts
        return [f"TRUNCATE TABLE {local(truncated.group(1))}{on}"]
    raise clickhouse.ClickHouseError(f"no cluster form for this DDL: {ddl.strip()[:80]}")


def _sharding_key(columns: str, rest: str) -> str:
    """sipHash64 of the ORDER BY's tenant prefix (org, namespace), else of its first column: rows that replace one
    another share an ORDER BY key, so they share a shard. A table without one (a Null table feeding views) shards
    by (org, namespace), as the tables its views fill."""
    if ordered := _ORDER_BY.search(rest):
        key = [column.strip() for column in ordered.group(1).split(",")]
    else:
        key = [column for column in ("org", "namespace") if re.search(rf"^\s*{column} ", columns, re.M)]
    tenant = [column for column in key[:2] if column in ("org", "namespace")]
    return f"sipHash64({', '.join(tenant or key[:1])})"


def run(ddl: str, params: dict | None = None, every_org: bool = False) -> None:
    """Run a DDL statement (a migration's, or a mutation such as ALTER TABLE ... DELETE) where it belongs: as it
    is without a cluster; else in its cluster form, once or on each listed node. `every_org`: a mutation of every
    org's rows, on purpose (retrieval/store/tenants.py)."""
    for statement in statements(ddl):
        for node in settings.LOOM_CLICKHOUSE_CLUSTER_NODES or [None]:
            with clickhouse.at(node) if node else nullcontext():
                clickhouse.command(statement, params, every_org)
