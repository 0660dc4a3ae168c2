"""Entity summaries: `entity_summary.set` and `.delete`, a paragraph on what an entity is, embedded with its name.

A row names its entities as written (`entities` on memory.set: "Office:BER"); a question names them as people
say them ("the Berlin office"). An entity's summary, embedded as "<name>: <summary>" (`entity_vectors`, one per
embedding model), lets the search find the entity a question means in other words, and through it the rows that
mention it (retrieval/search/service.py, the entity leg). Judged for sensitivity like a value (high: stored,
never embedded); with the org's model calls off the summary waits unembedded until embed_pending embeds it.
"""

from dataclasses import dataclass
from datetime import UTC, datetime

from retrieval.ingest import passes, sensitivity
from retrieval.ingest.embedding import embed_texts
from retrieval.ingest.side_rows import retire_side
from retrieval.providers.embedders import get_embedder
from retrieval.store import clickhouse, reads
from retrieval.store.rows import next_version
from tenancy.access import Scope


@dataclass(frozen=True)
class EntityInput:
    entity: str
    summary: str
    sensitivity: str = "low"


@dataclass
class EntityResult:
    entity: str  # lowercased: how rows' mentions and searches name it
    outcome: str  # created, updated or unchanged
    version: int
    sensitivity: str
    sensitivity_reason: str | None
    embedding_pending: bool = False


def set_summaries(scope: Scope, items: list[EntityInput]) -> list[EntityResult]:
    stored = reads.live_side("entity_summaries", scope, [item.entity.lower() for item in items])
    now, results, rows = datetime.now(UTC), [], []
    for item in items:
        key = item.entity.lower()
        level, reason = sensitivity.effective(item.sensitivity, item.summary, item.entity)
        previous = stored.get(key)
        stated = (item.entity, item.summary, level)
        if previous and stated == tuple(previous[name] for name in ("name", "summary", "sensitivity")):
            results.append(EntityResult(key, "unchanged", previous["version"], level, reason))
            continue
        row = {
            "org": scope.org,
            "namespace": scope.namespace,
            "entity": key,
            "version": next_version(),
            "status": "active",
            "name": item.entity,
            "summary": item.summary,
            "sensitivity": level,
            "actor": scope.subject,
            "updated_at": now,
        }
        rows.append(row)
        results.append(EntityResult(key, "updated" if previous else "created", row["version"], level, reason))
    clickhouse.insert("entity_summaries", rows)
    embedded = _embed(scope, [row for row in rows if row["sensitivity"] != "high"])
    for result in results:
        result.embedding_pending = result.outcome != "unchanged" and result.sensitivity != "high" and not embedded
    if rows:
        reads.now_holds("entity_summaries", scope.org, scope.namespace)
    return results


def _embed(scope: Scope, rows: list[dict]) -> bool:
    """Store each summary's vector for the served model; False when the org's model calls are refused."""
    vectors = embed_texts(scope, "entity_summary.set", [f"{row['name']}: {row['summary']}" for row in rows], set())
    if vectors is None:
        return False
    model = get_embedder().model_name
    clickhouse.insert(
        "entity_vectors",
        [
            {
                "org": row["org"],
                "namespace": row["namespace"],
                "embedding_model": model,
                "entity": row["entity"],
                "version": row["version"],
                "vector": vector,
            }
            for row, vector in zip(rows, vectors)
        ],
    )
    return True


def delete_summary(scope: Scope, entity: str) -> int:
    """Retire an entity's summary (its vectors go unread); how many were live (0 or 1)."""
    return retire_side("entity_summaries", scope, entity.lower())


def embed_missing(
    batch_size: int, skip_orgs: set[str], actor: str, org: str | None = None, other_models: bool = False
) -> int:
    """Embed live summaries stored with no vector (their org's calls were off: embed_pending), or, with
    `other_models`, with none of the served model (reembed, after a model change); one call per namespace and writer,
    for the writer (passes.py); how many were embedded."""
    rows = clickhouse.query(
        f"""
        SELECT * FROM entity_summaries FINAL
        WHERE status = 'active' AND sensitivity != 'high' AND org NOT IN {{off:Array(String)}}
          AND ({{org:Nullable(String)}} IS NULL OR org = {{org:Nullable(String)}})
          AND (org, namespace, entity, version) NOT IN (
              SELECT org, namespace, entity, version FROM entity_vectors {_SERVED_MODEL if other_models else _ANY_MODEL})
        ORDER BY version DESC
        LIMIT {{batch:UInt32}}
        """,
        {
            "model": get_embedder().model_name,
            "off": sorted(skip_orgs),
            "org": org,
            "batch": batch_size * passes.READ_AHEAD,
        },
        every_org=True,  # a sweep over every org, or the one named
    )
    op = "reembed" if other_models else "embed_pending"
    return passes.each_writer(
        rows, op, actor, lambda scope, stubs: len(stubs) if _embed(scope, stubs) else 0, "entity summaries", batch_size
    )[0]


_SERVED_MODEL = "WHERE embedding_model = {model:String}"
_ANY_MODEL = ""


def nearest(org: str, namespaces: list[str], model: str, vector, floor: float, limit: int) -> list[str]:
    """The entities (lowercased) whose summary is closest to the query, at least `floor`, best first."""
    return [row["entity"] for row in _nearest_versions(org, namespaces, model, vector, floor, limit)]


def nearest_summaries(org: str, namespaces: list[str], model: str, vector, floor: float, limit: int) -> list[dict]:
    """The live summaries closest to the query, at least `floor`, best first (one an entity: its namespace's whose
    vector is nearest), each with namespace, entity, version, name, summary, updated_at and `sim`."""
    nearest_rows = _nearest_versions(org, namespaces, model, vector, floor, limit)
    if not nearest_rows:
        return []
    stated = clickhouse.query(
        """
        SELECT namespace, entity, version, name, summary, updated_at FROM entity_summaries FINAL
        WHERE org = {org:String} AND (namespace, entity, version) IN {ids:Array(Tuple(String, String, UInt64))}
        """,
        {"org": org, "ids": [(row["namespace"], row["entity"], row["version"]) for row in nearest_rows]},
    )
    text = {(row["namespace"], row["entity"], row["version"]): row for row in stated}
    return [
        {**text[key], "sim": row["sim"]}
        for row in nearest_rows
        if (key := (row["namespace"], row["entity"], row["version"])) in text
    ]


def _nearest_versions(org: str, namespaces: list[str], model: str, vector, floor: float, limit: int) -> list[dict]:
    return clickhouse.query(
        """
        SELECT v.namespace AS namespace, v.entity AS entity, v.version AS version,
               dotProduct(v.vector, {q:Array(Float32)}) AS sim
        FROM entity_vectors AS v FINAL
        WHERE v.org = {org:String} AND v.namespace IN {namespaces:Array(String)} AND v.embedding_model = {model:String}
          AND (v.namespace, v.entity, v.version) IN (
              SELECT namespace, entity, version FROM entity_summaries FINAL
              WHERE org = {org:String} AND namespace IN {namespaces:Array(String)} AND status = 'active'
                AND sensitivity != 'high')
          AND sim >= {floor:Float64}
        ORDER BY sim DESC, v.entity, v.namespace
        LIMIT 1 BY v.entity
        LIMIT {limit:UInt32}
        """,
        {"org": org, "namespaces": namespaces, "model": model, "q": vector, "floor": floor, "limit": limit},
    )
