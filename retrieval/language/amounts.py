"""Amounts a text states (money, hours, distances, weights), read deterministically: the `derived_facts` a write
stores beside a row, which a `sum` question ("how much did I spend on books in total?") adds up.

Each amount is a number with its unit, in a canonical unit (`USD`, `EUR`, `GBP`, `JPY`, `hour`, `km`, `mile`,
`kg`, `lb`): minutes count as hours, thousands and millions are multiplied out. A bare number (a year, a count)
has no unit and is no amount.
"""

import re
from typing import NamedTuple


class Amount(NamedTuple):
    value: float
    unit: str
    said: str  # the words it was read from


_NUMBER = r"(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
_SCALE = r"(?:\s?(k|thousand|m|million|bn|billion)\b)?"
_SYMBOLS = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}
CURRENCIES = frozenset(_SYMBOLS.values())
_SCALES = {"k": 1e3, "thousand": 1e3, "m": 1e6, "million": 1e6, "bn": 1e9, "billion": 1e9}
# A unit word (lower case) -> its canonical unit and the factor into it.
_WORDS = {
    **dict.fromkeys(("dollar", "dollars", "usd", "bucks"), ("USD", 1.0)),
    **dict.fromkeys(("euro", "euros", "eur"), ("EUR", 1.0)),
    **dict.fromkeys(("gbp", "quid"), ("GBP", 1.0)),
    **dict.fromkeys(("yen", "jpy"), ("JPY", 1.0)),
    **dict.fromkeys(("hour", "hours", "hr", "hrs", "h"), ("hour", 1.0)),
    **dict.fromkeys(("minute", "minutes", "min", "mins"), ("hour", 1 / 60)),
    **dict.fromkeys(("km", "kilometer", "kilometers", "kilometre", "kilometres"), ("km", 1.0)),
    **dict.fromkeys(("mile", "miles", "mi"), ("mile", 1.0)),
    **dict.fromkeys(("kg", "kilogram", "kilograms", "kilo", "kilos"), ("kg", 1.0)),
    **dict.fromkeys(("lb", "lbs", "pound", "pounds"), ("lb", 1.0)),
}
_SYMBOL_FIRST = re.compile(rf"([$€£¥])\s?{_NUMBER}{_SCALE}", re.I)
_UNIT_AFTER = re.compile(
    rf"(?<![\w.,$€£¥]){_NUMBER}{_SCALE}\s?({'|'.join(sorted(_WORDS, key=len, reverse=True))})\b", re.I
)

# What a question asking for a sum names, for each unit: the unit it adds up when the question says which.
ASKED_UNITS = {
    "USD": r"\$|\bdollars?\b|\busd\b",
    "EUR": r"€|\beuros?\b|\beur\b",
    "GBP": r"£|\bgbp\b|\bquid\b",
    "JPY": r"¥|\byen\b|\bjpy\b",
    "hour": r"\bhours?\b|\bminutes?\b|\btime\b",  # "how much time", not "how many times"
    "km": r"\bkm\b|\bkilomet",
    "mile": r"\bmiles?\b",
    "kg": r"\bkg\b|\bkilos?\b|\bkilograms?\b",
    "lb": r"\blbs?\b|\bpounds?\b",
}
# Words that ask about money without naming a currency ("how much did I spend"): the currency the rows state most.
_MONEY = re.compile(r"\b(spen[dt]|cost|pa(y|id)|money|price|earn|budget|sav(e|ed|ings))", re.I)


def asked_unit(question: str) -> str | None:
    """The unit a question asks to add up, when it names one ("how many hours"); "money" when it asks about money
    without naming a currency ("how much did I spend")."""
    lowered = question.lower()
    return next((unit for unit, cue in ASKED_UNITS.items() if re.search(cue, lowered)), None) or (
        "money" if _MONEY.search(lowered) else None
    )


def found(text: str) -> list[Amount]:
    """Every amount the text states, in the order it states them."""
    amounts: list[tuple[int, Amount]] = []
    for match in _SYMBOL_FIRST.finditer(text):
        value = _number(match[2]) * _SCALES.get((match[3] or "").lower(), 1.0)
        amounts.append((match.start(), Amount(value, _SYMBOLS[match[1]], match.group().strip())))
    for match in _UNIT_AFTER.finditer(text):
        unit, factor = _WORDS[match[3].lower()]
        value = _number(match[1]) * _SCALES.get((match[2] or "").lower(), 1.0) * factor
        amounts.append((match.start(), Amount(value, unit, match.group().strip())))
    return [amount for _, amount in sorted(amounts)]


def _number(said: str) -> float:
    return float(said.replace(",", ""))
