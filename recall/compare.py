"""Compare's maths: two windows of the same query, row by row (rank moves, rows only in one), overlap@k and
Spearman's rank correlation of the rows both served. Pure: the view runs the searches, this reads their hits."""


def moves(runs: dict) -> dict:
    """Each side's rows with where the other side ranked them, and the summary line."""
    if any("result" not in run for run in runs.values()):
        return {}
    ranked = {side: [_identity(hit) for hit in run["result"].hits] for side, run in runs.items()}
    position = {side: {row: at for at, row in enumerate(rows, 1)} for side, rows in ranked.items()}
    rows = {}
    for side, other in (("a", "b"), ("b", "a")):
        rows[side] = []
        for at, hit in enumerate(runs[side]["result"].hits, 1):
            there = position[other].get(_identity(hit))  # None: only this window served it
            move = None if there is None else there - at  # > 0: the other window ranks it lower
            rows[side].append({"hit": hit, "rank": at, "other": there, "move": move, "steps": abs(move or 0)})
    both = [row for row in ranked["a"] if row in position["b"]]
    k = max(len(ranked["a"]), len(ranked["b"]))
    return {
        "rows": rows,
        "overlap": len(both) / k if k else None,
        "shared": len(both),
        "k": k,
        "correlation": spearman([position["a"][row] for row in both], [position["b"][row] for row in both]),
    }


def _identity(hit: dict) -> tuple:
    return hit["namespace"], hit["memory_key"], hit["agent"], hit["session_id"]


def spearman(a: list[int], b: list[int]) -> float | None:
    """Spearman's rank correlation of the rows both windows served (None under two)."""
    n = len(a)
    if n < 2:
        return None
    rank_a = {value: at for at, value in enumerate(sorted(a))}
    rank_b = {value: at for at, value in enumerate(sorted(b))}
    d2 = sum((rank_a[x] - rank_b[y]) ** 2 for x, y in zip(a, b))
    return 1 - 6 * d2 / (n * (n * n - 1))
