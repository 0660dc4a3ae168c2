"""The write gates: whether a value being stored duplicates, or conflicts with, a live row of another key.

Deterministic, no model call. A value whose cosine to a live row of another key in
its write scope (agent, user, session, run, memory type: a canonical row must be
visible wherever its duplicate is) passes the duplicate gate, and that holds the
same numbers, versions, dates, identifiers and names, is stored as a duplicate of
it; past the conflict gate, it carries a conflict verdict. The nearest stored row
comes from the namespace's vector mirror when it is loaded (exactly, or past
knobs.GATES_EXACT_ROWS rows from the cells nearest each value: retrieval/index/cells.py; a
namespace whose full mirror would not fit LOOM_VECTOR_MIRROR_MAX_BYTES keeps a compact one, its rows' vectors as
two int8 codes), else from one ClickHouse scan joined to the batch by write scope, or, a batch too large to scan, from
the namespace's cells stored in ClickHouse (retrieval/index/stored_cells.py; while they are first trained, waiting up
to LOOM_WRITE_GATES_LOAD_WAIT_S for the mirror's load, else for them); the batch's own earlier rows count too.
`write.set_memories` calls `judge` on its plans before anything is stored.
"""

import json
import logging
import time

import numpy as np
from django.conf import settings

from retrieval import index, knobs, metrics
from retrieval.gates import thresholds
from retrieval.language import names
from retrieval.store import clickhouse, reads
from retrieval.store.eligibility import Eligibility
from tenancy.access import Scope

log = logging.getLogger(__name__)


def judge(scope: Scope, plans: list) -> None:
    """The write gates: a value whose cosine to a live row of another key (in its write scope) passes the duplicate
    gate is stored as a duplicate of it (hidden from search unless include_duplicates); past the conflict gate, it
    carries a conflict verdict. Deterministic, no model call."""
    # A conversation turn records what was said: an answer that echoes its question is no duplicate of it.
    todo = [plan for plan in plans if plan.row and plan.head_vector is not None and plan.row["memory_type"] != "turn"]
    if not settings.LOOM_WRITE_GATES:
        _said(todo, "off")
        return
    if not todo:
        return
    model = todo[0].row["embedding_model"]
    vectors = np.asarray([plan.head_vector for plan in todo], dtype=np.float32)
    keys = [plan.row["memory_key"] for plan in todo]
    scopes = [index.scope_of(plan.row) for plan in todo]
    nearest = _nearest_stored(scope, model, vectors, keys, scopes)
    if nearest is None:  # said, not hidden
        _said(todo, "skipped")
        return
    gates = thresholds.resolve(scope.org, scope.namespace, model)
    _said(todo, "judged")
    # The batch's own earlier rows count too: of two copies written together, the first is the canonical.
    sims = _earlier_in_batch(vectors, keys, scopes)
    best = sims.argmax(axis=1).tolist()
    canonical = np.ones(len(todo), dtype=bool)  # a duplicate is never a canonical
    # A duplicate candidate's value (its markers are compared) comes with it from the mirror, else from ClickHouse.
    stored_values = _values(
        scope,
        [(hit[0], scopes[i]) for i, hit in enumerate(nearest) if hit and hit[1] >= gates.duplicate and hit[2] is None],
    )
    for i, (plan, hit) in enumerate(zip(todo, nearest)):
        j = best[i]
        if not canonical[j]:  # rare: look again among the canonical rows
            j = int(np.where(canonical, sims[i], -np.inf).argmax())
        if canonical[j] and sims[i, j] > -np.inf and (hit is None or sims[i, j] > hit[1]):
            hit = (keys[j], float(sims[i, j]), todo[j].row["value"])
        if hit is None:
            continue
        key, similarity, value = hit
        value = value if value is not None else stored_values.get((key, scopes[i]))
        # A near copy that differs in a number, version, date, identifier or name is another fact.
        if (
            similarity >= gates.duplicate
            and value is not None
            and names.markers(value) == names.markers(plan.row["value"])
        ):
            plan.row["duplicate_of"] = plan.result.duplicate_of = key
            canonical[i] = False
        elif similarity >= gates.conflict:
            verdict = {
                "memory_key": key,
                "similarity": round(similarity, 4),
                "threshold": gates.conflict,
                "tier": gates.tier,
            }
            plan.row["conflict_verdict"] = json.dumps(verdict)
            plan.result.conflict_verdict = verdict


def _said(plans: list, outcome: str) -> None:
    """Each plan's `write_gates`, and the count an operator's alert reads (`loom_write_gates_total`)."""
    for plan in plans:
        plan.result.write_gates = outcome
    metrics.write_gates.labels(outcome).inc(len(plans))


def _values(scope: Scope, wanted: list[tuple[str, tuple]]) -> dict[tuple[str, tuple], str]:
    """The live values of these (key, write scope) rows: what a duplicate candidate's markers are read from."""
    if not wanted:
        return {}
    rows = clickhouse.query(
        f"""
        SELECT memory_key, {", ".join(index.SCOPE)}, value FROM memories FINAL
        WHERE org = {{org:String}} AND namespace = {{namespace:String}} AND memory_key IN {{keys:Array(String)}}
          AND status = 'active'
        """,
        {"org": scope.org, "namespace": scope.namespace, "keys": sorted({key for key, _ in wanted})},
    )
    return {(row["memory_key"], index.scope_of(row)): row["value"] for row in rows}


