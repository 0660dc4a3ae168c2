"""The names a text is about: a query's, for the `entity_absent` verdict, and a value's, for the write gates.

A question about someone or something no memory mentions cannot be answered from
memory, however close its nearest rows sit ("Who won the 2026 World Cup?" against a
namespace of company facts). So a search reads the names out of its query
(deterministically: capitalised runs, quoted phrases, identifiers) and looks them
up in the namespace, as entity mentions and as lexical terms, before it judges its
result. When the query names something and none of its names is in memory, the
search abstains with `entity_absent`.

Not a name: a sentence's first word when it stands alone (English capitalises it
anyway: "Deploy", "Tell"), question and function words, months and weekdays
(a date, not an entity), a bare number.
"""

import re
from dataclasses import dataclass, field

from retrieval import clickhouse, text, vector_mirror
from retrieval.query import MONTHS, STOPWORDS, WEEKDAYS

# Words a sentence may open with that are never names, even in a run ("What Jon said" -> "Jon").
_OPENERS = STOPWORDS | frozenset(
    """is are was were do does did can could would should shall may might must will has have had tell show
    find list give describe name explain summarize summarise please any some all""".split()
)
_NOT_NAMES = frozenset({"i", *MONTHS, *WEEKDAYS})
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
        if name.lower() not in seen and _terms(name):
            seen.add(name.lower())
            names.append(name)
    # A name inside a longer one ("Berg" in "Jonas Berg") is checked as part of it.
    return [n for n in names if not any(n != m and f" {n.lower()} " in f" {m.lower()} " for m in names)]


_WORD_WITH_DIGIT = re.compile(r"[\w.:/-]*\d[\w.:/-]*")


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


def _terms(name: str) -> list[str]:
    """A name's lexical terms as the write path stores them (stemmed word tokens), stopwords left out."""
    words = [word for word in text.tokens(name) if word not in STOPWORDS]
    return list(dict.fromkeys(text.stems(words)))


@dataclass
class Check:
    """What the entity check read: `names` the query is about, `found` those memory mentions."""

    names: list[str] = field(default_factory=list)
    found: list[str] = field(default_factory=list)

    @property
    def absent(self) -> bool:
        """The query names something, and nothing it names is in memory."""
        return bool(self.names) and not self.found


def check(org: str, namespaces: list[str], model: str, query: str) -> Check:
    """Look the query's names up: a name is in memory when a live row mentions it as an entity, or holds all of
    its terms (in its value or key).

    The namespaces' vector mirrors answer first (embedded engine: every write passes through this process, so
    their word counts are exact), with no statement; what they do not find (a name of several words, or one only
    a row without a vector holds) is read from ClickHouse in one statement.
    """
    names = about(query)
    if not names:
        return Check()
    terms = [_terms(name) for name in names]
    found = _in_mirrors(org, namespaces, model, names, terms)
    unknown = [at for at in range(len(names)) if at not in found]
    if unknown:
        found |= {
            unknown[at]
            for at in _in_clickhouse(org, namespaces, [names[at] for at in unknown], [terms[at] for at in unknown])
        }
    return Check(names, [name for at, name in enumerate(names) if at in found])


def _in_mirrors(org: str, namespaces: list[str], model: str, names: list[str], terms: list[list[str]]) -> set[int]:
    """The names some loaded mirror's rows hold: a one-word name by its word, any name as an entity."""
    if not vector_mirror.enabled():
        return set()
    mirrors = [vector_mirror.get(org, namespace, model) for namespace in namespaces]
    if any(mirror is None for mirror in mirrors):
        return set()
    asked = [name_terms[0] if len(name_terms) == 1 else "\0" for name_terms in terms]
    asked += ["\0" + name.lower() for name in names]
    held = [any(flags) for flags in zip(*(mirror.mentions(asked) for mirror in mirrors))]
    count = len(names)
    return {at for at in range(count) if (held[at] and asked[at] != "\0") or held[count + at]}


def _in_clickhouse(org: str, namespaces: list[str], names: list[str], terms: list[list[str]]) -> set[int]:
    """The same, read from the names' postings and entity mentions (FINAL: a row deleted a moment ago no longer
    counts); a one-word name, most of them, reads only its term's postings."""
    single = [(at, name_terms[0]) for at, name_terms in enumerate(terms) if len(name_terms) == 1]
    multi = [(at, name_terms) for at, name_terms in enumerate(terms) if len(name_terms) > 1]
    rows = clickhouse.query_rows(
        """
        SELECT DISTINCT i FROM (
            SELECT {single_at:Array(UInt32)}[indexOf({single_terms:Array(String)}, term)] AS i
            FROM memory_terms FINAL
            WHERE org = {org:String} AND namespace IN {namespaces:Array(String)} AND field IN ('value', 'key')
              AND term IN {single_terms:Array(String)} AND status = 'active'
            LIMIT 1 BY term
            UNION ALL
            SELECT {multi_at:Array(UInt32)}[n] AS i
            FROM (
                SELECT groupUniqArray(term) AS held FROM memory_terms FINAL
                WHERE org = {org:String} AND namespace IN {namespaces:Array(String)} AND field IN ('value', 'key')
                  AND term IN {multi_flat:Array(String)} AND status = 'active'
                GROUP BY namespace, memory_key, agent, session_id, version
            )
            ARRAY JOIN arrayFilter(x -> hasAll(held, {multi_terms:Array(Array(String))}[x]),
                                   range(1, length({multi_terms:Array(Array(String))}) + 1)) AS n
            UNION ALL
            SELECT indexOf({lowered:Array(String)}, entity) - 1 AS i FROM entity_mentions FINAL
            WHERE org = {org:String} AND namespace IN {namespaces:Array(String)} AND status = 'active'
              AND entity IN {lowered:Array(String)}
        )
        """,
        {
            "org": org,
            "namespaces": namespaces,
            "single_terms": [term for _, term in single],
            "single_at": [at for at, _ in single],
            "multi_terms": [name_terms for _, name_terms in multi],
            "multi_at": [at for at, _ in multi],
            "multi_flat": sorted({term for _, name_terms in multi for term in name_terms}),
            "lowered": [name.lower() for name in names],
        },
    )
    return {row[0] for row in rows}
