"""eval.set_upload and eval.set_list: labelled questions stored as numbered versions, bad ones refused by field."""

from retrieval.evaluation import sets
from tenancy.access import Scope
from tenancy.models import ApiToken
from tenancy.roles import Role

QUESTION = {"question": "when do production deploys run", "gold_keys": ["deploy"]}


def test_an_upload_is_a_new_version_and_the_list_shows_the_latest(backend, agent):
    first = agent.call("eval.set_upload", {"set_name": "faq", "questions": [QUESTION]}, agent.token)
    assert first.status == 201 and (first.json["version"], first.json["questions"]) == (1, 1)
    questions = [QUESTION, {"id": "off", "question": "capital of mongolia", "should_abstain": True, "category": "neg"}]
    second = agent.call("eval.set_upload", {"set_name": "faq", "questions": questions}, agent.token)
    assert (second.json["version"], second.json["questions"]) == (2, 2)
    agent.call("eval.set_upload", {"set_name": "another", "questions": [QUESTION]}, agent.token)
    listed = agent.call("eval.set_list", {}, agent.token).json["sets"]
    assert [(s["set_name"], s["version"], s["questions"], s["should_abstain"]) for s in listed] == [
        ("another", 1, 1, 0),
        ("faq", 2, 2, 1),
    ]
    scope = Scope(org=ApiToken.verify(agent.token).org.name, namespace="default", role=Role.ADMIN, subject="test")
    version, stored = sets.questions(scope, "faq", 1)
    assert version == 1 and [(q.question_id, q.gold_keys) for q in stored] == [("1", ("deploy",))]
    _, latest = sets.questions(scope, "faq")
    assert [(q.question_id, q.should_abstain, q.category) for q in latest] == [("1", False, ""), ("off", True, "neg")]


def test_bad_questions_are_refused_by_field_and_nothing_is_stored(backend, agent):
    cases = [
        ({"question": "who?"}, "MISSING_FIELD", "questions[1].gold_keys"),
        ({"question": "who?", "gold_keys": []}, "MISSING_FIELD", "questions[1].gold_keys"),
        ({"question": " ", "gold_keys": ["k"]}, "INVALID_VALUE", "questions[1].question"),
        ({"question": "who?", "gold_keys": ["k"], "conv": "c1"}, "UNKNOWN_FIELD", "questions[1].conv"),
        ({"question": "who?", "gold_keys": ["\n"]}, "INVALID_KEY", "questions[1].gold_keys[0]"),
        ({"question": "who?", "gold_keys": "k"}, "INVALID_TYPE", "questions[1].gold_keys"),
    ]
    for bad, code, field in cases:
        reply = agent.call("eval.set_upload", {"set_name": "faq", "questions": [QUESTION, bad]}, agent.token)
        assert (reply.status, reply.error, reply.json["error"].get("field")) == (422, code, field), bad
    reply = agent.call("eval.set_upload", {"set_name": "faq", "questions": [QUESTION] * 5001}, agent.token)
    assert reply.error == "TOO_MANY_ITEMS"
    assert agent.call("eval.set_list", {}, agent.token).json["sets"] == []


def test_only_admins_upload(backend, alice, call):
    reply = call("eval.set_upload", {"set_name": "faq", "questions": [QUESTION]}, alice.token("writer"))
    assert reply.error == "ROLE_FORBIDDEN"
