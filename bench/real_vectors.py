"""Real embeddings for the scale benchmarks: the local embedder (local:minilm) over distinct English sentences.

    .venv/bin/python bench/real_vectors.py [--count 50000]    # embeds once (~200 texts/s here), then cached

Random vectors flatter an approximate read: real embeddings crowd into a few directions, so near-ties are many.
The texts are the sentences of the docstrings of Python's standard library (files in sorted order, each sentence
once), which every machine with this Python has: no download. Vectors are cached under var/bench/ by count.
"""

import argparse
import ast
import re
import sys
import sysconfig
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "var" / "bench"
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
PROSE = re.compile(r"[a-z]{3,} [a-z]{3,} [a-z]{3,}")  # three words in a row: a sentence, not a signature


def sentences(count: int) -> list[str]:
    """`count` distinct sentences (40-200 characters) from the standard library's docstrings."""
    found: dict[str, None] = {}
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(errors="ignore"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for sentence in SENTENCE_END.split(" ".join((ast.get_docstring(node) or "").split())):
                if 40 <= len(sentence) <= 200 and PROSE.search(sentence):
                    found[sentence] = None
                    if len(found) == count:
                        return list(found)
    raise SystemExit(f"the standard library holds {len(found):,} such sentences, not {count:,}")


def embedded(count: int) -> np.ndarray:
    """(count, 384) float32 unit vectors of `sentences(count)`, cached."""
    path = CACHE / f"minilm-{count}.npy"
    if path.exists():
        return np.load(path)
    from retrieval.providers.embedders import LocalEmbedder

    texts = sentences(count)
    embedder = LocalEmbedder.minilm()
    step = 2_000
    parts = []
    for start in range(0, count, step):
        parts.append(embedder.embed_many(texts[start : start + step]))
        print(f"\rembedded {start + len(parts[-1]):,} of {count:,}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    CACHE.mkdir(parents=True, exist_ok=True)
    vectors = np.concatenate(parts)
    np.save(path, vectors)
    return vectors


if __name__ == "__main__":
    import os

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loom_site.settings")
    import django

    django.setup()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=50_000)
    print(embedded(parser.parse_args().count).shape)
