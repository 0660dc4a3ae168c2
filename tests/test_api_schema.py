"""GET /v1/schema (OpenAPI 3) and /v1/docs, served without any CDN."""

import json
import re

import schemathesis
from django.core.wsgi import get_wsgi_application
from django.test import Client

from memories import urls
from retrieval import options


def test_schema_lists_every_op_with_its_request_fields(db):
    reply = Client().get("/v1/schema?format=json")
    assert reply.status_code == 200
    doc = json.loads(reply.content)
    assert doc["openapi"].startswith("3.")
    for op in ("memory.set", "memory.get", "memory.bulk_get", "memory.list", "memory.delete", "namespace.register"):
        assert f"/v1/{op}" in doc["paths"], op
        assert doc["paths"][f"/v1/{op}"]["post"]["security"] == [{"bearerToken": []}]
    body = doc["paths"]["/v1/memory.get"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    get_fields = doc["components"]["schemas"][body["$ref"].split("/")[-1]]["properties"]
    assert {"memory_key", "namespace", "history"} <= set(get_fields)
    assert doc["components"]["securitySchemes"]["bearerToken"]["scheme"] == "bearer"


def test_memory_ask_documents_its_own_fields_and_answer(db):
    doc = json.loads(Client().get("/v1/schema?format=json").content)
    schemas = doc["components"]["schemas"]
    post = doc["paths"]["/v1/memory.ask"]["post"]
    request = schemas[post["requestBody"]["content"]["application/json"]["schema"]["$ref"].split("/")[-1]]["properties"]
    assert {"query", "allow_synthesis", "max_answer_chars", "recent_messages", "llm_cache"} <= set(request)
    assert "paging" not in request and "page" not in request
    answer = schemas[post["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].split("/")[-1]]
    assert {"answer", "source", "memory_keys", "cited_sessions", "hits"} <= set(answer["properties"])


def test_docs_page_loads_its_assets_from_this_server(db):
    page = Client().get("/v1/docs").content.decode()
    assert "swagger-ui" in page
    # Every script, stylesheet and link names this server (a bare "cdn" check once matched the page's random nonce).
    assets = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)""", page)
    assert any("swagger-ui" in asset for asset in assets)
    assert all(asset.startswith("/") and not asset.startswith("//") for asset in assets), assets
    assert Client().get("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js").status_code == 200


def _schema():
    # Django's own WSGI app: loom_site.wsgi would also start the server's workers in the test process.
    return schemathesis.openapi.from_wsgi("/v1/schema?format=json", get_wsgi_application())


def test_every_op_documents_its_types_bounds_and_refusals(db):
    doc = json.loads(Client().get("/v1/schema?format=json").content)
    assert doc["openapi"] == "3.1.0"
    search = doc["components"]["schemas"]["MemorySearch"]["properties"]
    assert search["top_k"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 500,
        "description": "Window size, default 5.",
    }
    assert search["hyde"] == {"type": "boolean"} and search["explain"] == {"type": "boolean", "default": False}
    assert (search["alpha"]["type"], search["alpha"]["minimum"], search["alpha"]["maximum"]) == ("number", 0, 1)
    mode = doc["components"]["schemas"][search["search_mode"]["$ref"].split("/")[-1]]
    assert (mode["type"], mode["enum"]) == ("string", list(options.SEARCH_MODES))
    assert search["tags"]["type"] == "array" and search["tags"]["items"]["maxLength"] == 128
    assert search["as_of"] == {"type": "string", "format": "date-time", "pattern": r"^(19\d\d|2[0-2]\d\d)-"}
    assert search["exclude_keys"]["maxItems"] == 200
    batch = doc["components"]["schemas"]["MemorySetBatch"]["properties"]["items"]
    assert (batch["minItems"], batch["maxItems"]) == (1, 500)
    valid_at = doc["components"]["schemas"]["MemoryFields"]["properties"]["valid_at"]
    assert valid_at["type"] == ["string", "null"]
    for path, item in doc["paths"].items():
        if path == "/v1/health":
            continue
        answers = item["post"]["responses"]
        assert {"400", "401", "403", "422", "429", "503"} <= set(answers), path
        assert {"200", "201", "202"} & set(answers), path
        assert "RATE_LIMITED" in answers["429"]["description"] and "Retry-After" in answers["429"]["headers"]
        assert item["post"]["description"], path
    assert "MEMORY_NOT_FOUND" in doc["paths"]["/v1/memory.get"]["post"]["responses"]["404"]["description"]
    assert "MEMORY_PINNED" in doc["paths"]["/v1/memory.set"]["post"]["responses"]["409"]["description"]


def test_every_example_succeeds_as_sent_in_the_listed_order(local_embedder, alice):
    """What /v1/docs' *Try it out* sends: each op's example, as-is, one after another; each answer matches the
    schema (status, content type, body, headers)."""
    schema = _schema()
    headers = {"Authorization": f"Bearer {alice.token('admin')}"}
    paths = [path for path in schema.raw_schema["paths"] if path != "/v1/health"]
    assert len(paths) == len(urls.OPS)
    for path in paths:
        operation = schema[path]["POST"]
        example = operation.definition.raw["requestBody"]["content"]["application/json"]["examples"]
        (body,) = [entry["value"] for entry in example.values()]
        response = operation.Case(body=body).call_and_validate(headers=headers)
        assert response.status_code in (200, 201, 202), (path, response.text[:500])
