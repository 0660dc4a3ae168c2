"""Compare's maths, with no engine: rank moves, rows only in one window, overlap@k, Spearman."""

from types import SimpleNamespace

from recall.compare import moves, spearman


def test_compare_moves_and_summary():
    def run(*keys):
        hits = [{"namespace": "n", "memory_key": key, "agent": "a", "session_id": ""} for key in keys]
        return {"result": SimpleNamespace(hits=hits)}

    found = moves({"a": run("x", "y", "z"), "b": run("y", "x", "w")})
    assert [(row["hit"]["memory_key"], row["move"]) for row in found["rows"]["a"]] == [("x", 1), ("y", -1), ("z", None)]
    assert [row["move"] for row in found["rows"]["b"]] == [1, -1, None]
    assert (found["shared"], found["k"], found["overlap"], found["correlation"]) == (2, 3, 2 / 3, -1)

    assert spearman([1, 2, 3], [1, 2, 3]) == 1 and spearman([1, 2, 3], [3, 2, 1]) == -1
    assert spearman([1], [4]) is None
