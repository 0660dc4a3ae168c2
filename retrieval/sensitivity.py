"""Deterministic detection of high-sensitivity values.

A value that holds a credential, a card number, an SSN or a stated PIN is
stored (readable by key) but never embedded, chunked or indexed for search.
No model decides this: the same text always gets the same verdict.
"""

import re

LEVELS = ("low", "medium", "high")

_CARD = re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])")
_SSN = re.compile(r"(?<!\d)(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?!\d)")
_PIN = re.compile(r"\bpin(?:\s*(?:code|number))?\s*(?:is|was|:|=)\s*\d{4,8}\b", re.IGNORECASE)
_CREDENTIAL = [
    re.compile(
        r"\b(?:password|passwd|passphrase|passcode|api[ _-]?key|secret[ _-]?key|access[ _-]?token|"
        r"auth[ _-]?token|client[ _-]?secret)\b\s*(?:is|was|:|=)\s*\S{4,}",
        re.IGNORECASE,
    ),
    re.compile(r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{20,}"),  # OpenAI-style secret keys
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key ids
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b"),  # GitHub tokens
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),  # Slack tokens
]


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        digit = int(char)
        if index % 2:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return total % 10 == 0


def detect(text: str) -> str | None:
    """What makes `text` high-sensitivity ('credential', 'card_number', 'ssn', 'pin'), or None."""
    if any(pattern.search(text) for pattern in _CREDENTIAL):
        return "credential"
    for match in _CARD.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if 13 <= len(digits) <= 19 and _luhn(digits):
            return "card_number"
    if _SSN.search(text):
        return "ssn"
    if _PIN.search(text):
        return "pin"
    return None


def effective(declared: str, text: str) -> tuple[str, str | None]:
    """The level a value is stored at: declared, raised to high when detected."""
    reason = detect(text)
    return ("high", reason) if reason else (declared, None)
