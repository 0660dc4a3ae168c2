"""Deterministic detection of high-sensitivity values.

A value that holds a credential, a card number, an SSN or a stated PIN is
stored (readable by key) but never embedded, chunked or indexed for search,
and so never served or sent to a model. No model decides this: the same text
always gets the same verdict.

Credentials in known formats (cloud, Stripe, Slack, GitHub, GitLab, JWTs,
private keys, and the rest of detect-secrets' plugins) and quoted high-entropy
strings are found by detect-secrets, which is maintained as formats change;
what it does not cover is here: a secret stated in prose ("the wifi password:
..."), or assigned to a secret-named variable unquoted (an env file's line), a
key split at its prefix, OpenAI-style `sk-` keys of the current formats, and
the Luhn, SSN and PIN checks.
"""

import re
from functools import cache

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString
from detect_secrets.plugins.ip_public import IPPublicDetector

LEVELS = ("low", "medium", "high")

_CARD = re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])")
_SSN = re.compile(r"(?<!\d)(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?!\d)")
_PIN = re.compile(r"\bpin(?:\s*(?:code|number))?\s*(?:is|was|:|=)\s*\d{4,8}\b", re.IGNORECASE)
# A stated secret ("password: ..."): detect-secrets' keyword plugin reads code (`password = "..."`), not prose.
_STATED_SECRET = re.compile(
    r"\b(?:password|passwd|passphrase|passcode|api[ _-]?key|secret[ _-]?key|access[ _-]?token|"
    r"auth[ _-]?token|client[ _-]?secret)\b\s*(?:is|was|:|=)\s*\S{4,}",
    re.IGNORECASE,
)
# An assignment to a secret-named variable, as in an env file or a shell (`aws_secret_access_key = wJalr...`,
# `export DB_PASSWORD=hunter22`): detect-secrets' keyword plugin wants its value quoted. A value of digits alone
# (`max_tokens=4096`) is a setting, not a secret.
_ASSIGNED = re.compile(r"""(?:^|[\s;,(])(?:export\s+)?([A-Za-z_][\w.-]*)\s*[:=]\s*["']?(?!\d+\b)([^\s"']{8,})""")
_SECRET_NAME = re.compile(r"secret|passw|passphrase|token|api_?key|private_?key|access_?key|credential", re.IGNORECASE)
_SECRET_WORDS = ("pass", "key", "token", "secret", "credential")
# A key split at its prefix (`sk_live_ 51H...`, pasted across a line break): read again with the gap closed.
_SPLIT_KEY = re.compile(r"\b([A-Za-z]{2,8}(?:_[A-Za-z]{2,8})?[_-])\s+(?=[A-Za-z0-9]{12,})")
# OpenAI (and Anthropic) secret keys as issued today: detect-secrets' OpenAI plugin knows only the older format.
_SK_KEY = re.compile(r"\bsk-[A-Za-z0-9_-]{20,}")
# What key material looks like: a run of 16+ token characters with a digit or a capital after its first. Without
# one (or a URL, which may carry credentials, or a private key's header) detect-secrets' plugins need not run: they
# cost ~130 µs a value, this check a few.
_TOKEN = re.compile(r"[A-Za-z0-9_+/=.-]{16,}")
_MIXED = re.compile(r"[0-9A-Z]")
_KEY_HEADERS = ("://", "PRIVATE KEY", "PuTTY-User-Key")


@cache
def _plugins() -> tuple:
    """detect-secrets' format plugins (a public IP address is no secret), and its quoted base64 high-entropy
    strings. Not its hex high-entropy plugin: commit hashes and ids are hex, and an agent's notes hold many."""
    formats = [
        plugin()
        for plugin in get_mapping_from_secret_type_to_class().values()
        if issubclass(plugin, RegexBasedDetector) and plugin is not IPPublicDetector
    ]
    return (*formats, _HighEntropy())


class _HighEntropy(Base64HighEntropyString):
    """A quoted base64 string past the plugin's entropy limit: the plugin's `analyze_string` yields every quoted
    string and leaves the limit to its line scan (`"injected"`, in a value with a URL, read as a key)."""

    def analyze_string(self, string: str):
        return (
            found
            for found in super().analyze_string(string)
            if self.calculate_shannon_entropy(found) > self.entropy_limit
        )


def _key_material(text: str) -> bool:
    return any(header in text for header in _KEY_HEADERS) or any(_MIXED.search(run, 1) for run in _TOKEN.findall(text))


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        digit = int(char)
        if index % 2:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return total % 10 == 0


def _assigned_secret(text: str) -> bool:
    return any(_SECRET_NAME.search(name) for name, _ in _ASSIGNED.findall(text))


def detect(text: str) -> str | None:
    """What makes `text` high-sensitivity ('credential', 'card_number', 'ssn', 'pin'), or None."""
    lowered = text.lower()
    if any(word in lowered for word in _SECRET_WORDS) and (_STATED_SECRET.search(text) or _assigned_secret(text)):
        return "credential"
    if _SPLIT_KEY.search(text) and detect(_SPLIT_KEY.sub(r"\1", text)) == "credential":
        return "credential"
    if "sk-" in text and _SK_KEY.search(text):  # its own check: such a key need not look like key material
        return "credential"
    if _key_material(text) and any(next(iter(plugin.analyze_string(text)), None) for plugin in _plugins()):
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


# Short texts found clean (agents, sessions, users, tags: the same few on row after row), so that a row's many
# texts cost about what its value does. Never a text found secret: no secret is kept past its write.
_CLEAN_SHORT: set[str] = set()
SHORT, MAX_CLEAN_SHORT = 64, 16_384


def _detect_named(text: str) -> str | None:
    if text in _CLEAN_SHORT:
        return None
    found = detect(text)
    if found is None and len(text) <= SHORT:
        if len(_CLEAN_SHORT) >= MAX_CLEAN_SHORT:
            _CLEAN_SHORT.clear()
        _CLEAN_SHORT.add(text)
    return found


def effective(declared: str, *texts: str) -> tuple[str, str | None]:
    """The level a row is stored at: declared, raised to high when any of its texts (its value, key, tags,
    entities...: all that a hit would show or a prompt quote) is detected. Each text is judged apart: nothing found
    spans two."""
    reason = next((found for text in texts if text and (found := _detect_named(text))), None)
    return ("high", reason) if reason else (declared, None)
