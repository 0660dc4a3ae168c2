"""The write path: memory.set, and embed_pending's vectors for rows stored with stubs.

A batch is judged whole before anything is stored (pinned rows, sensitivity,
embeddings), then written table by table with `memories` last, so a row that
`memory.get` serves has its vectors, chunks and terms in place (its chunks,
terms and entity graph are stored while the write gates judge it). Deletes
and the conflict resolver's decisions are retire.py's.
"""

import logging
from concurrent import futures
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime

from django.conf import settings

from retrieval import index
from retrieval.errors import Refusal
from retrieval.ingest import sensitivity, write_gates
from retrieval.ingest.embedding import embed_rows, passages, turn_contexts
from retrieval.ingest.identities import Locked, active_rows
from retrieval.ingest.side_rows import IDENTITY, Graph, derived_facts, retire_side_rows, term_input
from retrieval.language import names, text
from retrieval.providers import customer, llm
from retrieval.providers.embedders import get_embedder
from retrieval.store import clickhouse, extraction_queue
from retrieval.store.rows import ACTIVE, SUPERSEDED, next_version
from tenancy.access import Scope

log = logging.getLogger(__name__)

MEMORY_TYPES = ("fact", "preference", "event", "observation", "instruction", "turn", "reflection")
SOURCE_CLASSES = ("asserted", "observed", "imported", "external", "extracted")


@dataclass
class MemoryInput:
    memory_key: str
    value: str
    agent: str = "default"
    session_id: str = ""
    memory_type: str = "fact"
    tags: list[str] = field(default_factory=list)
    category: str = ""
    entities: list[str] = field(default_factory=list)
    triples: list[list[str]] = field(default_factory=list)  # [subject, relation, object] each
    confidence: float = 1.0
    source_class: str = "asserted"
    sensitivity: str = "low"
    pinned: bool = False
    valid_at: datetime | None = None
    user_id: str = ""
    run_id: str = ""
    source_keys: list[str] = field(default_factory=list)  # an extracted fact: the turns it came from

    @property
    def identity(self) -> tuple[str, str, str]:
        return (self.memory_key, self.agent, self.session_id)

    @property
    def texts(self) -> tuple[str, ...]:
        """Every text the row carries, each judged for secrets: a hit shows them and a prompt may quote them."""
        named = (self.memory_key, self.agent, self.session_id, self.category, self.user_id, self.run_id)
        return (self.value, *named, *self.tags, *self.entities, *(part for triple in self.triples for part in triple))


INPUT_FIELDS = tuple(f.name for f in fields(MemoryInput))
# The fields whose change makes a new version; a write equal on all of them is a no-op.
_CONTENT = tuple(f.name for f in fields(MemoryInput) if f.name not in ("memory_key", "agent", "session_id"))


@dataclass
class WriteResult:
    memory_key: str
    agent: str
    session_id: str
    outcome: str  # created | updated | unchanged
    version: int
    superseded_version: int | None
    sensitivity: str
    sensitivity_reason: str | None
    embedding_model: str
    chunks: int
    embedding_pending: bool = False  # stored with a stub: the org's model calls are off (embed_pending fills it)
    duplicate_of: str | None = None  # the write gate's verdict: this value duplicates that live row
    conflict_verdict: dict | None = None  # ...or conflicts with it
    # "judged"; "skipped": too many pairs to scan, or the scan failed; "off": LOOM_WRITE_GATES; "exempt": nothing to
    # judge (a conversation turn, a value never embedded or stored with a stub, an unchanged value)
    write_gates: str = "exempt"


# --- memory.set ---------------------------------------------------------------


