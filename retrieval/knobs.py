"""Every weight and constant a search ranks and judges by, in one table: its stage, default, bounds, why, and
the setting that overrides it (a `LOOM_*` name) or none (a constant, changed here with a measurement).

`loom_site/settings/search.py` reads the settings from this table, the code reads the constants from this module, and
docs/operating.md's "Ranking knobs" table is generated from it (`python -m retrieval.knobs`; a test keeps them equal).
"""

from dataclasses import dataclass

from retrieval.options import SEARCH_MODES


@dataclass(frozen=True)
class Knob:
    name: str  # a constant of this module, or the LOOM_* setting
    default: object
    stage: str  # where it acts: plan, index, embed, fusion, rank, window, verdict, gates, write
    why: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()

    @property
    def setting(self) -> bool:
        return self.name.startswith("LOOM_")

    def read(self, env):
        """The setting's value from the environment (loom_site/env.py: strict, bounded)."""
        if isinstance(self.default, bool):
            return env.boolean(self.name, self.default)
        if self.choices:
            return env.choice(self.name, self.default, self.choices)
        if isinstance(self.default, tuple):
            return env.strings(self.name, self.default)
        if isinstance(self.default, int):
            return env.integer(self.name, self.default, self.minimum, self.maximum)
        return env.number(self.name, self.default, self.minimum, self.maximum)


TABLE: list[Knob] = []


def _knob(name: str, default, stage: str, why: str, **bounds):
    TABLE.append(Knob(name, default, stage, why, **bounds))
    return default


# --- plan: the mode, the pool ----------------------------------------------------------------------------------
_knob(
    "LOOM_MEMORY_SEARCH_DEFAULT_MODE",
    "semantic",
    "plan",
    "the spec's wire default; `make run` serves hybrid (docs/benchmarks.md, Quality)",
    choices=SEARCH_MODES,
)
_knob(
    "LOOM_MEMORY_SEARCH_DEFAULT_ALPHA",
    0.25,
    "plan",
    "hybrid's lexical weight: chosen on leave-one-conversation-out folds of the dev split",
    minimum=0,
    maximum=1,
)
CODES_MIN_ROWS = _knob(
    "CODES_MIN_ROWS",
    50_000,
    "index",
    "from this many live rows a mirror scans int8 codes first and rescores the best at full precision "
    "(4x fewer bytes read; below it the exact float32 scan is as fast); 0 turns codes off",
)
CODES_CANDIDATES = _knob(
    "CODES_CANDIDATES",
    1000,
    "index",
    "rows the codes pass keeps for exact rescoring (at least the pool, plus a margin)",
)
BITS_MIN_ROWS = _knob(
    "BITS_MIN_ROWS",
    250_000,
    "index",
    "from this many live rows the codes pass reads only the rows whose sign bits (a bit a dimension) differ least "
    "from the query's, while a check on the mirror's recent queries finds that they keep the nearest; 0 turns bits off",
)
BITS_KEEP = _knob(
    "BITS_KEEP",
    0.02,
    "index",
    "the share of the rows the bits pass keeps for the codes pass (real embeddings, 45k rows: recall@10 1.000 at "
    "0.02, 0.997 at 0.01)",
)
_knob(
    "LOOM_MEMORY_SEARCH_POOL_MULTIPLIER",
    4,
    "plan",
    "the pool each leg fills is top_k times this (at least the minimum below)",
    minimum=1,
)
POOL_MIN = _knob(
    "POOL_MIN",
    50,
    "plan",
    "the smallest pool: the abstain verdict reads separation over it",
)
_knob(
    "LOOM_MEMORY_SEARCH_POOL_MULTIPLIER_RERANK",
    8,
    "plan",
    "a reranker only reorders what the first stage surfaced: its pool is widened first",
    minimum=1,
)
_knob(
    "LOOM_MEMORY_SEARCH_PAGING_POOL",
    50,
    "plan",
    "the least pool a paged search ranks and parks (its pages' depth): each row deeper costs every paged search",
    minimum=1,
    maximum=5000,
)
PAGE_TTL_SECONDS = _knob("PAGE_TTL_SECONDS", 600, "plan", "how long a parked page handle serves")
TEMPORAL_WINDOW_DAYS = _knob(
    "TEMPORAL_WINDOW_DAYS",
    7.0,
    "plan",
    "temporal mode's half-width around the question's date, at least",
)
_knob(
    "LOOM_MEMORY_SEARCH_DEFAULT_NAMESPACE_SCOPE",
    "this",
    "plan",
    "a search reads its own namespace unless it asks for all_mine",
    choices=("this", "all_mine"),
)
_knob(
    "LOOM_MEMORY_SEARCH_FANOUT_MAX_NAMESPACES",
    32,
    "plan",
    "all_mine reads at most this many namespaces; the rest are named in namespaces_skipped",
    minimum=0,
)
_knob(
    "LOOM_MEMORY_SEARCH_KEY_AXIS",
    "auto",
    "plan",
    "score the query against key vectors too: on, off, or when keys are reused",
    choices=("auto", "on", "off"),
)
_knob(
    "LOOM_MEMORY_SEARCH_KEY_AXIS_AUTO_REUSE_SHARE",
    0.1,
    "plan",
    "auto: a namespace whose keys repeat this often names attributes with them",
    minimum=0,
    maximum=1,
)

