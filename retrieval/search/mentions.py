"""Is what a query asks about in memory? The check behind the `entity_absent` and `content_absent` verdicts.

A question about someone or something no memory mentions cannot be answered from
memory, however close its nearest rows sit ("Who won the 2026 World Cup?" against a
namespace of company facts). So a search reads the names out of its query
(`retrieval.language.names`) and looks them up in the namespace, as entity mentions and
as lexical terms, before it judges its result. When the query names something and
none of its names is in memory, the search abstains with `entity_absent`.

Every name may be known and the fact still absent ("what is Alice's favourite dessert?"
of a memory that never heard of one). So the same lookup reads the query's content words
beyond its names (`query.asked_words`): the ones no row holds are the verdict's evidence
for `content_absent` (retrieval/search/abstain.py).
"""

from dataclasses import dataclass, field

from retrieval import index
from retrieval.language import names as language
from retrieval.language import query as query_text
from retrieval.store import clickhouse


@dataclass
class Check:
    """What the check read: `names` the query is about, `found` those memory mentions; `words` it asks about
    beyond them, `held` those some row holds."""

    names: list[str] = field(default_factory=list)
    found: list[str] = field(default_factory=list)
    words: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)

    @property
    def absent(self) -> bool:
        """The query names something, and nothing it names is in memory."""
        return bool(self.names) and not self.found

    @property
    def words_absent(self) -> list[str]:
        """The query's content words no memory holds, in its order."""
        return [word for word in self.words if word not in self.held]


def check(org: str, namespaces: list[str], model: str, query: str) -> Check:
    """Look the query's names and words up: a name is in memory when a live row mentions it as an entity, or holds
    all of its terms (in its value or key); a word when a row holds one of its stems.

    The namespaces' vector mirrors answer first, with no statement. What they do not find is read from ClickHouse
    in one statement, unless each mirror holds every live row of its namespace with its words: then what they
    do not find is in no live row (without that, a search in ten asked the engine only to hear it:
    docs/benchmarks.md).
    """
    names = language.about(query)
    asked = query_text.asked_words(query, names)
    if not names and not asked:
        return Check()
    terms = [language.terms(name) for name in names]
    stems = [word_stems for _, word_stems in asked]
    found, whole = _in_mirrors(org, namespaces, model, names, terms, stems)
    unknown = [at for at in range(len(names) + len(asked)) if at not in found]
    if unknown and not whole:
        found |= _in_clickhouse(org, namespaces, names, terms, stems, unknown)
    words = [word for word, _ in asked]
    return Check(
        names,
        [name for at, name in enumerate(names) if at in found],
        words,
        [word for at, word in enumerate(words, len(names)) if at in found],
    )


def _in_mirrors(
    org: str, namespaces: list[str], model: str, names: list[str], terms: list[list[str]], stems: list[tuple[str, ...]]
) -> tuple[set[int], bool]:
    """The names and words (numbered after the names) some loaded mirror's rows hold: a one-word name by its word,
    a name of several words when one row holds them all (a few questions in a hundred name one, each a statement
    otherwise), any name as an entity, a word by any of its stems. And whether that is all of them: every mirror
    holds its whole namespace's words."""
    asked = [name_terms[0] if len(name_terms) == 1 else "\0" for name_terms in terms]
    asked += ["\0" + name.lower() for name in names]
    flat = [stem for word_stems in stems for stem in word_stems]
    if (answer := index.mentioned(org, namespaces, model, asked + flat)) is None:
        return set(), False
    held, whole = answer
    count = len(names)
    found = {at for at in range(count) if (held[at] and asked[at] != "\0") or held[count + at]}
    at_stem = 2 * count
    for at, word_stems in enumerate(stems, count):
        if any(held[at_stem : at_stem + len(word_stems)]):
            found.add(at)
        at_stem += len(word_stems)
    several = [at for at, name_terms in enumerate(terms) if at not in found and len(name_terms) > 1]
    if several:
        mirrors = [index.peek(org, namespace, model) for namespace in namespaces]
        found |= {at for at in several if any(mirror and mirror.holding_all(terms[at]) for mirror in mirrors)}
    return found, whole


def _in_clickhouse(
    org: str,
    namespaces: list[str],
    names: list[str],
    terms: list[list[str]],
    stems: list[tuple[str, ...]],
    unknown: list[int],
) -> set[int]:
    """The same for the `unknown` names and words, read from their postings and the names' entity mentions (FINAL:
    a row deleted a moment ago no longer counts); a one-word name, most of them, and a word read only their terms'
    postings."""
    count = len(names)
    single = {terms[at][0] for at in unknown if at < count and len(terms[at]) == 1}
    single |= {stem for at in unknown if at >= count for stem in stems[at - count]}
    multi = [at for at in unknown if at < count and len(terms[at]) > 1]
    rows = clickhouse.query_rows(
        """
        SELECT 'term' AS kind, term AS what
        FROM memory_terms FINAL
        WHERE org = {org:String} AND namespace IN {namespaces:Array(String)} AND field IN ('value', 'key')
          AND term IN {single_terms:Array(String)} AND status = 'active'
        LIMIT 1 BY term
        UNION ALL
        SELECT DISTINCT 'name' AS kind, toString({multi_at:Array(UInt32)}[n]) AS what
        FROM (
            SELECT groupUniqArray(term) AS held FROM memory_terms FINAL
            WHERE org = {org:String} AND namespace IN {namespaces:Array(String)} AND field IN ('value', 'key')
              AND term IN {multi_flat:Array(String)} AND status = 'active'
            GROUP BY namespace, memory_key, agent, session_id, version
        )
        ARRAY JOIN arrayFilter(x -> hasAll(held, {multi_terms:Array(Array(String))}[x]),
                               range(1, length({multi_terms:Array(Array(String))}) + 1)) AS n
        UNION ALL
        SELECT DISTINCT 'entity' AS kind, entity AS what FROM entity_mentions FINAL
        WHERE org = {org:String} AND namespace IN {namespaces:Array(String)} AND status = 'active'
          AND entity IN {lowered:Array(String)}
        """,
        {
            "org": org,
            "namespaces": namespaces,
            "single_terms": sorted(single),
            "multi_terms": [terms[at] for at in multi],
            "multi_at": multi,
            "multi_flat": sorted({term for at in multi for term in terms[at]}),
            "lowered": [names[at].lower() for at in unknown if at < count],
        },
    )
    held = {what for kind, what in rows if kind == "term"}
    entities = {what for kind, what in rows if kind == "entity"}
    found = {int(what) for kind, what in rows if kind == "name"}
    for at in unknown:
        if at < count:
            if (len(terms[at]) == 1 and terms[at][0] in held) or names[at].lower() in entities:
                found.add(at)
        elif held.intersection(stems[at - count]):
            found.add(at)
    return found
