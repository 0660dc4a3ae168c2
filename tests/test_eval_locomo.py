"""A LoCoMo-format split loaded as question sets reproduces bench/quality.py's recall@10: the evaluation and the
bench search through the same search(). (The dev split itself cannot ship with the tests: a small split in its
format stands in; docs/benchmarks.md quotes the dev split's run.)"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOPICS = [
    ("pottery", "I signed up for a pottery class on saturdays"),
    ("hiking", "we went hiking in the mountains near the lake"),
    ("adoption", "I am researching adoption agencies this month"),
    ("violin", "my daughter started violin lessons at school"),
    ("camping", "the camping trip got rained out last weekend"),
    ("painting", "I painted a sunrise over the harbour"),
    ("marathon", "I am training for the city marathon in october"),
    ("garden", "the tomatoes in my garden finally turned red"),
]


def split(folder: Path) -> None:
    memories, queries = [], []
    for conv, speakers in (("conv-a", ("Ann", "Bo")), ("conv-b", ("Cy", "Di"))):
        for n, (topic, text) in enumerate(TOPICS):
            speaker = speakers[n % 2]
            memories.append(
                {
                    "key": f"{conv}:D1:{n}",
                    "conv": conv,
                    "session": 1 + n // 4,
                    "speaker": speaker,
                    "text": f"{speaker}: {text}",
                    "date": f"2023-05-0{1 + n // 4}T10:00:00",
                }
            )
            queries.append(
                {
                    "qid": f"{conv}:q{n}",
                    "conv": conv,
                    "question": f"what did {speaker} say about the {topic}?",
                    "category": 1 + n % 4,
                    "gold_keys": [f"{conv}:D1:{n}"] + ([f"{conv}:D1:{(n + 3) % 8}"] if n % 3 == 0 else []),
                    "should_abstain": False,
                }
            )
        queries.append(
            {"qid": f"{conv}:neg", "conv": conv, "question": "what is the boiling point of tungsten?", "category": 0,
             "gold_keys": [], "should_abstain": True}
        )  # fmt: skip
    (folder / "memories.jsonl").write_text("\n".join(json.dumps(m) for m in memories) + "\n")
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")


def test_the_evaluation_reproduces_the_bench(tmp_path):
    split(tmp_path)
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("LOOM_")},
        "LOOM_VAR_DIR": str(tmp_path / "var"),
        "LOOM_EMBEDDING_MODEL": "fake-ngram-384",
        "DJANGO_SETTINGS_MODULE": "loom_site.settings",
    }
    args = ["--data", str(tmp_path), "--modes", "--alphas", "0.25", "--resamples", "20", "--eval-sets"]
    done = subprocess.run(
        [sys.executable, "bench/quality.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = re.findall(r"^(conv-[ab])\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+[\d.]+\s+[\d.]+$", done.stdout, re.M)
    assert [(conv, questions) for conv, questions, *_ in rows] == [("conv-a", "9"), ("conv-b", "9")], done.stdout
    for _, _, by_evaluation, by_bench, _ in rows:
        assert by_evaluation == by_bench
    assert {by_bench for *_, by_bench, _ in rows} != {"0.000"}  # something was found: the equality means something