ENTITY_NEAREST = _knob(
    "ENTITY_NEAREST",
    2,
    "plan",
    "entities whose summary is nearest the question (at least the hyde_fallback gate) join the query's entities",
)
DIGEST_SESSIONS = _knob(
    "DIGEST_SESSIONS", 3, "plan", "the nearest session digests read: candidates themselves, and whose rows descend"
)
DIGEST_DESCENT_ROWS = _knob(
    "DIGEST_DESCENT_ROWS", 5, "plan", "each of those sessions' rows nearest the query pulled into the pool"
)

# --- fallback: LLM legs after a weak first pass (retrieval/search/fallback.py) ----------------------------------
_knob(
    "LOOM_MEMORY_SEARCH_FALLBACK_MAX_ROUNDS",
    4,
    "fallback",
    "rounds after a weak first pass: the graph leg, a rewrite, HyDE, the judged retry (those that call a model "
    "also capped by the calls)",
    minimum=0,
)
_knob("LOOM_MEMORY_SEARCH_FALLBACK_MAX_LLM_CALLS", 2, "fallback", "the spec's cap on a search's LLM calls", minimum=0)
_knob("LOOM_MEMORY_SEARCH_FALLBACK_MAX_WALL_MS", 8000, "fallback", "the rounds' time in all, calls included", minimum=0)
_knob(
    "LOOM_MEMORY_SEARCH_HYDE_TIMEOUT_S",
    6.0,
    "fallback",
    "each call's wait (the client's own 300 s only catches a hung connection)",
    minimum=0.1,
)

# --- embed: the query's vector ----------------------------------------------------------------------------------
_knob(
    "LOOM_MEMORY_SEARCH_EMBED_BOUND_S",
    2.5,
    "embed",
    "the query embed's bound per attempt, then 503 EMBED_TIMEOUT",
    minimum=0.05,
)
_knob("LOOM_MEMORY_SEARCH_EMBED_BOUND_RETRIES", 1, "embed", "attempts after the first within the bound", minimum=0)
_knob(
    "LOOM_MEMORY_SEARCH_QUERY_SPELLING_MAX_WORDS",
    6,
    "embed",
    "a short query embeds its words as the corpus spells them (0: off)",
    minimum=0,
)

# --- fusion: each mode's relevance --------------------------------------------------------------------------------
RRF_K = _knob("RRF_K", 60, "fusion", "rrf's rank offset, the value of the original paper: a rank-1 hit counts 1/61")
RRF_PATH_LEXICAL_WEIGHT = _knob(
    "RRF_PATH_LEXICAL_WEIGHT",
    0.5,
    "fusion",
    "a code- or path-shaped query shares path tokens with every path: its lexical order counts half",
)
GRAPH_ENTITY = _knob("GRAPH_ENTITY", 0.1, "fusion", "graph mode: a row that mentions a query entity, over its cosine")
GRAPH_HOP = _knob("GRAPH_HOP", 0.1, "fusion", "graph mode: a row one edge away from a query entity")
GRAPH_TRIPLE = _knob("GRAPH_TRIPLE", 0.2, "fusion", "graph mode: a row holding a triple about a query entity")
TEMPORAL_CLOSENESS = _knob(
    "TEMPORAL_CLOSENESS",
    0.05,
    "fusion",
    "temporal mode: closeness to the question's date, over cosine: orders, never outweighs",
)
TIE = _knob("TIE", 0.01, "fusion", "within lexical or related relevance, the other signal only breaks ties")

