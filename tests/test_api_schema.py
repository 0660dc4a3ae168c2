"""GET /v1/schema (OpenAPI 3) and /v1/docs, served without any CDN."""

import json

from django.test import Client


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
    assert "cdn" not in page.lower() and "unpkg" not in page.lower()
    assert Client().get("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js").status_code == 200
