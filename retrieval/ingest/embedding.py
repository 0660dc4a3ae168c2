"""Embedding what memory stores: a value's head and passages, its key, a turn read with the one before it.

The write path, embed_pending, reembed and the texts beside the rows (digests, entity summaries) all embed here.
"""

import logging

import numpy as np
from django.conf import settings

from retrieval import knobs
from retrieval.language import chunking, sentences
from retrieval.providers import customer
from retrieval.providers.embedders import get_embedder
from retrieval.store import clickhouse
from tenancy.access import Scope

log = logging.getLogger(__name__)


def passages(value: str) -> list[tuple[int, str]]:
    """A long value's passages: the row's own vector covers only its head."""
    if len(value) <= settings.LOOM_MEMORY_EMBED_HEAD_CHARS:
        return []
    return chunking.split(value, settings.LOOM_MEMORY_CHUNK_CHARS, knobs.CHUNK_OVERLAP_CHARS)


def embed_rows(embedder, rows: list[tuple[str, str | None, list[tuple[int, str]], str | None]]) -> list[tuple]:
    """(value, key, passages, context) -> (value vector, key vector, passage vectors), in one provider call; a key of
    None (a text with no key: a digest, an entity summary) is not embedded and its vector is None.

    A value's vector is its head's (LOOM_MEMORY_EMBED_HEAD_CHARS), pooled from its sentences when the embedder
    asks for that (retrieval/language/sentences.py), and for a turn with a `context` (the turn before it, `turn_contexts`)
    blended with the vector of the two read together. The write path, embed_pending and reembed all embed
    through here.
    """
    head_chars = settings.LOOM_MEMORY_EMBED_HEAD_CHARS
    texts, spans = [], []
    for value, key, cut, context in rows:
        head = value[:head_chars]
        parts = sentences.pieces(head) if embedder.pools_sentences else [head]
        together = [f"{context[-head_chars:]}\n{head}"] if context else []
        spans.append((len(parts), len(together)))
        texts += parts + together + ([] if key is None else [key]) + [passage for _, passage in cut]
    vectors = embedder.embed_many(texts)
    out, at = [], 0
    for (_, key, cut, _), (parts, together) in zip(rows, spans):
        head = sentences.pooled(vectors[at : at + parts])
        at += parts
        if together:
            blend = head + knobs.CONTEXT_WEIGHT * vectors[at]
            head = blend / (np.linalg.norm(blend) or 1.0)
            at += 1
        keyed = key is not None
        out.append((head, vectors[at] if keyed else None, vectors[at + keyed : at + keyed + len(cut)]))
        at += keyed + len(cut)
    return out


def embed_texts(scope: Scope, op: str, texts: list[str], users: set[str]) -> list | None:
    """Texts beside the rows (session digests, entity summaries), embedded as values are, in one call metered to
    `op`; None when the org's model calls are refused (the caller stores a stub for embed_pending)."""
    if not texts:
        return []
    try:
        with customer.for_org(scope.org, scope.namespace, scope.subject, op, customer.one_user(users)):
            return [vector for vector, _, _ in embed_rows(get_embedder(), [(text, None, [], None) for text in texts])]
    except customer.SWITCHED as exc:
        log.info("%s: %d texts wait unembedded: %s", op, len(texts), exc)
        return None


def turn_contexts(org: str, namespace: str, rows: list[dict]) -> list[str | None]:
    """Each conversation turn's preceding turn in its session (None for any other row, and a session's first):
    the batch's earlier turns first, then the session's newest stored turn of another key older than it."""
    out: list[str | None] = [None] * len(rows)
    last: dict[str, str] = {}
    wanted = []
    for at in sorted(range(len(rows)), key=lambda at: rows[at]["version"]):  # in the order they were written
        row = rows[at]
        if row["memory_type"] != "turn" or not row["session_id"]:
            continue
        if row["session_id"] in last:
            out[at] = last[row["session_id"]]
        else:
            wanted.append(at)
        last[row["session_id"]] = row["value"]
    if not wanted:
        return out
    stored = clickhouse.query(
        """
        SELECT session_id, memory_key, version, value FROM memories FINAL
        WHERE org = {org:String} AND namespace = {namespace:String} AND memory_type = 'turn' AND status = 'active'
          AND session_id IN {sessions:Array(String)} AND version < {before:UInt64}
        ORDER BY session_id, version
        """,
        {
            "org": org,
            "namespace": namespace,
            "sessions": sorted({rows[at]["session_id"] for at in wanted}),
            "before": max(rows[at]["version"] for at in wanted),
        },
    )
    for at in wanted:
        row = rows[at]
        earlier = [
            s
            for s in stored
            if s["session_id"] == row["session_id"]
            and s["version"] < row["version"]
            and s["memory_key"] != row["memory_key"]
        ]
        out[at] = earlier[-1]["value"] if earlier else None
    return out
