"""A token's read_scope is a ceiling on every read, not on search alone: under own_user, memory.get, bulk_get,
list, timeline and related read the named user's rows only (under own_session, that session's too), and a read
that names no user is refused."""

import pytest

from tenancy.models import ApiToken
from tenancy.roles import Role

pytestmark = pytest.mark.cluster

ROWS = (("mine", "u1", "s1"), ("mine.later", "u1", "s2"), ("theirs", "u2", "s3"))
# Each read op, and the keys of ROWS it returns when nothing holds it.
READS = {
    "memory.get": ({"memory_key": "theirs"}, lambda json: [json["memory_key"]]),
    "memory.bulk_get": (
        {"memory_keys": [key for key, *_ in ROWS]},
        lambda json: sorted(row["memory_key"] for row in json["memories"]),
    ),
    "memory.list": ({}, lambda json: sorted(item["memory_key"] for item in json["items"])),
    "memory.timeline": ({"entity": "Acme"}, lambda json: sorted(row["memory_key"] for row in json["results"])),
    "memory.related": ({"memory_key": "mine"}, lambda json: sorted(row["memory_key"] for row in json["results"])),
}


@pytest.fixture
def stored(backend, alice, call):
    writer = alice.token("writer")
    for key, user, session in ROWS:
        body = {"memory_key": key, "value": f"notes on the Acme deal by {user}", "entities": ["Acme"]}
        assert call("memory.set", {**body, "user_id": user, "session_id": session}, writer).status == 201


def read(call, op: str, token: str, **held) -> list[str] | str:
    """The keys `op` returns, or its refusal's code (a memory.get of another's row: not found)."""
    body, keys = READS[op]
    reply = call(op, {**body, **held}, token)
    return keys(reply.json) if reply.status == 200 else reply.error


@pytest.mark.parametrize("op", READS)
def test_a_token_held_to_its_user_reads_their_rows_only(stored, alice, call, op):
    _, own_user = ApiToken.issue(alice.org, Role.VIEWER, read_scope="own_user")
    everyone = {
        "memory.get": ["theirs"],
        "memory.bulk_get": ["mine", "mine.later", "theirs"],
        "memory.list": ["mine", "mine.later", "theirs"],
        "memory.timeline": ["mine", "mine.later", "theirs"],
        "memory.related": ["mine.later", "theirs"],
    }[op]
    assert read(call, op, alice.token("viewer")) == everyone
    assert read(call, op, own_user) == "MISSING_FIELD"
    assert read(call, op, own_user, user_id="-") == "MISSING_FIELD"  # '-' would lift the ceiling
    theirs_removed = [key for key in everyone if key != "theirs"] or "MEMORY_NOT_FOUND"
    assert read(call, op, own_user, user_id="u1") == theirs_removed
    assert read(call, op, own_user, user_id="u1", read_scope="own_user") == theirs_removed


@pytest.mark.parametrize("op", READS)
def test_own_session_reads_the_named_session_only(stored, alice, call, op):
    _, own_session = ApiToken.issue(alice.org, Role.VIEWER, read_scope="own_session")
    assert read(call, op, own_session, user_id="u1") == "MISSING_FIELD"
    in_session = {
        "memory.get": "MEMORY_NOT_FOUND",
        "memory.bulk_get": ["mine"],
        "memory.list": ["mine"],
        "memory.timeline": ["mine"],
        "memory.related": [],
    }[op]
    assert read(call, op, own_session, user_id="u1", session_id="s1") == in_session
    # A token with no ceiling asks for the same itself.
    viewer = alice.token("viewer")
    assert read(call, op, viewer, read_scope="own_session", user_id="u1", session_id="s1") == in_session


def test_the_refusal_names_the_missing_field(stored, alice, call):
    _, own_session = ApiToken.issue(alice.org, Role.VIEWER, read_scope="own_session")
    reply = call("memory.list", {"user_id": "u1"}, own_session)
    assert (reply.status, reply.error, reply.json["error"]["field"]) == (422, "MISSING_FIELD", "session_id")
    assert "read_scope own_session" in reply.json["error"]["message"]
