"""Query spelling: a short query's lowercase words embed in the identifier spelling the namespace's rows use."""

import time

import pytest

from retrieval.search import spelling
from retrieval.store import clickhouse

CATALOG = [
    {"memory_key": "a", "value": "DataLakeCatalog keeps the table metadata"},
    {"memory_key": "b", "value": "Queries resolve tables through the DataLakeCatalog"},
    {"memory_key": "c", "value": "the datalakecatalog service restarts nightly"},
]


def embedded(model_server) -> list[str]:
    """What the search's query embeds sent: the inputs of requests carrying one text."""
    return [seen.body["input"][0] for seen in model_server.embedding_requests() if len(seen.body["input"]) == 1]


def work(reply) -> dict:
    """What query spelling did (retrieval_work also carries the entity check)."""
    return {k: v for k, v in reply.json["retrieval_work"].items() if k.startswith("query_spellings")}


def test_a_lowercase_word_embeds_as_the_rows_spell_it(backend, openai_embedder, model_server, agent):
    agent.set(*CATALOG)
    reply = agent.search("datalakecatalog metadata")
    assert work(reply) == {"query_spellings": {"datalakecatalog": "DataLakeCatalog"}, "query_spellings_skipped": False}
    assert embedded(model_server) == ["datalakecatalog metadata", "DataLakeCatalog metadata"]  # typed, respelled
    again = agent.search("datalakecatalog metadata")  # the answer is remembered: only the respelled text is asked for
    assert work(again)["query_spellings"] == {"datalakecatalog": "DataLakeCatalog"}
    trace = agent.call("memory.search_trace", {"query": "datalakecatalog metadata"}, agent.token).json
    assert (trace["query_spellings"], trace["query_spellings_skipped"]) == (
        {"datalakecatalog": "DataLakeCatalog"},
        False,
    )


def test_an_llm_free_read_embeds_its_query_once_as_typed(backend, openai_embedder, model_server, agent, settings):
    agent.set(*CATALOG)
    settings.LOOM_READS_LLM_FREE = True
    reply = agent.search("datalakecatalog metadata")
    assert work(reply)["query_spellings"] == {} and embedded(model_server) == ["datalakecatalog metadata"]


@pytest.mark.parametrize(
    "rows, query",
    [
        # one row is no evidence of how the corpus spells a word
        ([{"memory_key": "a", "value": "the DataLakeCatalog keeps metadata"}], "datalakecatalog"),
        # twice as many rows must use the identifier as write the word plainly
        (
            CATALOG[:2] + [{"memory_key": f"p{i}", "value": f"datalakecatalog note {i}"} for i in range(2)],
            "datalakecatalog",
        ),
        # a sentence-initial capital is title case, which counts as plain
        ([{"memory_key": f"w{i}", "value": f"What runs at night? job {i}"} for i in range(3)], "what runs"),
        # words of fewer than four letters, and queries over LOOM_MEMORY_SEARCH_QUERY_SPELLING_MAX_WORDS, stay as typed
        ([{"memory_key": f"k{i}", "value": f"the KeY rotates {i}"} for i in range(3)], "key"),
        (CATALOG, "where does the datalakecatalog keep the table metadata"),
    ],
)
def test_no_rewrite_without_the_evidence(backend, agent, rows, query):
    agent.set(*rows)
    assert work(agent.search(query)) == {"query_spellings": {}, "query_spellings_skipped": False}


def test_zero_max_words_turns_it_off(backend, agent, settings):
    settings.LOOM_MEMORY_SEARCH_QUERY_SPELLING_MAX_WORDS = 0
    agent.set(*CATALOG)
    assert work(agent.search("datalakecatalog"))["query_spellings"] == {}


def test_a_failing_lookup_embeds_as_typed_and_three_in_a_row_back_off(backend, agent, monkeypatch):
    agent.set(*CATALOG)
    calls = []

    def refused(*args):
        calls.append(args)
        raise clickhouse.ClickHouseError("simulated refusal")

    monkeypatch.setattr(spelling, "lookup", refused)
    for attempt in range(4):
        reply = agent.search(f"datalakecatalog metadata{attempt}")
        assert reply.status == 200 and reply.json["hits"]  # the search goes on, as typed
        assert work(reply) == {"query_spellings": {}, "query_spellings_skipped": True}
    assert len(calls) == 3  # the fourth search found the namespace backing off: no lookup


def test_a_word_is_looked_up_once_whatever_query_it_comes_in(backend, agent, monkeypatch):
    agent.set(*CATALOG)
    asked = []
    lookup = spelling.lookup

    def spy(org, namespace, model, words):
        found = lookup(org, namespace, model, words)
        asked.append(list(words))  # once it answers (tried in line, a lookup starts over at its first statement)
        return found

    monkeypatch.setattr(spelling, "lookup", spy)
    agent.search("datalakecatalog metadata")
    assert work(agent.search("datalakecatalog"))["query_spellings"] == {"datalakecatalog": "DataLakeCatalog"}
    agent.search("metadata restarts")
    assert asked == [["datalakecatalog", "metadata"], ["restarts"]]  # only the word not seen yet is looked up


