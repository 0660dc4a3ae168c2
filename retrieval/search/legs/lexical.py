"""Lexical: how much of the query's content (stemmed words) a row's value or key holds, each word weighted by
its rarity in the namespace.

A plain share counts "Caroline" in a namespace where every row is hers as much as
"sunrise", the word that picks the row out. Weighting each word by its inverse
document frequency (BM25's idf, over the same postings) makes the lexical score
follow the words that discriminate: on LoCoMo's dev split, cosine plus the
weighted share gained 2-4 points of recall@10 over cosine plus the plain share on
every leave-one-conversation-out fold (bench/quality.py). A query word no row
holds counts at full weight, so a row that holds all the query's rare words
scores 1.

The leg keeps its pool's best rows, and rows holding the same words score alike, so its cut falls among ties and
the rows' names decide which of them carry the signal. `complete` gives the signal to the rest of the pool (rows
another leg found), scored alike, so fusion weighs a row's words whatever its name.
"""

import math

import numpy as np

from retrieval.search.legs import BASE, TIE_BREAK, Context, Hit, postings, rows_to_hits
from retrieval.store import clickhouse
from retrieval.store.rows import IDENTITY_TYPE, RowId


def run(ctx: Context) -> list[Hit]:
    terms = ctx.shape.terms
    if not terms:
        return []
    held = postings.read(ctx, terms, "any")
    if held is not None:
        weigh, total = _weigh(held, len(terms))
        return _hits(postings.best(held, weigh, ctx.plan.pool_size), total)
    return _sql(ctx, terms)


def complete(ctx: Context, ids: list[RowId], terms: list[str] | None = None) -> list[Hit]:
    """The signal of these pool rows, for those that hold some of the query's words (or of `terms`)."""
    terms = ctx.shape.terms if terms is None else terms
    if not terms or not ids:
        return []
    held = postings.read(ctx, terms, "any")
    if held is not None:
        weigh, total = _weigh(held, len(terms))
        return _hits(postings.scored(held, weigh, ids), total)
    return _sql(ctx, terms, ids)


def holding_every(ctx: Context, ids: list[RowId], terms: list[str]) -> set[RowId]:
    """Those of these pool rows that hold every one of `terms` (a share of 1: a term no row holds counts in the
    whole, so then none does)."""
    return {rid for rid, signals, _, _ in complete(ctx, ids, terms) if signals["lexical"] >= 1 - 1e-9}


def _sql(ctx: Context, terms: list[str], ids: list[RowId] | None = None) -> list[Hit]:
    """The statement: the pool's best rows, or (`ids`) these rows, each term weighed over every row that holds it."""
    only = f"AND (namespace, memory_key, agent, session_id, version) IN {{ids:{IDENTITY_TYPE}}}" if ids else ""
    rows = clickhouse.query(
        f"""
        WITH (SELECT sum(docs) FROM corpus_stats
              WHERE org = {{org:String}} AND namespace IN {{namespaces:Array(String)}} AND field = 'value') AS n,
             log(1 + (n + 0.5) / 0.5) AS unseen_idf
        SELECT namespace, memory_key, agent, session_id, version, sum(idf) AS weight,
               any(held_idf) + ({{n_terms:UInt32}} - any(held_terms)) * unseen_idf AS total
        FROM (
            SELECT *, log(1 + (greatest(n - df, 0) + 0.5) / (df + 0.5)) AS idf,
                   sum(idf / df) OVER () AS held_idf,  -- each term's idf once: it sits on df rows
                   uniqExact(term) OVER () AS held_terms
            FROM (
                SELECT *, count() OVER (PARTITION BY term) AS df
                FROM (
                    SELECT DISTINCT namespace, memory_key, agent, session_id, version, term
                    FROM memory_terms FINAL
                    WHERE {BASE} AND term IN {{terms:Array(String)}}
                )
            )
        )
        WHERE 1 {ctx.eligible.in_eligible()} {only}
        GROUP BY namespace, memory_key, agent, session_id, version
        ORDER BY weight DESC, {TIE_BREAK}
        LIMIT {{pool:UInt32}}
        """,
        ctx.params(
            terms=terms,
            n_terms=len(terms),
            **({"ids": [rid.as_tuple() for rid in ids], "pool": len(ids)} if ids else {}),
        ),
    )
    return rows_to_hits(rows, lambda r: {"lexical": r["weight"] / r["total"]})


def _weigh(held: list, n_terms: int):
    """Each held term's weight (its idf), and the query's whole weight (a word no row holds counts at full idf)."""
    n = sum(each.rows for each in held)
    df = postings.document_frequency(held)
    idf = {term: math.log(1 + (max(n - count, 0) + 0.5) / (count + 0.5)) for term, count in df.items()}
    total = sum(idf.values()) + (n_terms - len(idf)) * math.log(1 + (n + 0.5) / 0.5)

    def weigh(term: str, tf: np.ndarray, length: np.ndarray) -> np.ndarray:
        return np.full(len(tf), idf[term])

    return weigh, total


def _hits(scored: list[tuple[RowId, float]], total: float) -> list[Hit]:
    return [(rid, {"lexical": weight / total}, None, None) for rid, weight in scored]