# --- rank: bounded terms added to relevance ----------------------------------------------------------------------
ENTITY_BOOST = _knob("ENTITY_BOOST", 0.5, "rank", "times the share of the entity_filter's entities a row carries")
QUERY_ENTITY_BOOST = _knob(
    "QUERY_ENTITY_BOOST", 0.1, "rank", "a known entity the question names (not filtered on): a smaller lift"
)
NEAR_TIE = _knob(
    "NEAR_TIE", 0.1, "rank", "a recency or chronology cue reorders the rows within this of the most relevant by date"
)
RECENCY = _knob(
    "RECENCY", 0.1, "rank", "...each near-tie lifted to the top plus this times its date's place (newest 1)"
)
DATE = _knob("DATE", 0.15, "rank", "a dated question lifts rows dated within its window, most at the date")
TAG_BOOST = _knob("TAG_BOOST", 0.05, "rank", "a row carrying one of tags_soft (inside the prior cap)")
CATEGORY_BOOST = _knob("CATEGORY_BOOST", 0.05, "rank", "a row in category_soft (inside the prior cap)")
KEY_MATCH = _knob(
    "KEY_MATCH",
    {"tiebreak": 0.01, "boost": 0.05, "off": 0.0},
    "rank",
    "the query's words in a row's key: a tie-break, or a small boost",
)
DEMOTED = _knob("DEMOTED", -10.0, "rank", "demote_tags: below every other row, still in order among its kind")
TRUST = _knob(
    "TRUST",
    {"asserted": 0.5, "observed": 0.5, "imported": -0.25, "external": -1.0, "extracted": 0.0},
    "rank",
    "per source_class, times the trust weight",
)
_knob(
    "LOOM_MEMORY_SEARCH_TRUST_WEIGHT",
    0.0,
    "rank",
    "the spec's trust term; off until attestations exist to earn it",
    minimum=0,
    maximum=1,
)
_knob(
    "LOOM_MEMORY_PRIOR_CAP",
    0.15,
    "rank",
    "confidence, tag and category priors together never add more",
    minimum=0,
    maximum=1,
)
_knob(
    "LOOM_MEMORY_SEARCH_REINFORCEMENT_WEIGHT",
    0.15,
    "rank",
    "memory.outcome events earned by a key, decayed",
    minimum=0,
    maximum=1,
)
REINFORCEMENT_HALF_LIFE_DAYS = _knob(
    "REINFORCEMENT_HALF_LIFE_DAYS",
    90.0,
    "rank",
    "an outcome event counts half after this long",
)
ASK_CITED_WEIGHT = _knob(
    "ASK_CITED_WEIGHT",
    0.5,
    "rank",
    "the weight of the `used_cited` event a key memory.ask cites gets (memory.outcome's positive event weighs 1)",
)
_knob(
    "LOOM_MEMORY_SEARCH_SENSITIVITY_DEMOTE",
    0.1,
    "rank",
    "medium and high sensitivity rows sink unless the query asks for contact details",
    minimum=0,
    maximum=1,
)
_knob(
    "LOOM_MEMORY_SEARCH_RECENCY_POOL_WEIGHT",
    0.0,
    "rank",
    "the spec's newness term over the pool; off: the cue-driven recency term does this better",
    minimum=0,
    maximum=1,
)
_knob(
    "LOOM_MEMORY_SEARCH_SOURCE_CLASS_BOOST_ELIGIBLE",
    ("asserted", "observed", "imported", "external", "extracted"),
    "rank",
    "source classes the priors and reinforcement apply to",
)
_knob(
    "LOOM_MEMORY_SEARCH_KEY_MATCH_MODE",
    "tiebreak",
    "rank",
    "how KEY_MATCH applies",
    choices=("tiebreak", "boost", "off"),
)

DIGEST_DESCENT = _knob(
    "DIGEST_DESCENT",
    0.0,
    "rank",
    "a row of the session a question singles out by its digest (a namespace's digest_descent): off, as it gained "
    "on one dev conversation and lost on another",
)

# --- window ------------------------------------------------------------------------------------------------------
_knob(
    "LOOM_MEMORY_SEARCH_PER_KEY_CAP",
    2,
    "window",
    "at most this many rows of one key in a window, so one attribute cannot fill it (0: no cap)",
    minimum=0,
)

DIGEST_MAX_HITS = _knob(
    "DIGEST_MAX_HITS", 1, "window", "session digests served in one window: a summary, then the turns it covers"
)

# --- verdict: hits or abstain ------------------------------------------------------------------------------------
SEPARATION_SPAN = _knob(
    "SEPARATION_SPAN", 0.15, "verdict", "the lead over the pool's median cosine that counts as fully separated"
)
JUDGED_POOL = _knob(
    "JUDGED_POOL",
    50,
    "verdict",
    "separation is read over this many most similar rows: the smallest pool a search reads",
)
CONTENT_ABSENT_WORDS = _knob(
    "CONTENT_ABSENT_WORDS",
    2,
    "verdict",
    "a question with this many content words no memory holds, on a weak pass (under the query_rewrite gate), "
    "abstains content_absent; one such word raises retrieval_risk a grade",
    minimum=1,
)
RISK_LOW = _knob("RISK_LOW", 0.66, "verdict", "retrieval_confidence at or over this is risk low")
RISK_MEDIUM = _knob("RISK_MEDIUM", 0.33, "verdict", "...at or over this medium, under it high")
_knob(
    "LOOM_MEMORY_SEARCH_MIN_CONFIDENCE",
    0.15,
    "verdict",
    "under this confidence a search abstains low_calibrated_confidence",
    minimum=0,
    maximum=1,
)
_knob(
    "LOOM_MEMORY_SEARCH_ABSTAIN_TOP_SIM_SCOPE",
    "pool",
    "verdict",
    "the best cosine the abstain gate judges: the pool's (an off-window hit still counts), rank 1's or the window's",
    choices=("pool", "rank1", "window"),
)

