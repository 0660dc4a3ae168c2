"""A row written without `entities` gets the names its value is about (LOOM_ENTITY_EXTRACT_ENABLED, on), so the
entity leg, the graph and memory.related serve it as they serve a row that named its own."""

import pytest

pytestmark = pytest.mark.cluster


def test_a_row_written_without_entities_is_related_by_the_names_it_states(backend, agent, call):
    agent.set(
        {"memory_key": "tier", "value": "Acme is on the Enterprise plan since March."},
        {"memory_key": "contact", "value": "Dana Reyes is the Acme contact for the renewal."},
        {"memory_key": "lunch", "value": "the cafeteria serves soup on Fridays"},
    )
    got = {
        key: call("memory.get", {"memory_key": key}, agent.token).json["entities"]
        for key in ("tier", "contact", "lunch")
    }
    assert got == {"tier": ["Enterprise", "Acme"], "contact": ["Dana Reyes", "Acme"], "lunch": []}
    related = call("memory.related", {"memory_key": "tier"}, agent.token).json
    assert [(r["memory_key"], r["shared"]) for r in related["results"]] == [("contact", ["acme"])]
    timeline = call("memory.timeline", {"entity": "acme"}, agent.token).json
    assert sorted(r["memory_key"] for r in timeline["results"]) == ["contact", "tier"]
    filtered = agent.hits("plans and contacts", entity_filter=["Acme"], min_similarity=0)
    assert sorted(filtered) == ["contact", "tier"]


def test_written_again_it_is_unchanged_and_named_entities_are_kept_as_given(backend, agent, call):
    row = {"memory_key": "tier", "value": "Acme is on the Enterprise plan."}
    agent.set(row)
    assert agent.set(row).json["items"][0]["outcome"] == "unchanged"
    agent.set({**row, "entities": ["acme corp"]})
    assert call("memory.get", {"memory_key": "tier"}, agent.token).json["entities"] == ["acme corp"]


def test_switched_off_a_row_keeps_the_entities_it_was_written_with(backend, agent, call, settings):
    settings.LOOM_ENTITY_EXTRACT_ENABLED = False
    agent.set({"memory_key": "tier", "value": "Acme is on the Enterprise plan."})
    assert call("memory.get", {"memory_key": "tier"}, agent.token).json["entities"] == []
