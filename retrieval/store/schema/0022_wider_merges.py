"""Wider background merges for the tables every write appends to. The engine merges a table's parts in levels, and
each level rewrites every row once more; `merge_selector_base` is how many parts of about one size it waits for
before merging them (5 by default). At 10 a row is rewritten about a third fewer times on the way to a million-row
part, for a few more parts at any moment: 600k memories written in batches of 2,000 (twice each), the merges took
80 and 84 s of the engine's CPU at the default, 57 and 54 s at 10 (7-12 active parts a table either way), and the
writes ran 3,374-3,592 a second against 3,943-4,009 with the write gates and the vector mirror off. On the embedded
engine those merges share the cores with the service's own work; with the gates and the mirror on, whose Python is
the longer part of a write, a grow to a million rows took as long before as after (docs/benchmarks.md)."""

_TABLES = ("memories", "memory_embeddings", "memory_terms", "memory_chunks")

STATEMENTS = [f"ALTER TABLE {table} MODIFY SETTING merge_selector_base = 10" for table in _TABLES]
