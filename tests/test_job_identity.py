"""Jobs speak for the writer: a background pass's model calls name the principal that wrote the rows, one call per
identity, and an identity the gateway holds is skipped, not waited on (004, "Writer first", "Skip, not stall")."""

import pytest

from retrieval.ingest import embed_pending
from tests.model_server import Answer


@pytest.fixture
def gateway(settings, openai_embedder, model_server, alice):
    """The embedder's calls go through a gateway on 127.0.0.1 that is told whom each call is for. The stubs a test
    leaves held are embedded after it, so no later pass meets them."""
    from retrieval.providers import customer

    settings.LOOM_INFERENCE_GATEWAY_HOSTS = ["127.0.0.1"]
    settings.LOOM_INFERENCE_IDENTITY_HEADERS_JSON = '{"X-Subject": "{subject}", "X-User": "{user_id}"}'
    yield openai_embedder
    customer.forget_holds()
    embed_pending.run_once(org=alice.name)


def stubs_by_two_writers(alice, call) -> tuple[str, str]:
    """Two writers of one org each store a row while the org's model calls are off (stubs); the switch back on.
    Their subjects, the first writer's row the newest."""
    first, second = alice.token("writer"), alice.token("writer")
    admin = alice.token("admin")
    assert call("org.set_model_calls", {"enabled": False, "reason": "audit"}, admin).status == 200
    call("memory.set", {"memory_key": "older", "value": "the offsite is in porto", "user_id": "u-2"}, second)
    call("memory.set", {"memory_key": "newer", "value": "the standup moved to 9:30", "user_id": "u-1"}, first)
    assert call("org.set_model_calls", {"enabled": True, "reason": "done"}, admin).status == 200
    return subject_of(first), subject_of(second)


def subject_of(token: str) -> str:
    from tenancy.models import ApiToken

    return ApiToken.verify(token).subject


def embedded_dims(alice, key: str) -> list[int]:
    from retrieval.store import clickhouse

    return [
        row[0]
        for row in clickhouse.query_rows(
            "SELECT embedding_dim FROM memory_embeddings FINAL WHERE org = {org:String} AND memory_key = {key:String}",
            {"org": alice.name, "key": key},
        )
    ]


def sent_for(model_server) -> list[tuple[str, str, list[str]]]:
    return [
        (seen.headers.get("x-subject", ""), seen.headers.get("x-user", ""), seen.body["input"])
        for seen in model_server.embedding_requests()
    ]


def test_a_stub_is_embedded_for_its_writer_one_call_per_writer(backend, gateway, model_server, alice, call):
    first, second = stubs_by_two_writers(alice, call)
    assert embed_pending.run_once(org=alice.name) == 2
    sent = sent_for(model_server)
    assert [(subject, user) for subject, user, _ in sent] == [(first, "u-1"), (second, "u-2")]  # newest first
    assert all("porto" not in " ".join(texts) for subject, _, texts in sent if subject == first)
    assert not any(subject.startswith("process:") for subject, _, _ in sent)


def test_a_held_writer_is_skipped_and_the_batch_goes_to_the_others(
    backend, gateway, model_server, alice, call, settings
):
    first, second = stubs_by_two_writers(alice, call)
    settings.LOOM_INFERENCE_REFUSAL_COOLDOWN_SECONDS = 60
    model_server.script(Answer(402, code="budget_exceeded"))  # the gateway refuses the first writer's call
    assert (
        embed_pending.run_once(batch_size=1, org=alice.name) == 1
    )  # the newest row's writer held; its one row is the other's
    assert embed_pending.run_once(batch_size=1, org=alice.name) == 0  # the held writer's row: left out, nothing sent
    assert [subject for subject, _, _ in sent_for(model_server)] == [first, second]
    viewer = alice.token("viewer")
    assert call("memory.get", {"memory_key": "older"}, viewer).json["embedding_model"] == "text-embedding-3-small"
    assert embedded_dims(alice, "newer") == [0]  # still a stub


def test_a_hold_ends_and_the_writers_rows_are_embedded(backend, gateway, model_server, alice, call, settings):
    first, _ = stubs_by_two_writers(alice, call)
    settings.LOOM_INFERENCE_REFUSAL_COOLDOWN_SECONDS = 0
    model_server.script(Answer(402, code="budget_exceeded"))
    assert embed_pending.run_once(org=alice.name) == 1, sent_for(model_server)
    assert embed_pending.run_once(org=alice.name) == 1  # no hold left: asked again, for its writer
    assert [subject for subject, _, _ in sent_for(model_server)][-1] == first


def test_a_sessions_digest_is_written_for_its_newest_writer(backend, gateway, openai_llm, model_server, alice, call):
    from retrieval.ingest import digests

    earlier, later = alice.token("writer"), alice.token("writer")
    call("memory.set", {"memory_key": "a", "value": "the offsite is in porto", "session_id": "s-1"}, earlier)
    call("memory.set", {"memory_key": "b", "value": "it moved to may", "session_id": "s-1", "user_id": "u-9"}, later)
    assert digests.summarize_sessions(alice.name).written == 1
    (sent,) = model_server.chat_requests()
    assert (sent.headers["x-subject"], sent.headers["x-user"]) == (subject_of(later), "u-9")
