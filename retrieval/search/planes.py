"""The planes a search serves beside memory's rows (search.query, the MCP tool loom_search): entity summaries and
typed records, ranked into the rows' window, each hit naming its plane.

- `memory`: a stored row (a fact, a turn, a chunk of one); `session`: a session's digest. memory.search serves these.
- `entity`: an entity's summary (entity_summary.set) whose vector is nearest the query, at least the similarity
  floor in force. It stands where its cosine falls among the rows' cosines (the same embedder, the same query).
- `record`: a typed record (record.set). One that answers the question outright (the record memory.ask would
  answer from with no model call) leads the window; others sharing at least half the question's words follow the
  rows: a share of words is no cosine, and placing them among the rows would pretend it were.

The window stays top_k long, and a page (`page=`) continues the rows alone. A search whose rows abstained serves
no other plane (memory does not know), unless a record answers the question outright: then memory does know, and
the verdict says so (abstain false, retrieval_risk low, a note), as memory.ask answers from that record.
"""

from retrieval import knobs
from retrieval.ingest import entities
from retrieval.search import records
from retrieval.search.legs import Context
from retrieval.search.result import excerpt_of

PLANES = ("memory", "session", "entity", "record")
ROWS = frozenset({"memory", "session"})  # memory.search's
RECORD_SHARE = 0.5  # of the question's words a record must hold to be served beside the rows


def served(
    ctx: Context, hits: list[dict], found_records: list[dict], floor: float, planes: frozenset, abstained: bool
) -> tuple[list[dict], bool]:
    """The window with the other planes asked for ranked in, cut to top_k; and whether a record answers the
    question outright (the rows' abstain then does not stand: memory holds the answer, as memory.ask finds it)."""
    ranked = [hit for hit in hits if hit["plane"] in planes]
    if "entity" in planes and "entity_summaries" in ctx.side_held and not abstained:
        for summary in entities.nearest_summaries(
            ctx.org, ctx.namespaces, ctx.model, ctx.vector, floor, knobs.ENTITY_NEAREST
        ):
            at = next((i for i, hit in enumerate(ranked) if hit["similarity"] < summary["sim"]), len(ranked))
            ranked.insert(at, _entity_hit(summary, ctx.plan.bodies))
    outright = None
    if "record" in planes and found_records:
        outright = records.answering(found_records, ctx.request.query, ctx.shape.terms)
        for record in found_records:
            if outright is not None and record is outright.record:
                ranked.insert(0, _record_hit(record, True, ctx.plan.bodies))
            elif record["matched"] >= RECORD_SHARE and not abstained:
                ranked.append(_record_hit(record, False, ctx.plan.bodies))
    return ranked[: ctx.plan.top_k], outright is not None


def _entity_hit(summary: dict, bodies: str) -> dict:
    text = f"{summary['name']}: {summary['summary']}"
    return _hit(
        bodies,
        plane="entity",
        key=f"entity:{summary['entity']}",
        namespace=summary["namespace"],
        version=summary["version"],
        text=text,
        similarity=summary["sim"],
        entities=[summary["entity"]],
        created_at=summary["updated_at"],
    )


def _record_hit(record: dict, outright: bool, bodies: str) -> dict:
    return _hit(
        bodies,
        plane="record",
        key=record["record_key"],
        namespace=record["namespace"],
        version=0,
        text=record["text"],
        similarity=0.0,  # (no vector: ranked by what it answers, `record_answers` and `record_match`)
        components={"record_match": record["matched"], "record_answers": float(outright)},
        memory_type=record["record_type"],
    )


def _hit(
    bodies: str,
    *,
    plane: str,
    key: str,
    namespace: str,
    version: int,
    text: str,
    similarity: float,
    components: dict | None = None,
    entities: tuple | list = (),
    memory_type: str | None = None,
    created_at=None,
) -> dict:
    """A hit of another plane, with every field a row's hit has (memory.search's shape), so a caller reads one."""
    return {
        "memory_key": key,
        "namespace": namespace,
        "agent": "",
        "session_id": "",
        "version": version,
        "content_excerpt": excerpt_of(text),
        "value": None if bodies in ("excerpt", "none") else text,  # (as a row's: the body `bodies` asks for)
        "body_truncated": False,
        "similarity": round(similarity, 6),
        "rank_score": round(similarity, 6),
        "below_threshold": False,
        "source": plane,
        "parent_memory_key": None,
        "source_keys": [],
        "contradicts": [],
        "chunk_index": None,
        "status": "active",
        "superseded_by": None,
        "source_class": "agent",
        "verified": False,
        "memory_type": memory_type or plane,
        "tags": [],
        "entities": list(entities),
        "valid_at": None,
        "created_at": created_at,
        "score_components": components or {"similarity": round(similarity, 6)},
        "plane": plane,
    }