def set_memories(
    scope: Scope, items: list[MemoryInput], overwrite_pinned: bool = False, based_on: dict | None = None
) -> list[WriteResult]:
    """Store a batch, all or nothing. Raises Refusal before storing anything.

    `based_on` (identity -> the version the caller read): an item whose row moved on since, or is gone, is left
    out, and so is its result (a background job's rewrite never undoes the write it raced with)."""
    user = customer.one_user(item.user_id for item in items)  # a batch for one user names it to the gateway
    with (
        Locked(scope, [item.memory_key for item in items]),
        customer.for_org(scope.org, scope.namespace, scope.subject, "memory.set", user),
    ):
        # The keys' current rows are read while the values are checked for secrets (the engine works meanwhile).
        reading = clickhouse.beside(active_rows, scope, {item.memory_key for item in items})
        levels = [sensitivity.effective(item.sensitivity, *item.texts) for item in items]
        for item, (level, _) in zip(items, levels):  # stemmed meanwhile too: the term rows and the mirror reuse it
            if level != "high":
                text.value_terms(item.value)
        current = reading.result()
        if based_on is not None:
            held = [current.get(item.identity, {}).get("version") == based_on.get(item.identity) for item in items]
            items, levels = [i for i, h in zip(items, held) if h], [lv for lv, h in zip(levels, held) if h]
        unnamed = [not item.entities for item in items]
        items = [_with_entities(item, lv, current.get(item.identity)) for item, (lv, _) in zip(items, levels)]
        now = datetime.now(UTC)
        plans = []
        for index, (item, (level, reason)) in enumerate(zip(items, levels)):
            previous = current.get(item.identity)
            changes = previous is None or not _unchanged(previous, item, level)
            if previous and previous["pinned"] and changes and not overwrite_pinned:
                where = f"items[{index}].memory_key" if len(items) > 1 else "memory_key"
                raise Refusal(
                    "MEMORY_PINNED",
                    f"memory_key {item.memory_key!r} is pinned and was not overwritten; "
                    "send overwrite_pinned=true to replace it, or delete it first",
                    where,
                )
            plans.append(_plan(scope, item, previous, changes, level, reason, now))
        if not _embed(scope, plans):
            for plan in plans:
                plan.result.embedding_pending = bool(plan.row and plan.row["embedding_model"])
        # The new versions' chunks, terms and entity graph hold nothing the gates decide: they are inserted while the
        # gates judge and `_store` stores the vectors (the engine works beside the Python; the rows are made here,
        # not beside, where their Python would wait for the gates' turns at the GIL). No reader serves them before
        # `memories` holds their version, which is stored last, once they are in.
        chunks, side_rows = _new_side_rows(plans)
        stored = clickhouse.inserting(side_rows)
        try:
            write_gates.judge(scope, plans)
            _store(scope, plans, chunks, stored)
        finally:
            futures.wait([stored])  # nothing of the batch left running once its locks are released
        stored.result()
    _queue_model_work(scope, plans, unnamed)
    return [plan.result for plan in plans]


JOB_ROWS = 50  # the rows of one queued job of model work (the entity extractor reads them in one call)


def _queue_model_work(scope: Scope, plans: list["_Plan"], unnamed: list[bool]) -> None:
    """The model's work a batch leaves, queued (the extraction queue; never on the fake LLM, which would only say
    what the deterministic gates said): new versions written without entities, for the entity extractor
    (retrieval/ingest/entity_extractor.py); those that got a conflict verdict, for the conflict resolver
    (retrieval/ingest/conflict_resolver.py). Never a high row."""
    rows = [
        (plan.row, u) for plan, u in zip(plans, unnamed) if plan.row is not None and plan.row["sensitivity"] != "high"
    ]
    if not rows or llm.get_llm().provider == "fake":
        return
    if settings.LOOM_ENTITY_EXTRACT_ENABLED:
        _queue(scope, [row for row, u in rows if u], extraction_queue.ENTITIES)
    if resolver_enabled():
        _queue(scope, [row for row, _ in rows if row["conflict_verdict"]], extraction_queue.CONFLICTS)


def resolver_enabled() -> bool:
    """LOOM_MEMORY_CONFLICT_RESOLVER_ENABLED, and neither the LLM nor the resolver's model the fake."""
    return (
        settings.LOOM_MEMORY_CONFLICT_RESOLVER_ENABLED
        and llm.get_llm().provider != "fake"
        and llm.for_model(settings.LOOM_CONFLICT_RESOLVER_MODEL).provider != "fake"
    )


