"""Re-embedding: give every row another model embedded a vector of the served model.

Search reads only the served model's vectors, so after LOOM_EMBEDDING_MODEL
changes, older rows are invisible until re-embedded. The model is in the
vector tables' sorting key, so old and new rows coexist (vectors of two models
are never compared) until `--delete-old` drops the old ones. Every other column
of a vector row is kept; values are read from `memories`. Work goes in
identity order, one org per call (an org whose model calls are off is left
for later), and each batch ends with a resume token.
"""

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass

from retrieval import index
from retrieval.ingest import digests, embedding, entities, passes
from retrieval.ingest.side_rows import IDENTITY
from retrieval.providers import customer
from retrieval.providers.embedders import get_embedder
from retrieval.store import clickhouse, cluster
from retrieval.store.rows import next_version
from tenancy.access import Scope

AFTER_TYPE = "Tuple(String, String, String, String, String, UInt64)"
START = ("", "", "", "", "", 0)  # before every identity (an org name is never empty)


@dataclass
class Progress:
    done: int
    skipped: int  # rows held: their org's model calls are off, or the gateway refused its identity
    resume: str


def _scope_sql(org: str | None, namespace: str | None) -> str:
    return (
        "AND ({org:Nullable(String)} IS NULL OR org = {org:Nullable(String)}) "
        "AND ({namespace:Nullable(String)} IS NULL OR namespace = {namespace:Nullable(String)})"
    )


# The rows a run works on: another model's, not yet re-embedded; with --key-only, the served model's own.
_PENDING = """embedding_model != {model:String}
    AND (org, namespace, memory_key, agent, session_id, version) NOT IN (
        SELECT org, namespace, memory_key, agent, session_id, version FROM memory_embeddings
        WHERE embedding_model = {model:String} AND embedding_dim > 0)"""
_SERVED = "embedding_model = {model:String} AND embedding_dim > 0"


def pending_counts(org: str | None = None, namespace: str | None = None) -> list[dict]:
    """Rows per (org, namespace, old model) with no vector of the served model yet (--dry-run)."""
    return clickhouse.query(
        f"""
        SELECT org, namespace, embedding_model, count() AS rows FROM memory_embeddings FINAL
        WHERE {_PENDING} {_scope_sql(org, namespace)}
        GROUP BY org, namespace, embedding_model ORDER BY org, namespace, embedding_model
        """,
        {"model": get_embedder().model_name, "org": org, "namespace": namespace},
        every_org=True,  # reembed runs over every org, or the one named
    )


def key_only_count(org: str | None = None, namespace: str | None = None) -> int:
    """Rows whose key vector --key-only would redo (--dry-run)."""
    return clickhouse.query_value(
        f"SELECT count() FROM memory_embeddings FINAL WHERE {_SERVED} {_scope_sql(org, namespace)}",
        {"model": get_embedder().model_name, "org": org, "namespace": namespace},
        every_org=True,
    )


def run(
    org: str | None = None,
    namespace: str | None = None,
    batch_size: int = 200,
    resume: str | None = None,
    key_only: bool = False,
) -> Iterator[Progress]:
    """Re-embed batch after batch, yielding progress (and the token to resume after it).

    `key_only`: redo only the key vectors of rows the served model embedded (after a change to how keys are
    embedded); values and chunks keep theirs.
    """
    served = get_embedder()
    after = tuple(json.loads(base64.urlsafe_b64decode(resume))) if resume else START
    done = skipped = 0
    redo = _rekey if key_only else _reembed
    while True:
        rows = clickhouse.query(
            f"""
            SELECT * FROM memory_embeddings FINAL
            WHERE {_SERVED if key_only else _PENDING} {_scope_sql(org, namespace)}
              AND (org, namespace, memory_key, agent, session_id, version) > {{after:{AFTER_TYPE}}}
            ORDER BY org, namespace, memory_key, agent, session_id, version
            LIMIT 1 BY org, namespace, memory_key, agent, session_id, version
            LIMIT {{batch:UInt32}}
            """,
            {"model": served.model_name, "org": org, "namespace": namespace, "batch": batch_size, "after": after},
            every_org=True,
        )
        if not rows:
            return
        off = customer.switched_off_orgs()
        skipped += sum(row["org"] in off for row in rows)
        todo = [row for row in rows if row["org"] not in off]
        worked, held = passes.each_writer(
            todo, "reembed", ACTOR, lambda scope, group: redo(served, scope, group), writer_of=passes.writers(todo)
        )
        done, skipped = done + worked, skipped + held
        after = tuple(rows[-1][name] for name in IDENTITY)
        yield Progress(done, skipped, base64.urlsafe_b64encode(json.dumps(after).encode()).decode())


