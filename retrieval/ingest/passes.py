"""A worker pass over rows of many orgs: one (org, namespace) at a time, its provider calls metered to that org,
a refusal (the org's switch, the gateway) holding that namespace's work for a later pass while the others go on.
embed_pending, reembed and the passes over the texts beside the rows all work so."""

import logging
from collections.abc import Callable

from retrieval.providers import costs, customer
from tenancy.access import Scope
from tenancy.roles import Role

log = logging.getLogger(__name__)


def by_namespace(rows: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """Rows grouped by (org, namespace), in that order."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["org"], row["namespace"]), []).append(row)
    return dict(sorted(groups.items()))


def each_namespace(
    rows: list[dict], op: str, actor: str, work: Callable[[Scope, list[dict]], int], what: str = "rows"
) -> tuple[int, int]:
    """`work(scope, group)` (how many it did) for each namespace's rows, metered as `op`: (done, held)."""
    done = held = 0
    for (org, namespace), group in by_namespace(rows).items():
        scope = Scope(org=org, namespace=namespace, role=Role.ADMIN, subject=actor)
        try:
            with costs.accounted(org, namespace, op, actor), customer.job():
                done += work(scope, group)
        except customer.HOLDS as exc:  # held: left for a later pass, the other namespaces go on
            log.warning("%s holds %d %s of %s/%s: %s", op, len(group), what, org, namespace, exc)
            held += len(group)
    return done, held
