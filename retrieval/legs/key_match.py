"""Key match: the share of the query's content words a row's key parts cover (a tie-break)."""

from retrieval.legs import Context, matches, rows_to_hits


def run(ctx: Context):
    terms = ctx.shape.terms
    if not terms:
        return []
    rows = matches(ctx, "memory_terms", "term", terms, "AND field = 'key'")
    return rows_to_hits(rows, lambda r: {"key_match": r["matched"] / len(terms)})
