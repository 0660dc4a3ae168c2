"""memory.search: entity_absent when the question is about someone or something no memory mentions."""

import pytest

from retrieval.language import names

COMPANY_FACTS = [
    {"memory_key": "sla.enterprise", "value": "Enterprise SLA: first response within 1 hour, 24/7 coverage"},
    {"memory_key": "office.berlin", "value": "The Berlin office is at Torstrasse 12 and opens at 8:30"},
    {"memory_key": "deploy.window", "value": "Production deploys run on Tuesday mornings after the standup"},
    {"memory_key": "team.lead", "value": "Jonas Berg leads the platform team since March"},
]


@pytest.mark.parametrize(
    "query, expected",
    [
        ("Who won the 2026 World Cup?", ["World Cup"]),
        ("Did Jon and Gina both enter the dance contest?", ["Jon", "Gina"]),
        ("Jonas Berg deployed what?", ["Jonas Berg"]),  # a run opening the sentence is a name
        ("Deploy notes for tuesday?", []),  # one capitalised word opening a sentence is not
        ("What did Mel paint in July 2023?", ["Mel"]),  # months are dates, not names
        ("Where does Caroline's sister live?", ["Caroline"]),
        ('Would she enjoy "The Four Seasons" by Vivaldi?', ["The Four Seasons", "Vivaldi"]),
        ("When was web-app v4.2.3 rolled back?", ["v4.2.3"]),
        ("what happened on 2026-10-11?", []),
        ("what is the refund policy?", []),
        ("Did Jon say I'm sure I've met Gina?", ["Jon", "Gina"]),  # "I" contracted is no name either
    ],
)
def test_the_names_a_question_is_about(query, expected):
    assert names.about(query) == expected


def test_a_question_about_nothing_in_memory_abstains(backend, agent):
    agent.set(*COMPANY_FACTS)
    reply = agent.search("Who won the 2026 World Cup?").json
    assert (reply["abstain"], reply["abstain_code"], reply["retrieval_risk"]) == (True, "entity_absent", "abstain")
    assert "World Cup" in reply["abstain_reason"]
    assert reply["retrieval_work"]["names_checked"] == ["World Cup"]
    assert reply["retrieval_work"]["names_found"] == []


def test_a_question_about_a_known_name_is_answered(backend, agent):
    agent.set(*COMPANY_FACTS)
    reply = agent.search("What does Jonas Berg lead?").json
    assert reply["abstain_code"] != "entity_absent"
    assert reply["retrieval_work"]["names_found"] == ["Jonas Berg"]
    assert reply["hits"][0]["memory_key"] == "team.lead"


def test_one_known_name_is_enough(backend, agent):
    """A question naming a known and an unknown name may be about the known one: the cosine gates judge it."""
    agent.set(*COMPANY_FACTS)
    reply = agent.search("Does Jonas Berg know Vivaldi?").json
    assert reply["abstain_code"] != "entity_absent"
    assert reply["retrieval_work"] == {
        **reply["retrieval_work"],
        "names_checked": ["Jonas Berg", "Vivaldi"],
        "names_found": ["Jonas Berg"],
    }


def test_a_name_is_found_only_when_one_row_holds_all_its_words(backend, agent):
    """'Berlin' and 'Jonas' are both in memory, but no row names 'Jonas Berlin'."""
    agent.set(*COMPANY_FACTS)
    reply = agent.search("Where does Jonas Berlin work?").json
    assert reply["abstain_code"] == "entity_absent"


def test_an_entity_mention_counts_even_when_the_text_does_not_say_it(backend, agent):
    agent.set(
        {"memory_key": "office.ber", "value": "opens at 8:30, badge at the front desk", "entities": ["Office BER"]}
    )
    reply = agent.search("When does Office BER open?").json
    assert reply["retrieval_work"]["names_found"] == ["Office BER"]
    assert reply["abstain_code"] != "entity_absent"


def test_a_name_a_triple_declares_counts_from_the_mirror_too(backend, agent):
    """The subject of a declared triple is an entity mention, as the graph leg reads it: for a loaded mirror that
    answers the check alone too."""
    from tests.test_vector_mirror import wait_for_mirror

    triple = {"subject": "Gina", "relation": "badges_at", "object": "the front desk"}
    agent.set({"memory_key": "badge.rule", "value": "badge in at the front desk", "triples": [triple]})
    wait_for_mirror(agent)
    reply = agent.search("Where does Gina badge in?").json
    assert reply["retrieval_work"]["names_found"] == ["Gina"]
    assert reply["abstain_code"] != "entity_absent"


def test_names_are_looked_up_in_keys_too(backend, agent):
    agent.set({"memory_key": "customer.acme.contact", "value": "reach them at ops@example.com"})
    assert agent.search("How do I reach Acme?").json["retrieval_work"]["names_found"] == ["Acme"]