def test_a_loaded_mirror_answers_the_lookup_as_the_statement_does_and_makes_none(backend, agent, settings):
    """The statement scans every value of the namespace (it ran past its 0.4 s bound at 1M rows on a server); the
    namespace's vector mirror holds the values and which rows hold each word, so once it is loaded it answers."""
    import time

    from retrieval import index
    from tenancy.models import ApiToken

    agent.set(
        *CATALOG,
        {"memory_key": "p", "value": "the runbook says What to do"},
        *[{"memory_key": f"r{i}", "value": f"RunBook entry {i}: restart the DataLakeCatalog"} for i in range(2)],
        {"memory_key": "s", "value": "RunBook", "session_id": "other"},
    )
    org = ApiToken.verify(agent.token).org.name
    words = ["datalakecatalog", "runbook", "what", "restart", "absentword"]
    settings.LOOM_VECTOR_MIRROR = False
    with clickhouse.recorded() as statements:
        expected = spelling.lookup(org, agent.namespace, "fake-ngram-384", words)
    assert expected == {"datalakecatalog": "DataLakeCatalog", "runbook": "RunBook"} and statements
    settings.LOOM_VECTOR_MIRROR = True
    agent.search("start the load")
    deadline = time.monotonic() + 30
    while not index.loaded(org, agent.namespace, "fake-ngram-384"):
        assert time.monotonic() < deadline, "the mirror did not load"
        time.sleep(0.01)
    with clickhouse.recorded() as statements:
        assert spelling.lookup(org, agent.namespace, "fake-ngram-384", words) == expected
    assert statements == []
    # A word many rows hold is counted over an evenly spaced share of them: the rule compares shares.
    mirror = index.get(org, agent.namespace, "fake-ngram-384")
    assert sorted(rid.memory_key for rid, _ in mirror.values_holding(["runbook"], 100)["runbook"]) == [
        "p",
        "r0",
        "r1",
        "s",
    ]
    assert [rid.memory_key for rid, _ in mirror.values_holding(["runbook"], 2)["runbook"]] == ["p", "r1"]


def learn_the_spelling(agent, model_server) -> None:
    """The namespace's spelling of `datalakecatalog` remembered (a search looked it up), the requests forgotten."""
    agent.set(*CATALOG)
    assert work(agent.search("datalakecatalog metadata"))["query_spellings"] == {"datalakecatalog": "DataLakeCatalog"}
    model_server.requests.clear()


@pytest.fixture
def one_second_bound(settings):
    settings.LOOM_MEMORY_SEARCH_EMBED_BOUND_S, settings.LOOM_MEMORY_SEARCH_EMBED_BOUND_RETRIES = 1.0, 0


def test_after_the_respelled_embed_times_out_the_try_as_typed_gets_a_quarter_second(
    backend, openai_embedder, model_server, agent, one_second_bound
):
    from tests.model_server import Answer

    learn_the_spelling(agent, model_server)
    model_server.script(Answer(delay_s=3), Answer(delay_s=3))  # a provider that hangs
    started = time.monotonic()
    reply = agent.search("datalakecatalog tables")
    took = time.monotonic() - started
    assert (reply.status, reply.error) == (503, "EMBED_TIMEOUT")
    assert embedded(model_server) == ["DataLakeCatalog tables", "datalakecatalog tables"]  # respelled, then typed
    assert took < 1.0 + 0.25 + 0.5  # one bound and a quarter second, not two bounds


def test_the_try_as_typed_after_a_timeout_is_served_from_the_embedding_cache(
    backend, openai_embedder, model_server, agent, one_second_bound, settings
):
    from tests.model_server import Answer

    settings.LOOM_MEMORY_SEARCH_QUERY_SPELLING_MAX_WORDS = 0
    agent.set(*CATALOG)
    assert agent.search("datalakecatalog tables").status == 200  # as typed, now in the embedding cache
    settings.LOOM_MEMORY_SEARCH_QUERY_SPELLING_MAX_WORDS = 6
    learn_the_spelling(agent, model_server)
    model_server.script(Answer(delay_s=3))
    reply = agent.search("datalakecatalog tables")
    assert reply.status == 200 and work(reply) == {"query_spellings": {}, "query_spellings_skipped": True}
    assert embedded(model_server) == ["DataLakeCatalog tables"]  # the typed text came from the cache


def test_a_refused_embed_as_typed_fails_the_search_only_once_the_respelled_one_fails_too(
    backend, openai_embedder, model_server, agent
):
    from tests.model_server import Answer

    agent.set(*CATALOG)
    model_server.script(Answer(400, message="this input is refused"))  # the embed as typed
    reply = agent.search("datalakecatalog metadata")
    assert reply.status == 200, reply.json
    assert work(reply)["query_spellings"] == {"datalakecatalog": "DataLakeCatalog"}
    assert embedded(model_server) == ["datalakecatalog metadata", "DataLakeCatalog metadata"]
    model_server.script(Answer(400, message="this input is refused"))
    nothing_to_respell = agent.search("nightly restarts")
    assert (nothing_to_respell.status, nothing_to_respell.error) == (503, "EMBEDDER_UNAVAILABLE")
