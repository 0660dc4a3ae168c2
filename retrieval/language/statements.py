"""What a conversation's turns state, read deterministically: the fake LLM's answer to extraction (so CI runs the
production path and tests assert exact rows), never a gate.

A sentence is a statement when it says something (MIN_WORDS words or more, MIN_CONTENT of them neither function
words nor names, not a question) about its speaker (it speaks in the first person) or about a named person. A
name the sentence addresses ("Thanks, Jon!", "You've got this, Gina.") is not what it is about: small talk that
only names its listener states nothing. It is kept as said, with its speaker's label ("Caroline:
I went to a support group yesterday."): a rewrite into the third person is a model's work. Its kind: a
preference says one (love, like, prefer, favourite, enjoy, hate); an event is dated or told in the past; else a
fact. The names it is about are its entities, the speaker's first.
"""

import re
from dataclasses import dataclass

from retrieval.language import names
from retrieval.language.query import STOPWORDS

MIN_WORDS, MIN_CONTENT = 4, 2
_OPENING = r"(?:hey|hi|hello|thanks|thank you|wow|yeah|yes|no|oh|congrats|go|sorry)"
_WORD = re.compile(r"[A-Za-z][\w'’]*")
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|our|us)\b", re.IGNORECASE)
_PREFERENCE = re.compile(
    r"\b(?:love[sd]?|like[sd]?|prefer(?:s|red)?|favou?rite|enjoy(?:s|ed)?|hate[sd]?|can't stand|into)\b",
    re.IGNORECASE,
)
_EVENT = re.compile(
    r"\b(?:yesterday|today|last (?:week|month|year|night|weekend)|ago|went|did|had|was|were|got|made|took|saw|"
    r"met|started|finished|visited|bought|moved|joined|\w+ed)\b",
    re.IGNORECASE,
)
_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass(frozen=True)
class Statement:
    value: str  # the speaker's label and the sentence
    said: str  # the sentence
    kind: str  # fact, preference or event
    about: tuple[str, ...]  # the names it is about, the speaker's first
    turn: int  # the index of its turn among those read


def statements(turns: list[tuple[str, str]]) -> list[Statement]:
    """The statements of these (speaker, content) turns, in order; a speaker may be "" (no name given)."""
    found = []
    for index, (speaker, content) in enumerate(turns):
        for sentence in (piece.strip() for piece in _BREAK.split(content)):
            if len(sentence.split()) < MIN_WORDS or sentence.endswith("?"):
                continue
            mentioned = names.about(sentence)
            named = [n for n in mentioned if n.lower() != speaker.lower() and not _addressed(n, sentence)]
            own = bool(_FIRST_PERSON.search(sentence))
            if not own and not named or _content_words(sentence, mentioned) < MIN_CONTENT:
                continue
            kind = "preference" if _PREFERENCE.search(sentence) else "event" if _EVENT.search(sentence) else "fact"
            about = ((speaker,) if own and speaker else ()) + tuple(named)
            found.append(Statement(f"{speaker}: {sentence}" if speaker else sentence, sentence, kind, about, index))
    return found


def _addressed(name: str, sentence: str) -> bool:
    """Whether the sentence only speaks to `name`: it stands set off by a comma or the sentence's edge."""
    n = re.escape(name)
    vocative = rf"(?:^(?:{_OPENING}\s+)?{n}\s*[,!.]|,\s*{n}\s*(?:[,.!]|$)|^{_OPENING}\s+{n}\b|\b{n},?\s+you\b)"
    told = re.search(vocative, sentence, re.IGNORECASE) is not None
    return told and len(re.findall(rf"\b{n}\b", sentence)) == 1


def _content_words(sentence: str, named: list[str]) -> int:
    ignored = STOPWORDS | {part.lower() for name in named for part in name.split()}
    return sum(1 for word in _WORD.findall(sentence) if word.lower() not in ignored and not _FIRST_PERSON.match(word))


def slug(text: str, words: int = 6) -> str:
    """A key part from text: its first `words` words, lowercased, joined by hyphens ("went-to-a-support-group")."""
    return "-".join(re.findall(r"[a-z0-9]+", text.lower())[:words]) or "x"
