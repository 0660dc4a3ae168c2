"""Lexical: the share of the query's content words (stemmed) a row's value or key holds."""

from retrieval.legs import Context, matches, rows_to_hits


def run(ctx: Context):
    terms = ctx.shape.terms
    if not terms:
        return []
    return rows_to_hits(matches(ctx, "memory_terms", "term", terms), lambda r: {"lexical": r["matched"] / len(terms)})