def _earlier_in_batch(vectors: np.ndarray, keys: list[str], scopes: list[tuple]) -> np.ndarray:
    """Cosines of each row to the batch's earlier rows of another key in its write scope; -inf for every other."""
    codes = {scope: at for at, scope in enumerate(dict.fromkeys(scopes))}
    scope_codes = np.asarray([codes[scope] for scope in scopes])
    key_codes = np.unique(keys, return_inverse=True)[1]
    allowed = np.tri(len(keys), k=-1, dtype=bool)
    allowed &= (scope_codes[:, None] == scope_codes) & (key_codes[:, None] != key_codes)
    return np.where(allowed, vectors @ vectors.T, -np.inf)


def _nearest_stored(
    scope: Scope, model: str, vectors: np.ndarray, keys: list[str], scopes: list[tuple]
) -> list[tuple[str, float, str | None] | None] | None:
    """Each vector's nearest stored row (its key, the cosine, its value when the mirror holds it): from the vector
    mirror when it is loaded (a compact one past the byte budget), else a ClickHouse scan; a batch over
    LOOM_WRITE_GATES_MAX_PAIRS reads the namespace's stored cells instead (retrieval/index/stored_cells.py), or,
    while they are first trained, waits up to LOOM_WRITE_GATES_LOAD_WAIT_S for the mirror's load, else for them.
    None when none answers, or a read fails (the write stands, unjudged)."""
    index.sync(scope.org, [scope.namespace], model)
    mirror = index.get(scope.org, scope.namespace, model, compact=True) if index.enabled() else None
    if mirror is not None:
        if mirror.size >= knobs.STORED_CELLS_FROM > 0:
            index.keep_stored_cells(scope.org, scope.namespace, model)  # for the batches of a restart's load
        return mirror.nearest(vectors, keys, scopes)
    try:
        stored = reads.live_rows(scope.org, scope.namespace)
        if stored == 0:
            return [None] * len(keys)
        if len(keys) * stored <= settings.LOOM_WRITE_GATES_MAX_PAIRS:
            return _nearest_in_clickhouse(scope, model, vectors, keys, scopes)
        found = index.stored_nearest(scope.org, scope.namespace, model, vectors, keys, scopes, stored)
        if found is not None:
            return found
        # Too many pairs to scan, and no stored cells yet (their training has begun): the first write after a start
        # finds its namespace's mirror loading, in seconds for 100k rows, and it brings every write after it (a
        # search's first read begins the load too); with no mirror to come, the training is as quick at a few
        # thousand rows.
        waited = settings.LOOM_WRITE_GATES_LOAD_WAIT_S
        deadline = time.monotonic() + waited
        loading = waited and index.enabled()
        if loading and (mirror := index.awaited(scope.org, scope.namespace, model, waited)) is not None:
            index.sync(scope.org, [scope.namespace], model)  # (what other processes wrote as it loaded)
            return mirror.nearest(vectors, keys, scopes)
        if waited and index.stored_cells_awaited(scope.org, scope.namespace, model, deadline):
            found = index.stored_nearest(scope.org, scope.namespace, model, vectors, keys, scopes, stored)
            if found is not None:
                return found
        log.warning(
            "write gates skipped for %d rows of %s/%s: %d new x %d stored rows is over "
            "LOOM_WRITE_GATES_MAX_PAIRS (%d), its stored cells are still being trained, and no vector mirror holds "
            "the namespace here (neither the cells nor its load were in within LOOM_WRITE_GATES_LOAD_WAIT_S, %g s, "
            "or their pace said they would not be; LOOM_VECTOR_MIRROR is off; or even its compact mirror is past "
            "LOOM_VECTOR_MIRROR_MAX_BYTES)",
            len(keys),
            scope.org,
            scope.namespace,
            len(keys),
            stored,
            settings.LOOM_WRITE_GATES_MAX_PAIRS,
            waited,
        )
        return None
    except clickhouse.ClickHouseError as exc:
        log.warning("write gates skipped for %d rows of %s/%s: %s", len(keys), scope.org, scope.namespace, exc)
        return None
    except clickhouse.ClickHouseUnavailable:  # the write's own statements meet it next (the outage is logged)
        return None


def _nearest_in_clickhouse(
    scope: Scope, model: str, vectors: np.ndarray, keys: list[str], scopes: list[tuple]
) -> list[tuple[str, float, None] | None]:
    """For each vector, the most similar live row of another key in its write scope: one scan of the namespace's
    vectors, joined to the batch by scope (so only pairs within a scope are scored)."""
    live = Eligibility(["active"])
    batch_scope = ", ".join(f"arrayElement({{scope_{name}:Array(String)}}, i) AS b_{name}" for name in index.SCOPE)
    same_scope = " AND ".join(f"{name} = b_{name}" for name in index.SCOPE)
    rows = clickhouse.query(
        f"""
        SELECT i, argMax(memory_key, sim) AS key, max(sim) AS best FROM (
            SELECT i, memory_key, dotProduct(value_vector, q) AS sim
            FROM memory_embeddings
            INNER JOIN (
                SELECT i, arraySlice({{vectors:Array(Float32)}}, (i - 1) * {{dim:UInt32}} + 1, {{dim:UInt32}}) AS q,
                       arrayElement({{keys:Array(String)}}, i) AS b_key, {batch_scope}
                FROM (SELECT arrayJoin(range(1, {{n:UInt32}} + 1)) AS i)
            ) AS batch ON {same_scope}
            WHERE {live.where()} AND memory_key != b_key
        )
        GROUP BY i
        """,
        {
            "org": scope.org,
            "namespaces": [scope.namespace],
            "model": model,
            "statuses": live.statuses,
            "n": len(keys),
            "dim": vectors.shape[1],
            "vectors": vectors.ravel(),
            "keys": keys,
            **{f"scope_{name}": [s[at] for s in scopes] for at, name in enumerate(index.SCOPE)},
        },
    )
    found = {row["i"]: (row["key"], row["best"], None) for row in rows}
    return [found.get(i + 1) for i in range(len(keys))]
