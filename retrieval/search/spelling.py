"""Query spelling: a short query's lowercase words embed in the identifier spelling the namespace's rows use.

An embedder reads `datalakecatalog` and `DataLakeCatalog` as different strings. So a
query of at most LOOM_MEMORY_SEARCH_QUERY_SPELLING_MAX_WORDS words embeds each
all-lowercase word of four or more letters as the namespace's live rows spell it: a
spelling with a capital past the first letter, used by at least two rows and by twice as
many as write the word plainly (title case counts as plain: "What" opens a sentence, it
is no identifier). Lexical matching is case-insensitive already and is unchanged.

Each word's answer is kept a minute, so a query looks up only the words no recent query had. A namespace whose lookup fails three times in a row
backs off (a minute, doubling up to an hour; a success ends the streak): its queries
embed as typed, with `query_spellings_skipped`.
"""

import logging
import re
import threading
import time
from dataclasses import dataclass, field

from django.conf import settings

from retrieval import index
from retrieval.language import text
from retrieval.store import clickhouse

log = logging.getLogger(__name__)

MIN_LETTERS = 4
CACHE_S = 60.0
MAX_REMEMBERED = 100_000  # words; past it, expired answers are dropped
LOOKUP_BOUND_S = 0.4
MIRROR_ROWS_A_WORD = 1_000
BACKOFF_AFTER, BACKOFF_FIRST_S, BACKOFF_MAX_S = 3, 60.0, 3600.0

_WORD = re.compile(r"\w+")


@dataclass
class Work:
    """What query spelling did for one search: `retrieval_work` in the response."""

    query_spellings: dict[str, str] = field(default_factory=dict)  # the word as typed -> the corpus spelling
    query_spellings_skipped: bool = False


def candidates(query: str) -> list[str]:
    """The query's words that may be respelled; none when the query is longer than the setting allows."""
    words = _WORD.findall(query)
    limit = settings.LOOM_MEMORY_SEARCH_QUERY_SPELLING_MAX_WORDS
    if not limit or len(words) > limit:
        return []
    return sorted({word for word in words if word.isalpha() and word.islower() and len(word) >= MIN_LETTERS})


def respelled(query: str, spellings: dict[str, str]) -> str:
    for word, spelling in spellings.items():
        query = re.sub(rf"\b{re.escape(word)}\b", spelling, query)
    return query


class _State:
    def __init__(self):
        self.lock = threading.Lock()
        self.answers: dict[tuple, tuple[float, str | None]] = {}  # (target, org, ns, word) -> (when, its spelling)
        self.failures: dict[tuple, tuple[int, float]] = {}  # (target, org, ns) -> (streak, backing off until)


_state = _State()


def remembered(org: str, namespace: str, words: list[str]) -> tuple[dict[str, str], list[str]]:
    """The spellings of the words looked up in the last minute, and the words still to look up."""
    known, missing, now, target = {}, [], time.monotonic(), clickhouse.target()
    with _state.lock:
        for word in words:
            held = _state.answers.get((target, org, namespace, word))
            if held is None or now - held[0] >= CACHE_S:
                missing.append(word)
            elif held[1]:
                known[word] = held[1]
    return known, missing


def backing_off(org: str, namespace: str) -> bool:
    with _state.lock:
        _, until = _state.failures.get((clickhouse.target(), org, namespace), (0, 0.0))
    return time.monotonic() < until


def lookup(org: str, namespace: str, model: str, words: list[str]) -> dict[str, str]:
    """The corpus spelling of each word that has one, remembered a minute: from the namespace's vector mirror when
    it is loaded, else one statement (which reads every value of the namespace: past its bound at 1M rows)."""
    counts = _from_mirror(org, namespace, model, words)
    if counts is None:
        counts = dict(_from_clickhouse(org, namespace, words))
    spellings = {word: found for word in words if (found := _spelling(word, counts))}
    now, target = time.monotonic(), clickhouse.target()
    with _state.lock:
        if len(_state.answers) > MAX_REMEMBERED:  # forget what is past its minute
            _state.answers = {key: held for key, held in _state.answers.items() if now - held[0] < CACHE_S}
        for word in words:
            _state.answers[(target, org, namespace, word)] = (now, spellings.get(word))
    return spellings


def _from_mirror(org: str, namespace: str, model: str, words: list[str]) -> dict[str, int] | None:
    """How many live rows (by key, agent and session) write each spelling of these words, as the statement counts
    them: read from the rows the mirror's postings name for each word's stem. A word more than MIRROR_ROWS_A_WORD
    rows hold is counted over that many of them, evenly spaced: the rule compares shares. None when the namespace's
    mirror is not loaded, or does not hold every live row's words."""
    mirror = index.peek(org, namespace, model) if index.enabled() else None
    stems = dict(zip(words, text.stems(words)))
    held = mirror.values_holding(sorted(set(stems.values())), MIRROR_ROWS_A_WORD) if mirror else None
    if held is None:
        return None
    writers: dict[str, set] = {}
    for word, stem in stems.items():
        written = re.compile(rf"(?<!\w){re.escape(word)}(?!\w)", re.IGNORECASE)  # the word as a whole \w+ token
        for rid, value in held[stem]:
            for spelling in set(written.findall(value)):
                writers.setdefault(spelling, set()).add((rid.memory_key, rid.agent, rid.session_id))
    return {spelling: len(rows) for spelling, rows in writers.items()}


def _from_clickhouse(org: str, namespace: str, words: list[str]) -> list[tuple[str, int]]:
    return clickhouse.query_rows(
        r"""
        SELECT word, uniqExact(memory_key, agent, session_id) AS rows FROM (
            SELECT memory_key, agent, session_id,
                   arrayJoin(arrayFilter(w -> has({words:Array(String)}, lower(w)), extractAll(value, '\\w+'))) AS word
            FROM memories FINAL
            WHERE org = {org:String} AND namespace = {namespace:String} AND status = 'active'
              AND multiSearchAnyCaseInsensitive(value, {words:Array(String)})
        )
        GROUP BY word
        """,
        {"org": org, "namespace": namespace, "words": words},
    )


def _spelling(word: str, rows_by_spelling: dict[str, int]) -> str | None:
    plain = sum(n for spelling, n in rows_by_spelling.items() if spelling in (word, word.capitalize()))
    identifiers = [
        (n, spelling)
        for spelling, n in rows_by_spelling.items()
        if spelling.lower() == word and any(c.isupper() for c in spelling[1:])
    ]
    if not identifiers:
        return None
    rows, spelling = max(identifiers, key=lambda found: (found[0], found[1]))  # ties: one answer, always the same
    return spelling if rows >= 2 and rows >= 2 * plain else None


def failed(org: str, namespace: str, exc: BaseException) -> None:
    """A lookup failed or ran past its bound: the third in a row starts the namespace's back-off."""
    log.warning("query spelling lookup for %s/%s skipped: %s %s", org, namespace, type(exc).__name__, exc)
    key = (clickhouse.target(), org, namespace)
    with _state.lock:
        streak = _state.failures.get(key, (0, 0.0))[0] + 1
        wait = min(BACKOFF_FIRST_S * 2 ** (streak - BACKOFF_AFTER), BACKOFF_MAX_S) if streak >= BACKOFF_AFTER else 0
        _state.failures[key] = (streak, time.monotonic() + wait)


def succeeded(org: str, namespace: str) -> None:
    with _state.lock:
        _state.failures.pop((clickhouse.target(), org, namespace), None)


def forget() -> None:
    """Drop every remembered answer and back-off (tests)."""
    with _state.lock:
        _state.answers.clear()
        _state.failures.clear()
