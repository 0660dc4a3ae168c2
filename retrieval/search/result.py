"""What a search hands back: the served window as hits, with their rows hydrated, or as one reader block."""

from dataclasses import dataclass, field

from retrieval import index
from retrieval.search.pool import Candidate
from retrieval.store import clickhouse, conflict_decisions
from retrieval.store.rows import IDENTITY_TYPE, row_id

EXCERPT_CHARS = 320
# The components a hit always carries, and those it carries when they are not zero;
# explain=true adds every other.
ALWAYS_COMPONENTS = ("similarity", "relevance", "rank_score")
MAIN_COMPONENTS = (
    "entity_boost",
    "prior",
    "reinforcement",
    "foreign",
    "demoted",
    "sensitivity_demotion",
    "exact_identifier",
)


@dataclass
class SearchResult:
    hits: list[dict]
    abstain: bool
    abstain_code: str | None
    abstain_reason: str | None
    retrieval_confidence: float
    retrieval_risk: str
    candidates_total: int
    namespaces_searched: list[str]
    namespaces_skipped: list[str] = field(default_factory=list)
    pending_extraction: int = 0
    degraded: list[str] = field(default_factory=list)
    next: str | None = None
    search_mode: str = ""
    mode_source: str = ""
    recipe: str | None = None
    retrieval_budget: str = ""
    thresholds: dict = field(default_factory=dict)
    query_entities: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    computed: list[dict] = field(default_factory=list)  # computed evidence (retrieval/search/evidence.py)
    records: list[dict] = field(default_factory=list)  # typed records matching the question (search/records.py)
    latency_ms: float = 0.0
    stage_ms: dict[str, float] = field(default_factory=dict)
    trace_id: str = ""
    retrieval_work: dict = field(default_factory=dict)  # query_spellings, query_spellings_skipped
    reader_block: str | None = None  # render="reader": the hits as one text block


# What a hit shows of its row. Read without FINAL (the merge costs more than the row):
# each identity's newest revision is kept here instead.
HIT_COLUMNS = (
    "namespace, memory_key, agent, session_id, version, revision, status, superseded_by, value, memory_type, "
    "tags, entities, source_class, valid_at, created_at, source_keys"
)


def hydrate(org: str, candidates: list[Candidate], model: str = "") -> None:
    """Attach each candidate's memory row (the exact version the legs scored, at its latest revision).

    Live rows the vector mirror holds come from it; the rest are read.
    """
    candidates = [c for c in candidates if c.row is None]  # the reranker may have read the pool's head already
    _digests(org, [c for c in candidates if c.source == "summary"])
    candidates = [c for c in candidates if c.source != "summary"]
    if not candidates:
        return
    by_id = index.rows(org, model, [c.id for c in candidates]) if model else {}
    for rid, row in _read(org, [c for c in candidates if c.id not in by_id]).items():
        if (held := by_id.get(rid)) is None or row["revision"] > held["revision"]:
            by_id[rid] = row
    for c in candidates:
        c.row = by_id.get(c.id)


def provenance(org: str, candidates: list[Candidate]) -> None:
    """Attach the turns each extracted fact came from (`sources`), so the window shows a fact and its turns once.
    Their rows are read for it (the mirror does not hold source keys), and so are hydrated already."""
    facts = [c for c in candidates if c.row is None and c.meta and c.meta.get("source_class") == "extracted"]
    rows = _read(org, facts)
    for c in facts:
        c.row = rows.get(c.id)
        c.sources = tuple(c.row["source_keys"]) if c.row else ()


def contradictions(org: str, served: list[Candidate]) -> None:
    """Mark each served version the conflict resolver found contradicted (`contradicts`: by which keys)."""
    found = conflict_decisions.contradicted(org, [c.id for c in served if c.source != "summary"])
    for c in served:
        c.contradicts = tuple(found.get(c.id, ()))


def _read(org: str, candidates: list[Candidate]) -> dict:
    """The stored rows of these candidates' versions, each at its newest revision."""
    if not candidates:
        return {}
    rows = clickhouse.query(
        f"""
        SELECT {HIT_COLUMNS} FROM memories
        WHERE org = {{org:String}} AND namespace IN {{namespaces:Array(String)}}
          AND memory_key IN {{keys:Array(String)}}
          AND (namespace, memory_key, agent, session_id, version) IN {{ids:{IDENTITY_TYPE}}}
        """,
        {
            "org": org,
            "namespaces": sorted({c.id.namespace for c in candidates}),
            "keys": sorted({c.id.memory_key for c in candidates}),
            "ids": [c.id.as_tuple() for c in candidates],
        },
    )
    found: dict = {}
    for row in rows:
        if (held := found.get(rid := row_id(row))) is None or row["revision"] > held["revision"]:
            found[rid] = row
    return found


