"""Session digests: the sessions whose digest is closest to the query, and digest descent.

"What happened in that session" is answered by a digest, not by any one turn; and a question about an event
often names it in words its session's digest shares while the turn that holds the answer does not. So the leg
reads the digests nearest the query (`session_summaries`, one per session); to a question about a session or a
conversation as a whole (`QueryShape.overview`: "summary", "what did we discuss", "meeting", ...) it serves them
as candidates (`source: "summary"`). Then it descends: each of the top digests pulls its session's rows nearest the query into
the pool, with `digest` (how far its digest stands above the digests not taken, up to the lead that counts as
separated) for the rank term `session_digest`.

A digest carries no type, tags, entities or dates: when the request filters on those, digests still guide the
descent (the rows they pull in are checked against every filter) but are not served themselves.
"""

from retrieval import knobs
from retrieval.ingest import digests
from retrieval.search.legs import TIE_BREAK, Context, Hit, vector
from retrieval.store import clickhouse
from retrieval.store.rows import RowId

# The filters a digest can answer to itself: it has a writer (agent), a user and a session.
_DIGEST_FILTERS = {"agent", "user_id", "session_id"}


def run(ctx: Context) -> list[Hit]:
    if "session_summaries" not in ctx.side_held:
        return []
    filters = set(ctx.eligible.params)
    # The digest's own columns, named after the request's filters (names from _DIGEST_FILTERS, values bound).
    narrowing = "".join(f" AND {name} = {{{name}:String}}" for name in sorted(filters & _DIGEST_FILTERS))
    nearest = clickhouse.query(
        f"""
        SELECT namespace, session_id, version, agent, sensitivity, coalesce(session_date, created_at) AS dated_at,
               dotProduct(vector, {{q:Array(Float32)}}) AS sim
        FROM session_summaries FINAL
        WHERE org = {{org:String}} AND namespace IN {{namespaces:Array(String)}} AND status = 'active'
          AND embedding_model = {{model:String}} AND embedding_dim > 0 AND sensitivity != 'high'
          {narrowing}
        ORDER BY sim DESC, namespace, session_id
        LIMIT {{nearest:UInt32}}
        """,
        ctx.params(q=ctx.vector, nearest=knobs.DIGEST_SESSIONS + 1),  # one more: the level the top ones stand above
    )
    nearest, below = nearest[: knobs.DIGEST_SESSIONS], nearest[knobs.DIGEST_SESSIONS :]
    if not nearest:
        return []
    # A digest answers a question about its session as a whole; any other question reads it only for descent.
    served = [_as_hit(digest) for digest in nearest] if ctx.shape.overview and not filters - _DIGEST_FILTERS else []
    # The level the top digests stand above: the first not taken; with no more digests than that, the weakest taken.
    level = below[0]["sim"] if below else (nearest[-1]["sim"] if len(nearest) > 1 else 0.0)
    return served + _descent(ctx, nearest, level)


def _as_hit(digest: dict) -> Hit:
    key = digests.KEY_PREFIX + digest["session_id"]
    rid = RowId(digest["namespace"], key, digest["agent"], digest["session_id"], digest["version"])
    meta = {
        "memory_type": "summary",
        "tags": [],
        "category": "",
        "entities": [],
        "source_class": "extracted",
        "confidence": 1.0,
        "sensitivity": digest["sensitivity"],
        "dated_at": digest["dated_at"],
    }
    return rid, {"summary_similarity": digest["sim"]}, None, meta


def _descent(ctx: Context, nearest: list[dict], level: float) -> list[Hit]:
    """Each top digest's session's rows nearest the query, with `digest`: how far its digest stands above the first
    digest not taken (`level`), over the lead that counts as fully separated (SEPARATION_SPAN, the verdict's). A
    digest no nearer than the rest lifts nothing: only a session the question singles out does."""
    share = {
        (d["namespace"], d["session_id"]): min(1.0, max(0.0, d["sim"] - level) / knobs.SEPARATION_SPAN) for d in nearest
    }
    rows = clickhouse.query(
        f"""
        SELECT {vector.select(ctx)}
        FROM memory_embeddings
        WHERE {ctx.eligible.where()} AND (namespace, session_id) IN {{sessions:Array(Tuple(String, String))}}
        ORDER BY greatest(value_sim, key_sim) DESC, {TIE_BREAK}
        LIMIT {{per_session:UInt32}} BY namespace, session_id
        """,
        ctx.params(q=ctx.vector, sessions=list(share), per_session=knobs.DIGEST_DESCENT_ROWS),
    )
    return [
        (rid, {**signals, "digest": share[(rid.namespace, rid.session_id)]}, chunk, meta)
        for rid, signals, chunk, meta in vector.hits(rows)
    ]
