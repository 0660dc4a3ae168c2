"""memory.search: content_absent when every name is known but what the question asks about is in no memory."""

import pytest

from retrieval.language.query import asked_words
from tests.test_search_entity_absent import COMPANY_FACTS

UNSTATED = "What is Jonas Berg's favourite dessert recipe?"  # a known person, a fact no memory states


@pytest.fixture
def agent(agent, settings):
    """The fake embedder scores a question against any row of these facts under 0.30: with the abstain gate at
    0.1, the cosine gates alone would serve its rows, and what the question asks about is what is judged."""
    settings.LOOM_MEMORY_SEARCH_ABSTAIN_THRESHOLD = 0.1
    return agent


@pytest.mark.parametrize(
    "query, names, words",
    [
        (UNSTATED, ["Jonas Berg"], ["favourite", "dessert", "recipe"]),
        ("What kind of music did Gina mention in July 2023?", ["Gina"], ["music"]),  # frame words and dates: no
        ("Does she paint? Has she been painting?", [], ["paint"]),  # one stem, one word
        ("what is the refund policy?", [], ["refund", "policy"]),
    ],
)
def test_the_words_a_question_asks_about_beyond_its_names(query, names, words):
    assert [word for word, _ in asked_words(query, names)] == words


def test_a_derivation_is_looked_up_by_its_stem_cut_back():
    """The stemmer leaves "mentorship" whole; a row saying "mentor" holds it. Never cut under six letters: a row
    saying "count" does not hold "countries"."""
    (_, mentorship), (_, countries) = asked_words("mentorship countries", [])
    assert "mentor" in mentorship and mentorship[0] == "mentorship"
    assert "count" not in countries


def test_a_known_persons_unstated_fact_abstains(backend, agent):
    agent.set(*COMPANY_FACTS)
    reply = agent.search(UNSTATED).json
    assert (reply["abstain"], reply["abstain_code"], reply["retrieval_risk"]) == (True, "content_absent", "abstain")
    assert reply["retrieval_work"]["names_found"] == ["Jonas Berg"]
    assert reply["retrieval_work"]["words_absent"] == ["favourite", "dessert", "recipe"]
    assert "favourite, dessert, recipe" in reply["abstain_reason"]


def test_the_stated_fact_does_not(backend, agent):
    agent.set(*COMPANY_FACTS)
    reply = agent.search("Which team does Jonas Berg lead?").json
    assert reply["abstain"] is False and reply["hits"][0]["memory_key"] == "team.lead"
    assert reply["retrieval_work"]["words_checked"] == ["team", "lead"]
    assert reply["retrieval_work"]["words_absent"] == []


def test_a_strong_pass_is_served_at_a_higher_risk(backend, agent):
    """Rows this close to the question (over the weak-pass gate) may state it in other words: served, but the
    words no memory holds cost the risk a grade."""
    agent.set(*COMPANY_FACTS)
    reply = agent.search("What dessert recipe does Jonas Berg bake for the platform team?").json
    assert reply["abstain"] is False and reply["hits"][0]["memory_key"] == "team.lead"
    assert reply["hits"][0]["similarity"] >= reply["thresholds"]["query_rewrite"]
    assert reply["retrieval_work"]["words_absent"] == ["dessert", "recipe", "bake"]
    assert reply["retrieval_risk"] in ("medium", "high")


def test_a_fact_written_a_moment_ago_is_known_at_once(backend, agent):
    agent.set(*COMPANY_FACTS)
    assert agent.search(UNSTATED).json["abstain_code"] == "content_absent"
    agent.set({"memory_key": "jonas.dessert", "value": "Jonas Berg's favourite dessert recipe is his tiramisu"})
    reply = agent.search(UNSTATED).json
    assert reply["abstain"] is False and reply["hits"][0]["memory_key"] == "jonas.dessert"
    assert reply["retrieval_work"]["words_absent"] == []


def test_a_word_held_only_in_another_org_is_absent(backend, agent, bob, call):
    from tests.conftest import Agent

    Agent(call, bob.token("admin")).set({"memory_key": "d", "value": "Jonas Berg: favourite dessert recipe, flan"})
    agent.set(*COMPANY_FACTS)
    assert agent.search(UNSTATED).json["abstain_code"] == "content_absent"


def test_the_mirror_answers_the_words_as_clickhouse_does(backend, agent, settings):
    """A loaded mirror (embedded) answers the words with no statement; the server reads their postings. Both say
    the same, and a derivation counts in both."""
    from tests.test_vector_mirror import wait_for_mirror

    agent.set(*COMPANY_FACTS, {"memory_key": "mentors", "value": "Priya mentors every new hire in the Berlin office"})
    if backend == "embedded":
        wait_for_mirror(agent)
    reply = agent.search("Who gives mentorship and parking permits to new hires?").json
    assert reply["retrieval_work"]["words_checked"] == ["gives", "mentorship", "parking", "permits", "new", "hires"]
    assert reply["retrieval_work"]["words_absent"] == ["gives", "parking", "permits"]


def test_search_trace_shows_the_words(backend, agent, call):
    agent.set(*COMPANY_FACTS)
    trace = call("memory.search_trace", {"namespace": "default", "query": UNSTATED}, agent.token).json
    assert (trace["words_checked"], trace["words_absent"]) == (["favourite", "dessert", "recipe"],) * 2
