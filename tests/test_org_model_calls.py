"""org.set_model_calls / org.get_model_calls: an admin switches an org's model calls off, and nothing model-made reaches it."""

import pytest
from django.core.management import call_command

from retrieval.store import clickhouse
from tests.conftest import Agent
from tests.model_server import Answer


def switch(call, token, enabled, reason="incident 42", **more):
    return call("org.set_model_calls", {"enabled": enabled, "reason": reason, **more}, token)


def test_an_admin_switches_model_calls_off_and_the_audit_trail_says_who_and_why(backend, alice, call):
    token = alice.token("admin")
    assert call("org.get_model_calls", {}, token).json == {"org": alice.name, "enabled": True, "history": []}
    off = switch(call, token, False, "customer asked us to stop")
    assert off.status == 200 and off.json["enabled"] is False
    assert switch(call, token, True, "resolved").json["enabled"] is True
    history = call("org.get_model_calls", {}, token).json["history"]
    assert [(h["enabled"], h["reason"]) for h in history] == [(True, "resolved"), (False, "customer asked us to stop")]
    assert history[0]["actor"] and history[0]["changed_at"]


@pytest.mark.parametrize(
    "role,namespaces,body,status,code,field",
    [
        ("writer", (), {"enabled": False, "reason": "x"}, 403, "ROLE_FORBIDDEN", None),
        ("admin", ("default",), {"enabled": False, "reason": "x"}, 403, "NAMESPACE_FORBIDDEN", None),
        ("admin", (), {"enabled": False, "reason": "x", "org": "someone-else"}, 403, "ORG_MISMATCH", "org"),
        ("admin", (), {"enabled": False}, 422, "MISSING_FIELD", "reason"),
        ("admin", (), {"enabled": False, "reason": "  "}, 422, "INVALID_VALUE", "reason"),
        ("admin", (), {"enabled": "no", "reason": "x"}, 422, "INVALID_TYPE", "enabled"),
        ("admin", (), {"reason": "x"}, 422, "MISSING_FIELD", "enabled"),
    ],
)
def test_who_may_flip_the_switch_and_what_they_must_send(
    backend, alice, call, role, namespaces, body, status, code, field
):
    reply = call("org.set_model_calls", body, alice.token(role, namespaces=namespaces))
    assert (reply.status, reply.error, reply.json["error"].get("field")) == (status, code, field)
    assert call("org.get_model_calls", {}, alice.token("admin")).json["enabled"] is True


def test_a_switched_off_org_makes_no_call_while_another_orgs_go_on(
    backend, openai_embedder, model_server, alice, bob, call
):
    alices, bobs = Agent(call, alice.token("admin")), Agent(call, bob.token("admin"))
    alices.set({"memory_key": "before", "value": "the release train leaves on thursdays"})
    assert switch(call, alices.token, False).status == 200
    sent = len(model_server.embedding_requests())

    stored = alices.set({"memory_key": "during", "value": "the offsite is in porto this year"}).json["items"][0]
    assert stored["embedding_pending"] is True
    found = alices.search("when does the release train leave")
    assert found.status == 200 and found.json["search_mode"] == "lexical"
    assert "leg:vector:model_calls_off" in found.json["degraded"]
    assert [hit["memory_key"] for hit in found.json["hits"]] == ["before"]  # the lexical legs still answer
    assert alices.hits("offsite porto") == []  # a stub is not searchable until it is embedded
    assert len(model_server.embedding_requests()) == sent  # nothing reached the provider for alice

    bobs.set({"memory_key": "b", "value": "bob's notes"})
    assert bobs.hits("bob's notes") == ["b"]
    assert len(model_server.embedding_requests()) == sent + 2  # bob's write and search went on

    call_command("embed_pending", "--org", alice.name)  # alice is still off: her stub is left alone
    assert len(model_server.embedding_requests()) == sent + 2  # (other tests' orgs' stubs are not this test's)
    switch(call, alices.token, True, "back on")
    call_command("embed_pending", "--org", alice.name)
    assert alices.hits("where is the offsite this year")[0] == "during"


