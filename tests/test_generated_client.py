"""A client generated from the OpenAPI schema by openapi-python-client works as generated: typed bodies in, typed
answers and refusals out, over real HTTP (the test's live server)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

PACKAGE = "loom_generated"


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """The generated package, importable for this module's tests."""
    folder = tmp_path_factory.mktemp("generated")
    schema = folder / "schema.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(schema))  # what GET /v1/schema serves
    config = folder / "config.json"
    config.write_text(json.dumps({"post_hooks": [], "package_name_override": PACKAGE}))
    done = subprocess.run(
        [Path(sys.executable).parent / "openapi-python-client", "generate", "--path", schema, "--config", config]
        + ["--meta", "none", "--output-path", folder / PACKAGE],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "Warning" not in done.stdout + done.stderr, done.stdout + done.stderr
    sys.path.insert(0, str(folder))
    yield
    sys.path.remove(str(folder))
    for name in [name for name in sys.modules if name.split(".")[0] == PACKAGE]:
        del sys.modules[name]


def test_set_search_and_ask_round_trip_through_the_generated_client(
    generated, backend, transactional_db, live_server, alice
):
    from loom_generated import AuthenticatedClient
    from loom_generated.api.memory import memory_ask, memory_get, memory_search, memory_set
    from loom_generated.models import (
        AskOut,
        ErrorCode,
        ErrorOut,
        MemoryAsk,
        MemoryGet,
        MemorySearch,
        MemorySetBatch,
        MemorySetOne,
        SearchOut,
        WriteResultOut,
    )

    # Closed before the test ends: a kept-alive connection would outlive the live server's database.
    with AuthenticatedClient(
        base_url=live_server.url, token=alice.token("writer"), raise_on_unexpected_status=True
    ) as client:
        written = memory_set.sync_detailed(
            client=client,
            body=MemorySetOne(
                memory_key="deploy.window", value="production deploys run on tuesdays after 10am", tags=["ops"]
            ),
        )
        assert written.status_code == 201 and isinstance(written.parsed, WriteResultOut)
        assert (written.parsed.memory_key, written.parsed.outcome) == ("deploy.window", "created")
        batch = memory_set.sync(
            client=client,
            body=MemorySetBatch.from_dict(
                {"items": [{"memory_key": "lunch", "value": "the cafeteria serves soup on fridays"}]}
            ),
        )
        assert [item.memory_key for item in batch.items] == ["lunch"]

        found = memory_search.sync(client=client, body=MemorySearch(query="when do production deploys run?", top_k=3))
        assert isinstance(found, SearchOut) and found.abstain is False
        assert found.hits[0].memory_key == "deploy.window" and found.hits[0].rank_score > 0

        answered = memory_ask.sync(client=client, body=MemoryAsk(query="When do production deploys run?"))
        assert isinstance(answered, AskOut) and "deploy.window" in answered.memory_keys

        missing = memory_get.sync(client=client, body=MemoryGet(memory_key="no.such.key"))
        assert isinstance(missing, ErrorOut)
        assert (missing.error.code, missing.error.field) == (ErrorCode.MEMORY_NOT_FOUND, "memory_key")
