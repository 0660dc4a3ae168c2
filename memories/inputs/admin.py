"""The request serializers of the ops that configure and measure: namespaces, calibration, question sets and runs,
an org's switch and audit log."""

import re

from rest_framework.exceptions import ErrorDetail, ValidationError

from memories.fields import (
    Boolean,
    Choice,
    Integer,
    Number,
    String,
    TextPairs,
    Timestamp,
)
from memories.inputs.base import MAX_EVAL_CONFIGS, MAX_EVAL_QUESTIONS, MAX_EVAL_WAIT, KeyList, OpInput, Strict, checked
from memories.inputs.search import HowToSearch, Reranker
from memories.inputs.writes import Batch
from retrieval import options
from retrieval.errors import Refusal
from retrieval.evaluation import sets
from tenancy.models import NAME_PATTERN, NAME_RULE


class RetrievalDefaults(Strict):
    """The per-namespace search defaults the spec lists; a request's own field wins."""

    search_mode = Choice(options.SEARCH_MODES, required=False)
    retrieval_budget = Choice(options.BUDGETS, required=False)
    top_k = Integer(min_value=1, max_value=500, required=False)
    bodies = Choice(options.BODIES, required=False)
    min_similarity = Number(min_value=0, max_value=1, required=False)
    floor_mode = Choice(options.FLOOR_MODES, required=False)
    chunk_max_share = Number(min_value=0, max_value=1, required=False)
    recency_pool_weight = Number(min_value=0, max_value=1, required=False)
    reinforcement_weight = Number(min_value=0, max_value=1, required=False)
    confidence_weight = Number(min_value=0, max_value=1, required=False)
    alpha = Number(min_value=0, max_value=1, required=False)
    digest_descent = Number(
        min_value=0,
        max_value=1,
        required=False,
        help_text="The session_digest term's weight: rows of the session a question singles out by its digest.",
    )


class NamespaceRegister(OpInput):
    namespace = String(max_chars=128, pattern=NAME_PATTERN.pattern, help_text=NAME_RULE)
    retrieval_defaults = RetrievalDefaults(required=False)
    text_capture = Boolean(required=False, help_text="Consent to store query text in the search trace log.")
    rerank_endpoint = Reranker(required=False, help_text="The namespace's default reranker; empty: none.")
    description = String(required=False, max_chars=1024)


class OrgInput(Strict):
    """An op on the token's org itself."""

    org = String(required=False, max_chars=128, help_text="Must be the token's org when given.")


class AuditList(OrgInput):
    limit = Integer(min_value=1, max_value=500, default=100)
    before = Timestamp(required=False, help_text="The `at` of the last entry of the previous page.")


class OrgSetModelCalls(OrgInput):
    enabled = Boolean(help_text="false switches every model call for the org off: nothing model-made reaches it.")
    reason = String(max_chars=500, allow_empty=False, plain=True, help_text="Why; kept in the audit trail.")


class CalibrationRun(OpInput):
    similar = TextPairs(
        min_items=5, max_items=500, help_text="A question and the stored fact that answers it: the trigger gates."
    )
    distractors = TextPairs(min_items=3, max_items=500, help_text="Pairs on unrelated subjects: floor and abstain.")
    paraphrases = TextPairs(
        min_items=5,
        max_items=500,
        required=False,
        help_text="Two wordings of one fact: the write gates (conflict, duplicate). Without them the write gates "
        "stay with the cluster calibration.",
    )


