"""How long work under way will take, at its pace so far: a write batch waits for a mirror's load
(index.awaited) or a training of stored cells (stored_cells.awaited) only while it will be in before the
batch's deadline."""


def seconds_left(elapsed: float, done: int, total: int) -> float:
    """Seconds until all `total` are done, `done` of them in `elapsed` seconds; 0 until one is (no pace yet)."""
    return elapsed * max(0.0, total / done - 1) if done else 0.0