def _queue(scope: Scope, rows: list[dict], task: str) -> None:
    """A job per author and session, of at most JOB_ROWS rows, naming their versions."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["agent"], row["session_id"]), []).append(row)
    for (agent, session_id), group in groups.items():
        for at in range(0, len(group), JOB_ROWS):
            part = group[at : at + JOB_ROWS]
            keys, versions = [row["memory_key"] for row in part], [row["version"] for row in part]
            extraction_queue.enqueue(scope, session_id, keys, agent, "", "", task=task, versions=versions)


def _with_entities(item: MemoryInput, level: str, previous: dict | None) -> MemoryInput:
    """The item as stored: one written without entities (LOOM_ENTITY_EXTRACT_ENABLED) gets the names its value is
    about, before it is compared with the stored row: those its row holds for the same value (the entity
    extractor's, or the ones it was written with), else the names read from the value. Never a high row's: its
    value is read by key alone."""
    if item.entities or level == "high" or not settings.LOOM_ENTITY_EXTRACT_ENABLED:
        return item
    if previous is not None and previous["value"] == item.value and previous["entities"]:
        return replace(item, entities=list(previous["entities"]), triples=item.triples or list(previous["triples"]))
    return replace(item, entities=names.in_value(item.value))


@dataclass
class _Plan:
    item: MemoryInput
    previous: dict | None
    result: WriteResult
    row: dict | None = None  # None: unchanged, nothing to write
    head_vector: list | None = None
    key_vector: list | None = None
    chunks: list[tuple[int, str]] = field(default_factory=list)
    chunk_vectors: list = field(default_factory=list)


def _plan(scope, item, previous, changes, level, reason, now) -> _Plan:
    if not changes:
        result = WriteResult(
            *item.identity,
            "unchanged",
            previous["version"],
            None,
            previous["sensitivity"],
            reason,
            previous["embedding_model"],
            previous["chunk_count"],
        )
        return _Plan(item, previous, result)
    embedded = level != "high"
    model = get_embedder().model_name if embedded else ""
    chunks = passages(item.value) if embedded else []
    version = next_version()
    row = {name: getattr(item, name) for name in _CONTENT}
    row.update(
        org=scope.org,
        namespace=scope.namespace,
        memory_key=item.memory_key,
        agent=item.agent,
        session_id=item.session_id,
        version=version,
        revision=version,
        status=ACTIVE,
        superseded_by=0,
        sensitivity=level,
        actor=scope.subject,
        embedding_model=model,
        chunk_count=len(chunks),
        duplicate_of="",  # the write gates' verdicts (_judge)
        conflict_verdict="",
        created_at=previous["created_at"] if previous else now,
        updated_at=now,
    )
    result = WriteResult(
        *item.identity,
        "updated" if previous else "created",
        version,
        previous["version"] if previous else None,
        level,
        reason,
        model,
        len(chunks),
    )
    return _Plan(item, previous, result, row=row, chunks=chunks)


def _unchanged(previous: dict, item: MemoryInput, level: str) -> bool:
    """Equal on every content field, sensitivity compared at its effective level."""
    return previous["sensitivity"] == level and all(
        _same(previous[name], getattr(item, name)) for name in _CONTENT if name != "sensitivity"
    )


def _same(stored, given) -> bool:
    if isinstance(stored, float) or isinstance(given, float):
        return abs(float(stored) - float(given)) < 1e-6
    if isinstance(stored, datetime) and isinstance(given, datetime):
        return abs((stored - given).total_seconds()) < 0.001
    return list(stored) == list(given) if isinstance(given, list) else stored == given


def _embed(scope: Scope, plans: list[_Plan]) -> bool:
    """Embed every new row's head and key, and its chunks, in one call; False when the org's calls are refused."""
    todo = [plan for plan in plans if plan.row and plan.row["embedding_model"]]
    if not todo:
        return True
    contexts = turn_contexts(scope.org, scope.namespace, [plan.row for plan in todo])
    try:
        vectors = embed_rows(
            get_embedder(),
            [
                (plan.row["value"], plan.row["memory_key"], plan.chunks, context)
                for plan, context in zip(todo, contexts)
            ],
        )
    except customer.SWITCHED as exc:  # stored with stubs; embed_pending embeds them later
        log.info("storing %d rows with embedding stubs: %s", len(todo), exc)
        return False
    for plan, (head, key, chunk_vectors) in zip(todo, vectors):
        plan.head_vector, plan.key_vector, plan.chunk_vectors = head, key, chunk_vectors
    return True


def _new_side_rows(plans: list[_Plan]) -> tuple[list[dict], list[tuple[str, list[dict]]]]:
    """The new versions' chunks (the mirror is told of them), and the rows of every side table: chunks, terms,
    the entity graph and the amounts their values state (never a high row's)."""
    chunks, terms, facts, graph = [], [], [], Graph()
    for plan in plans:
        row = plan.row
        if row and row["embedding_model"]:
            chunks += _chunk_rows(plan, row["revision"], row["updated_at"])
            terms += term_input(row, ACTIVE, +1, row["revision"])
            facts += derived_facts(row)
            graph.add(row, row["updated_at"])
    return chunks, [("memory_chunks", chunks), ("term_input", terms), ("derived_facts", facts), *graph.tables()]


def _store(scope: Scope, plans: list[_Plan], chunks: list[dict], side: futures.Future) -> None:
    """The rest of the batch, while its side rows (`_new_side_rows`) are still being stored: vectors, the superseded
    versions' retirement, and `memories` last, once the side rows are in. The vector mirror holds the new rows
    (hidden) while the engine stores them, and shows them once `memories` holds them."""
    changed = [plan for plan in plans if plan.row]
    if not changed:
        return
    now = changed[0].row["updated_at"]
    revision = next_version()
    retired = [plan.previous for plan in changed if plan.previous]
    embeddings = [_embedding_row(plan, plan.row["revision"], now) for plan in changed if plan.row["embedding_model"]]
    superseded = [
        {**plan.previous, "status": SUPERSEDED, "superseded_by": plan.row["version"], "revision": revision}
        for plan in changed
        if plan.previous
    ]
    rows = [plan.row for plan in changed]
    storing = clickhouse.inserting(
        [
            ("memory_embeddings", embeddings),
            ("vector_cells", index.stored_cell_rows(scope.org, scope.namespace, embeddings)),
            ("term_input", [t for row in retired for t in term_input(row, SUPERSEDED, -1, revision)]),
            lambda: retire_side_rows(scope, retired, SUPERSEDED, revision),
            side.result,  # raises, and stores no `memories` row, when the side rows failed
            ("memories", rows + superseded),
        ]
    )
    try:
        show = index.staged(scope.org, scope.namespace, embeddings, rows)
    finally:
        futures.wait([storing])
    storing.result()
    index.retired(scope.org, scope.namespace, retired)
    show(chunks)


def _embedding_row(plan: _Plan, revision: int, now: datetime) -> dict:
    """The row's memory_embeddings row: a stub (embedding_dim 0) when it has no vectors yet."""
    row = plan.row
    stub = plan.head_vector is None
    return {
        **{k: row[k] for k in IDENTITY},
        "embedding_model": row["embedding_model"],
        "revision": revision,
        "status": ACTIVE,
        **{k: row[k] for k in ("memory_type", "tags", "category", "entities", "user_id", "run_id")},
        "source_class": row["source_class"],
        "confidence": row["confidence"],
        "sensitivity": row["sensitivity"],
        "dated_at": row["valid_at"] or row["created_at"],
        "duplicate_of": row["duplicate_of"],
        "embedding_dim": 0 if stub else len(plan.head_vector),
        "value_vector": [] if stub else plan.head_vector,
        "key_vector": [] if stub else plan.key_vector,
        "created_at": now,
    }


def _chunk_rows(plan: _Plan, revision: int, now: datetime) -> list[dict]:
    row = plan.row
    ident = {k: row[k] for k in IDENTITY}
    return [
        {
            **ident,
            "embedding_model": row["embedding_model"],
            "chunk_index": index,
            "revision": revision,
            "status": ACTIVE,
            "start_char": start,
            "text": passage,
            "embedding_dim": len(vector),
            "vector": vector,
            "created_at": now,
        }
        for index, ((start, passage), vector) in enumerate(zip(plan.chunks, plan.chunk_vectors))
    ]


def embed_stubs(scope: Scope, stubs: list[tuple[str, str, str, int]]) -> int:
    """Embed these (key, agent, session, version) rows, stored with stubs while the org's model calls were off.

    Under the identities' locks, only versions still live are embedded: a row
    superseded meanwhile keeps its status. The new vector rows carry a newer
    revision, so they replace the stubs. Returns how many rows were embedded.
    """
    with Locked(scope, [stub[0] for stub in stubs]):
        live = active_rows(scope, {stub[0] for stub in stubs}).values()
        wanted = set(stubs)
        rows = [row for row in live if (row["memory_key"], row["agent"], row["session_id"], row["version"]) in wanted]
        plans = [_Plan(None, None, None, row=row, chunks=passages(row["value"])) for row in rows]
        user = customer.one_user(row["user_id"] for row in rows)
        with customer.for_org(scope.org, scope.namespace, scope.subject, "embed_pending", user):
            if not rows or not _embed(scope, plans):
                return 0
        now, revision = datetime.now(UTC), next_version()
        embeddings = [_embedding_row(plan, revision, now) for plan in plans]
        chunks = [chunk for plan in plans for chunk in _chunk_rows(plan, revision, now)]
        clickhouse.insert("memory_chunks", chunks)
        clickhouse.insert("memory_embeddings", embeddings)
        clickhouse.insert("vector_cells", index.stored_cell_rows(scope.org, scope.namespace, embeddings))
        index.added(scope.org, scope.namespace, embeddings, chunks, rows)
    return len(rows)
