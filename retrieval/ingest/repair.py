"""Sweeping what a failed write left behind.

A write stores its side rows first (vectors, chunks, entity rows, terms) and its
`memories` row last: that row is the commit. A write that fails before it
(ClickHouse gone mid-batch, a request over its ClickHouse budget) answers 503 and
leaves side rows of a version no `memories` row names. No read serves them (a hit
is hydrated from `memories`), but they count in the namespace's BM25 statistics and
would stay forever. `sweep` retires them as a delete would: status 'deleted' at a
newer revision, their terms out of the statistics. Run it with `python manage.py
loom_repair`; one sweep at a time (two at once would take the same terms out twice).
"""

from datetime import UTC, datetime, timedelta

from django.conf import settings

from retrieval import index, metrics
from retrieval.ingest.side_rows import SIDE_TABLES, retire_side_rows
from retrieval.store import clickhouse
from retrieval.store.rows import DELETED, THESE_VERSIONS, next_version, versions
from tenancy.access import Scope
from tenancy.roles import Role


def grace() -> timedelta:
    """A write still in flight is younger than this (LOOM_REPAIR_GRACE_S): its side rows wait for their commit."""
    return timedelta(seconds=settings.LOOM_REPAIR_GRACE_S)


# The live versions of every table a write stores rows in before its `memories` row: the vectors, chunks and
# entity rows (`retire_side_rows`) and the terms. A write may fail after any of them, so each is asked.
_WRITTEN_VERSIONS = " UNION ALL ".join(
    f"""
    SELECT org, namespace, memory_key, agent, session_id, version FROM {table} FINAL
    WHERE status = 'active' AND version < {{before:UInt64}}
      AND ({{org:Nullable(String)}} IS NULL OR org = {{org:Nullable(String)}})
    """
    for table in (*SIDE_TABLES, "memory_terms")
)


def orphans(grace: timedelta, org: str | None = None) -> dict[tuple[str, str], list[tuple]]:
    """Versions begun more than `grace` ago (a version is its write's start, in ns) with a live row in any table a
    write touches and no `memories` row (of one org, or all), by (org, namespace)."""
    rows = clickhouse.query_rows(
        f"""
        SELECT DISTINCT org, namespace, memory_key, agent, session_id, version FROM ({_WRITTEN_VERSIONS})
        WHERE (org, namespace, memory_key, agent, session_id, version) NOT IN (
            SELECT org, namespace, memory_key, agent, session_id, version FROM memories
            WHERE {{org:Nullable(String)}} IS NULL OR org = {{org:Nullable(String)}}
        )
        ORDER BY org, namespace, memory_key, agent, session_id, version
        """,
        {"before": int((datetime.now(UTC) - grace).timestamp() * 1e9), "org": org},
        every_org=True,  # a sweep over every org, or the one named
    )
    found: dict[tuple[str, str], list[tuple]] = {}
    for org, namespace, *identity in rows:
        found.setdefault((org, namespace), []).append(tuple(identity))
    return found


def sweep(older_than: timedelta | None = None, only_org: str | None = None) -> int:
    """Retire every orphaned version's side rows (of one org, or all) older than `older_than` (else the grace);
    how many versions were swept."""
    swept = 0
    for (org, namespace), identities in orphans(older_than if older_than is not None else grace(), only_org).items():
        scope = Scope(org=org, namespace=namespace, role=Role.ADMIN, subject="process:repair")
        revision = next_version()
        # Their terms leave the statistics as they entered: one term_input row per field, rebuilt from the postings.
        clickhouse.command(
            f"""
            INSERT INTO term_input (org, namespace, field, memory_key, agent, session_id, version, revision, status,
                                    sign, terms, tfs, doc_len)
            SELECT org, namespace, field, memory_key, agent, session_id, version, {{revision:UInt64}},
                   {{status:String}}, -1, arrayStringConcat(groupArray(term), ' '), groupArray(toUInt32(tf)),
                   any(doc_len)
            FROM memory_terms FINAL
            WHERE org = {{org:String}} AND namespace = {{namespace:String}} AND status = 'active'
              AND {THESE_VERSIONS}
            GROUP BY org, namespace, field, memory_key, agent, session_id, version
            """,
            {"org": org, "namespace": namespace, "revision": revision, "status": DELETED, **versions(identities)},
        )
        rows = [dict(zip(("memory_key", "agent", "session_id", "version"), identity)) for identity in identities]
        retire_side_rows(scope, rows, DELETED, revision)
        index.retired(org, namespace, rows)  # a mirror loaded from the tables may hold them
        swept += len(identities)
    metrics.swept.inc(swept)
    return swept
