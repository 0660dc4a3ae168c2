"""HyDE: a weak first pass searches again with the embedding of an LLM-written answer."""

from tests.model_server import Answer

ROWS = [
    {"memory_key": "offsite", "value": "The company offsite is in Porto this year"},
    {"memory_key": "soup", "value": "The cafeteria serves soup on fridays"},
    {"memory_key": "backups", "value": "Backups run nightly at two"},
]
QUESTION = "where do we all gather for the yearly retreat?"


def test_a_weak_first_pass_is_rescued_by_the_hypothetical_answer(
    backend, openai_llm, openai_embedder, model_server, ranker
):
    ranker.set(*ROWS)
    plain = ranker.search(QUESTION, hyde=False, explain=True).json
    model_server.script(Answer(content="The company offsite is in Porto this year."))
    hyde = ranker.search(QUESTION, hyde=True, explain=True).json
    top = hyde["hits"][0]
    assert top["memory_key"] == "offsite" and top["score_components"]["hyde_similarity"] > 0.9
    assert top["similarity"] > plain["hits"][0]["similarity"] + 0.3
    sent = model_server.chat_requests()[0].body
    assert sent["messages"][-1]["content"] == QUESTION and "passage" in sent["messages"][0]["content"]


def test_a_strong_first_pass_makes_no_llm_call(backend, openai_llm, openai_embedder, model_server, ranker):
    ranker.set(*ROWS)
    assert ranker.hits("The company offsite is in Porto this year", hyde=True)[0] == "offsite"
    assert model_server.chat_requests() == []


def test_hyde_fails_open_and_says_so(backend, openai_llm, openai_embedder, model_server, ranker, settings):
    settings.LOOM_LLM_RETRY_ATTEMPTS = 1
    ranker.set(*ROWS)
    ranker.search(QUESTION, hyde=False)  # the question's vector is cached: the scripted 401 meets the LLM call
    model_server.script(Answer(401))
    reply = ranker.search(QUESTION, hyde=True).json
    assert "hyde:failed" in reply["degraded"] and reply["hits"]


def test_llm_free_reads_and_the_fast_budget_make_no_llm_call(
    backend, openai_llm, openai_embedder, model_server, ranker, settings
):
    ranker.set(*ROWS)
    assert ranker.search(QUESTION, hyde=True, retrieval_budget="fast").status == 200
    settings.LOOM_READS_LLM_FREE = True
    assert ranker.search(QUESTION, recipe="quality").status == 200
    assert model_server.chat_requests() == []
