"""memory.set_from_messages: a conversation handed to memory, as an agent has it.

Every message is stored as a `turn` row (the raw conversation, what memory.recall reads back): its key names its
session and its content (`turn.<session>.<digest>`), so the same message sent again is `unchanged`, and its value is
the speaker's label and what was said ("Caroline: I went to a support group yesterday."), as the turns of a
conversation are written and searched. The facts, preferences and events the turns state are extracted
(retrieval/ingest/extraction.py) and written with them, one write batch through the same write path (one batch's
inserts, not two): `source_class: extracted`, `valid_at` from their newest turn, `source_keys` naming the turns, no
session (a fact about a person is the same fact whichever session said it: said again, it is `unchanged` or a new
version, never a second copy).

The turns are the commit: they are stored whatever the extraction does. A failed extraction (the model
down, refused by its switch or the gateway, an answer that never parsed) is said in the answer and left to the
extraction queue (`defer`, or the retry after a failure: retrieval/store/extraction_queue.py), which the
server's worker and `manage.py extract_pending` drain (retrieval/ingest/extraction_pass.py).
"""

import dataclasses
import hashlib
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from retrieval.errors import Refusal
from retrieval.ingest import extraction, sensitivity, write
from retrieval.providers import customer, remote
from retrieval.store import extraction_queue, reads
from tenancy.access import Scope

log = logging.getLogger(__name__)

OP = "memory.set_from_messages"
ROLES = ("user", "assistant", "system", "tool")
EXTRACTED_FROM = ("user", "assistant")  # system prompts and tool output state nothing about the people


@dataclass(frozen=True)
class Message:
    role: str
    content: str
    name: str = ""
    created_at: datetime | None = None


@dataclass
class Conversation:
    """What a set_from_messages stored: its turns, the facts extracted, and how the extraction went."""

    session_id: str
    turns: list[write.WriteResult]
    facts: list[dict] = field(default_factory=list)  # each a WriteResult's fields, its value, type and source keys
    extraction: str = "done"  # done, queued (deferred or failed: the queue retries), none (nothing to read)
    error: str | None = None
    model_calls: int = 0
    job_id: str | None = None


def turn_inputs(
    messages: list[Message], session_id: str, agent: str, user_id: str, run_id: str, now: datetime
) -> list[write.MemoryInput]:
    """The messages as turn rows, in order: a message without its own time is placed a millisecond after the one
    before (so recall reads them back as sent)."""
    rows, seen = [], {}
    for index, message in enumerate(messages):
        speaker = message.name or message.role
        said = (
            message.role,
            message.name,
            message.content,
            message.created_at.isoformat() if message.created_at else "",
        )
        seen[said] = seen.get(said, -1) + 1  # the same message twice in one conversation is two turns
        digest = hashlib.sha256(repr((*said, seen[said])).encode()).hexdigest()[:16]
        rows.append(
            write.MemoryInput(
                memory_key=f"turn.{session_id}.{digest}",
                value=f"{speaker}: {message.content}",
                agent=agent,
                session_id=session_id,
                memory_type="turn",
                tags=[f"role:{message.role}"],
                entities=[message.name] if message.name else [],
                source_class="observed",
                valid_at=message.created_at or now + timedelta(milliseconds=index),
                user_id=user_id,
                run_id=run_id,
            )
        )
    return rows