# --- gates: the scalar tier, in force until an embedder is calibrated (fake embedders always) -------------------
_knob(
    "LOOM_MEMORY_SEARCH_MIN_SIMILARITY",
    0.22,
    "gates",
    "the similarity floor: a hit under it is marked below_threshold",
    minimum=0,
    maximum=1,
)
_knob(
    "LOOM_MEMORY_SEARCH_ABSTAIN_THRESHOLD",
    0.30,
    "gates",
    "no cosine over it: abstain below_threshold",
    minimum=0,
    maximum=1,
)
_knob(
    "LOOM_MEMORY_SEARCH_HYDE_FALLBACK_THRESHOLD",
    0.45,
    "gates",
    "a first pass weaker than this runs HyDE when asked",
    minimum=0,
    maximum=1,
)
_knob(
    "LOOM_MEMORY_SEARCH_QUERY_REWRITE_THRESHOLD",
    0.38,
    "gates",
    "the spec's query-rewrite gate, for the weak-pass fallback",
    minimum=0,
    maximum=1,
)
_knob(
    "LOOM_LLM_RERANK_SKIP_ABOVE", 0.60, "gates", "a first pass this strong skips the LLM reranker", minimum=0, maximum=1
)
_knob(
    "LOOM_CONFLICT_THRESHOLD",
    0.85,
    "gates",
    "a write this close to a stored value of its key conflicts with it",
    minimum=0,
    maximum=1,
)
_knob(
    "LOOM_DUPLICATE_THRESHOLD",
    0.95,
    "gates",
    "a write this close to a stored value with the same markers duplicates it",
    minimum=0,
    maximum=1,
)
NOISE_PERCENTILE = _knob(
    "NOISE_PERCENTILE", 90, "gates", "a namespace's noise: this percentile of off-topic questions' best cosines"
)
NOISE_MARGIN = _knob(
    "NOISE_MARGIN",
    0.07,
    "gates",
    "the abstain gate stands this far over the noise (the spec's floor plus abstain margins)",
)

# --- write: how a row's vector is made ---------------------------------------------------------------------------
CONTEXT_WEIGHT = _knob(
    "CONTEXT_WEIGHT",
    0.5,
    "write",
    "a turn's vector leans toward the turn it answers: gained recall@10 on every dev fold",
)
CHUNK_OVERLAP_CHARS = _knob(
    "CHUNK_OVERLAP_CHARS", 150, "write", "a long value's passages overlap this much, so no sentence is only cut"
)
GATES_EXACT_ROWS = _knob(
    "GATES_EXACT_ROWS",
    20_000,
    "write",
    "from this many rows in a namespace's mirror, the write gates compare a batch with the rows of the cells nearest "
    "each value instead of every row: a cost that grows with the cells read (docs/benchmarks.md, bench/gates.py)",
)
STORED_CELLS_FROM = _knob(
    "STORED_CELLS_FROM",
    200_000,
    "write",
    "a namespace whose mirror holds this many rows (more than a restart loads within LOOM_WRITE_GATES_LOAD_WAIT_S) "
    "keeps its write gates' cells in ClickHouse too, so a restart's batches are judged before its mirror is in; "
    "not fewer: indexing them costs each write CPU (docs/benchmarks.md); 0: only once a batch found neither",
)

SETTINGS = [knob for knob in TABLE if knob.setting]


def _shown(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{key} {amount:g}" for key, amount in value.items())
    if isinstance(value, tuple):
        return ", ".join(value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def markdown() -> str:
    """docs/operating.md's table, one row per knob in stage order."""
    lines = ["| stage | knob | default | bounds | why |", "|---|---|---|---|---|"]
    for knob in TABLE:
        if knob.choices:
            bounds = " / ".join(knob.choices)
        elif knob.minimum is not None or knob.maximum is not None:
            low = "" if knob.minimum is None else _shown(knob.minimum)
            high = "" if knob.maximum is None else _shown(knob.maximum)
            bounds = f"{low}–{high}" if high else f"≥ {low}"
        else:
            bounds = ""
        name = f"`{knob.name}`" if knob.setting else f"{knob.name} (constant)"
        lines.append(f"| {knob.stage} | {name} | {_shown(knob.default)} | {bounds} | {knob.why} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())
