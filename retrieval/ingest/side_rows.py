"""The rows a memory version keeps beside it, and their retirement.

Terms (term_input, the lexical statistics), the entity graph (mentions, edges, triples), the amounts its value
states (derived_facts); and the side tables that carry a version's status, retired with it.
"""

from datetime import UTC, datetime

from retrieval.language import amounts, text
from retrieval.store import clickhouse, reads
from retrieval.store.rows import ACTIVE, IDENTITY_COLUMNS, THESE_VERSIONS, next_version, versions
from tenancy.access import Scope

IDENTITY = ("org", *IDENTITY_COLUMNS)


def derived_facts(row: dict) -> list[dict]:
    """The amounts a row's value states (retrieval/language/amounts.py), for computed evidence's sums."""
    ident = {k: row[k] for k in IDENTITY}
    dated_at = row["valid_at"] or row["created_at"]
    return [
        {**ident, "position": at, "value": amount.value, "unit": amount.unit, "said": amount.said, "dated_at": dated_at}
        for at, amount in enumerate(amounts.found(row["value"]))
    ]


def term_input(row: dict, status: str, sign: int, revision: int) -> list[dict]:
    """A row version's change to the lexical index: one term_input row per field.

    `sign` +1 enters the BM25 statistics, -1 leaves them, 0 only changes the
    postings' status. High-sensitivity rows were never indexed and stay out.
    """
    if not row["embedding_model"]:
        return []
    ident = {k: row[k] for k in IDENTITY}
    out = []
    for name, counts in (("value", text.value_terms(row["value"])), ("key", text.key_terms(row["memory_key"]))):
        out.append(
            {
                **ident,
                "field": name,
                "revision": revision,
                "status": status,
                "sign": sign,
                "terms": " ".join(counts),
                "tfs": list(counts.values()),
                "doc_len": sum(counts.values()),
            }
        )
    return out


class Graph:
    """A batch's entity mentions, entity edges and triples (entities lowercased for matching)."""

    def __init__(self):
        self.mentions, self.edges, self.triples = [], [], []

    def add(self, row: dict, now: datetime):
        ident = {k: row[k] for k in IDENTITY}
        base = {**ident, "revision": row["revision"], "status": ACTIVE, "created_at": now}
        entities = sorted({entity.lower() for entity in row["entities"]})
        named = {part.lower() for subject, _, obj in row["triples"] for part in (subject, obj)}
        self.mentions += [{**base, "entity": entity} for entity in sorted(set(entities) | named)]
        pairs = {(a, b, "co_mention") for a in entities for b in entities if a != b}
        for subject, relation, obj in row["triples"]:
            subject, obj = subject.lower(), obj.lower()
            pairs |= {(subject, obj, relation), (obj, subject, relation)}
            self.triples.append(
                {
                    **base,
                    "subject": subject,
                    "relation": relation,
                    "object": obj,
                    "relation_terms": list(text.value_terms(relation)),
                }
            )
        self.edges += [{**base, "src": a, "dst": b, "relation": rel} for a, b, rel in sorted(pairs)]

    def tables(self) -> list[tuple[str, list[dict]]]:
        return [("entity_mentions", self.mentions), ("entity_edges", self.edges), ("entity_triples", self.triples)]


# The side tables that carry a row version's status: vectors, chunks, the entity graph.
SIDE_TABLES = ("memory_embeddings", "memory_chunks", "entity_mentions", "entity_edges", "entity_triples")


def retire_side_rows(scope: Scope, rows: list[dict], status: str, revision: int) -> None:
    """Carry a status change onto the side-table rows of these row versions (terms go through term_input)."""
    if not rows:
        return
    params = {
        "org": scope.org,
        "namespace": scope.namespace,
        "status": status,
        "revision": revision,
        **versions([(row["memory_key"], row["agent"], row["session_id"], row["version"]) for row in rows]),
    }
    for table in SIDE_TABLES:
        clickhouse.command(
            f"""
            INSERT INTO {table}
            SELECT * REPLACE ({{status:String}} AS status, {{revision:UInt64}} AS revision)
            FROM {table} FINAL
            WHERE org = {{org:String}} AND namespace = {{namespace:String}} AND {THESE_VERSIONS}
            """,
            params,
        )


def retire_side(table: str, scope: Scope, key: str) -> int:
    """Retire the live version of `key` in a side table (a digest, an entity summary, a record) with a newer one
    of status 'deleted'; how many were live (0 or 1)."""
    previous = reads.live_side(table, scope, [key]).get(key)
    if previous is None:
        return 0
    gone = {**previous, "version": next_version(), "status": "deleted", "actor": scope.subject}
    clickhouse.insert(table, [{**gone, "updated_at": datetime.now(UTC)}])
    return 1
