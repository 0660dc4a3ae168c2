"""Test and benchmark processes leave no var/ directory behind (a disk filled by them once failed CI)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_test_process_var_dir_is_removed_when_it_exits():
    script = (
        "import os, pathlib, tests.settings\n"
        "var = pathlib.Path(os.environ['LOOM_VAR_DIR'])\n"
        "(var / 'clickhouse').mkdir(); (var / 'clickhouse' / 'part.bin').write_bytes(b'x' * 1024)\n"
        "print(var)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    var = Path(done.stdout.strip())
    assert var.name.startswith("loom-test-")
    assert not var.exists()
