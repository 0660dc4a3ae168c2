"""What each tool is for, as the model choosing a tool reads it: when to call it and what its answer means, not its
syntax (the input schema carries that). Whether an agent writes memory at all is its model's decision (spec 004)."""

LOOM_SEARCH = (
    "Search long-term memory before you answer anything that depends on what was said, decided or learned in "
    "earlier sessions: facts, preferences, events, conversation turns, session digests, entity summaries and "
    "records, ranked together (each hit names its plane). Read `abstain` first: true means memory does not know (branch on `abstain_code`, never "
    "on the prose), so say so rather than guess. `retrieval_risk` grades how far to trust the hits; "
    "`pending_extraction` > 0 means a conversation is still being read, so a thin answer is not evidence of "
    "absence. Pass `next` back as `page` for more hits."
)
MEMORY_ASK = (
    "Ask memory a question and get a short answer written from what it holds, citing the memory keys it used; or "
    "an explicit abstain when memory does not support an answer. Use it when you want the answer, loom_search when "
    "you want the evidence."
)
MEMORY_GET = (
    "Read one memory by its exact key (from a search hit or one you wrote), with its write-time verdicts; "
    "`history: true` adds every earlier version and the conflict resolver's decisions."
)
MEMORY_SET = (
    "Remember one durable fact, preference or decision the user or task will need in a later session, under a "
    "stable readable key (`pref.editor`, `customer.acme.contact`). Writing the same key again makes a new version; "
    "the answer says whether it was created, updated, unchanged or flagged as a duplicate or a conflict. Do not "
    "store secrets: they are kept out of search and never sent to a model."
)
MEMORY_SET_FROM_MESSAGES = (
    "Hand memory a conversation (the messages of a session) and let it extract the facts, preferences and events "
    "they state; the turns are kept as said. Use it at the end of a session or every few turns instead of choosing "
    "facts yourself. `defer: true` answers at once and extracts in the background (searches count it in "
    "`pending_extraction`)."
)
MEMORY_RECALL = (
    "Read the conversation turns behind a memory (by key), or a session's turns in order: what was actually said, "
    "when a fact's wording is not enough."
)
MEMORY_DELETE = "Retire a memory that is wrong or no longer wanted; searches stop serving it at once."
MEMORY_OUTCOME = (
    "Tell memory whether the memories a search or answer served helped (positive) or misled you (harm), by their "
    "keys; later searches rank by it."
)
CONTEXT_PACK = (
    "Get the best evidence memory holds for a task as one text block that fits your token budget (`max_tokens`), "
    'ready to put in your context: the verdict first (including "memory does not know"), then one line per '
    "memory, best first, each cited by key. Never calls a model."
)
MEMORY_BRIEF = (
    "Orient yourself before a task: memory's answer, the memories it rests on, what memory does not know or holds "
    "contradicting versions of, and which calls to make next. `allow_synthesis: false` for the evidence alone."
)
