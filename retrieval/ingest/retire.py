"""Row versions out of search: memory.delete, and the conflict resolver's decisions (supersede, verdicts)."""

from retrieval import index
from retrieval.ingest.identities import Locked, as_stored
from retrieval.ingest.side_rows import retire_side_rows, term_input
from retrieval.providers import llm
from retrieval.store import clickhouse
from retrieval.store.rows import ACTIVE, DELETED, SUPERSEDED, next_version
from tenancy.access import Scope


def delete_memory(scope: Scope, memory_key: str, agent: str | None = None, session_id: str | None = None) -> int:
    """Tombstone a key's rows (all writers and sessions unless narrowed), and drop the cached LLM answers that
    quoted it; returns the rows deleted."""
    with Locked(scope, [memory_key]):
        rows = clickhouse.query(
            """
            SELECT * FROM memories FINAL
            WHERE org = {org:String} AND namespace = {namespace:String}
              AND memory_key = {key:String} AND status != 'deleted'
              AND ({agent:Nullable(String)} IS NULL OR agent = {agent:Nullable(String)})
              AND ({session:Nullable(String)} IS NULL OR session_id = {session:Nullable(String)})
            """,
            {"org": scope.org, "namespace": scope.namespace, "key": memory_key, "agent": agent, "session": session_id},
        )
        retire(scope, rows, DELETED)
    return sum(1 for row in rows if row["status"] == ACTIVE)


def retire(scope: Scope, rows: list[dict], status: str, superseded_by: int = 0) -> None:
    """Rows out of search: their terms out of the statistics, their side rows and mirror rows retired, the cached
    answers that quoted them dropped. The caller holds their identities' locks."""
    revision = next_version()
    terms = [t for row in rows for t in term_input(row, status, -1 if row["status"] == ACTIVE else 0, revision)]
    clickhouse.insert("term_input", terms)
    retire_side_rows(scope, rows, status, revision)
    clickhouse.insert(
        "memories",
        [
            {**row, "status": status, "superseded_by": superseded_by or row["superseded_by"], "revision": revision}
            for row in rows
        ],
    )
    index.retired(scope.org, scope.namespace, rows)
    llm.forget_answers(scope.org, sorted({row["memory_key"] for row in rows}))


def supersede(scope: Scope, row: dict, by: dict) -> bool:
    """`row` (another key's) superseded by `by`, a revision of it, if both are still the versions judged."""
    with Locked(scope, [row["memory_key"], by["memory_key"]]):
        current = _current(scope, [row, by])
        if current is None:
            return False
        retire(scope, current[:1], SUPERSEDED, by["version"])
    return True


def set_verdicts(scope: Scope, verdicts: list[tuple[dict, str]]) -> bool:
    """Each row's `conflict_verdict` set (JSON, or "" to clear it) in a newer revision of its version, if every
    row is still the version judged."""
    with Locked(scope, [row["memory_key"] for row, _ in verdicts]):
        current = _current(scope, [row for row, _ in verdicts])
        if current is None:
            return False
        revision = next_version()
        rows = [{**row, "conflict_verdict": v, "revision": revision} for row, (_, v) in zip(current, verdicts)]
        clickhouse.insert("memories", rows)
    return True


def _current(scope: Scope, rows: list[dict]) -> list[dict] | None:
    """These rows as stored now, in order; None if any is no longer the active version."""
    current = as_stored(scope, rows)
    return None if None in current else current
