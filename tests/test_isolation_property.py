"""Isolation as a property (hypothesis): whatever org, role, namespace grant and read op a token is drawn with, and
whatever org and namespace it names, it never reads anything of another org or of a namespace outside its grant —
no key, no value, no count; asking is refused with the code that says why.

The world: two orgs, each with namespaces `ops` and `hr`, each holding rows on one shared subject ("lighthouse
maintenance"), so a search that leaked would find the others'. Each row's value names its owner ("owned by
<org>/<namespace>") and its key carries it too, so a leak shows in any answer's text.
"""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Tenant

NAMESPACES = ("ops", "hr")
ROLES = ("viewer", "writer", "admin")
READS = {
    "memory.search": {"query": "lighthouse maintenance schedule", "min_similarity": 0, "top_k": 50},
    "memory.search_trace": {"query": "lighthouse maintenance schedule"},
    "memory.list": {"limit": 100},
    "memory.get": {"memory_key": "row0"},
    "memory.bulk_get": {"memory_keys": ["row0", "row1", "row2"]},
    "memory.timeline": {"memory_key_prefix": "row"},
    "memory.related": {"memory_key": "row0"},
    "memory.ask": {"query": "when is the lighthouse maintained?"},
}


def owner(org: str, namespace: str) -> str:
    return f"owned by {org}/{namespace}"


@pytest.fixture
def world(db, call):
    orgs = [Tenant("iso"), Tenant("iso")]
    for tenant in orgs:
        writer = tenant.token("writer")
        for namespace in NAMESPACES:
            items = [
                {
                    "memory_key": f"row{i}",
                    "value": f"lighthouse maintenance schedule {i}, {owner(tenant.name, namespace)}",
                }
                for i in range(3)
            ]
            assert call("memory.set", {"namespace": namespace, "items": items}, writer).status == 201
    return orgs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    caller=st.integers(0, 1),
    role=st.sampled_from(ROLES),
    grant=st.sampled_from([(), ("ops",), ("hr",), ("ops", "hr")]),
    op=st.sampled_from(sorted(READS)),
    named_org=st.sampled_from(["own", "other", "unnamed"]),
    namespace=st.sampled_from(NAMESPACES),
    all_mine=st.booleans(),
)
def test_a_token_never_reads_outside_its_org_and_grant(
    backend, world, call, caller, role, grant, op, named_org, namespace, all_mine
):
    mine, other = world[caller], world[1 - caller]
    token = mine.token(role, namespaces=grant)
    body = {**READS[op], "namespace": namespace}
    if named_org != "unnamed":
        body["org"] = (mine if named_org == "own" else other).name
    if all_mine and op == "memory.search":
        body["namespace_scope"] = "all_mine"
    reply = call(op, body, token)

    allowed = set(grant or NAMESPACES)
    if named_org == "other":
        assert (reply.status, reply.error) == (403, "ORG_MISMATCH"), (op, reply.json)
    elif namespace not in allowed:
        assert (reply.status, reply.error) == (403, "NAMESPACE_FORBIDDEN"), (op, reply.json)
    else:
        assert reply.status in (200, 404), (op, reply.json)  # 404: a key op may find none
    said = json.dumps(reply.json)
    for tenant in world:
        for name in NAMESPACES:
            if tenant is not mine or name not in allowed:
                assert owner(tenant.name, name) not in said, (op, body)
    if reply.status == 200 and op == "memory.search":
        assert reply.json["candidates_total"] <= 3 * len(allowed)  # counts nothing it may not read
