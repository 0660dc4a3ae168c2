"""What a query says about itself: content terms, identifiers, cues and dates.

Deterministic reads of the query text that planning and ranking act on. No
model is asked.
"""

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from retrieval.language import amounts, text

STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in into is it
    its me my of on or our she he her him his so that the their them then there these they this those to
    was we were what when where which who whom whose why will with would you your""".split()
)

# An identifier: snake_case, camelCase, dotted or slashed paths, codes mixing capitals and
# digits, long digit runs (not years), UUIDs.
_IDENTIFIER = re.compile(
    r"\b[A-Za-z]+_[A-Za-z0-9_]+\b"
    r"|\b[a-z]+[A-Z][A-Za-z0-9]*\b"
    r"|\b(?=[A-Z0-9-]*[A-Z])(?=[A-Z0-9-]*\d)[A-Z0-9]+(?:-[A-Z0-9]+)+\b"
    r"|\b\w+(?:[./]\w+){2,}\b"
    r"|\b\d{5,}\b"
    r"|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
)
_PATH = re.compile(r"(?:^|\s)(?:[\w.-]+/)+[\w.-]+|\b\w+\.(?:py|js|ts|go|rs|java|md|sql|yaml|yml|json|toml)\b")
# Time words count as words only: "first" in "first-response" or "now" in "know-now" is no chronology cue.
_RECENCY = re.compile(
    r"(?<![\w-])(latest|current(ly)?|most recent(ly)?|newest|now|these days|recently|last time)(?![\w-])", re.I
)
_EARLIEST = re.compile(r"(?<![\w-])(first|earliest|oldest|originally|initially|at first)(?![\w-])", re.I)
_CUES = re.compile(f"{_RECENCY.pattern}|{_EARLIEST.pattern}", re.I)
# The cues that ask for an order ("the latest deploy", "the first release"), not for the present ("what is she
# reading now", "what did he paint recently"): they order every row about the subject by date.
_ORDINAL = re.compile(r"(?<![\w-])(latest|newest|most recent|first|earliest|oldest)(?![\w-])", re.I)
_CONTACT = re.compile(
    r"\b(e-?mail|phone|mobile|contact|address|reach (him|her|them)|call (him|her|them)|iban|bank account|"
    r"account number|sort code|routing number)\b",
    re.I,
)

# A question about a session or a conversation as a whole, which its digest answers (retrieval/search/legs/digests.py).
_OVERVIEW = re.compile(
    r"\b(summar(y|ise|ize|ies)|overview|recap|what happened|what (did|do) (we|you|they|i|\w+) (talk|chat|discuss)\w*"
    r"|discuss(ed|ion)?|conversations?|sessions?|meetings?)\b",
    re.I,
)

# What a question asks to be computed rather than found (retrieval/search/evidence.py). A span of time first:
# "how many days since" asks for a date difference, not a count.
_TEMPORAL_DIFF = re.compile(
    r"\bhow (long|many (days|weeks|months|years))\b.*\b(ago|since|before|after|between|until|passed|later)\b"
    r"|\bhow long (ago|has|have)\b",
    re.I,
)
_COUNT = re.compile(r"\b(how many|how often|number of|count of)\b", re.I)
# A sum: an amount asked for ("how much", "how many hours") or a total, of a unit the question names or implies.
_SUM = re.compile(r"\b(how much|how many|in total|total|altogether|combined|all together|sum of|overall)\b", re.I)
# The asking words themselves, which no row is about.
INTENT_WORDS = frozenset(
    "how many much often number count times time long ago since days weeks months years "
    "total altogether combined overall sum spend spent hours minutes dollars miles".split()
)

# Words that say how a question asks, not what it asks about ("what kind of", "did she mention", "would he
# consider"): a memory that answers it need not hold them.
FRAME_WORDS = frozenset(
    """kind kinds type types sort sorts name names mention mentioned mentions say said says talk talked tell told
    describe described share shared think thought specific particular consider considered according regarding
    reason reasons general common multiple item items thing things something anything one ones some any other
    others another both either each every all way ways part whether might may likely should also still ever never
    really just even besides apart between towards toward during after before seem seems seemed get got make made
    go went come came take took give gave know knew""".split()
)
# A word's stem is cut back to no fewer letters than this (and no less than ASKED_SHARE of it) to find its row:
# the stemmer leaves derivations whole, so a row saying "mentor" holds a question's "mentorship".
ASKED_STEM_MIN, ASKED_SHARE = 6, 0.6

MONTHS = tuple("january february march april may june july august september october november december".split())
WEEKDAYS = tuple("monday tuesday wednesday thursday friday saturday sunday".split())
_MONTHS = {month: number for number, month in enumerate(MONTHS, 1)}
_NOT_ASKED = STOPWORDS | FRAME_WORDS | INTENT_WORDS | frozenset(MONTHS) | frozenset(WEEKDAYS)  # (asked_words)
_MONTH = r"(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)"
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\.?,?\s+(\d{{4}})\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)
_MONTH_YEAR = re.compile(rf"\b(?:in\s+)?{_MONTH}\.?\s+(\d{{4}})\b", re.I)
_RELATIVE = [
    (re.compile(r"\btoday\b", re.I), 0, 1),
    (re.compile(r"\byesterday\b", re.I), 1, 1),
    (re.compile(r"\blast week\b", re.I), 7, 4),
    (re.compile(r"\blast month\b", re.I), 30, 15),
    (re.compile(r"\blast year\b", re.I), 365, 120),
]
_AGO = re.compile(r"\b(\d+|a|one|two|three|four|five|six|seven)\s+(day|week|month|year)s?\s+ago\b", re.I)
_NUMBER_WORDS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}


@dataclass(frozen=True)
class DateCue:
    """The date a question is about, with how far around it counts (days)."""

    at: datetime
    window_days: float
    said: str


@dataclass
class QueryShape:
    text: str
    terms: list[str] = field(default_factory=list)  # stemmed content words, in order, unique
    # The content words less a recency or chronology cue's own ("latest", "first"): what the rows an ordinal cue
    # orders by date must each hold.
    subject: list[str] = field(default_factory=list)
    ordinal: bool = False  # a cue asking for an order: "latest", "newest", "most recent", "first", "earliest"
    all_terms: list[str] = field(default_factory=list)  # stemmed words, stopwords included (BM25)
    identifiers: list[str] = field(default_factory=list)
    path_shaped: bool = False
    recency: bool = False
    earliest: bool = False
    contact: bool = False
    date: DateCue | None = None
    overview: bool = False  # about a session or conversation as a whole
    intent: str | None = None  # "count", "sum", "temporal_diff", or "latest" (a recency cue): computed evidence


def analyse(query: str, anchor: datetime | None = None) -> QueryShape:
    """Read a query; `anchor` is the 'today' relative dates resolve against."""
    words = text.tokens(query)
    stems = text.stems(words)
    content = [stem for word, stem in zip(words, stems) if word not in STOPWORDS]
    cues = set(text.stems([word for found in _CUES.finditer(query) for word in text.tokens(found.group())]))
    return QueryShape(
        text=query,
        terms=list(dict.fromkeys(content or stems)),
        subject=[term for term in dict.fromkeys(content) if term not in cues],
        all_terms=list(dict.fromkeys(stems)),
        identifiers=[match.group() for match in _IDENTIFIER.finditer(query)],
        path_shaped=bool(_PATH.search(query)),
        recency=bool(_RECENCY.search(query)),
        earliest=bool(_EARLIEST.search(query)),
        ordinal=bool(_ORDINAL.search(query)),
        contact=bool(_CONTACT.search(query)),
        date=resolve_date(query, anchor or datetime.now(UTC)),
        overview=bool(_OVERVIEW.search(query)),
        intent=_intent(query),
    )


def _intent(query: str) -> str | None:
    if _TEMPORAL_DIFF.search(query):
        return "temporal_diff"
    if _SUM.search(query) and amounts.asked_unit(query):
        return "sum"
    if _COUNT.search(query):
        return "count"
    return "latest" if _RECENCY.search(query) else None


def resolve_date(query: str, anchor: datetime) -> DateCue | None:
    """An explicit date in the query, else a relative one ('last week') from the anchor."""
    if match := _ISO_DATE.search(query):
        return _cue(int(match[1]), int(match[2]), int(match[3]), 1, match.group())
    if match := _DAY_MONTH_YEAR.search(query):
        return _cue(int(match[3]), _month(match[2]), int(match[1]), 1, match.group())
    if match := _MONTH_DAY_YEAR.search(query):
        return _cue(int(match[3]), _month(match[1]), int(match[2]), 1, match.group())
    if match := _MONTH_YEAR.search(query):
        return _cue(int(match[2]), _month(match[1]), 15, 16, match.group())
    for pattern, days_back, window in _RELATIVE:
        if match := pattern.search(query):
            return DateCue(anchor - timedelta(days=days_back), window, match.group())
    if match := _AGO.search(query):
        count = _NUMBER_WORDS.get(match[1].lower()) or int(match[1])
        days = count * _UNIT_DAYS[match[2].lower()]
        return DateCue(anchor - timedelta(days=days), max(1, days / 4), match.group())
    return None


def _month(name: str) -> int:
    name = name.lower()
    return next(number for full, number in _MONTHS.items() if full.startswith(name[:3]))


def _cue(year: int, month: int, day: int, window: float, said: str) -> DateCue | None:
    try:
        return DateCue(datetime.combine(date(year, month, day), datetime.min.time(), UTC), window, said)
    except ValueError:
        return None


def asked_words(query: str, names: list[str]) -> list[tuple[str, tuple[str, ...]]]:
    """What the query asks about beyond its names: its content words (not stopwords, frame or asking words, dates,
    numbers or the names' own words), each with the stems a row holding it may be stored under, its own first.
    The `content_absent` verdict reads which of them no memory holds (retrieval/search/mentions.py)."""
    skip = _NOT_ASKED | {word for name in names for word in text.tokens(name)}
    words = [
        word
        for word in dict.fromkeys(text.tokens(query))
        if len(word) > 2 and word not in skip and not any(char.isdigit() for char in word)
    ]
    asked, seen = [], set()
    for word, stem in zip(words, text.stems(words)):
        if stem in seen:  # "paint" and "painting": one word to look up
            continue
        seen.add(stem)
        cut = range(len(stem) - 1, max(ASKED_STEM_MIN, math.ceil(ASKED_SHARE * len(stem))) - 1, -1)
        asked.append((word, (stem, *(stem[:end] for end in cut))))
    return asked