def test_another_org_mentioning_the_name_does_not_count(backend, agent, bob, call):
    from tests.conftest import Agent

    Agent(call, bob.token("admin")).set({"memory_key": "cup", "value": "Argentina won the World Cup final"})
    agent.set(*COMPANY_FACTS)
    assert agent.search("Who won the World Cup?").json["abstain_code"] == "entity_absent"


def test_search_trace_shows_the_check(backend, agent, call):
    agent.set(*COMPANY_FACTS)
    trace = call("memory.search_trace", {"namespace": "default", "query": "Who won the World Cup?"}, agent.token).json
    assert (trace["names_checked"], trace["names_found"]) == (["World Cup"], [])


def test_the_mirror_answers_as_clickhouse_does_and_follows_every_write(backend, agent, settings):
    """With the embedded engine a loaded mirror answers the check without a statement; it must agree with
    ClickHouse, and know a name written or deleted a moment ago."""
    from tests.test_vector_mirror import wait_for_mirror

    agent.set(*COMPANY_FACTS)
    if backend == "embedded":
        wait_for_mirror(agent)
    for query, found in [
        ("What does Jonas Berg lead?", ["Jonas Berg"]),
        ("Who won the World Cup?", []),
        ("Is the Berlin office open?", ["Berlin"]),
        ("Where is Gina?", []),
    ]:
        assert agent.search(query).json["retrieval_work"]["names_found"] == found, query
    agent.set({"memory_key": "gina", "value": "Gina joined the Berlin office in May"})
    assert agent.search("Where is Gina?").json["retrieval_work"]["names_found"] == ["Gina"]
    assert agent.call("memory.delete", {"memory_key": "gina"}, agent.token).status == 200
    assert agent.search("Where is Gina?").json["abstain_code"] == "entity_absent"


def test_a_loaded_mirror_answers_the_check_without_a_statement(backend, agent, settings):
    """Every live row of the namespace is in the mirror with its words (a high-sensitivity row is never indexed, so
    it names nothing either way): it finds 'Jonas Berg' (one row holds both words) and knows 'Jonas Berlin' is in
    no row, with no statement either way."""
    from retrieval.store import clickhouse
    from tests.test_vector_mirror import wait_for_mirror

    settings.LOOM_VECTOR_MIRROR = False  # the mirror is loaded from what is stored
    agent.set(*COMPANY_FACTS, {"memory_key": "salary", "value": "Jonas Berlin earns 90k", "sensitivity": "high"})
    settings.LOOM_VECTOR_MIRROR = True
    wait_for_mirror(agent)
    for query, found in [("What does Jonas Berg lead?", ["Jonas Berg"]), ("Where does Jonas Berlin work?", [])]:
        with clickhouse.recorded() as statements:
            reply = agent.search(query).json
        assert reply["retrieval_work"]["names_found"] == found, query
        assert not [statement for statement in statements if "multi_terms" in statement], query  # the check's


@pytest.mark.parametrize("loaded", ["before", "after"])
def test_a_name_only_a_row_without_a_vector_holds_is_found(backend, agent, loaded, settings):
    """A write while the org's model calls are off stores no vector (a stub), so the mirror lacks its words: from
    then on the check asks ClickHouse what the mirror does not find, whether the stub came before the mirror's load
    or after it; once the stub is embedded, the mirror answers alone again."""
    from django.core.management import call_command

    from retrieval.store import clickhouse
    from tests.test_vector_mirror import wait_for_mirror

    def model_calls(enabled: bool) -> None:
        reply = agent.call("org.set_model_calls", {"enabled": enabled, "reason": "audit"}, agent.token)
        assert reply.status == 200

    settings.LOOM_VECTOR_MIRROR = loaded == "before"  # "after": no mirror until the stub is stored
    agent.set(*COMPANY_FACTS)
    if loaded == "before":
        wait_for_mirror(agent)
        assert agent.search("Where is Gina?").json["abstain_code"] == "entity_absent"
    model_calls(False)
    assert agent.set({"memory_key": "gina", "value": "Gina joined the Berlin office in May"}).json["items"][0][
        "embedding_pending"
    ]
    model_calls(True)
    if loaded == "after":
        settings.LOOM_VECTOR_MIRROR = True
        wait_for_mirror(agent)
    reply = agent.search("Where is Gina?").json
    assert reply["retrieval_work"]["names_found"] == ["Gina"]
    assert reply["abstain_code"] != "entity_absent"  # (the stub itself is not searchable until it is embedded)
    call_command("embed_pending")  # the stub's vector comes: the mirror holds every row again
    with clickhouse.recorded() as statements:
        assert agent.search("Where is Gino?").json["abstain_code"] == "entity_absent"
    assert not [statement for statement in statements if "multi_terms" in statement]
