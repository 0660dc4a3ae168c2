"""Who may read and write what: roles, namespace scopes, and other orgs (alice, bob, charlie)."""

import pytest

WRITE_OPS = [
    ("memory.set", {"memory_key": "k", "value": "v"}),
    ("memory.delete", {"memory_key": "k"}),
]
READ_OPS = [
    ("memory.get", {"memory_key": "k"}),
    ("memory.bulk_get", {"memory_keys": ["k"]}),
    ("memory.list", {}),
]


@pytest.fixture
def charlie(db, tenant):
    return tenant("charlie")


def test_a_viewer_reads_but_cannot_write(backend, alice, call):
    call("memory.set", {"memory_key": "k", "value": "v"}, alice.token("writer"))
    viewer = alice.token("viewer")
    for op, body in READ_OPS:
        assert call(op, body, viewer).status == 200, op
    for op, body in WRITE_OPS:
        reply = call(op, body, viewer)
        assert (reply.status, reply.error) == (403, "ROLE_FORBIDDEN"), op
    assert call("memory.get", {"memory_key": "k"}, viewer).json["value"] == "v"


def test_a_writer_cannot_manage_namespaces_an_admin_can(backend, alice, call):
    assert call("namespace.register", {"namespace": "n"}, alice.token("writer")).error == "ROLE_FORBIDDEN"
    assert call("namespace.register", {"namespace": "n"}, alice.token("admin")).status == 201


def test_another_orgs_token_can_neither_read_nor_write(backend, alice, bob, call):
    call("memory.set", {"namespace": "shared-name", "memory_key": "secret", "value": "alice's"}, alice.token("writer"))
    bobs = bob.token("admin")
    # Naming alice's org is refused outright...
    for op, body in READ_OPS + WRITE_OPS:
        reply = call(op, {**body, "org": alice.name, "namespace": "shared-name"}, bobs)
        assert (reply.status, reply.error) == (403, "ORG_MISMATCH"), op
    # ...and the same namespace name under bob's own token is bob's namespace, not alice's.
    assert call("memory.get", {"namespace": "shared-name", "memory_key": "secret"}, bobs).status == 404
    call("memory.set", {"namespace": "shared-name", "memory_key": "secret", "value": "bob's"}, bobs)
    alices = call("memory.get", {"namespace": "shared-name", "memory_key": "secret"}, alice.token("viewer"))
    assert alices.json["value"] == "alice's"


def test_a_namespace_scoped_token_stays_in_its_namespaces(backend, alice, call):
    scoped = alice.token("writer", namespaces=["ops"])
    assert call("memory.set", {"namespace": "ops", "memory_key": "k", "value": "v"}, scoped).status == 201
    for op, body in READ_OPS + WRITE_OPS:
        reply = call(op, {**body, "namespace": "finance"}, scoped)
        assert (reply.status, reply.error) == (403, "NAMESPACE_FORBIDDEN"), op
        assert reply.json["error"]["field"] == "namespace"


def test_the_org_in_the_body_may_be_the_tokens_own(backend, alice, call):
    reply = call("memory.set", {"org": alice.name, "memory_key": "k", "value": "v"}, alice.token("writer"))
    assert reply.status == 201


def test_a_revoked_token_is_refused(alice, call):
    from tenancy.models import ApiToken

    token = alice.token("admin")
    ApiToken.objects.filter(org=alice.org).update(revoked_at="2026-01-01T00:00:00Z")
    reply = call("memory.list", {}, token)
    assert (reply.status, reply.error) == (401, "INVALID_TOKEN")


def test_no_token_wrong_scheme_and_a_tampered_token_are_401(alice, call):
    token = alice.token("admin")
    assert call("memory.list", {}).error == "UNAUTHENTICATED"
    tampered = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    assert call("memory.list", {}, tampered).error == "INVALID_TOKEN"
    from django.test import Client

    reply = Client().post("/v1/memory.list", "{}", content_type="application/json", HTTP_AUTHORIZATION=f"Basic {token}")
    assert reply.status_code == 401 and reply.json()["error"]["code"] == "INVALID_TOKEN"
    assert reply.headers["WWW-Authenticate"].startswith("Bearer")


def test_tokens_are_stored_hashed(alice):
    from tenancy.models import ApiToken

    token = alice.token("writer")
    row = ApiToken.objects.get(org=alice.org)
    assert token not in (row.digest, row.prefix) and len(row.digest) == 64
    assert ApiToken.verify(token) == row
    assert ApiToken.verify(token + "x") is None
