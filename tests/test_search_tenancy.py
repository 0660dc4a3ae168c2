"""memory.search respects orgs, namespace scopes, roles and the read_scope ceiling."""

import pytest

pytestmark = pytest.mark.cluster  # these ops run on a two-shard cluster too


def test_another_orgs_rows_are_never_searched(backend, alice, bob, call):
    call("memory.set", {"memory_key": "k", "value": "alice's quarterly revenue figures"}, alice.token("writer"))
    bobs = bob.token("admin")
    assert call("memory.search", {"query": "quarterly revenue", "org": alice.name}, bobs).error == "ORG_MISMATCH"
    mine = call("memory.search", {"query": "quarterly revenue", "namespace_scope": "all_mine"}, bobs).json
    assert mine["hits"] == [] and mine["abstain_code"] == "no_match"


def test_all_mine_stays_within_the_tokens_namespaces(backend, alice, call):
    writer = alice.token("writer")
    for namespace in ("ops", "hr"):
        call("memory.set", {"namespace": namespace, "memory_key": "k", "value": "quarterly review notes"}, writer)
    scoped = alice.token("viewer", namespaces=["ops"])
    reply = call(
        "memory.search", {"namespace": "ops", "query": "quarterly review", "namespace_scope": "all_mine"}, scoped
    )
    assert reply.json["namespaces_searched"] == ["ops"] and {h["namespace"] for h in reply.json["hits"]} == {"ops"}
    assert call("memory.search", {"namespace": "hr", "query": "q"}, scoped).error == "NAMESPACE_FORBIDDEN"
    org_wide = call(
        "memory.search",
        {"namespace": "ops", "query": "quarterly review", "namespace_scope": "all_mine"},
        alice.token("viewer"),
    ).json
    assert org_wide["namespaces_searched"] == ["ops", "hr"]


def test_outcome_needs_a_writer_and_search_a_viewer(backend, alice, call):
    viewer = alice.token("viewer")
    assert call("memory.search", {"query": "q"}, viewer).status == 200
    assert call("memory.outcome", {"memory_keys": ["k"], "outcome": "positive"}, viewer).error == "ROLE_FORBIDDEN"


def test_read_scope_narrows_to_the_requests_user_and_session(backend, alice, call):
    writer = alice.token("writer")
    for user, session in (("u1", "s1"), ("u1", "s2"), ("u2", "s3")):
        call(
            "memory.set",
            {"memory_key": f"{user}.{session}", "value": "my notes", "user_id": user, "session_id": session},
            writer,
        )
    viewer = alice.token("viewer")
    own_user = call(
        "memory.search", {"query": "notes", "read_scope": "own_user", "user_id": "u1", "min_similarity": 0}, viewer
    )
    assert sorted(h["memory_key"] for h in own_user.json["hits"]) == ["u1.s1", "u1.s2"]
    own_session = call(
        "memory.search",
        {"query": "notes", "read_scope": "own_session", "user_id": "u1", "session_id": "s2", "min_similarity": 0},
        viewer,
    )
    assert [h["memory_key"] for h in own_session.json["hits"]] == ["u1.s2"]


def test_a_tokens_read_scope_claim_is_a_ceiling_the_request_cannot_lift(backend, alice, call):
    from tenancy.models import ApiToken
    from tenancy.roles import Role

    call("memory.set", {"memory_key": "mine", "value": "my notes", "user_id": "u1"}, alice.token("writer"))
    call("memory.set", {"memory_key": "theirs", "value": "my notes", "user_id": "u2"}, alice.token("writer"))
    _, claimed = ApiToken.issue(alice.org, Role.VIEWER, read_scope="own_user")
    refused = call("memory.search", {"query": "notes"}, claimed)
    assert (refused.status, refused.json["error"]["field"]) == (422, "user_id")
    refused = call("memory.search", {"query": "notes", "user_id": "-"}, claimed)
    assert refused.status == 422  # '-' would lift the ceiling
    reply = call("memory.search", {"query": "notes", "user_id": "u1", "min_similarity": 0}, claimed)
    assert [h["memory_key"] for h in reply.json["hits"]] == ["mine"]
