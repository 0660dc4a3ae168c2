"""schemathesis's own command, with every check it has (`--checks all`), over every op of the live server's schema.

Where tests/test_api_fuzz.py draws bodies in-process on each backend, this runs the command a user of the schema
would, as they would: its examples, coverage and fuzzing phases, and checks such as a schema-valid body accepted, a
schema-invalid one refused with a validation status (a list over its maxItems is a 422, not a 413), auth ignored,
unsupported methods. The draws are seeded, so a red run names a change, not a lucky draw.

One check is told one more status: a schema-valid body may be refused 422 where a value is valid only if the
service issued it (a page cursor, a run's configuration name), which no schema can say; test_api_fuzz.py pins which
codes such a refusal may carry.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

CONFIG = """
[checks.positive_data_acceptance]
expected-statuses = ["2xx", "3xx", "401", "403", "404", "409", "422", "429"]
"""


@pytest.mark.parametrize("backend", ["embedded"], indirect=True)
def test_every_op_passes_every_schemathesis_check(backend, transactional_db, live_server, alice, tmp_path):
    (tmp_path / "schemathesis.toml").write_text(CONFIG)
    ran = subprocess.run(
        [
            str(Path(sys.executable).with_name("schemathesis")),
            f"--config-file={tmp_path / 'schemathesis.toml'}",
            "run",
            f"{live_server.url}/v1/schema?format=json",
            "--checks=all",
            f"--header=Authorization: Bearer {alice.token('admin')}",
            f"--max-examples={os.environ.get('FUZZ_EXAMPLES', '5')}",
            "--seed=1",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,  # whatever it keeps between runs stays out of the checkout
    )
    assert ran.returncode == 0, ran.stdout[-20000:] + ran.stderr[-3000:]
