"""memory.brief: orientation on a task, before an agent starts it: the answer memory gives, its grounding, what
memory does not know (or not for certain), and the ops worth calling next.

The answer is memory.ask's, written by a model where one may be called; with `allow_synthesis: false` or
LOOM_READS_LLM_FREE the brief is the evidence alone (no answer, no model call), where memory.ask would refuse with
READS_LLM_FREE: a brief is orientation, and its evidence is most of it (spec 001).
"""

from dataclasses import replace

from django.conf import settings

from retrieval.search import ask
from tenancy.access import Scope

GROUNDING = 8  # hits shown as grounding
READ_NEXT = 5


def brief(scope: Scope, request: ask.AskRequest, op: str = "memory.brief", run_id: str = "") -> dict:
    synthesize = request.allow_synthesis and not settings.LOOM_READS_LLM_FREE
    asked = ask.ask(scope, replace(request, allow_synthesis=synthesize), run_id=run_id, op=op)
    hits = [] if asked["abstain"] else asked["hits"][:GROUNDING]
    cited = set(asked["memory_keys"])
    return {
        "answer": asked["answer"],
        "source": asked["source"],
        "grounding": [
            {
                "memory_key": hit["memory_key"],
                "namespace": hit["namespace"],
                "excerpt": hit["content_excerpt"],
                "dated": hit["valid_at"] or hit["created_at"],
                "cited": hit["memory_key"] in cited,
                "contradicts": hit["contradicts"],
            }
            for hit in hits
        ],
        "unknowns": _unknowns(asked, hits),
        "read_next": _read_next(hits)[:READ_NEXT],
        "abstain": asked["abstain"],
        "abstain_code": asked["abstain_code"],
        "retrieval_risk": asked["retrieval_risk"],
        "pending_extraction": asked["pending_extraction"],
        "degraded": asked["degraded"],
        "trace_id": asked["trace_id"],
    }


def _unknowns(asked: dict, hits: list[dict]) -> list[dict]:
    found = []
    if asked["abstain"]:
        found.append({"kind": "abstain", "detail": f"{asked['abstain_code']}: {asked['abstain_reason']}"})
    elif asked["retrieval_risk"] == "high":
        found.append({"kind": "weak_evidence", "detail": "the best hits barely match the task: check before relying"})
    for hit in hits:
        if hit["contradicts"]:
            found.append(
                {
                    "kind": "contradiction",
                    "detail": f"memory holds {hit['memory_key']} and what contradicts it; which holds is not known",
                    "memory_keys": [hit["memory_key"], *hit["contradicts"]],
                }
            )
    if asked["pending_extraction"]:
        found.append(
            {
                "kind": "pending_extraction",
                "detail": f"{asked['pending_extraction']} conversation extraction(s) still queued for this scope",
            }
        )
    return [{"memory_keys": [], **unknown} for unknown in found]


def _read_next(hits: list[dict]) -> list[dict]:
    steps = []
    for hit in hits:
        if hit["contradicts"]:
            steps.append(_step("memory.get", "its versions and the conflict resolver's decision", hit, history=True))
        if hit["source_keys"]:
            steps.append(_step("memory.recall", "the conversation turns it was extracted from", hit))
    if hits:
        steps.append(_step("memory.related", "memories that share its entities", hits[0]))
    return steps


def _step(op: str, why: str, hit: dict, **more) -> dict:
    arguments = {"namespace": hit["namespace"], "memory_key": hit["memory_key"], **more}
    return {"op": op, "arguments": arguments, "why": f"{hit['memory_key']}: {why}"}
