"""Numbered ClickHouse schema migrations.

Each module `NNNN_name.py` holds `STATEMENTS`, idempotent DDL applied in
order (on a cluster, in its cluster form: retrieval/store/cluster.py) and
recorded in `schema_migrations`. `python manage.py migrate` applies
them (see retrieval/apps.py); `apply()` is safe to run any number of times.
"""

import functools
import importlib
import pkgutil
import re
from datetime import UTC, datetime

from retrieval.store import clickhouse, cluster

_MODULE = re.compile(r"^(\d{4})_\w+$")
_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+)\s*\((.*?)\)\s*ENGINE", re.S)
_ORG_COLUMN = re.compile(r"^\s*org\s", re.M)

LEDGER = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    name String,
    applied_at DateTime64(3, 'UTC')
) ENGINE = ReplacingMergeTree
ORDER BY name
"""


def migrations() -> list[tuple[str, list[str]]]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        if _MODULE.match(info.name):
            module = importlib.import_module(f"{__name__}.{info.name}")
            found.append((info.name, module.STATEMENTS))
    return sorted(found)


@functools.cache
def org_keyed() -> frozenset[str]:
    """The tables the migrations create with an `org` column: those a statement reads only naming its org
    (retrieval/store/tenants.py). Read from the DDL, not the engine, so it holds before the schema is applied."""
    return frozenset(
        name
        for _, statements in migrations()
        for statement in statements
        for name, columns in _TABLE.findall(statement)
        if _ORG_COLUMN.search(columns)
    )


def applied() -> set[str]:
    cluster.run(LEDGER)
    return {row[0] for row in clickhouse.query_rows("SELECT name FROM schema_migrations FINAL")}


def apply() -> list[str]:
    """Apply the migrations not yet recorded; returns their names."""
    done = applied()
    ran = []
    for name, statements in migrations():
        if name in done:
            continue
        for statement in statements:
            cluster.run(statement)
        clickhouse.forget_column_types()
        clickhouse.insert("schema_migrations", [{"name": name, "applied_at": datetime.now(UTC)}])
        ran.append(name)
    return ran
