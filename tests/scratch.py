"""Throwaway var/ directories for test and benchmark processes, removed when the process exits.

A var/ dir holds an embedded ClickHouse (hundreds of MB after a benchmark); left behind, a few hundred
runs filled this machine's disk and CI failed on `pip install`.
"""

import atexit
import shutil
import tempfile


def scratch_dir(prefix: str) -> str:
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path
