"""Typed records: `record.set` and `.delete`, a type and named fields ("customer" acme: plan Enterprise, seats 40).

Facts an agent keeps as fields rather than prose. The records leg (retrieval/search/records.py) matches a
question's words against a record's type, key, field names and values; memory.ask answers from a record outright
when one names what the question asks (`source: "record"`), and from a recorded decision (a record of type
`precedent`: fields `decision`, and optionally `situation` and `rationale`) as `source: "precedent"`. Judged for
sensitivity like a value: a record whose text holds a secret is stored high and never served.
"""

from dataclasses import dataclass
from datetime import UTC, datetime

from retrieval.ingest import sensitivity
from retrieval.ingest.side_rows import retire_side
from retrieval.language import text
from retrieval.store import clickhouse, reads
from retrieval.store.rows import next_version
from tenancy.access import Scope

PRECEDENT = "precedent"


@dataclass(frozen=True)
class RecordInput:
    record_key: str
    record_type: str
    fields: dict[str, str]
    sensitivity: str = "low"


@dataclass
class RecordResult:
    record_key: str
    outcome: str  # created, updated or unchanged
    version: int
    sensitivity: str
    sensitivity_reason: str | None


def rendered(record_type: str, record_key: str, fields: dict[str, str]) -> str:
    """A record as one line: how it is judged for sensitivity, and how a hit or an answer shows it."""
    return f"{record_type} {record_key}: " + "; ".join(f"{name}: {value}" for name, value in fields.items())


def set_records(scope: Scope, items: list[RecordInput]) -> list[RecordResult]:
    stored = reads.live_side("memory_records", scope, [item.record_key for item in items])
    now, results, rows = datetime.now(UTC), [], []
    for item in items:
        line = rendered(item.record_type, item.record_key, item.fields)
        level, reason = sensitivity.effective(item.sensitivity, line)
        previous = stored.get(item.record_key)
        stated = (item.record_type, item.fields, level)
        if previous and stated == tuple(previous[name] for name in ("record_type", "fields", "sensitivity")):
            results.append(RecordResult(item.record_key, "unchanged", previous["version"], level, reason))
            continue
        row = {
            "org": scope.org,
            "namespace": scope.namespace,
            "record_key": item.record_key,
            "version": next_version(),
            "status": "active",
            "record_type": item.record_type,
            "fields": item.fields,
            "terms": sorted(set(text.value_terms(line)) | set(text.key_terms(item.record_key))),
            "sensitivity": level,
            "actor": scope.subject,
            "updated_at": now,
        }
        rows.append(row)
        results.append(
            RecordResult(item.record_key, "updated" if previous else "created", row["version"], level, reason)
        )
    clickhouse.insert("memory_records", rows)
    if rows:
        reads.now_holds("memory_records", scope.org, scope.namespace)
    return results


def delete_record(scope: Scope, record_key: str) -> int:
    return retire_side("memory_records", scope, record_key)
