"""Question sets: an operator's labelled questions for one namespace, stored as numbered versions.

An upload never edits: it adds version n+1, so every run names exactly the questions it asked. The questions
arrive already checked (the API's input serializer, which the Lab and `loom_eval` use too, through
`memories.inputs.eval_questions_from_jsonl`); `read_jsonl` turns a JSONL file into the objects that serializer
checks.
"""

import json
import threading
from datetime import UTC, datetime

from retrieval.errors import Refusal
from retrieval.evaluation.metrics import Question
from retrieval.search import trace
from retrieval.store import audit, clickhouse
from tenancy.access import Scope

MAX_QUESTIONS = 5000
_versions = threading.Lock()  # two uploads of one set in this process take successive versions


def read_jsonl(text: str) -> tuple[list[dict], list[int]]:
    """A JSONL file's objects and the line each came from, blank lines skipped; a line that is not a JSON object
    is refused by number."""
    items, lines = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            raise Refusal(
                "MALFORMED_JSON", f"line {number} is not valid JSON: {exc}", "questions", line=number
            ) from None
        if not isinstance(item, dict):
            raise Refusal("INVALID_TYPE", f"line {number} must be a JSON object", "questions", line=number)
        items.append(item)
        lines.append(number)
    if not items:
        raise Refusal("MISSING_FIELD", "the file holds no questions", "questions")
    return items, lines


def upload(scope: Scope, set_name: str, questions: list[dict]) -> dict:
    """Store checked questions as the set's next version; returns {set_name, version, questions}."""
    now = datetime.now(UTC)
    with _versions:
        version = _latest_version(scope, set_name) + 1
        clickhouse.insert(
            "eval_questions",
            [
                {
                    "org": scope.org,
                    "namespace": scope.namespace,
                    "set_name": set_name,
                    "version": version,
                    "position": position,
                    "question_id": item.get("id") or str(position + 1),
                    "question": item["question"],
                    "gold_keys": item.get("gold_keys", []),
                    "should_abstain": item.get("should_abstain", False),
                    "category": str(item.get("category", "")),
                    "answer": item.get("answer", ""),
                    "uploaded_at": now,
                    "uploaded_by": scope.subject,
                }
                for position, item in enumerate(questions)
            ],
        )
    audit.record(
        scope.org,
        scope.subject,
        "eval.set_upload",
        scope.namespace,
        {"set_name": set_name, "version": version, "questions": len(questions)},
    )
    return {"set_name": set_name, "version": version, "questions": len(questions), "uploaded_at": now}


def _latest_version(scope: Scope, set_name: str) -> int:
    return (
        clickhouse.query_value(
            """
        SELECT max(version) FROM eval_questions
        WHERE org = {org:String} AND namespace = {namespace:String} AND set_name = {set_name:String}
        """,
            {"org": scope.org, "namespace": scope.namespace, "set_name": set_name},
        )
        or 0
    )


def listed(scope: Scope) -> list[dict]:
    """The namespace's sets, each at its latest version: name, version, question count, when and by whom."""
    return clickhouse.query(
        """
        SELECT set_name, version, count() AS questions, countIf(should_abstain) AS should_abstain,
               any(uploaded_at) AS uploaded_at, any(uploaded_by) AS uploaded_by
        FROM eval_questions
        WHERE org = {org:String} AND namespace = {namespace:String}
          AND (set_name, version) IN (
              SELECT set_name, max(version) FROM eval_questions
              WHERE org = {org:String} AND namespace = {namespace:String} GROUP BY set_name)
        GROUP BY set_name, version
        ORDER BY set_name
        """,
        {"org": scope.org, "namespace": scope.namespace},
    )


def questions(scope: Scope, set_name: str, version: int | None = None) -> tuple[int, list[Question]]:
    """The set's questions at `version` (default: the latest), in upload order."""
    version = version or _latest_version(scope, set_name)
    rows = clickhouse.query(
        """
        SELECT position, question_id, question, gold_keys, should_abstain, category, answer FROM eval_questions
        WHERE org = {org:String} AND namespace = {namespace:String} AND set_name = {set_name:String}
          AND version = {version:UInt32}
        ORDER BY position
        """,
        {"org": scope.org, "namespace": scope.namespace, "set_name": set_name, "version": version},
    )
    if not rows:
        at = f" version {version}" if version else ""
        raise Refusal(
            "EVAL_SET_NOT_FOUND", f"no question set {set_name!r}{at} in namespace {scope.namespace!r}", "set_name"
        )
    return version, [Question(**{**row, "gold_keys": tuple(row["gold_keys"])}) for row in rows]


def items(scope: Scope, set_name: str) -> list[dict]:
    """The set's latest questions as upload items (none when there is no such set), to upload with one more."""
    try:
        _, found = questions(scope, set_name)
    except Refusal:
        return []
    return [
        {
            "id": q.question_id,
            "question": q.question,
            "gold_keys": list(q.gold_keys),
            "should_abstain": q.should_abstain,
            "category": q.category,
            "answer": q.answer,
        }
        for q in found
    ]


def from_outcomes(scope: Scope, set_name: str) -> tuple[list[dict], int]:
    """The set's latest questions and, after them, each logged search whose run memory.outcome rated positive (its
    question text kept) that the set does not hold yet: the question, with the rated keys it served as gold. Returns
    them and how many were added."""
    held = items(scope, set_name)
    ids, asked = {item["id"] for item in held}, {item["question"] for item in held}
    added = []
    for row in trace.rated(scope):
        if f"outcome-{row['trace_id']}" in ids or row["query"] in asked:
            continue
        asked.add(row["query"])
        added.append(
            {"id": f"outcome-{row['trace_id']}", "question": row["query"], "gold_keys": sorted(row["positive"])}
        )
    return held + added, len(added)
