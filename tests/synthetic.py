"""Synthetic unit vectors and a vector mirror built from them, for the codes-first test and bench/scale.py."""

from datetime import UTC, datetime

import numpy as np

from retrieval.index import Vectors

DIM = 384
DATED = datetime(2026, 1, 1, tzinfo=UTC)


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def vectors(count: int, rng) -> np.ndarray:
    """`count` unit vectors in 200 clusters."""
    centers = rng.standard_normal((200, DIM)).astype(np.float32)
    return unit(centers[rng.integers(0, 200, count)] + 0.6 * rng.standard_normal((count, DIM)).astype(np.float32))


def mirror(
    namespace: str,
    values: np.ndarray,
    keys: np.ndarray | None,
    built: Vectors | None = None,
    name="m",
    sessions: int = 0,
    texts: list[str] | None = None,
) -> Vectors:
    """A mirror of these rows (keys m0, m1, ...; or added to `built`, under another `name`), added as the write
    path's notices add them, 50,000 at a time; with `sessions`, row i is in session s{i % sessions}. Without key
    vectors, a mirror that holds none (a namespace no search scored on the key axis). With `texts`, row i's value is
    texts[i], added as a load adds its rows: words not counted yet (`Vectors.count_words`)."""
    built = built or Vectors(keyed=keys is not None)
    step = 50_000
    for start in range(0, len(values), step):
        rows = [
            {
                "namespace": namespace,
                "memory_key": f"{name}{i}",
                "agent": "default",
                "session_id": f"s{i % sessions}" if sessions else "",
                "version": 1,
                "revision": 1,
                "value_vector": values[i],
                "key_vector": None if keys is None else keys[i],
                "duplicate_of": "",
                "user_id": "",
                "run_id": "",
                "memory_type": "fact",
                "tags": [],
                "category": "",
                "entities": [],
                "source_class": "",
                "confidence": 1.0,
                "sensitivity": "low",
                "dated_at": DATED,
            }
            for i in range(start, min(start + step, len(values)))
        ]
        if texts is None:
            built.add(rows)
        else:
            shown = {
                (row["memory_key"], "default", row["session_id"], 1): (texts[i], DATED, DATED, ())
                for i, row in enumerate(rows, start)
            }
            built.add(rows, shown=shown, words=False)
    return built
