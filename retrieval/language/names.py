"""The names a text is about: a query's, for the `entity_absent` verdict (retrieval/search/mentions.py), a value's
(its entities, when a write names none: `in_value`), and a value's markers, for the write gates. Read
deterministically: capitalised runs, quoted phrases, identifiers.

Not a name: a sentence's first word when it stands alone (English capitalises it
anyway: "Deploy", "Tell"), question and function words, months and weekdays
(a date, not an entity), a bare number.
"""

import re
from functools import lru_cache

from retrieval.language import text
from retrieval.language.query import MONTHS, STOPWORDS, WEEKDAYS

# Words a sentence may open with that are never names, even in a run ("What Jon said" -> "Jon").
_OPENERS = STOPWORDS | frozenset(
    """is are was were do does did can could would should shall may might must will has have had tell show
    find list give describe name explain summarize summarise please any some all""".split()
)
# "I", contracted too ("I'm sure"); months and weekdays ("on Fridays"): a date too.
_NOT_NAMES = frozenset(
    {
        "i",
        "i'm",
        "i've",
        "i'll",
        "i'd",
        "i’m",
        "i’ve",
        "i’ll",
        "i’d",
        *MONTHS,
        *WEEKDAYS,
        *(day + "s" for day in WEEKDAYS),
    }
)
_CAPITALISED = re.compile(r"[A-Z][\w&.-]*(?:['’][A-Za-z]+)?")
_RUN = re.compile(rf"{_CAPITALISED.pattern}(?:\s+{_CAPITALISED.pattern})*")
_QUOTED = re.compile(r"\"([^\"]{2,80})\"|“([^”]{2,80})”")
# Identifiers: snake_case, camelCase, codes mixing letters and digits (v4.2.3, Q3, db-01), dotted names.
_IDENTIFIER = re.compile(
    r"\b[A-Za-z]+_[A-Za-z0-9_]+\b"
    r"|\b[a-z]+[A-Z][A-Za-z0-9]*\b"
    r"|\b(?=[\w.-]*[A-Za-z])(?=[\w.-]*\d)[A-Za-z0-9]+(?:[.-][A-Za-z0-9]+)*\b"
    r"|\b[a-z0-9]+(?:\.[a-z0-9]+){2,}\b"
)
_SENTENCE_START = re.compile(r"(?:^|[.?!:;]\s+|\n)\s*")
_POSSESSIVE = re.compile(r"['’]s$", re.I)
_YEAR_OR_ORDINAL = re.compile(r"^(?:\d{4}|\d+(?:st|nd|rd|th))$", re.I)


def about(query: str) -> list[str]:
    """The names the query is about, as written, in order, each once."""
    starts = {match.end() for match in _SENTENCE_START.finditer(query)}
    found = []
    for match in _QUOTED.finditer(query):
        found.append((match.group(1) or match.group(2)).strip())
    for match in _RUN.finditer(query):
        words = match.group().split()
        at_start = match.start() in starts
        while words and (words[0].lower() in _OPENERS or _bare(words[0]).lower() in _NOT_NAMES):
            words, at_start = words[1:], False
        if at_start and len(words) == 1:
            continue  # one capitalised word opening a sentence: English capitalises it anyway
        words = [_bare(word) for word in words]
        while words and words[-1].lower() in _NOT_NAMES | STOPWORDS:
            words.pop()
        if words:
            found.append(" ".join(words))
    for match in _IDENTIFIER.finditer(query):
        if not _YEAR_OR_ORDINAL.match(match.group()):
            found.append(match.group())
    seen, names = set(), []
    for name in found:
        if name.lower() not in seen and terms(name):
            seen.add(name.lower())
            names.append(name)
    # A name inside a longer one ("Berg" in "Jonas Berg") is checked as part of it.
    return [n for n in names if not any(n != m and f" {n.lower()} " in f" {m.lower()} " for m in names)]


# A sentence's capitalised first word, alone, that a statement goes on to say something of ("Acme is on the
# Enterprise plan"): a name, where "Production deploys run" is just a capital.
_SUBJECT = re.compile(
    r"(?:^|[.!?]\s+)([A-Z][\w&-]*)(?:['’]s)?\s+(?:is|was|are|were|has|had|will|would|can|could|said|says|and|does|did)\b"
)
MAX_ENTITIES = 16


def in_value(value: str) -> list[str]:
    """The names a stored value is about (its entities when its write named none): `about`'s, and a sentence's
    first word when what follows says something of it; at most MAX_ENTITIES, each once, as written."""
    found = about(value)
    for match in _SUBJECT.finditer(value):
        word = match.group(1)
        if word.lower() not in _OPENERS | _NOT_NAMES and word.lower() not in (name.lower() for name in found):
            found.append(word)
    return found[:MAX_ENTITIES]


# A whole token holding a digit; tried from a token's start only (the lookbehind), so not retried at each position.
_WORD_WITH_DIGIT = re.compile(r"(?<![\w.:/-])(?=[\w.:/-]*\d)[\w.:/-]+")


# Read when a value is written and again when it is a later write's duplicate candidate (~30 us each): remembered.
@lru_cache(maxsize=8192)
def markers(value: str) -> frozenset[str]:
    """What tells one stored fact from a near copy: its numbers, versions, dates and identifiers, and its
    capitalised words (names), lowercased. Two values whose markers differ are distinct facts, whatever their
    cosine ("web-app v4.2.3 deployed by Jonas Berg" is no duplicate of "web-app v2.4.5 deployed by Lena Fischer")."""
    found = {match.group().strip(".:/-").lower() for match in _WORD_WITH_DIGIT.finditer(value)}
    found |= {match.group().lower() for match in _IDENTIFIER.finditer(value)}
    for match in _CAPITALISED.finditer(value):
        word = _bare(match.group())
        if word and word.lower() not in _OPENERS:
            found.add(word.lower())
    return frozenset(found - {""})


def _bare(word: str) -> str:
    return _POSSESSIVE.sub("", word).strip(".-&")


def terms(name: str) -> list[str]:
    """A name's lexical terms as the write path stores them (stemmed word tokens), stopwords left out."""
    words = [word for word in text.tokens(name) if word not in STOPWORDS]
    return list(dict.fromkeys(text.stems(words)))
