"""Identity headers: templates rendered from whom a call is for; empty ones left out; the agent goes whole."""

import json

import pytest

from retrieval.providers import customer


@pytest.fixture
def templates(settings):
    def use(**headers):
        settings.LOOM_INFERENCE_IDENTITY_HEADERS_JSON = json.dumps(headers)

    return use


def headers_for(subject: str, user_id: str = "") -> dict:
    with customer.for_org("acme", "support", subject, "memory.search", user_id):
        return customer.gateway_headers()


def test_an_agents_subject_names_the_agent_and_a_persons_names_the_email(templates):
    templates(**{"X-Agent": "{agent}", "X-Email": "{email}", "X-Space": "{org}/{namespace}"})
    assert headers_for("sa:ci-trust:deploy-bot") == {"X-Agent": "deploy-bot", "X-Space": "acme/support"}
    assert headers_for("ana@example.com") == {"X-Email": "ana@example.com", "X-Space": "acme/support"}


def test_user_id_is_the_requests_else_the_subject(templates):
    templates(**{"X-User": "user:{user_id}"})
    assert headers_for("token:7", user_id="u-42") == {"X-User": "user:u-42"}
    assert headers_for("token:7") == {"X-User": "user:token:7"}
    assert headers_for("token:7", user_id="-") == {"X-User": "user:token:7"}  # "-" names no user


def test_the_agent_headers_go_together_or_not_at_all(templates):
    templates(**{"X-Agent": "{agent}", "X-Tenant": "{tenant}", "X-Org": "{org}"})
    # This build has no trusts, so {tenant} renders empty: the agent's headers stay home, the others go.
    assert headers_for("sa:ci-trust:deploy-bot") == {"X-Org": "acme"}
    templates(**{"X-Agent": "{agent}", "X-Who": "agent {agent} of {org}"})
    assert headers_for("sa:ci-trust:deploy-bot") == {"X-Agent": "deploy-bot", "X-Who": "agent%20deploy-bot%20of%20acme"}
    assert headers_for("token:7") == {}  # not an agent: neither goes, though "agent  of acme" is not empty


def test_a_value_a_header_cannot_carry_is_percent_encoded(templates):
    templates(**{"X-User": "{user_id}"})
    assert headers_for("token:7", user_id="José 100%") == {"X-User": "Jos%C3%A9%20100%25"}


def test_a_searchs_user_reaches_the_gateway(backend, openai_embedder, model_server, agent, settings, templates):
    settings.LOOM_INFERENCE_GATEWAY_HOSTS = ["127.0.0.1"]
    templates(**{"X-User": "{user_id}"})
    agent.search("where is the deploy runbook", user_id="u-42")
    # The search's requests, the query's and any fallback's HyDE passage (a first search may also start the
    # calibration probe, whose requests are the deployment's own).
    asked = [seen for seen in model_server.embedding_requests() if "deploy runbook" in json.dumps(seen.body)]
    assert asked and all(seen.headers["x-user"] == "u-42" for seen in asked)
