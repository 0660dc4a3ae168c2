"""audit.list: who switched model calls, registered a namespace, recalibrated, issued or revoked a token, when and
from where; an org's admins read their org's entries, newest first."""

from io import StringIO

from django.core.management import call_command

from tenancy.models import ApiToken


def entries(call, token, **body) -> list[dict]:
    reply = call("audit.list", body, token)
    assert reply.status == 200, reply.json
    return reply.json["entries"]


def test_admin_changes_are_listed_newest_first_with_who_and_where(backend, alice, call):
    admin = alice.token("admin")
    subject = f"token:{ApiToken.verify(admin).prefix}"
    assert call("org.set_model_calls", {"enabled": False, "reason": "budget review"}, admin).status == 200
    body = {"namespace": "support", "description": "help desk", "retrieval_defaults": {"top_k": 8}}
    assert call("namespace.register", body, admin).status == 201
    listed = [entry for entry in entries(call, admin) if not entry["action"].startswith("token.")]
    assert [(entry["action"], entry["target"], entry["actor"]) for entry in listed] == [
        ("namespace.register", "support", subject),
        ("org.set_model_calls", "", subject),
    ]
    assert listed[0]["detail"] == {"description": "help desk", "retrieval_defaults": {"top_k": 8}}
    assert listed[1]["detail"] == {"enabled": False, "reason": "budget review"}
    assert {entry["origin"] for entry in listed} == {"http:127.0.0.1"}
    assert listed[0]["at"] >= listed[1]["at"]


def test_token_commands_are_listed_with_the_operator(db, alice, call):
    admin = alice.token("admin")
    out = StringIO()
    call_command("loom_token", "create", "--org", alice.name, "--role", "viewer", "--name", "ci", stdout=out)
    prefix = out.getvalue().strip().splitlines()[-1].split("_")[1]
    call_command("loom_token", "revoke", prefix, stdout=StringIO())
    tokens = [entry for entry in entries(call, admin) if entry["target"] == prefix]
    assert [entry["action"] for entry in tokens] == ["token.revoke", "token.issue"]
    assert all(entry["actor"].startswith("cli:") for entry in tokens)
    assert tokens[1]["detail"] == {"role": "viewer", "namespaces": [], "read_scope": "", "name": "ci"}


def test_pages_go_back_with_before_and_limit(backend, alice, call):
    admin = alice.token("admin")
    for n in range(3):
        call("org.set_model_calls", {"enabled": n % 2 == 0, "reason": f"change {n}"}, admin)
    switched = [entry for entry in entries(call, admin, limit=2) if entry["action"] == "org.set_model_calls"]
    assert [entry["detail"]["reason"] for entry in switched] == ["change 2", "change 1"]
    older = entries(call, admin, limit=2, before=switched[-1]["at"])
    assert [entry["detail"].get("reason") for entry in older if entry["action"] == "org.set_model_calls"] == [
        "change 0"
    ]


def test_only_the_orgs_admins_read_it_and_only_their_org(backend, alice, bob, call):
    call("org.set_model_calls", {"enabled": True, "reason": "alice's change"}, alice.token("admin"))
    assert call("audit.list", {}, alice.token("writer")).error == "ROLE_FORBIDDEN"
    assert call("audit.list", {"org": alice.name}, bob.token("admin")).error == "ORG_MISMATCH"
    assert not [entry for entry in entries(call, bob.token("admin")) if entry["action"] == "org.set_model_calls"]
