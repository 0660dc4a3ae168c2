"""POST /v1/namespace.register (admin)."""


def test_register_creates_then_updates_keeping_unsent_fields(backend, alice, call):
    token = alice.token("admin")
    created = call(
        "namespace.register",
        {"namespace": "support", "text_capture": True, "retrieval_defaults": {"search_mode": "rrf", "top_k": 8}},
        token,
    )
    assert created.status == 201 and created.json["created"] is True
    assert created.json["retrieval_defaults"] == {"search_mode": "rrf", "top_k": 8}
    updated = call("namespace.register", {"namespace": "support", "description": "Tier-1 tickets"}, token)
    assert updated.status == 200 and updated.json["created"] is False
    assert updated.json["text_capture"] is True and updated.json["retrieval_defaults"]["top_k"] == 8
    assert updated.json["description"] == "Tier-1 tickets"


def test_register_needs_the_admin_role(backend, alice, call):
    reply = call("namespace.register", {"namespace": "x"}, alice.token("writer"))
    assert reply.status == 403 and reply.error == "ROLE_FORBIDDEN"


def test_retrieval_defaults_are_validated_field_by_field(backend, alice, call):
    token = alice.token("admin")
    cases = [
        ({"search_mode": "fuzzy"}, "retrieval_defaults.search_mode", "INVALID_VALUE"),
        ({"top_k": 501}, "retrieval_defaults.top_k", "INVALID_VALUE"),
        ({"top_k": "5"}, "retrieval_defaults.top_k", "INVALID_TYPE"),
        ({"min_similarity": 1.5}, "retrieval_defaults.min_similarity", "INVALID_VALUE"),
        ({"floor_mode": "hide"}, "retrieval_defaults.floor_mode", "INVALID_VALUE"),
        ({"bogus": 1}, "retrieval_defaults.bogus", "UNKNOWN_FIELD"),
    ]
    for defaults, field, code in cases:
        reply = call("namespace.register", {"namespace": "x", "retrieval_defaults": defaults}, token)
        assert (reply.status, reply.error, reply.json["error"]["field"]) == (422, code, field), defaults


def test_a_url_is_refused_as_rerank_endpoint(backend, alice, call):
    reply = call(
        "namespace.register", {"namespace": "x", "rerank_endpoint": "http://evil/rerank"}, alice.token("admin")
    )
    assert reply.status == 422 and reply.json["error"]["field"] == "rerank_endpoint"
    ok = call("namespace.register", {"namespace": "x", "rerank_endpoint": "builtin:cohere"}, alice.token("admin"))
    assert ok.status == 201 and ok.json["rerank_endpoint"] == "builtin:cohere"


def test_namespace_is_required_and_must_be_a_plain_name(backend, alice, call):
    token = alice.token("admin")
    missing = call("namespace.register", {}, token)
    assert missing.status == 422 and missing.error == "MISSING_FIELD" and missing.json["error"]["field"] == "namespace"
    bad = call("namespace.register", {"namespace": "a b/c"}, token)
    assert bad.status == 422 and bad.error == "INVALID_NAMESPACE"
