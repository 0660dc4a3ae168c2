"""BM25 over stemmed value terms (k1 1.2, b 0.75).

Corpus size and length come from `corpus_stats` (signed deltas, summed at read
time, so a row written a moment ago counts at once); a term's document
frequency is counted from the same postings the score reads.
"""

import numpy as np

from retrieval.search.legs import BASE, TIE_BREAK, Context, postings, rows_to_hits
from retrieval.store import clickhouse

K1, B = 1.2, 0.75


def run(ctx: Context):
    terms = ctx.shape.all_terms
    if not terms:
        return []
    held = postings.read(ctx, terms, "value")
    if held is not None:
        return _from_mirror(held, ctx.plan.pool_size)
    rows = clickhouse.query(
        f"""
        WITH
            (SELECT sum(docs) FROM corpus_stats
             WHERE org = {{org:String}} AND namespace IN {{namespaces:Array(String)}} AND field = 'value') AS n,
            (SELECT sum(total_len) FROM corpus_stats
             WHERE org = {{org:String}} AND namespace IN {{namespaces:Array(String)}} AND field = 'value') / n AS avgdl
        SELECT namespace, memory_key, agent, session_id, version,
               sum(log(1 + (n - df + 0.5) / (df + 0.5)) * tf * {K1 + 1}
                   / (tf + {K1} * (1 - {B} + {B} * doc_len / avgdl))) AS score
        FROM (
            SELECT namespace, memory_key, agent, session_id, version, term, tf, doc_len,
                   sum(status = 'active') OVER (PARTITION BY term) AS df
            FROM memory_terms FINAL
            WHERE {BASE} AND field = 'value' AND term IN {{terms:Array(String)}}
        )
        WHERE 1 {ctx.eligible.in_eligible()}
        GROUP BY namespace, memory_key, agent, session_id, version
        ORDER BY score DESC, {TIE_BREAK}
        LIMIT {{pool:UInt32}}
        """,
        ctx.params(terms=terms),
    )
    return rows_to_hits(rows, lambda r: {"bm25": r["score"]})


def _from_mirror(held: list, pool: int):
    n = sum(each.rows for each in held)
    if n == 0:
        return []
    avgdl = sum(each.length for each in held) / n
    df = postings.document_frequency(held)

    def weigh(term: str, tf: np.ndarray, length: np.ndarray) -> np.ndarray:
        idf = np.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
        return idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avgdl))

    return [(rid, {"bm25": score}, None, None) for rid, score in postings.best(held, weigh, pool)]
