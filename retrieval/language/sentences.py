"""Value vectors pooled from sentences, for embedders that read one sentence best.

A small sentence model (all-MiniLM-L6-v2) embeds a multi-sentence value as a blur
of its topics; the mean of its sentences' vectors keeps each of them findable. On
LoCoMo's dialogue turns, cosine alone went from recall@10 0.521 (each turn
embedded whole) to 0.664 (its sentences of three or more words, each carrying the
turn's "Speaker: " label, averaged). Averaging the short ones too ("Wow!") gave
0.644; the best of the whole turn and its sentences without the label, 0.457 (the
questions name the speaker). An embedder says whether it wants
this (`pools_sentences`: the local models do; remote ones read long text well and
were not measured here).
"""

import re

import numpy as np

MIN_WORDS = 3
MAX_SENTENCES = 8  # a long head costs at most this many embeddings
_LABEL = re.compile(r"[^\s:][^:\n]{0,38}:\s+")  # "Caroline: ", "Dr. Lee: " (not "http://")
_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")


def pieces(text: str) -> list[str]:
    """What a value's vector is made of: its sentences of MIN_WORDS or more, each with the value's leading label,
    when it has two or more; else the text itself."""
    label = match.group(0) if (match := _LABEL.match(text)) else ""
    sentences = [s.strip() for s in _BREAK.split(text[len(label) :]) if len(s.split()) >= MIN_WORDS]
    if len(sentences) < 2:
        return [text]
    return [label + sentence for sentence in sentences[:MAX_SENTENCES]]


def pooled(vectors: np.ndarray) -> np.ndarray:
    """The mean of the pieces' vectors, L2-normalised (one piece: its own vector)."""
    if len(vectors) == 1:
        return vectors[0]
    mean = vectors.mean(axis=0)
    return mean / (np.linalg.norm(mean) or 1.0)
