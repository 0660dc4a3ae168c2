"""The records leg: typed records whose fields match the question, served beside the hits (`records`), and the one
that answers it outright, which memory.ask answers from (`source: "record"`, or `"precedent"` for a recorded
decision) with no model call.

A record answers outright when it holds every name the question is about and exactly one of its fields is named
by the question ("What plan is Acme on?" -> customer acme's `plan`); a precedent, when it holds most of the
question's words. Anything less is evidence for the model, not an answer. A record carries no type, tags,
session or dates of a row: a search that filters on anything is served none.
"""

from dataclasses import dataclass

from retrieval.ingest.records import PRECEDENT, rendered
from retrieval.language import names, text
from retrieval.search.legs import Context
from retrieval.store import clickhouse

MATCHED = 5  # records served beside the hits


@dataclass(frozen=True)
class Answer:
    record: dict
    text: str
    source: str  # record or precedent


def matching(ctx: Context) -> list[dict]:
    """The live records of the namespaces sharing the most words with the question, best first."""
    terms = ctx.shape.terms
    if not terms or ctx.eligible.narrowed or "memory_records" not in ctx.side_held:
        return []
    rows = clickhouse.query(
        """
        SELECT namespace, record_key, record_type, fields,
               length(arrayIntersect(terms, {terms:Array(String)})) AS matched
        FROM memory_records FINAL
        WHERE org = {org:String} AND namespace IN {namespaces:Array(String)} AND status = 'active'
          AND sensitivity != 'high' AND hasAny(terms, {terms:Array(String)})
        ORDER BY matched DESC, namespace, record_key
        LIMIT {limit:UInt32}
        """,
        {"org": ctx.org, "namespaces": ctx.namespaces, "terms": terms, "limit": MATCHED},
    )
    return [
        {
            "namespace": row["namespace"],
            "record_key": row["record_key"],
            "record_type": row["record_type"],
            "fields": dict(row["fields"]),
            "text": rendered(row["record_type"], row["record_key"], dict(row["fields"])),
            "matched": round(row["matched"] / len(terms), 6),
        }
        for row in rows
    ]


def answering(found: list[dict], question: str, terms: list[str]) -> Answer | None:
    """The answer the best-matching record gives outright, if it does."""
    if not found:
        return None
    best = found[0]
    if best["record_type"] == PRECEDENT:
        if best["matched"] >= 0.5 and best["fields"].get("decision"):
            why = best["fields"].get("rationale")
            return Answer(best, best["fields"]["decision"] + (f" ({why})" if why else ""), "precedent")
        return None
    held = set(text.value_terms(best["text"]))
    about = {term for name in names.about(question) for term in names.terms(name)}
    if not about or not about <= held:
        return None
    asked = [name for name in best["fields"] if set(text.key_terms(name)) & set(terms)]
    if len(asked) != 1:
        return None
    return Answer(best, best["fields"][asked[0]], "record")
