"""Is what a query names in memory? The check behind the `entity_absent` verdict.

A question about someone or something no memory mentions cannot be answered from
memory, however close its nearest rows sit ("Who won the 2026 World Cup?" against a
namespace of company facts). So a search reads the names out of its query
(`retrieval.language.names`) and looks them up in the namespace, as entity mentions and
as lexical terms, before it judges its result. When the query names something and
none of its names is in memory, the search abstains with `entity_absent`.
"""

from dataclasses import dataclass, field

from retrieval import index
from retrieval.language import names as language
from retrieval.store import clickhouse


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

    The namespaces' vector mirrors answer first, with no statement. What they do not find is read from ClickHouse
    in one statement, unless each mirror holds every live row of its namespace with its words: then a name they
    do not find is in no live row (without that, a search in ten asked the engine only to hear it:
    docs/benchmarks.md).
    """
    names = language.about(query)
    if not names:
        return Check()
    terms = [language.terms(name) for name in names]
    found, whole = _in_mirrors(org, namespaces, model, names, terms)
    unknown = [at for at in range(len(names)) if at not in found]
    if unknown and not whole:
        found |= {
            unknown[at]
            for at in _in_clickhouse(org, namespaces, [names[at] for at in unknown], [terms[at] for at in unknown])
        }
    return Check(names, [name for at, name in enumerate(names) if at in found])


def _in_mirrors(
    org: str, namespaces: list[str], model: str, names: list[str], terms: list[list[str]]
) -> tuple[set[int], bool]:
    """The names some loaded mirror's rows hold: a one-word name by its word, a name of several words when one row
    holds them all (a few questions in a hundred name one, each a statement otherwise), any name as an
    entity. And whether that is all of them: every mirror holds its whole namespace's words."""
    asked = [name_terms[0] if len(name_terms) == 1 else "\0" for name_terms in terms]
    asked += ["\0" + name.lower() for name in names]
    if (answer := index.mentioned(org, namespaces, model, asked)) is None:
        return set(), False
    held, whole = answer
    count = len(names)
    found = {at for at in range(count) if (held[at] and asked[at] != "\0") or held[count + at]}
    several = [at for at, name_terms in enumerate(terms) if at not in found and len(name_terms) > 1]
    if several:
        mirrors = [index.peek(org, namespace, model) for namespace in namespaces]
        found |= {at for at in several if any(mirror and mirror.holding_all(terms[at]) for mirror in mirrors)}
    return found, whole


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
