"""A worker pass over rows of many orgs: one call per namespace and writer, for the writer; a held identity skipped.

embed_pending, reembed and the passes over the texts beside the rows all work so:

- **Writer first.** A job's call is for the principal that wrote the row (its `actor`, with its `user_id`), as the
  write's own call was: the gateway sees that identity, not the job's process. A pipeline's own actor
  (`process:...`) is no principal.
- **One identity per call.** A namespace's rows are grouped by the identity they render to the gateway
  (`customer.rendered`), so one call never carries two writers' texts; without identity headers a namespace's rows
  share one call, as before.
- **Skip, not stall.** A refusal (the org's switch, the gateway refusing or deferring an identity) holds that
  group's work for a later pass and the pass goes on to the next writer's. While the gateway's refusal lasts, a
  job's call for that identity is refused before anything is sent (`customer.job`), and a request's success ends
  it. Callers read `READ_AHEAD` times their batch and the pass does at most the batch, so a held writer's rows do
  not fill it.
"""

import logging
from collections.abc import Callable

from retrieval.providers import costs, customer
from retrieval.store import clickhouse
from retrieval.store.rows import IDENTITY_TYPE, row_id
from tenancy.access import Scope
from tenancy.roles import Role

log = logging.getLogger(__name__)

PIPELINE = "process:"  # a pipeline's own actor: no principal to speak for
READ_AHEAD = 4  # rows a caller reads per row of its batch, so a held writer's rows do not fill it


def writer(row: dict) -> str:
    """The principal a job's call on this row is for: whoever wrote it, unless a pipeline did."""
    actor = row.get("actor", "")
    return "" if actor.startswith(PIPELINE) else actor


def writers(rows: list[dict]) -> Callable[[dict], str]:
    """Vector rows carry no actor: `writer` for rows of memory_embeddings, read from their memory versions (one
    statement)."""
    if not rows:
        return writer
    found = clickhouse.query_rows(
        f"""
        SELECT org, namespace, memory_key, agent, session_id, version, any(actor) FROM memories
        WHERE org IN {{orgs:Array(String)}} AND memory_key IN {{keys:Array(String)}}
          AND (namespace, memory_key, agent, session_id, version) IN {{ids:{IDENTITY_TYPE}}}
        GROUP BY org, namespace, memory_key, agent, session_id, version
        """,
        {
            "orgs": sorted({row["org"] for row in rows}),
            "keys": sorted({row["memory_key"] for row in rows}),
            "ids": sorted({row_id(row).as_tuple() for row in rows}),
        },
    )
    actors = {(org, *rest[:-1]): rest[-1] for org, *rest in found}
    return lambda row: writer({"actor": actors.get((row["org"], *row_id(row)), "")})


def each_writer(
    rows: list[dict],
    op: str,
    actor: str,
    work: Callable[[Scope, list[dict]], int],
    what: str = "rows",
    limit: int | None = None,
    writer_of: Callable[[dict], str] = writer,
) -> tuple[int, int]:
    """`work(scope, group)` (how many it did) for each group of rows one identity wrote in one namespace, newest
    group first, its calls metered as `op` by `actor` (the pass) and attributed to the writer (`scope.subject`,
    each row's `user_id`; `writer_of` reads the principal off a row): (done, held). Stops once `limit` rows are
    done."""
    done = held = 0
    for attribution, group in _groups(rows, op, writer_of):
        if limit is not None and done >= limit:
            break
        org, namespace, subject = attribution.org, attribution.namespace, attribution.subject
        scope = Scope(org=org, namespace=namespace, role=Role.ADMIN, subject=subject)
        try:
            with costs.accounted(org, namespace, op, actor), customer.job():
                done += work(scope, group)
        except customer.HOLDS as exc:  # held: left for a later pass, the other writers' work goes on
            log.warning("%s holds %d %s of %s/%s for %s: %s", op, len(group), what, org, namespace, subject, exc)
            held += len(group)
    return done, held


def _groups(rows: list[dict], op: str, writer_of) -> list[tuple[customer.Attribution, list[dict]]]:
    """Rows by the identity their writer renders in their namespace, the group holding the newest row first."""
    groups: dict[tuple, tuple[customer.Attribution, list[dict]]] = {}
    for row in sorted(rows, key=lambda row: -row.get("version", 0)):
        attribution = customer.Attribution(row["org"], row["namespace"], writer_of(row), op, row.get("user_id", ""))
        key = (attribution.org, attribution.namespace, customer.rendered(attribution))
        groups.setdefault(key, (attribution, []))[1].append(row)
    return list(groups.values())
