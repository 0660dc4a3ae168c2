"""The embedding worker: rows stored with stubs (their org's model calls were off) get their vectors.

`python manage.py embed_pending` runs one pass (or `--loop`). Work is chosen
in the query: an org whose model calls are still off is left out, so its rows
spend nothing and do not crowd the batch; the newest stubs go first.
"""

import logging
from collections import defaultdict

from retrieval import clickhouse, write
from retrieval.providers import customer
from retrieval.providers.embedders import get_embedder
from tenancy.access import Scope
from tenancy.roles import Role

log = logging.getLogger(__name__)

ACTOR = "process:embed_pending"


def pending(batch_size: int, org: str | None = None) -> list[dict]:
    """Live rows of the served model whose vectors are still stubs, newest first."""
    return clickhouse.query(
        """
        SELECT org, namespace, memory_key, agent, session_id, version FROM memory_embeddings
        WHERE embedding_model = {model:String} AND embedding_dim = 0 AND status = 'active'
          AND org NOT IN {off:Array(String)} AND ({org:Nullable(String)} IS NULL OR org = {org:Nullable(String)})
          AND (org, namespace, memory_key, agent, session_id, version) NOT IN (
              SELECT org, namespace, memory_key, agent, session_id, version FROM memory_embeddings
              WHERE embedding_model = {model:String} AND (embedding_dim > 0 OR status != 'active'))
        ORDER BY version DESC
        LIMIT {batch:UInt32}
        """,
        {"model": get_embedder().model_name, "off": sorted(customer.switched_off_orgs()), "org": org,
         "batch": batch_size},
    )  # fmt: skip


def run_once(batch_size: int = 100, org: str | None = None) -> int:
    """One pass: embed up to `batch_size` stubs, one call per (org, namespace); how many were embedded.

    A refusal (customer.HOLDS: the switch, a copy of it too old to trust, the gateway refusing or deferring an
    identity) holds that work: its stubs stay for a later pass and the other orgs' go on.
    """
    try:
        rows = pending(batch_size, org)
    except customer.SwitchUnread as exc:
        log.warning("embed_pending holds: %s", exc)
        return 0
    groups = defaultdict(list)
    for row in rows:
        groups[(row["org"], row["namespace"])].append(
            (row["memory_key"], row["agent"], row["session_id"], row["version"])
        )
    done = 0
    for (org_name, namespace), stubs in sorted(groups.items()):
        scope = Scope(org=org_name, namespace=namespace, role=Role.ADMIN, subject=ACTOR)
        try:
            done += write.embed_stubs(scope, stubs)
        except customer.HOLDS as exc:
            log.warning("embed_pending holds %d stubs of %s/%s: %s", len(stubs), org_name, namespace, exc)
    return done
