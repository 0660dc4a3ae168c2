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
# A stated secret ("password: ...") and well-known key formats.
_STATED_SECRET = re.compile(
    r"\b(?:password|passwd|passphrase|passcode|api[ _-]?key|secret[ _-]?key|access[ _-]?token|"
    r"auth[ _-]?token|client[ _-]?secret)\b\s*(?:is|was|:|=)\s*\S{4,}",
    re.IGNORECASE,
)
_SECRET_WORDS = ("pass", "key", "token", "secret")
_KEY_FORMAT = re.compile(
    r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----"
    r"|\bsk-[A-Za-z0-9_-]{20,}"  # OpenAI-style secret keys
    r"|\bAKIA[0-9A-Z]{16}\b"  # AWS access key ids
    r"|\bgh[pousr]_[A-Za-z0-9]{36,}\b"  # GitHub tokens
    r"|\bxox[abposr]-[A-Za-z0-9-]{10,}"  # Slack tokens
)
# Substrings every key format above contains: without one, the regex need not run.
_KEY_MARKERS = ("-----BEGIN", "sk-", "AKIA", "_", "xox")


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
    # Cheap checks first, so the common value (no secret words, few digits) costs ~2 µs.
    lowered = text.lower()
    if any(word in lowered for word in _SECRET_WORDS) and _STATED_SECRET.search(text):
        return "credential"
    if any(marker in text for marker in _KEY_MARKERS) and _KEY_FORMAT.search(text):
        return "credential"
    digits = sum(text.count(digit) for digit in "0123456789")
    if digits >= 13:
        for match in _CARD.finditer(text):
            number = re.sub(r"\D", "", match.group())
            if 13 <= len(number) <= 19 and _luhn(number):
                return "card_number"
    if digits >= 9 and _SSN.search(text):
        return "ssn"
    if digits >= 4 and "pin" in lowered and _PIN.search(text):
        return "pin"
    return None


def effective(declared: str, text: str) -> tuple[str, str | None]:
    """The level a value is stored at: declared, raised to high when detected."""
    reason = detect(text)
    return ("high", reason) if reason else (declared, None)
