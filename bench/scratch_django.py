"""Django for a bench script, on a scratch `LOOM_VAR_DIR` of its own (removed at exit: tests/scratch.py). A script
under bench/ calls `django_on_scratch("loom-bench-NAME-")` before it imports the app (this module is found beside it:
Python puts a script's folder first on the path)."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def django_on_scratch(prefix: str) -> None:
    sys.path.insert(0, str(ROOT))  # the repository: the apps, tests.scratch, bench.*
    from tests.scratch import scratch_dir

    os.environ["LOOM_VAR_DIR"] = scratch_dir(prefix)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loom_site.settings")

    import django

    django.setup()
