"""Exact: the rows whose value holds an identifier the query names (a version, a ticket, a code), as written.

The other legs read words: `1.4.6` is the terms 1, 4 and 6 to them, as `1.6.4` is, and a cosine barely tells
them apart. This leg runs in every mode when the query holds an identifier (language/query.py): the rows holding
all of its terms, read through their values for the identifier itself between word boundaries, case aside. A row
found here is served first (rank.order), whatever the mode weighed.
"""

import re
from collections import Counter

from retrieval.language import text
from retrieval.search.legs import BASE, TIE_BREAK, Context, Hit
from retrieval.store import clickhouse
from retrieval.store.rows import row_id


def run(ctx: Context) -> list[Hit]:
    """Each row holding some of the query's identifiers, its signal `exact` the share of them it holds."""
    identifiers, held = ctx.shape.identifiers, Counter()
    for identifier in identifiers:
        held.update(row_id(row) for row in _holding(ctx, identifier))
    return [(rid, {"exact": count / len(identifiers)}, None, None) for rid, count in sorted(held.items())]


def holds(value: str, identifier: str) -> bool:
    """Whether `value` holds `identifier` as a whole: not inside a longer code (`1.4.6` is not in `11.4.6` nor in
    `1.4.6.2`), case aside."""
    return re.search(rf"(?<![\w.]){re.escape(identifier)}(?![\w]|\.\w)", value, re.IGNORECASE) is not None


def _holding(ctx: Context, identifier: str) -> list[dict]:
    terms = sorted(text.value_terms(identifier))
    if not terms:
        return []
    rows = clickhouse.query(
        f"""
        SELECT namespace, memory_key, agent, session_id, version, any(value) AS shown
        FROM memories
        WHERE org = {{org:String}} AND namespace IN {{namespaces:Array(String)}}
          AND (namespace, memory_key, agent, session_id, version) IN (
              SELECT namespace, memory_key, agent, session_id, version FROM memory_terms FINAL
              WHERE {BASE} AND field = 'value' AND term IN {{terms:Array(String)}} {ctx.eligible.in_eligible()}
              GROUP BY namespace, memory_key, agent, session_id, version
              HAVING uniqExact(term) = {{n_terms:UInt32}})
          AND positionCaseInsensitiveUTF8(value, {{identifier:String}}) > 0
        GROUP BY namespace, memory_key, agent, session_id, version
        ORDER BY {TIE_BREAK}
        LIMIT {{pool:UInt32}}
        """,
        ctx.params(terms=terms, n_terms=len(terms), identifier=identifier),
    )
    return [row for row in rows if holds(row["shown"], identifier)]
