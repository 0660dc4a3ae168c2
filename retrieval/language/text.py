"""Lexical terms: lowercased word tokens, stemmed in Python.

The embedded engine has no `stem()`, so terms are stemmed here at write time
and at query time with the same function, and stored stemmed.
"""

import math
import re
from collections import Counter
from functools import lru_cache

import Stemmer

_WORD = re.compile(r"\w+", re.UNICODE)
# Key parts: split on anything not a letter or digit, and at camelCase humps.
_KEY_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_stemmer = Stemmer.Stemmer("english")
# An ASCII text's word characters are [a-z0-9_] once lowercased: every other character becomes a space, and the words
# are what `split` leaves (a write's 500 values took 2.7 ms that way against 6.3 by the regex).
_ASCII_BREAKS = str.maketrans({c: " " for c in map(chr, range(128)) if not (c.isalnum() or c == "_")})


def tokens(text: str) -> list[str]:
    lowered = text.lower()
    return lowered.translate(_ASCII_BREAKS).split() if lowered.isascii() else _WORD.findall(lowered)


# Stems already made, by word: PyStemmer's own cache costs ~0.4 µs a word (a write's 26k words, 10 ms), a dict
# lookup a tenth of that. A text whose words are all known costs one comprehension; one with a new word is stemmed
# whole. Emptied when full: a language's working vocabulary is far smaller. A number is its own stem and is never
# remembered: ids and amounts are new words nearly every time (keys numbered m0..m999999 filled and emptied the
# cache five times over a million rows' word count, every word stemmed again after each).
_STEMS: dict[str, str] = {}
_STEMS_HELD = 200_000


def stems(words: list[str]) -> list[str]:
    known = _STEMS
    try:
        return [word if word.isdigit() else known[word] for word in words]
    except KeyError:
        stemmed = _stemmer.stemWords(words)
        if len(known) > _STEMS_HELD:
            known.clear()
        known.update((word, stem) for word, stem in zip(words, stemmed) if not word.isdigit())
        return stemmed


# A write computes a value's terms for the postings and again for the vector mirror's word counts (and ranking a
# key's parts once per candidate): remembered, so each is stemmed once. Callers only read the Counters.
@lru_cache(maxsize=8192)
def value_terms(text: str) -> Counter:
    """Stemmed term frequencies of a value."""
    return Counter(stems(tokens(text)))


@lru_cache(maxsize=8192)
def key_terms(key: str) -> Counter:
    """Stemmed parts of a memory key: `user.preferredEditor` -> user, prefer, editor."""
    parts = [part.lower() for part in _KEY_PART.findall(key)]
    return Counter(stems(parts))


# The tags a prompt fences data with (memory.ask's memories, conversation and computed evidence, the fallback judge's
# notes), with whatever a tag may carry before its `>` (`</memories foo>` closes the fence as well).
_FENCE = re.compile(r"</?\s*(memories|conversation|computed|note)\b[^>]*>", re.IGNORECASE)


def fenced(content: str) -> str:
    """Text inside a fence cannot close it: a stored memory must not pose as the prompt around it."""
    return _FENCE.sub(lambda m: f"({m.group(1)})", content)


_PIECE = re.compile(r"\w+|[^\w\s]")


def token_count(text: str) -> int:
    """Tokens as the service counts them against a budget (context.pack's max_tokens): four characters a token, or
    one a word or mark where that is more. No model's tokenizer ships with the service (the local embedder's counts
    word pieces of its own); this is the common estimate, made conservative for short words and punctuation."""
    return max(math.ceil(len(text) / 4), len(_PIECE.findall(text)))


def cut_to_tokens(text: str, tokens: int, mark: str = "…") -> str:
    """The longest prefix of `text` that, with `mark` after it, counts at most `tokens` ("" if none does)."""
    low, high = 0, len(text)
    while low < high:  # a prefix counts no fewer tokens than a shorter one: the longest that fits is found by halves
        middle = (low + high + 1) // 2
        if token_count(text[:middle].rstrip() + mark) <= tokens:
            low = middle
        else:
            high = middle - 1
    return text[:low].rstrip() + mark if low else ""
