"""Bad input gets its own code and names the field; never a 500, never a traceback."""

import pytest


@pytest.fixture
def token(alice):
    return alice.token("writer")


CASES = [
    # (body, status, code, field)
    ({"memory_key": "k", "value": "v", "colour": "red"}, 422, "UNKNOWN_FIELD", "colour"),
    ({"memory_key": "k"}, 422, "MISSING_FIELD", "value"),
    ({"value": "v"}, 422, "MISSING_FIELD", "memory_key"),
    ({"memory_key": 7, "value": "v"}, 422, "INVALID_TYPE", "memory_key"),
    ({"memory_key": "k", "value": ["v"]}, 422, "INVALID_TYPE", "value"),
    ({"memory_key": "k", "value": "v", "pinned": "yes"}, 422, "INVALID_TYPE", "pinned"),
    ({"memory_key": "k", "value": "v", "confidence": "0.5"}, 422, "INVALID_TYPE", "confidence"),
    ({"memory_key": "k", "value": "v", "confidence": 1.5}, 422, "INVALID_VALUE", "confidence"),
    ({"memory_key": "k", "value": "v", "tags": "a,b"}, 422, "INVALID_TYPE", "tags"),
    ({"memory_key": "k", "value": "v", "memory_type": "gossip"}, 422, "INVALID_VALUE", "memory_type"),
    ({"memory_key": "k", "value": "v", "valid_at": "yesterday"}, 422, "INVALID_VALUE", "valid_at"),
    ({"memory_key": "k", "value": "   "}, 422, "INVALID_VALUE", "value"),
    ({"memory_key": "", "value": "v"}, 422, "INVALID_KEY", "memory_key"),
    ({"memory_key": "   ", "value": "v"}, 422, "INVALID_KEY", "memory_key"),
    ({"memory_key": "k" * 513, "value": "v"}, 422, "INVALID_KEY", "memory_key"),
    ({"memory_key": "é" * 257, "value": "v"}, 422, "INVALID_KEY", "memory_key"),  # 514 bytes
    ({"memory_key": "line\nbreak", "value": "v"}, 422, "INVALID_KEY", "memory_key"),
    ({"memory_key": "nul\x00", "value": "v"}, 422, "INVALID_KEY", "memory_key"),
    ({"memory_key": "k", "value": "x" * (64 * 1024 + 1)}, 413, "VALUE_TOO_LARGE", "value"),
    ({"namespace": "no spaces", "memory_key": "k", "value": "v"}, 422, "INVALID_NAMESPACE", "namespace"),
    ({"namespace": "trailing\n", "memory_key": "k", "value": "v"}, 422, "INVALID_NAMESPACE", "namespace"),
    ({"items": [{"memory_key": "k", "value": "v"}] * 501}, 422, "TOO_MANY_ITEMS", "items"),
    ({"items": []}, 422, "INVALID_VALUE", "items"),
    ({"items": [{"memory_key": "a", "value": "v"}, {"memory_key": "b"}]}, 422, "MISSING_FIELD", "items[1].value"),
    ({"items": [{"memory_key": "a", "value": "v", "x": 1}]}, 422, "UNKNOWN_FIELD", "items[0].x"),
    ({"items": "nope"}, 422, "INVALID_TYPE", "items"),
]


@pytest.mark.parametrize("body,status,code,field", CASES, ids=[f"{c[2]}-{c[3]}-{i}" for i, c in enumerate(CASES)])
def test_bad_memory_set_input(backend, call, token, body, status, code, field):
    reply = call("memory.set", body, token)
    assert (reply.status, reply.error, reply.json["error"].get("field")) == (status, code, field)
    assert field in reply.json["error"]["message"] or field == reply.json["error"]["field"]


def test_a_key_of_512_bytes_is_accepted(backend, call, token):
    assert call("memory.set", {"memory_key": "k" * 512, "value": "v"}, token).status == 201
    assert call("memory.set", {"memory_key": "é" * 256, "value": "v"}, token).status == 201