ACTOR = "process:reembed"


def texts_beside(org: str | None = None, batch_size: int = 200) -> int:
    """Session digests and entity summaries another model embedded, embedded with the served one (a few per
    session or entity: no resume token); how many."""
    done, off = 0, customer.switched_off_orgs()
    while True:
        batch = digests.embed_missing(batch_size, off, ACTOR, org, other_models=True)
        batch += entities.embed_missing(batch_size, off, ACTOR, org, other_models=True)
        if not batch:
            return done
        done += batch


def _reembed(served, scope: Scope, rows: list[dict]) -> int:
    """New vector rows (and chunks) of the served model for these rows of one namespace and writer (the scope's
    subject, whom the call is for), every other column kept."""
    org, namespace = scope.org, scope.namespace
    memories = {
        tuple(m[name] for name in IDENTITY): m
        for m in clickhouse.query(
            """
            SELECT org, namespace, memory_key, agent, session_id, version, value, valid_at, created_at, triples
            FROM memories FINAL
            WHERE org = {org:String} AND namespace = {namespace:String} AND memory_key IN {keys:Array(String)}
            """,
            {"org": org, "namespace": namespace, "keys": sorted({row["memory_key"] for row in rows})},
        )
    }
    rows = [row for row in rows if tuple(row[name] for name in IDENTITY) in memories]
    if not rows:
        return 0
    values = [memories[tuple(row[name] for name in IDENTITY)]["value"] for row in rows]
    passages = [embedding.passages(value) for value in values]
    contexts = embedding.turn_contexts(org, namespace, [{**row, "value": value} for row, value in zip(rows, values)])
    with customer.for_org(org, namespace, scope.subject, "reembed", customer.one_user(row["user_id"] for row in rows)):
        vectors = embedding.embed_rows(
            served,
            [(v, row["memory_key"], cut, context) for v, row, cut, context in zip(values, rows, passages, contexts)],
        )
    fresh, chunks = [], []
    for row, cut, (head, key, chunk_vectors) in zip(rows, passages, vectors):
        fresh.append(
            {
                **row,
                "embedding_model": served.model_name,
                "embedding_dim": served.dim,
                "value_vector": head,
                "key_vector": key,
            }
        )
        chunks += [
            {
                **{name: row[name] for name in IDENTITY},
                "embedding_model": served.model_name,
                "chunk_index": index,
                "revision": row["revision"],
                "status": row["status"],
                "start_char": start,
                "text": passage,
                "embedding_dim": served.dim,
                "vector": chunk_vectors[index],
                "created_at": row["created_at"],
            }
            for index, (start, passage) in enumerate(cut)
        ]
    clickhouse.insert("memory_chunks", chunks)
    clickhouse.insert("memory_embeddings", fresh)
    active = [row for row in fresh if row["status"] == "active"]
    live = [memories[tuple(row[name] for name in IDENTITY)] for row in active]
    index.added(org, namespace, active, [c for c in chunks if c["status"] == "active"], live)
    return len(fresh)


def _rekey(served, scope: Scope, rows: list[dict]) -> int:
    """New key vectors for these rows of one namespace and writer; a newer revision replaces each vector row."""
    org, namespace = scope.org, scope.namespace
    with customer.for_org(org, namespace, scope.subject, "reembed", customer.one_user(row["user_id"] for row in rows)):
        keys = served.embed_many([row["memory_key"] for row in rows])
    revision = next_version()
    fresh = [{**row, "key_vector": key, "revision": revision} for row, key in zip(rows, keys)]
    clickhouse.insert("memory_embeddings", fresh)
    index.added(org, namespace, [row for row in fresh if row["status"] == "active"], [], [])
    return len(fresh)


def delete_old(org: str | None = None, namespace: str | None = None) -> int:
    """Drop vectors of other models; refused while some row still has no vector of the served model."""
    left = sum(row["rows"] for row in pending_counts(org, namespace))
    if left:
        raise ValueError(f"{left} rows still have no vector of the served model: run reembed first")
    model = get_embedder().model_name
    params = {"model": model, "org": org, "namespace": namespace}
    old = clickhouse.query_value(
        f"SELECT count() FROM memory_embeddings WHERE embedding_model != {{model:String}} {_scope_sql(org, namespace)}",
        params,
        every_org=True,
    )
    for table in ("memory_embeddings", "memory_chunks"):
        cluster.run(
            f"ALTER TABLE {table} DELETE WHERE embedding_model != {{model:String}} {_scope_sql(org, namespace)} "
            "SETTINGS mutations_sync = 1",
            params,
            every_org=True,
        )
    return old
