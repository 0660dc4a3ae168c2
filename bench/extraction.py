"""memory.set_from_messages against memory.set, on a LoCoMo-format split: the same conversations written both
ways, each into its own namespace, and the split's questions searched in each.

    .venv/bin/python bench/extraction.py [--data ../shared/data/locomo-dev] [--resamples 1000] [--convs conv-26 ...]

`make bench-extraction` runs it as `make run` serves (the local embedder, hybrid search).

- `memory.set`: one memory per turn, as bench/quality.py writes them (valid_at the session's date, the speaker as
  entity): the baseline, timed in the same run.
- `set_from_messages`: each session sent as one conversation (a message per turn: the first speaker `user`, the
  other `assistant`, each named), in requests of at most 200 messages, through the service layer; the process's
  LLM extracts (the fake unless LOOM_LLM_MODEL names a model: deterministic, so the rows are the same every run).

Printed: write throughput (turns/s, median of the conversations; memory.set also sent a session per request, as
set_from_messages is, for the per-request cost) and model calls per 100 turns; then, per
conversation (each a fold: nothing here is tuned) and overall, recall@10 of the gold turns with its 95% bootstrap
interval, each way, searched as bench/quality.py's `default` (top_k 20, fast budget). A hit that is an extracted fact
stands for the turns it names (its `source_keys`): the question asks for the evidence, and the fact is its words
(the search shows a fact and its turns once).
"""

import argparse
import statistics
import sys
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quality  # sets up Django as bench/quality.py does

from retrieval.ingest import conversation, write
from retrieval.providers import costs, llm
from retrieval.providers.embedders import get_embedder
from retrieval.search import service
from retrieval.search.plan import SearchRequest
from tenancy.access import Scope
from tenancy.roles import Role

MAX_MESSAGES = 200


def scope(conv: str, way: str) -> Scope:
    return Scope(org="bench", namespace=f"{conv}-{way}", role=Role.ADMIN, subject="bench")


def by_session(memories: list[dict]) -> dict[tuple[str, str], list[dict]]:
    sessions = defaultdict(list)
    for m in memories:
        sessions[(m["conv"], str(m["session"]))].append(m)
    return sessions


def as_turns(conv: str, turns: list[dict], way: str = "set", batch: int = 500) -> float:
    start = time.perf_counter()
    items = [quality.turn_row(m) for m in turns]
    for at in range(0, len(items), batch):
        write.set_memories(scope(conv, way), items[at : at + batch])
    return time.perf_counter() - start


def as_session_requests(conv: str, sessions: dict) -> float:
    """memory.set of the same turns, a request per session (as set_from_messages is sent): the per-request cost."""
    return sum(as_turns(conv, turns, "session", MAX_MESSAGES) for (of, _), turns in sessions.items() if of == conv)


def as_messages(conv: str, sessions: dict, turn_of: dict) -> tuple[float, int]:
    """Each session as conversations of at most MAX_MESSAGES; fills turn_of (the split's key -> the stored turn's)."""
    start, calls = time.perf_counter(), 0
    for (of, session), turns in sessions.items():
        if of != conv:
            continue
        first = turns[0]["speaker"]
        for at in range(0, len(turns), MAX_MESSAGES):
            part = turns[at : at + MAX_MESSAGES]
            messages = [
                conversation.Message(
                    role="user" if m["speaker"] == first else "assistant",
                    name=m["speaker"],
                    content=m["text"].split(": ", 1)[1],
                    created_at=datetime.fromisoformat(m["date"] + "+00:00"),
                )
                for m in part
            ]
            done = conversation.set_from_messages(scope(conv, "messages"), messages, session)
            assert done.extraction == "done", done.error
            calls += done.model_calls
            turn_of.update({m["key"]: result.memory_key for m, result in zip(part, done.turns)})
    return time.perf_counter() - start, calls


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(quality.ROOT.parent / "shared" / "data" / "locomo-dev"))
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--convs", nargs="+", help="only these conversations (default: every one)")
    args = parser.parse_args()
    data = Path(args.data)
    memories, queries = quality.split(data, args.convs)
    convs, embedder = sorted({m["conv"] for m in memories}), get_embedder()
    sessions, turn_of, speed, calls = by_session(memories), {}, defaultdict(dict), 0
    for conv in convs:
        turns = [m for m in memories if m["conv"] == conv]
        speed["set"][conv] = len(turns) / as_turns(conv, turns)
        speed["session"][conv] = len(turns) / as_session_requests(conv, sessions)
        with costs.accounted("bench", conv, "memory.set_from_messages", "bench"):
            took, made = as_messages(conv, sessions, turn_of)
        speed["messages"][conv], calls = len(turns) / took, calls + made

    def recall(way: str, q: dict) -> float:
        request = SearchRequest(query=q["question"], top_k=20, retrieval_budget="fast")
        hits = service.search(scope(q["conv"], way), request).hits[:10]
        keys = [turn for hit in hits for turn in (hit["source_keys"] or [hit["memory_key"]])]  # a fact: its turns
        gold = {turn_of[key] for key in q["gold_keys"] if key in turn_of} if way == "messages" else set(q["gold_keys"])
        return len(gold & set(keys)) / len(gold)

    answerable = [q for q in queries if q["category"] in quality.CATEGORIES and q["gold_keys"]]
    scores = {way: {id(q): recall(way, q) for q in answerable} for way in ("set", "messages")}
    print(
        f"{data.name}: {len(memories)} turns in {len(sessions)} sessions, {len(answerable)} answerable questions; "
        f"embedder {embedder.model_name}; LLM {llm.get_llm().model}\n"
    )
    print(f"{'write':<22}{'turns/s (median)':>18}{'per conversation':>40}")
    ways = (("set", "memory.set"), ("session", "memory.set by session"), ("messages", "set_from_messages"))
    for way, label in ways:
        each = " ".join(f"{conv} {speed[way][conv]:.0f}" for conv in convs)
        print(f"{label:<22}{statistics.median(speed[way].values()):>18.1f}{each:>40}")
    print(f"model calls per 100 turns: {100 * calls / len(memories):.2f} ({calls} calls)\n")
    print(f"{'recall@10 of gold turns':<26}{'memory.set':>12}{'95% CI':>15}{'set_from_messages':>19}{'95% CI':>15}")
    for conv in [*convs, None]:
        asked = [q for q in answerable if conv is None or q["conv"] == conv]
        row = f"{conv or 'all':<26}"
        for way in ("set", "messages"):
            values = [scores[way][id(q)] for q in asked]
            low, high = quality.interval(values, args.resamples)
            row += f"{quality.mean(values):>12.3f}{f'{low:.3f}-{high:.3f}':>15}"
        print(row)


if __name__ == "__main__":
    main()