def test_a_rejected_write_stores_nothing(backend, call, token):
    call("memory.set", {"items": [{"memory_key": "a", "value": "v"}, {"memory_key": "b", "value": 3}]}, token)
    assert call("memory.get", {"memory_key": "a"}, token).status == 404


@pytest.mark.parametrize("raw", [b"{not json", b"", b"\xff\xfe", b'{"a": NaN}'])
def test_malformed_json_is_400(call, token, raw):
    reply = call("memory.set", raw=raw, token=token)
    expected = "MISSING_FIELD" if raw == b"" else "MALFORMED_JSON"  # an empty body is an empty object
    assert reply.error == expected


@pytest.mark.parametrize("raw", [b"[1, 2]", b'"text"', b"3"])
def test_a_body_that_is_not_an_object_is_400(call, token, raw):
    reply = call("memory.set", raw=raw, token=token)
    assert (reply.status, reply.error) == (400, "BODY_NOT_OBJECT")


def test_a_body_over_the_request_limit_is_413(call, token, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    reply = call("memory.set", {"memory_key": "k", "value": "x" * 4096}, token)
    assert (reply.status, reply.error) == (413, "BODY_TOO_LARGE")


def test_an_unknown_op_and_a_wrong_method(call, token):
    unknown = call("memory.frobnicate", {}, token)
    assert (unknown.status, unknown.error) == (404, "UNKNOWN_OP")
    wrong = call("memory.set", token=token, method="get")
    assert (wrong.status, wrong.error) == (405, "METHOD_NOT_ALLOWED")


def test_an_unexpected_failure_is_a_generic_500_without_traceback(backend, call, token, monkeypatch):
    from retrieval.ingest import write

    def explode(*args, **kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(write, "set_memories", explode)
    reply = call("memory.set", {"memory_key": "k", "value": "v"}, token)
    assert (reply.status, reply.error) == (500, "INTERNAL_ERROR")
    assert "secret internals" not in str(reply.json) and "Traceback" not in str(reply.json)


@pytest.mark.parametrize("depth", [40, 1000])  # past the service's limit; past the JSON decoder's own
def test_a_body_nested_too_deep_is_refused_not_a_500(call, token, depth):
    raw = b'{"memory_key": "k", "value": "v", "tags": ' + b"[" * depth + b"]" * depth + b"}"
    for op in ("memory.set", "memory.search"):
        reply = call(op, raw=raw, token=token)
        assert (reply.status, reply.error) == (400, "MALFORMED_JSON"), reply.json
        assert "nests deeper than 32 levels" in reply.json["error"]["message"]


LONE = '"\\ud800"'  # a lone surrogate escape: valid JSON, no UTF-8 text


@pytest.mark.parametrize(
    ("op", "body", "field"),
    [
        ("memory.set", '{"memory_key": "k", "value": "a %s b"}', "value"),
        ("memory.set", '{"memory_key": %s, "value": "v"}', "memory_key"),
        ("memory.set", '{"memory_key": "k", "value": "v", "tags": ["ok", %s]}', "tags[1]"),
        ("memory.set", '{"memory_key": "k", "value": "v", "user_id": %s}', "user_id"),
        ("memory.set", '{"memory_key": "k", "value": "v", "entities": [%s]}', "entities[0]"),
        ("memory.search", '{"query": %s}', "query"),
        ("memory.get", '{"memory_key": %s}', "memory_key"),
    ],
)
def test_a_lone_surrogate_is_refused_naming_its_field(backend, call, token, op, body, field):
    raw = (body % LONE).replace('"a "\\ud800" b"', '"a \\ud800 b"').encode()
    reply = call(op, raw=raw, token=token)
    assert (reply.status, reply.error, reply.json["error"].get("field")) == (422, "INVALID_VALUE", field), reply.json
    assert call("memory.get", {"memory_key": "k"}, token).status == 404  # nothing of it stored