def set_from_messages(
    scope: Scope,
    messages: list[Message],
    session_id: str,
    agent: str = "default",
    user_id: str = "",
    run_id: str = "",
    defer: bool = False,
) -> Conversation:
    """The turns and the facts they state, stored in one write batch once the model answered; the turns alone
    (and the extraction queued) when it did not, or when the facts' part of the batch is refused."""
    turns = turn_inputs(messages, session_id, agent, user_id, run_id, datetime.now(UTC))
    # A message sent again without its own time keeps the time it was first placed at (else it reads as updated).
    known = reads.bulk_get(scope, [turn.memory_key for turn in turns])
    for turn, message in zip(turns, messages):
        if message.created_at is None and turn.memory_key in known:
            turn.valid_at = known[turn.memory_key]["valid_at"]
    readable = [
        extraction.Turn(turn.memory_key, message.name or message.role, message.content, turn.valid_at)
        for turn, message in zip(turns, messages)
        if message.role in EXTRACTED_FROM and sensitivity.effective("low", *turn.texts)[0] != "high"  # never sent
    ]
    done = Conversation(session_id, [])
    if readable and not defer:
        try:
            with customer.for_org(scope.org, scope.namespace, scope.subject, OP, user_id):
                found = extraction.extract(readable)
            done.model_calls = found.calls
            facts = fact_inputs(scope, found.facts, agent, user_id, run_id)
            stored = write.set_memories(scope, turns + facts)
            done.turns, done.facts = stored[: len(turns)], shown(stored[len(turns) :], facts)
            return done
        except FAILURES as exc:
            done.error = f"{type(exc).__name__}: {exc}"
        except Refusal as refused:  # a fact's (a key pinned meanwhile): the turns are the commit all the same
            done.error = f"{refused.code}: {refused.message}"
    done.turns = write.set_memories(scope, turns)
    if not readable:
        done.extraction = "none"
        return done
    done.extraction = "queued"
    keys = [turn.key for turn in readable]
    done.job_id = extraction_queue.enqueue(scope, session_id, keys, agent, user_id, run_id, done.error or "")
    return done


# What fails an extraction and leaves it to the queue: the model's answer unreadable, the provider down or timing
# out, the org's calls switched off or refused by the gateway.
FAILURES = (extraction.ExtractionFailed, remote.ProviderError, remote.EmbedTimeout, customer.ModelCallRefused)


def fact_inputs(
    scope: Scope, facts: list[extraction.Fact], agent: str, user_id: str, run_id: str
) -> list[write.MemoryInput]:
    """The extracted facts as writes (the ordinary write path's gates judge them as any write). A fact whose key
    a person pinned is left out: the pinned row is what they chose to keep."""
    current = reads.bulk_get(scope, [fact.key for fact in facts])
    return [
        write.MemoryInput(
            memory_key=fact.key,
            value=fact.value,
            agent=agent,
            memory_type=fact.kind,
            entities=fact.entities,
            triples=fact.triples,
            source_class="extracted",
            valid_at=fact.valid_at,
            user_id=user_id,
            run_id=run_id,
            source_keys=fact.source_keys,
        )
        for fact in facts
        if not (fact.key in current and current[fact.key]["pinned"])
    ]


def shown(results: list[write.WriteResult], facts: list[write.MemoryInput]) -> list[dict]:
    """The facts as the answer shows them: each write's result, its value, type and source keys."""
    return [
        {
            **dataclasses.asdict(result),
            "value": fact.value,
            "memory_type": fact.memory_type,
            "source_keys": fact.source_keys,
        }
        for result, fact in zip(results, facts)
    ]


def extract_job(scope: Scope, job: extraction_queue.Job) -> int:
    """A queued extraction (retrieval/ingest/extraction_pass.py runs it as its writer): the facts stored."""
    found = extraction.extract(_turns(scope, job.turn_keys))
    return len(write.set_memories(scope, fact_inputs(scope, found.facts, job.agent, job.user_id, job.run_id)))


def _turns(scope: Scope, keys: list[str]) -> list[extraction.Turn]:
    """The job's turns as stored (a turn deleted since is left out): speaker and words from its value's label."""
    stored = reads.bulk_get(scope, keys)
    turns = []
    for key in keys:
        if (row := stored.get(key)) is not None and row["sensitivity"] != "high":
            speaker, _, said = row["value"].partition(": ")
            turns.append(extraction.Turn(key, speaker, said, row["valid_at"] or row["created_at"]))
    return turns
