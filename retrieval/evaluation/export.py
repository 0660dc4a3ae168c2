"""A run as a file: JSON (the report and every answer) or CSV (one row per question per configuration). The Lab's
download links and `loom_eval --format` write the same bytes."""

import csv
import io
import json

from retrieval.evaluation import runs
from tenancy.access import Scope

COLUMNS = [
    "config",
    "question_id",
    "question",
    "category",
    "should_abstain",
    "gold_keys",
    "served_keys",
    "first_gold_rank",
    "recall@10",
    "abstain",
    "abstain_code",
    "latency_ms",
    "cost_usd",
    "error",
]


def as_json(scope: Scope, run_id: str) -> str:
    loaded = runs.load(scope, run_id)
    return json.dumps({**runs.report_of(scope, *loaded), "answers": runs.answers_table(*loaded)}, indent=2, default=str)


def as_csv(scope: Scope, run_id: str) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in runs.answers_table(*runs.load(scope, run_id)):
        writer.writerow({**row, "gold_keys": " ".join(row["gold_keys"]), "served_keys": " ".join(row["served_keys"])})
    return out.getvalue()
