"""Which row versions a search may serve, as SQL over `memory_embeddings`.

Every filter of the request becomes a predicate on the vector table's own
columns, so the vector leg filters as it scans. The table is read without
FINAL (FINAL forces an ordered, merging read, the larger part of a
scan: docs/benchmarks.md):
a row version's status only ever moves forward (active -> superseded ->
deleted), so a version is served when it has a row in an allowed status and
none in another (`where()` says so). Legs over other tables read
the same set through `in_eligible()`, and every candidate is checked against
it again when its vectors are read (`legs.vector.rescore`), so no leg can
serve a row the filters exclude.
"""

from dataclasses import dataclass, field
from datetime import datetime

ACTIVE_ONLY = ("active",)


@dataclass
class Eligibility:
    statuses: list[str]
    predicates: list[str] = field(default_factory=list)
    params: dict = field(default_factory=dict)
    # Reflections are served only to an explicit memory_type filter. Too rare to narrow
    # the other legs for: the rescore drops them.
    hide_reflections: bool = True
    # Duplicates (the write gate's verdict) are served only with include_duplicates: the canonical takes the slot.
    hide_duplicates: bool = True

    @property
    def narrowed(self) -> bool:
        """True when a filter beyond tenant, model and status applies."""
        return bool(self.predicates)

    def where(self) -> str:
        """The full condition on memory_embeddings, read without FINAL (alias-free)."""
        tenant = "org = {org:String} AND namespace IN {namespaces:Array(String)} AND embedding_model = {model:String}"
        base = [
            tenant,
            "embedding_dim > 0",
            "status IN {statuses:Array(String)}",
            "(namespace, memory_key, agent, session_id, version) NOT IN (SELECT namespace, memory_key, agent, "
            "session_id, version "
            f"FROM memory_embeddings WHERE {tenant} AND status NOT IN {{statuses:Array(String)}})",
        ]
        if self.hide_reflections:
            base.append("memory_type != 'reflection'")
        if self.hide_duplicates:
            base.append("duplicate_of = ''")
        return " AND ".join(base + self.predicates)

    def in_eligible(self) -> str:
        """A condition for another table's rows: empty when nothing narrows the set."""
        if not self.narrowed:
            return ""
        return (
            "AND (namespace, memory_key, agent, session_id, version) IN "
            f"(SELECT namespace, memory_key, agent, session_id, version FROM memory_embeddings WHERE {self.where()})"
        )


def build(
    request, window: tuple[datetime, datetime] | None, user_id: str | None, session_id: str | None
) -> Eligibility:
    """The request's filters; `user_id` / `session_id` already carry the read scope in force."""
    statuses = list(ACTIVE_ONLY)
    if request.include_superseded:
        statuses.append("superseded")
    if request.include_proposed:
        statuses.append("proposed")
    found = Eligibility(statuses, hide_duplicates=not request.include_duplicates)

    def add(predicate: str, **params):
        found.predicates.append(predicate)
        found.params.update(params)

    if request.agent and request.agent != "*":
        add("agent = {agent:String}", agent=request.agent)
    if request.memory_type:
        add("memory_type = {memory_type:String}", memory_type=request.memory_type)
        found.hide_reflections = False
    if request.tags:
        add("hasAny(tags, {tags:Array(String)})", tags=request.tags)
    if request.category:
        add("category = {category:String}", category=request.category)
    if request.entity_filter:
        add(
            "hasAny(arrayMap(e -> lower(e), entities), {entity_filter:Array(String)})",
            entity_filter=[entity.lower() for entity in request.entity_filter],
        )
    for name, value in (("user_id", user_id), ("session_id", session_id), ("run_id", request.run_id)):
        if value is not None and value != "-":
            add(f"{name} = {{{name}:String}}", **{name: value})
    if request.exclude_keys:
        add("memory_key NOT IN {exclude_keys:Array(String)}", exclude_keys=request.exclude_keys)
    if window is not None:
        add(
            "dated_at BETWEEN {window_from:DateTime64(3, 'UTC')} AND {window_to:DateTime64(3, 'UTC')}",
            window_from=window[0],
            window_to=window[1],
        )
    if request.as_of is not None:
        if request.as_of_basis == "valid_time":
            add("dated_at <= {as_of:DateTime64(3, 'UTC')}", as_of=request.as_of)
        else:
            # Knowledge time: the versions that were live then, whatever happened to them since.
            found.statuses = ["active", "superseded", "deleted"]
            add(
                "(namespace, memory_key, agent, session_id, version) IN (SELECT namespace, memory_key, agent, "
                "session_id, version FROM memories FINAL WHERE org = {org:String} AND namespace IN "
                "{namespaces:Array(String)} AND version <= {as_of_ns:UInt64} AND (superseded_by = 0 OR "
                "superseded_by > {as_of_ns:UInt64}) AND (status != 'deleted' OR revision > {as_of_ns:UInt64}))",
                as_of_ns=int(request.as_of.timestamp() * 1_000_000_000),
            )
    return found