def _digests(org: str, candidates: list[Candidate]) -> None:
    """A session digest's row, shaped as a memory row for its hit."""
    if not candidates:
        return
    rows = clickhouse.query(
        """
        SELECT namespace, session_id, version, summary AS value, session_date AS valid_at, created_at
        FROM session_summaries FINAL
        WHERE org = {org:String} AND (namespace, session_id, version) IN {ids:Array(Tuple(String, String, UInt64))}
          AND status = 'active'
        """,
        {"org": org, "ids": [(c.id.namespace, c.id.session_id, c.id.version) for c in candidates]},
    )
    found = {(row["namespace"], row["session_id"], row["version"]): row for row in rows}
    for c in candidates:
        row = found.get((c.id.namespace, c.id.session_id, c.id.version))
        if row is not None:
            c.row = {**row, **_DIGEST_ROW}


# What a digest's hit shows where a memory row's shows its own columns.
_DIGEST_ROW = {
    "status": "active",
    "superseded_by": 0,
    "source_class": "extracted",
    "memory_type": "summary",
    "tags": [],
    "entities": [],
}


def hits(
    served: list[Candidate], *, home: str, bodies: str, floor_mode: str, budget_tokens: int | None, explain: bool
) -> list[dict]:
    """The served window as the caller reads it, bodies cut to `bodies`, floor_mode and the token budget."""
    budget = budget_tokens * 4 if budget_tokens else None  # ~4 characters a token
    out = []
    for c in served:
        row = c.row
        matched = c.chunk["text"] if c.source == "chunk" and c.chunk else row["value"]
        body_mode = "none" if c.below_threshold and floor_mode == "ids_only" else bodies
        excerpt = "" if body_mode == "none" else excerpt_of(matched)
        body = {"full": row["value"], "source": row["value"], "unit": matched}.get(body_mode)
        truncated = False
        if budget is not None:
            excerpt, body, truncated, budget = _spend(excerpt, body, budget)
        components = dict(c.components)
        if c.id.namespace != home:
            components["foreign"] = 1.0
        if not explain:
            components = {k: v for k, v in components.items() if k in ALWAYS_COMPONENTS or (k in MAIN_COMPONENTS and v)}
        out.append(
            {
                "memory_key": c.id.memory_key,
                "namespace": c.id.namespace,
                "agent": c.id.agent,
                "session_id": c.id.session_id,
                "version": c.id.version,
                "content_excerpt": excerpt,
                "value": body,
                "body_truncated": truncated,
                "similarity": round(c.similarity, 6),
                "rank_score": round(c.score, 6),
                "below_threshold": c.below_threshold,
                "source": c.source,
                "plane": "session" if c.source == "summary" else "memory",
                "parent_memory_key": c.id.memory_key if c.source == "chunk" else None,
                "source_keys": list(c.sources),
                "contradicts": list(c.contradicts),
                "chunk_index": c.chunk["chunk_index"] if c.source == "chunk" and c.chunk else None,
                "status": row["status"],
                "superseded_by": row["superseded_by"] or None,
                "source_class": row["source_class"],
                "verified": False,
                "memory_type": row["memory_type"],
                "tags": row["tags"],
                "entities": row["entities"],
                "valid_at": row["valid_at"],
                "created_at": row["created_at"],
                "score_components": {k: round(v, 6) if isinstance(v, float) else v for k, v in components.items()},
            }
        )
    return out


def excerpt_of(text: str) -> str:
    """A hit's `content_excerpt` of this text: at most EXCERPT_CHARS, cut with `…`."""
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1].rstrip() + "…"


def shown(hit: dict) -> str:
    """What a hit shows of its text: the body `bodies` asked for, else its excerpt."""
    return hit["value"] if hit["value"] is not None else hit["content_excerpt"]


def _spend(excerpt: str, body: str | None, budget: int):
    """Charge this hit's body against the remaining budget, cutting what does not fit."""
    text = body if body is not None else excerpt
    if len(text) <= budget:
        return excerpt, body, False, budget - len(text)
    cut = text[:budget]
    return (cut if body is None else excerpt[:budget]), (cut if body is not None else None), True, 0


def reader_block(result: SearchResult) -> str:
    """The window as a model reads evidence: numbered hits, each with its key, date and text (the served body,
    else the excerpt); a weak hit is marked; an abstained search says so and why, so nothing reads as an answer."""
    if result.abstain:
        return f"No memory answers this ({result.abstain_code}): {result.abstain_reason}"
    blocks = []
    for number, hit in enumerate(result.hits, 1):
        dated = hit["valid_at"] or hit["created_at"]
        weak = " · below the similarity floor" if hit["below_threshold"] else ""
        text = shown(hit)
        blocks.append(f"[{number}] {hit['memory_key']} · {dated:%Y-%m-%d}{weak}\n{text}")
    return "\n\n".join(blocks)