def test_a_switch_flipped_by_another_process_is_seen_after_the_refresh(backend, agent, settings):
    from datetime import UTC, datetime

    from tenancy.models import ApiToken

    settings.LOOM_MODEL_CALLS_POLICY_REFRESH_SECONDS = 0
    org = ApiToken.verify(agent.token).org.name
    clickhouse.insert(
        "org_model_calls",
        [{"org": org, "enabled": False, "reason": "elsewhere", "actor": "other", "changed_at": datetime.now(UTC)}],
    )
    reply = agent.set({"memory_key": "k", "value": "written while off"})
    assert reply.json["items"][0]["embedding_pending"] is True


def test_a_copy_of_the_switches_too_old_to_trust_refuses_every_call(backend, agent, settings, monkeypatch):
    from retrieval.providers import customer

    settings.LOOM_MODEL_CALLS_POLICY_REFRESH_SECONDS = 0
    settings.LOOM_MODEL_CALLS_POLICY_MAX_STALE_SECONDS = 0

    def unreadable():
        raise clickhouse.ClickHouseUnavailable("switches table unreachable")

    monkeypatch.setattr(customer, "_read_off", unreadable)
    reply = agent.set({"memory_key": "k", "value": "stored even so"})
    assert reply.json["items"][0]["embedding_pending"] is True  # refused as a switch-off is: a stub, no call
    found = agent.search("anything")
    assert found.status == 200 and "leg:vector:model_calls_switch_unread" in found.json["degraded"]


def test_a_gateway_refusal_holds_one_orgs_stubs_and_the_others_are_embedded(
    backend, openai_embedder, model_server, alice, bob, call, settings
):
    settings.LOOM_INFERENCE_CUSTOMER_HEADER = "X-Loom-Customer"
    settings.LOOM_INFERENCE_GATEWAY_HOSTS = ["127.0.0.1"]
    alices, bobs = Agent(call, alice.token("admin")), Agent(call, bob.token("admin"))
    for who in (bobs, alices):
        switch(call, who.token, False)
        who.set({"memory_key": "plan", "value": f"{who.token[:6]} ships the quarterly plan on monday"})
        switch(call, who.token, True, "back on")
    sent = len(model_server.embedding_requests())
    model_server.script(Answer(403, code="agent_denied"))  # the first stub the worker takes: the newest, alice's
    call_command("embed_pending")
    assert len(model_server.embedding_requests()) == sent + 2  # refused once, never retried; bob's went on
    assert model_server.embedding_requests()[sent].headers["x-loom-customer"] == alice.name
    call_command("embed_pending")  # within the cooldown a pass holds alice's identity: nothing is sent
    assert len(model_server.embedding_requests()) == sent + 2
    assert bobs.hits("quarterly plan") == ["plan"]
    # A request always asks the gateway; its success ends the hold, so the next pass embeds alice's stub.
    assert alices.search("quarterly plan").json["hits"] == []  # still a stub
    call_command("embed_pending")
    assert alices.hits("quarterly plan") == ["plan"]


@pytest.fixture
def embedding_worker(settings):
    """The server process's embedding worker, as wsgi.py starts it, stopped after the test."""
    from retrieval.ingest import embed_pending

    settings.LOOM_EMBEDDING_WORKER, settings.LOOM_EMBEDDING_WORKER_INTERVAL_S = "on", 600  # only a wake runs a pass
    assert embed_pending.start_worker()
    yield
    embed_pending.stop_worker()


def test_the_servers_worker_embeds_an_orgs_stubs_once_its_calls_are_back_on(backend, alice, call, embedding_worker):
    import time

    alices = Agent(call, alice.token("admin"))
    switch(call, alices.token, False)
    alices.set({"memory_key": "plan", "value": "the quarterly plan ships on monday"})
    switch(call, alices.token, True, "back on")  # wakes the worker: no command to run, no interval to wait
    deadline = time.monotonic() + 20
    while alices.hits("quarterly plan") != ["plan"]:
        assert time.monotonic() < deadline, "the worker did not embed the stub"
        time.sleep(0.05)


def test_the_servers_worker_runs_by_default_only_on_the_embedded_engine(backend, settings):
    from retrieval.ingest import embed_pending

    settings.LOOM_EMBEDDING_WORKER = "auto"  # a ClickHouse server's deployment runs `embed_pending --loop` apart
    try:
        assert embed_pending.start_worker() is (backend == "embedded")
    finally:
        embed_pending.stop_worker()