class EvalQuestion(Strict):
    id = String(
        required=False, max_chars=256, plain=True, allow_empty=False, help_text="Default: its line number, from 1."
    )
    question = String(max_chars=4000, allow_empty=False)
    gold_keys = KeyList(limit=100, default=list, help_text="The memory keys that answer it.")
    should_abstain = Boolean(default=False, help_text="Memory does not hold the answer: a good search abstains.")
    category = String(max_chars=128, plain=True, default="", help_text="Metrics are also reported per category.")
    answer = String(max_chars=4000, default="", help_text="A reference answer, kept with the question.")

    rules = (
        {
            "if": {"not": {"required": ["should_abstain"], "properties": {"should_abstain": {"const": True}}}},
            "then": {"required": ["gold_keys"], "properties": {"gold_keys": {"minItems": 1}}},
        },
    )

    def validate(self, data):
        if not data["gold_keys"] and not data["should_abstain"]:
            raise ValidationError(
                {"gold_keys": [ErrorDetail("name the keys that answer it, or set should_abstain", code="required")]}
            )
        return data


class EvalSetUpload(OpInput):
    set_name = String(max_chars=128, plain=True, allow_empty=False, help_text="Uploading a name again adds a version.")
    questions = Batch(
        child=EvalQuestion(),
        noun="questions",
        field="id",
        identity=lambda item: item.get("id") or object(),
        limit=MAX_EVAL_QUESTIONS,
    )


def eval_questions(set_name: str, items: list) -> list[dict]:
    """Questions checked as eval.set_upload checks its body."""
    return [dict(item) for item in checked(EvalSetUpload, {"set_name": set_name, "questions": items})["questions"]]


def eval_questions_from_jsonl(set_name: str, text: str) -> list[dict]:
    """A JSONL file's questions, checked; a refusal names the file's line."""
    items, lines = sets.read_jsonl(text)
    try:
        return eval_questions(set_name, items)
    except Refusal as refusal:
        found = re.match(r"questions\[(\d+)\]\.?(.*)", refusal.field or "")
        if not found:
            raise
        line, field = lines[int(found[1])], found[2]
        message = refusal.message.split(": ", 1)[-1]
        raise Refusal(
            refusal.code, f"line {line}: {field or 'the question'}: {message}", field or None, line=line
        ) from None


class EvalConfig(Strict, HowToSearch):
    """A configuration to measure: a name and the memory.search fields it sets (the rest as a search leaves them)."""

    name = String(max_chars=64, plain=True, allow_empty=False)
    top_k = Integer(min_value=1, max_value=100, required=False, help_text="Default 20 (recall@20 needs 20 hits).")
    min_similarity = Number(min_value=0, max_value=1, required=False)
    floor_mode = Choice(options.FLOOR_MODES, required=False)
    rerank = Reranker(allow_empty=False, required=False)
    include_duplicates = Boolean(required=False)
    personalization = Choice(("default", "none"), required=False)


class EvalRun(OpInput):
    set_name = String(max_chars=128, plain=True, allow_empty=False)
    version = Integer(min_value=1, max_value=2**32 - 1, required=False, help_text="Default: the set's latest.")
    configs = Batch(
        child=EvalConfig(),
        noun="configurations",
        field="name",
        limit=MAX_EVAL_CONFIGS,
        required=False,
        help_text="Default: one, named default, that sets nothing. A name given twice: the later configuration wins.",
    )
    wait = Boolean(
        default=False,
        help_text=f"true: answer once the run is done (200), for up to {MAX_EVAL_WAIT} searches; else at once (202).",
    )


class EvalRunGet(OpInput):
    run_id = String(max_chars=64, required=False, help_text="Default: the namespace's latest run (of set_name).")
    set_name = String(max_chars=128, required=False)
    a = String(
        max_chars=64,
        allow_empty=False,
        required=False,
        help_text="Wins and losses of b against a; default the first two.",
    )
    b = String(max_chars=64, allow_empty=False, required=False)
    against = String(
        max_chars=64,
        allow_empty=False,
        required=False,
        help_text="An earlier run of the same questions: a names its configuration (default b's name, else its first).",
    )


class EvalRunList(OpInput):
    set_name = String(max_chars=128, required=False)
    limit = Integer(min_value=1, max_value=500, default=50)
    before = String(max_chars=64, required=False, help_text="run_id of the last run of the previous page")
