"""context.pack: the best evidence for a task as one block that fits a token budget, for an agent to put in its
prompt as is.

The block leads with the verdict (what memory found, or that it does not know and why), then one line per memory,
best first, each cited by key and dated: `[pref.editor] 2026-03-01 Dana prefers vim keybindings.` The search runs as
memory.search's `fast` budget in every mode, so a pack never calls a model (spec 001, 004). Duplicates and
superseded rows are left out as the search leaves them, and a line that says what a line above it already said is
left out too. Lines are added while the block fits `max_tokens` (counted by `text.token_count`); the line that does
not fit is cut to the room left when that leaves enough to cite, so the top hit's evidence is always there when
there is any. An abstained search packs the verdict alone: a model given the nearest rows to a question memory
cannot answer would use them.
"""

from dataclasses import dataclass, replace

from retrieval.language.text import cut_to_tokens, token_count
from retrieval.search import service
from retrieval.search.plan import SearchRequest
from retrieval.search.result import shown
from tenancy.access import Scope

TOP_K = 20  # hits considered: a budget decides how many are packed
MIN_LINE_TOKENS = 12  # a line cut shorter than this cites too little to be worth its key
QUERY_SHOWN_TOKENS = 60  # of the task, echoed in the first line


@dataclass(frozen=True)
class PackRequest:
    search: SearchRequest
    max_tokens: int = 1000


def pack(scope: Scope, request: PackRequest, op: str = "context.pack", run_id: str = "") -> dict:
    wanted = replace(request.search, top_k=request.search.top_k or TOP_K, retrieval_budget="fast", bodies="unit")
    found = service.search(scope, wanted, op=op, run_id=run_id)
    budget = request.max_tokens
    head = _head(found, request.search.query)
    if token_count(head) > budget:  # (a budget smaller than the verdict: the verdict, cut)
        head = cut_to_tokens(head, budget)
    block, lines, said = head, [], set()
    hits = [] if found.abstain else found.hits
    for hit in hits:
        text = " ".join(shown(hit).split())
        if text.lower() in said:
            continue
        line = _line(hit, text)
        room = budget - token_count(block + "\n")
        truncated = token_count(line) > room
        if truncated:
            line = cut_to_tokens(line, room) if room >= MIN_LINE_TOKENS or not lines else ""
            if not line:
                break
        said.add(text.lower())
        block += "\n" + line
        lines.append(
            {
                "memory_key": hit["memory_key"],
                "namespace": hit["namespace"],
                "session_id": hit["session_id"],
                "truncated": truncated,
            }
        )
        if truncated:
            break
    packed = {(line["namespace"], line["memory_key"], line["session_id"]) for line in lines}
    return {
        "context": block,
        "tokens": token_count(block),
        "max_tokens": budget,
        "memory_keys": [line["memory_key"] for line in lines],
        "lines": lines,
        "left_out": sum(1 for h in hits if (h["namespace"], h["memory_key"], h["session_id"]) not in packed),
        "abstain": found.abstain,
        "abstain_code": found.abstain_code,
        "abstain_reason": found.abstain_reason,
        "retrieval_risk": found.retrieval_risk,
        "pending_extraction": found.pending_extraction,
        "degraded": list(found.degraded),
        "trace_id": found.trace_id,
    }


def _head(found, query: str) -> str:
    task = query if token_count(query) <= QUERY_SHOWN_TOKENS else cut_to_tokens(query, QUERY_SHOWN_TOKENS)
    if found.abstain:
        verdict = f"memory does not know this ({found.abstain_code}): {found.abstain_reason}"
    else:
        verdict = f"{len(found.hits)} memories found, best first (retrieval_risk {found.retrieval_risk})"
    head = f"Memory for: {task}\nVerdict: {verdict}"
    if found.pending_extraction:
        head += (
            f"\nNote: {found.pending_extraction} conversation extraction(s) still queued: "
            "a thin answer is not evidence of absence"
        )
    return head


def _line(hit: dict, text: str) -> str:
    dated = hit["valid_at"] or hit["created_at"]
    marks = " (weak match)" if hit["below_threshold"] else ""
    if hit["contradicts"]:
        marks += " (contradicted by " + ", ".join(f"[{key}]" for key in hit["contradicts"]) + ")"
    return f"[{hit['memory_key']}] {dated:%Y-%m-%d}{marks} {text}"
