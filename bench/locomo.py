"""The LoCoMo dev split's turns and questions as plain text, for the benchmarks (a synthetic stand-in without it)."""

import json
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo-dev"


def corpus() -> tuple[list[str], list[str]]:
    """(dialogue turns, questions)."""
    if DATA.exists():
        turns = [json.loads(line)["text"] for line in (DATA / "memories.jsonl").open()]
        questions = [json.loads(line)["question"] for line in (DATA / "queries.jsonl").open()]
        return turns, questions
    # Said, so a run from a checkout without ../shared is not compared with one that had it.
    print(f"bench: {DATA} not found: synthetic turns and questions stand in", file=sys.stderr)
    turns = [f"note {i}: the team discussed option {i % 31} for project {i % 7}" for i in range(1500)]
    return turns, [f"what did the team say about option {i}" for i in range(100)]
