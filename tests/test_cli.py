"""Management commands: loom_org, loom_token, loom_user (Django-only: they work while the server runs),
loom_bootstrap."""

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from tenancy.models import ApiToken, Membership, Org


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_org_create_is_idempotent_and_listed(db):
    assert "created: org acme" in run("loom_org", "create", "acme")
    assert "exists: org acme" in run("loom_org", "create", "acme")
    assert run("loom_org", "list").startswith("acme\t")
    with pytest.raises(CommandError, match="org name"):
        run("loom_org", "create", "bad name!")


def test_token_create_prints_the_token_alone_on_the_last_line_and_it_works(db, backend, call):
    run("loom_org", "create", "acme")
    out = run("loom_token", "create", "--org", "acme", "--namespace", "ops", "--namespace", "dev", "--role", "writer")
    token = out.strip().splitlines()[-1]
    assert token.startswith("loom_") and " " not in token
    row = ApiToken.objects.get()
    assert (row.org.name, row.role, row.namespaces) == ("acme", "writer", ["dev", "ops"])
    assert call("memory.set", {"namespace": "ops", "memory_key": "k", "value": "v"}, token).status == 201
    assert call("memory.set", {"namespace": "prod", "memory_key": "k", "value": "v"}, token).status == 403


def test_token_list_never_shows_the_secret_and_revoke_stops_it(db, call):
    Org.objects.create(name="acme")
    token = run("loom_token", "create", "--org", "acme", "--role", "viewer", "--name", "ci").strip().splitlines()[-1]
    prefix = token.split("_")[1]
    listing = run("loom_token", "list", "--org", "acme")
    assert prefix in listing and token not in listing and token.split("_", 2)[2] not in listing
    assert "\tactive" in listing
    assert f"revoked: {prefix}" in run("loom_token", "revoke", prefix)
    assert "\trevoked" in run("loom_token", "list")
    assert call("memory.list", {}, token).error == "INVALID_TOKEN"
    with pytest.raises(CommandError, match="no active token"):
        run("loom_token", "revoke", prefix)


def test_token_create_for_a_missing_org_says_how_to_make_it(db):
    with pytest.raises(CommandError, match="loom_org create nope"):
        run("loom_token", "create", "--org", "nope", "--role", "admin")


def test_several_workers_need_a_clickhouse_server(backend, db):
    if backend == "embedded":
        with pytest.raises(CommandError, match="WORKERS=4: the embedded engine serves from one process"):
            run("loom_bootstrap", "--workers", "4")
    else:
        assert "Loom Recall is starting" in run("loom_bootstrap", "--workers", "4")


def test_user_create_prints_a_password_that_logs_in_to_the_lab_with_that_role(db, alice):
    out = run("loom_user", "create", "--org", alice.name, "--role", "viewer", "dana")
    password = out.strip().splitlines()[-1].removeprefix("password (shown once): ")
    assert f"dana: viewer in org {alice.name}" in out and len(password) >= 12
    client = Client()
    answered = client.post("/recall/login", {"username": "dana", "password": password, "next": "/recall"})
    assert (answered.status_code, answered["Location"]) == (302, "/recall")
    assert Membership.objects.get(user__username="dana").role == "viewer"


def test_user_set_role_list_and_remove(db, alice, bob):
    run("loom_user", "create", "--org", alice.name, "--role", "viewer", "dana")
    run("loom_user", "create", "--org", bob.name, "--role", "writer", "dana")  # the same user, a second org
    assert "dana: admin in org" in run("loom_user", "set-role", "--org", alice.name, "--role", "admin", "dana")
    listed = run("loom_user", "list").splitlines()
    assert listed[0] == "user\torg\trole"
    assert f"dana\t{alice.name}\tadmin" in listed and f"dana\t{bob.name}\twriter" in listed
    assert run("loom_user", "list", "--org", bob.name).splitlines()[1:] == [f"dana\t{bob.name}\twriter"]
    run("loom_user", "remove", "--org", alice.name, "dana")
    assert [m.org.name for m in Membership.objects.filter(user__username="dana")] == [bob.name]


def test_user_commands_say_what_is_wrong(db, alice, monkeypatch):
    with pytest.raises(CommandError, match="no org 'nope'; create it with"):
        run("loom_user", "create", "--org", "nope", "--role", "viewer", "dana")
    run("loom_user", "create", "--org", alice.name, "--role", "viewer", "dana")
    with pytest.raises(CommandError, match="already in org .*set-role"):
        run("loom_user", "create", "--org", alice.name, "--role", "admin", "dana")
    with pytest.raises(CommandError, match="is not in org"):
        run("loom_user", "set-role", "--org", alice.name, "--role", "admin", "erin")
    monkeypatch.setattr("sys.stdin", StringIO("short\n"))
    with pytest.raises(CommandError, match="password: This password is too short"):
        run("loom_user", "create", "--org", alice.name, "--role", "viewer", "--password-stdin", "erin")
    assert not get_user_model().objects.filter(username="erin").exists()
