"""The Recall Lab page (/recall): login, one org's namespaces, the same search() as the REST op, partial swaps."""

import json
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from recall import views
from retrieval.gates import calibration, probe_corpora, thresholds
from retrieval.providers import embedders
from tenancy.models import Membership
from tests.conftest import Agent


def operator_of(*tenants, role="viewer") -> Client:
    """A dashboard user who is a member of these orgs, logged in."""
    user = get_user_model().objects.create_user(f"op-{uuid.uuid4().hex[:10]}", password="x")
    for tenant in tenants:
        Membership.objects.create(user=user, org=tenant.org, role=role)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def filled(alice, call):
    agent = Agent(call, alice.token("admin"))
    agent.set(
        {"memory_key": "deploy.window", "value": "production deploys run on tuesdays after 10am"},
        {"memory_key": "lunch", "value": "the cafeteria serves soup on fridays"},
    )
    return agent


def test_a_visitor_is_sent_to_log_in_and_a_member_who_is_not_staff_can(db, alice):
    response = Client().get("/recall")
    assert response.status_code == 302 and response["Location"] == "/recall/login?next=/recall"
    user = get_user_model().objects.create_user("member", password="a long passphrase")
    Membership.objects.create(user=user, org=alice.org, role="viewer")
    client = Client()
    assert client.post("/recall/login", {"username": "member", "password": "wrong"}).status_code == 200
    answered = client.post("/recall/login", {"username": "member", "password": "a long passphrase", "next": "/recall"})
    assert (answered.status_code, answered["Location"]) == (302, "/recall")


def test_repeated_failed_logins_lock_that_username_from_that_address(db, alice, settings):
    user = get_user_model().objects.create_user("member", password="a long passphrase")
    Membership.objects.create(user=user, org=alice.org, role="viewer")
    client = Client()
    tries = [client.post("/recall/login", {"username": "member", "password": "guess"}).status_code for _ in range(5)]
    assert tries == [200] * (settings.AXES_FAILURE_LIMIT - 1) + [429]  # the limit-th failure locks
    locked = client.post("/recall/login", {"username": "member", "password": "a long passphrase"})
    assert locked.status_code == 429 and b"Too many attempts" in locked.content  # even the right password
    other = get_user_model().objects.create_user("other", password="another passphrase")
    Membership.objects.create(user=other, org=alice.org, role="viewer")
    assert client.post("/recall/login", {"username": "other", "password": "another passphrase"}).status_code == 302


def test_a_user_of_no_org_sees_why_not_an_error_page(db):
    user = get_user_model().objects.create_user("nobody", password="x")
    client = Client()
    client.force_login(user)
    response = client.get("/recall")
    assert response.status_code == 403 and b"not a member of any org" in response.content


def test_the_page_runs_the_rest_search_and_shows_its_components(backend, alice, filled):
    response = operator_of(alice).get("/recall", {"query": "when do production deploys run", "search_mode": "rrf"})
    page = response.content.decode()
    assert response.status_code == 200 and "<html" in page
    assert "deploy.window" in page and "mode <code>rrf</code> (request)" in page
    figure = json.loads(page.split('class="plot" data-target="components-chart">')[1].split("</script>")[0])
    stacked = {trace["name"] for trace in figure["data"]}
    assert "relevance" in stacked and "rank_score" not in stacked  # the parts, not the total
    first = [trace["x"][0] for trace in figure["data"]]
    api = filled.search("when do production deploys run", search_mode="rrf", explain=True).json["hits"][0]
    assert api["memory_key"] == "deploy.window"
    assert sum(first) == pytest.approx(api["rank_score"], abs=1e-3)  # the bar adds up to the REST op's score


def test_a_reranked_window_shows_where_each_hit_stood_before(backend, alice, filled, model_server, settings):
    from tests.model_server import Answer

    settings.COHERE_API_KEY, settings.LOOM_COHERE_BASE_URL = "co-test", model_server.url.removesuffix("/v1")
    filled.call(
        "namespace.register", {"namespace": "default", "retrieval_defaults": {"min_similarity": 0}}, filled.token
    )
    query = "when do production deploys run"
    fused = [hit["memory_key"] for hit in filled.search(query).json["hits"]]
    model_server.script(Answer(ranking=[1, 0]))
    page = operator_of(alice).get("/recall", {"query": query, "rerank": "builtin:cohere"}).content.decode()
    rows = page.split("<tbody>")[1].split("</tbody>")[0].split("<tr")[1:]
    assert fused[1] in rows[0] and "<td>#2</td>" in rows[0] and "<td>#1</td>" in rows[1]
    assert "before the reranker" in page


def test_the_keyword_matches_are_the_rows_holding_the_querys_words(backend, alice, filled):
    def keywords(query):
        page = operator_of(alice).get("/recall", {"query": query}).content.decode()
        return page.split('aria-label="Keyword matches"')[1].split("</section>")[0]

    found = keywords("soup fridays")
    assert '<code>lunch</code> <span class="score">2 of 2 words' in found and "deploy.window" not in found
    both = keywords("cafeteria tuesdays")  # one word each
    assert both.count("1 of 2 words") == 2
    # Stop words count for no row (the lexical leg leaves them out too): "what is the soup on fridays" is 2 words.
    asked = keywords("what is the soup on fridays")
    assert '<code>lunch</code> <span class="score">2 of 2 words' in asked and "deploy.window" not in asked


def test_the_words_no_memory_holds_are_named(backend, alice, filled):
    page = operator_of(alice).get("/recall", {"query": "soup with croutons on fridays"}).content.decode()
    section = page.split('aria-label="Keyword matches"')[1].split("</section>")[0]
    assert "held by no memory:" in section and "<code>croutons</code>" in section and "<code>soup</code>" not in section
    whole = operator_of(alice).get("/recall", {"query": "soup on fridays"}).content.decode()
    assert "held by no memory" not in whole


def test_an_htmx_search_gets_the_results_partial_only(backend, alice, filled):
    response = operator_of(alice).get("/recall", {"query": "soup"}, HTTP_HX_REQUEST="true")
    page = response.content.decode()
    assert response.status_code == 200 and "<html" not in page and "lunch" in page


def test_an_off_topic_query_shows_the_abstain_banner(backend, alice, filled):
    page = operator_of(alice).get("/recall", {"query": "zebra migration quantum", "search_mode": "semantic"}).content
    assert b"Abstained: below_threshold" in page


def test_bad_input_is_shown_in_the_page_with_its_field(backend, alice, filled):
    response = operator_of(alice).get("/recall", {"query": "soup", "top_k": "9999"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and b"<code>top_k</code>" in response.content


def test_alice_sees_her_namespaces_and_rows_never_bobs(backend, alice, bob, call, filled):
    Agent(call, bob.token("admin"), namespace="bob-secrets").set({"memory_key": "bob.plan", "value": "soup plan"})
    page = operator_of(alice).get("/recall", {"query": "soup plan"}).content.decode()
    assert "bob-secrets" not in page and "bob.plan" not in page and "lunch" in page
    asked = operator_of(alice).get("/recall", {"query": "soup", "org": bob.name})
    assert asked.status_code == 403  # not her org: refused, not served as hers


def test_lab_pages_allow_scripts_from_this_server_only(backend, alice):
    page = operator_of(alice).get("/recall")
    policy = page["Content-Security-Policy"]
    assert "script-src 'self';" in policy and "frame-ancestors 'none'" in policy
    assert (page["X-Content-Type-Options"], page["X-Frame-Options"]) == ("nosniff", "DENY")
    assert b"onchange=" not in page.content  # no inline handler the policy would block


@pytest.mark.parametrize("path", ["/recall", "/recall/memories", "/recall/traces", "/recall/compare"])
def test_the_namespace_picker_shows_the_namespace_the_page_serves(backend, alice, call, path):
    for namespace in ("archive", "default", "northwind"):
        Agent(call, alice.token("admin"), namespace=namespace).set({"memory_key": "k", "value": "v"})
    client = operator_of(alice)
    # Named by a direct link (the memory page's back link is one): listed, and selected.
    linked = client.get(path, {"org": alice.name, "namespace": "northwind"}).content.decode()
    assert "<option>archive</option>" in linked and "<option selected>northwind</option>" in linked
    # Named by nothing: `default`, though another sorts first.
    plain = client.get(path).content.decode()
    assert "<option selected>default</option>" in plain and "<option>archive</option>" in plain


def test_every_page_names_the_health_problems_in_a_banner(backend, alice, settings):
    page = operator_of(alice).get("/recall/memories").content.decode()  # the suite embeds with the fake
    assert 'class="banner warn"' in page and "<code>fake_embedder</code>: search ranks with a test embedder" in page
    # No key: the fake stands in, and the banner says why.
    settings.LOOM_EMBEDDING_MODEL, settings.OPENAI_API_KEY = "text-embedding-3-small", ""
    embedders.get_embedder.cache_clear()
    try:
        page = operator_of(alice).get("/recall").content.decode()
    finally:
        embedders.get_embedder.cache_clear()
    assert "<code>embedder_key_missing</code>: the configured embedder has no API key" in page


def test_the_login_page_loads_no_chart_library_and_every_page_has_an_icon(db, alice):
    login = Client().get("/recall/login").content.decode()
    assert "plotly" not in login and 'rel="icon"' in login
    assert "plotly.min.js" in operator_of(alice).get("/recall").content.decode()
    icon = Client().get("/static/recall/favicon.svg")
    assert icon.status_code == 200 and b"<svg" in b"".join(icon.streaming_content)


def test_htmx_and_plotly_are_served_from_our_own_static_files(db):
    for path, carries in (
        ("/static/recall/vendor/htmx-2.0.11.min.js", b'version:"2.0.11"'),
        ("/static/plotly/plotly.min.js", b"plotly.js"),
        ("/static/recall/lab.js", b"Plotly.newPlot"),
    ):
        response = Client().get(path)
        assert response.status_code == 200 and carries in b"".join(response.streaming_content), path


def test_compare_marks_rank_moves_rows_only_in_one_window_and_sums_up(backend, alice, call, settings):
    settings.LOOM_WRITE_GATES = False
    agent = Agent(call, alice.token("admin"))
    agent.set(
        {"memory_key": "exact", "value": "kubectl rollout undo reverts a deploy"},
        {"memory_key": "near", "value": "to roll back a release, revert the deploy"},
        {"memory_key": "other", "value": "the cafeteria serves soup on fridays"},
    )
    query = {"query": "kubectl rollout undo", "a_search_mode": "lexical", "b_search_mode": "semantic", "top_k": "3"}
    response = operator_of(alice).get("/recall/compare", query, HTTP_HX_REQUEST="true")
    page = response.content.decode()
    assert response.status_code == 200 and "<html" not in page
    a = [h["memory_key"] for h in agent.search("kubectl rollout undo", search_mode="lexical", top_k=3).json["hits"]]
    b = [h["memory_key"] for h in agent.search("kubectl rollout undo", search_mode="semantic", top_k=3).json["hits"]]
    shared = [key for key in a if key in b]
    assert f"overlap@{max(len(a), len(b))} {len(shared) / max(len(a), len(b)):.2f} ({len(shared)} rows in both)" in page
    assert page.count("only in A") == len(set(a) - set(b)) and page.count("only in B") == len(set(b) - set(a))
    for at, key in enumerate(a, 1):  # each of A's rows says where B ranked it
        move = b.index(key) + 1 - at if key in b else None
        label = (
            "only in A"
            if move is None
            else "same rank"
            if move == 0
            else f"{b.index(key) + 1} in the other ({'▼' if move > 0 else '▲'}{abs(move)})"
        )
        assert label in page.split(f"<code>{key}</code>")[1].split("</li>")[0]
    assert "<code>lexical</code> (request)" in page and "<code>semantic</code> (request)" in page
    exact = page.split("<code>exact</code>")[1].split("</li>")[0]
    assert '<div class="excerpt">kubectl rollout undo reverts a deploy</div>' in exact  # what the row says


def csrf_client_of(tenant, role):
    """A logged-in member whose POSTs are CSRF-checked, with the token its page handed out."""
    user = get_user_model().objects.create_user(f"op-{uuid.uuid4().hex[:10]}", password="x")
    Membership.objects.create(user=user, org=tenant.org, role=role)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    page = client.get("/recall/orgs")
    token = page.cookies["csrftoken"].value if "csrftoken" in page.cookies else None
    return client, page, token, user


def test_a_non_admin_gets_403_and_no_toggle(backend, alice):
    client, page, _, _ = csrf_client_of(alice, "writer")
    assert page.status_code == 403 and b"Switch off" not in page.content


def test_an_admin_switches_an_orgs_model_calls_with_a_reason_and_it_takes_effect(backend, alice, bob, call):
    client, page, token, user = csrf_client_of(alice, "admin")
    assert page.status_code == 200 and alice.name.encode() in page.content and bob.name.encode() not in page.content
    assert b"Switch off" in page.content and b"hx-confirm" in page.content
    form = {"org": alice.name, "enabled": "false", "reason": "customer asked to pause AI processing"}
    assert client.post("/recall/orgs", form).status_code == 403  # no CSRF token: refused
    answered = client.post("/recall/orgs", form, HTTP_X_CSRFTOKEN=token, HTTP_HX_REQUEST="true")
    row = answered.content.decode()
    assert answered.status_code == 200 and "<html" not in row and "Switch on" in row
    assert f"human:{user.get_username()} switched off: customer asked to pause AI processing" in row
    found = Agent(call, alice.token("admin")).search("anything")
    assert "leg:vector:model_calls_off" in found.json["degraded"]  # the switch took effect on a search
    audit = client.get(f"/recall/audit?org={alice.name}").content.decode()
    assert f"<td>human:{user.get_username()}</td><td>org.set_model_calls</td>" in audit
    assert "customer asked to pause AI processing" in audit and "<td>http:127.0.0.1</td>" in audit


def test_the_audit_log_is_for_the_orgs_admins(backend, alice):
    assert operator_of(alice, role="writer").get("/recall/audit").status_code == 403
    page = operator_of(alice, role="admin").get("/recall/audit")
    assert page.status_code == 200 and b"Audit log" in page.content


def test_a_switch_needs_a_reason_and_an_org_the_admin_holds(backend, alice, bob):
    client, _, token, _ = csrf_client_of(alice, "admin")
    missing = client.post(
        "/recall/orgs", {"org": alice.name, "enabled": "false", "reason": " "}, HTTP_X_CSRFTOKEN=token
    )
    assert missing.status_code == 422 and b"Say why" in missing.content
    other = client.post("/recall/orgs", {"org": bob.name, "enabled": "false", "reason": "x"}, HTTP_X_CSRFTOKEN=token)
    assert other.status_code == 403
    from retrieval.providers import customer

    assert customer.get_model_calls(alice.name)["enabled"] and customer.get_model_calls(bob.name)["enabled"]


def test_calibration_shows_the_scalar_tier_for_the_fake_and_no_recalibrate(backend, alice, filled):
    page = operator_of(alice, role="admin").get("/recall/calibration").content.decode()
    assert "<td>scalar</td>" in page and "0.220" in page and "the scalar gates" in page
    assert 'disabled aria-disabled="true"' in page  # a fake has nothing to calibrate


def test_an_admin_recalibrates_the_real_embedder_and_sees_the_distributions(local_embedder, alice, call):
    Agent(call, alice.token("admin")).set({"memory_key": "k", "value": "the deploy window is tuesday"})
    viewer = operator_of(alice)
    client, _, token, _ = csrf_client_of(alice, "admin")
    refused = viewer.post("/recall/calibration")
    assert refused.status_code == 403 and b"an admin of this org" in refused.content  # a viewer looks, no more
    assert client.post("/recall/calibration").status_code == 403  # an admin's POST without the CSRF token
    answered = client.post("/recall/calibration", HTTP_X_CSRFTOKEN=token, HTTP_HX_REQUEST="true")
    page = answered.content.decode()
    assert answered.status_code == 200 and "Recalibrated local:minilm" in page and "<td>cluster</td>" in page
    figure = json.loads(page.split('class="plot" data-target="calibration-')[1].split('">', 1)[1].split("</script>")[0])
    assert {trace["name"] for trace in figure["data"]} == {"paraphrase", "question_fact", "distractor"}
    labels = " = ".join(note["text"] for note in figure["layout"]["annotations"]).split(" = ")
    assert sorted(labels) == sorted(thresholds.report(alice.name, "default")["gates"])  # every gate, drawn once
    noise = thresholds.report(alice.name, "default")["noise"]
    assert f'{noise["level"]:.3f} <span class="meta">(1 row,' in page  # the namespace's noise level, measured


def test_gates_that_coincide_share_one_line_and_label():
    assert views._coinciding({"conflict": 0.85, "abstain": 0.2, "duplicate": 0.855, "rewrite": 0.6}) == [
        (0.2, ["abstain"]),
        (0.6, ["rewrite"]),
        (0.85, ["conflict", "duplicate"]),
    ]


def test_the_calibration_page_warns_of_a_namespace_gate_far_from_the_models(local_embedder, alice, call):
    call_command("recalibrate")
    agent = Agent(call, alice.token("admin"))
    similar = [list(pair) for pair in probe_corpora.QUESTION_FACT[:6]]
    # "Distractors" that are paraphrases (mislabelled pairs): the abstain gate lands past most real questions' cosines.
    same = [list(pair) for pair in probe_corpora.PARAPHRASES[:4]]  # mislabelled: two wordings of one fact
    assert agent.call("calibration.run", {"similar": similar, "distractors": same}, agent.token).status == 200
    page = operator_of(alice).get("/recall/calibration").content.decode()
    warning = page.split('class="banner warn" role="status"><strong>Gates far')[1].split("</div>")[0]
    cluster = calibration.stored("local:minilm").gates["abstain"]
    assert "<code>default</code> abstain" in warning and f"(the model's: {cluster:.3f})" in warning


def test_the_trace_log_lists_filters_charts_and_opens_a_search(backend, alice, call, settings):
    settings.LOOM_SEARCH_TRACE_LOG_ENABLED = True
    agent = Agent(call, alice.token("admin"))
    agent.call("namespace.register", {"namespace": "default", "text_capture": True}, agent.token)
    agent.set({"memory_key": "deploy.window", "value": "production deploys run on tuesdays"})
    agent.search("when do production deploys run")
    agent.search("zebra migration quantum", search_mode="semantic")
    client = operator_of(alice, role="admin")
    page = client.get("/recall/traces", {"namespace": "default"}).content.decode()
    assert "when do production deploys run" in page and "abstain: below_threshold" in page
    figure = json.loads(page.split('data-target="trace-chart">')[1].split("</script>")[0])
    assert {trace["name"] for trace in figure["data"]} == {"latency p50 (ms)", "latency p95 (ms)", "abstain rate"}
    assert sum(sum(t["y"]) for t in figure["data"] if t["name"] == "abstain rate") > 0
    # A date axis, its times as plotly.js reads them (no zone offset: with one, the axis showed category labels).
    assert figure["layout"]["xaxis"]["type"] == "date"
    assert all(len(at) == 19 and "+" not in at for at in figure["data"][0]["x"])

    only = client.get("/recall/traces", {"namespace": "default", "abstain": "yes"}, HTTP_HX_REQUEST="true").content
    assert b"zebra" in only and b"production deploys" not in only and b"<html" not in only
    trace_id = agent.call("memory.search_trace_log", {"namespace": "default", "abstain": False}, agent.token).json[
        "rows"
    ][0]["trace_id"]
    detail = client.get(f"/recall/traces/{trace_id}", {"namespace": "default"}).content.decode()
    assert "<code>deploy.window</code>" in detail and "Re-run in the Lab" in detail
    assert "query=when%20do%20production%20deploys%20run" in detail


def test_a_bad_trace_filter_is_named_in_the_page(backend, alice):
    page = operator_of(alice).get("/recall/traces", {"since": "yesterday"}).content
    assert b"<code>since</code>" in page


def test_memories_lists_pages_and_opens_a_key_with_versions_and_chunks(backend, alice, call, settings):
    settings.LOOM_MEMORY_EMBED_HEAD_CHARS, settings.LOOM_MEMORY_CHUNK_CHARS = 200, 150  # a long value is chunked
    agent = Agent(call, alice.token("admin"))
    agent.set(*[{"memory_key": f"note.{i}", "value": f"note number {i} about plants"} for i in range(30)])
    agent.set(
        {
            "memory_key": "note.0",
            "value": "note zero, rewritten " + "long text about office plants. " * 12,
            "tags": ["ops"],
        }
    )
    client = operator_of(alice)
    first = client.get("/recall/memories", {"namespace": "default"}).content.decode()
    assert first.count("<code>note.") == 25 and "Next page" in first
    cursor = first.split("cursor=")[1].split('"')[0]
    rest = client.get("/recall/memories", {"namespace": "default", "cursor": cursor}, HTTP_HX_REQUEST="true")
    assert rest.content.decode().count("<code>note.") == 5
    assert (
        client.get("/recall/memories", {"namespace": "default", "cursor": "bogus"}).content.count(
            b"<code>cursor</code>"
        )
        == 1
    )
    page = client.get("/recall/memories/note.0", {"namespace": "default"}).content.decode()
    assert "superseded" in page and "active" in page and "ops" in page and "fake-ngram-384" in page
    assert "Chunks of the live rows" in page
    assert client.get("/recall/memories/missing", {"namespace": "default"}).status_code == 404


def test_memories_list_shows_each_keys_value_and_its_marks(backend, alice, call):
    agent = Agent(call, alice.token("admin"))
    agent.set({"memory_key": "plants", "value": "the office plants are watered on mondays"})
    agent.set(
        {"memory_key": "plants.copy", "value": "the office plants are watered on mondays"},
        {"memory_key": "vault", "value": "the vault api key is sk-abcdefghijklmnopqrstuvwxyz0123"},
    )
    listed = {item["memory_key"]: item for item in agent.call("memory.list", {}, agent.token).json["items"]}
    assert (listed["plants.copy"]["duplicate_of"], listed["plants"]["duplicate_of"]) == ("plants", None)
    assert (listed["vault"]["sensitivity"], listed["vault"]["excerpt"]) == ("high", "")  # never shown in a listing
    page = operator_of(alice).get("/recall/memories").content.decode()
    assert page.count("the office plants are watered on mondays") == 2 and "sk-abc" not in page
    assert 'class="mark sensitive"' in page and "duplicate of <code>plants</code>" in page
    assert f">{listed['plants']['version']}<" not in page  # a version is a 19-digit stamp: on the key's page


def test_conversations_shows_sessions_their_turns_and_facts_and_the_queues_failures_first(
    backend, alice, bob, call, monkeypatch
):
    from retrieval.ingest import extraction_pass
    from retrieval.store import extraction_queue
    from tenancy.access import Scope
    from tenancy.roles import Role

    writer = alice.token("writer")
    said = {"role": "user", "name": "Dana", "content": "I moved to Lisbon last month. Hi there!"}
    scope = Scope(org=alice.name, namespace="default", role=Role.ADMIN, subject="t")
    call("memory.set_from_messages", {"session_id": "s-15", "messages": [said], "defer": True}, writer)
    assert extraction_pass.run_due(org=alice.name) == 1  # done
    call("memory.set_from_messages", {"session_id": "s-16", "messages": [said], "defer": True}, writer)
    monkeypatch.setattr(extraction_queue, "BACKOFF_S", 0)
    for _ in range(extraction_queue.MAX_ATTEMPTS):  # and one that keeps failing
        extraction_queue.failed(extraction_queue.due(1, alice.name)[0], "APITimeoutError: the model did not answer")
    assert [job.state for job in extraction_queue.jobs(scope)] == ["failed", "done"]
    client = operator_of(alice)
    listing = client.get("/recall/conversations", {"namespace": "default"}).content.decode()
    assert "<code>s-15</code>" in listing and "<code>s-16</code>" in listing
    queue = listing.split('id="extraction-queue"')[1]
    assert queue.index("failed") < queue.index("done") and "APITimeoutError: the model did not answer" in queue
    session = client.get(
        "/recall/conversations", {"namespace": "default", "session_id": "s-15"}, HTTP_HX_REQUEST="true"
    )
    page = session.content.decode()
    assert "<html" not in page  # the partial
    assert "Dana: I moved to Lisbon last month. Hi there!" in page
    assert "<code>event.dana.i-moved-to-lisbon-last-month</code>" in page  # the fact, beside its turn
    assert "Lisbon" not in operator_of(bob).get("/recall/conversations", {"namespace": "default"}).content.decode()
    # A long session pages its turns, the next page's link keeping the session.
    said = [{"role": "user", "name": "Dana", "content": f"Note {n} about the move."} for n in range(30)]
    call("memory.set_from_messages", {"session_id": "s-long", "messages": said}, writer)
    first = client.get("/recall/conversations", {"session_id": "s-long"}).content.decode()
    assert first.count('<td class="excerpt">Dana: Note ') == 25 and "Next turns" in first
    link = first.split("Next turns")[0].split('hx-get="')[-1].split('"')[0].replace("&amp;", "&")
    rest = client.get(link, HTTP_HX_REQUEST="true").content.decode()
    turns = [f'<td class="excerpt">Dana: Note {n} about the move.' in rest for n in (25, 29, 0)]
    assert turns == [True, True, False]


@pytest.mark.parametrize(
    "path",
    [
        "/recall",
        "/recall/compare",
        "/recall/memories",
        "/recall/conversations",
        "/recall/traces",
        "/recall/calibration",
        "/recall/audit",
        "/recall/memories/k",
        "/recall/traces/t",
    ],
)
def test_every_page_refuses_a_user_of_no_org(db, path):
    user = get_user_model().objects.create_user(f"nobody-{uuid.uuid4().hex[:6]}", password="x")
    client = Client()
    client.force_login(user)
    response = client.get(path)
    assert response.status_code == 403 and b"not a member of any org" in response.content


def test_a_clickhouse_outage_is_a_banner_in_the_page(alice, db):
    from retrieval.store import clickhouse
    from tests.chserver import free_port

    previous = clickhouse.use(f"http://127.0.0.1:{free_port()}")
    try:
        client = operator_of(alice)
        pages = [client.get(path, {"query": "anything"}) for path in ("/recall", "/recall/memories", "/recall/traces")]
    finally:
        clickhouse.use(previous)
    for page in pages:
        assert (
            page.status_code == 200 and b"CLICKHOUSE_UNAVAILABLE" in page.content and b"Traceback" not in page.content
        )


def test_a_lab_search_reaches_the_provider_as_its_org_and_is_costed(
    backend, openai_embedder, model_server, alice, filled, settings
):
    from retrieval.store import clickhouse

    settings.LOOM_INFERENCE_CUSTOMER_HEADER, settings.LOOM_INFERENCE_GATEWAY_HOSTS = "X-Loom-Customer", ["127.0.0.1"]
    operator_of(alice).get("/recall", {"query": "which day is soup served"})
    assert model_server.embedding_requests()[-1].headers["x-loom-customer"] == alice.name
    clickhouse.flush_later()  # usage rows are written off the request path
    rows = clickhouse.query_rows(
        "SELECT op, embedding_calls FROM agent_events WHERE org = {org:String}", {"org": alice.name}
    )
    # At least the query's embedding; a first search of the model may also probe its calibration, as the org's call.
    assert any(op == "recall.lab" and calls >= 1 for op, calls in rows), rows


def test_a_bad_field_gets_the_code_rest_gives_it(backend, alice, filled, call):
    """One refusal type and one envelope: the Lab names the code and field the REST op names for the same input."""
    rest = call("memory.search", {"query": "soup", "top_k": 0, "search_mode": "nope"}, alice.token("viewer")).json
    page = operator_of(alice).get("/recall", {"query": "soup", "top_k": "0", "search_mode": "nope"}).content.decode()
    code, field = rest["error"]["code"], rest["error"]["field"]
    assert code == "INVALID_VALUE" and f"<strong>{code}</strong> in <code>{field}</code>" in page


HOSTILE = '</script><h1 class="injected">owned</h1><form action="/x"><button>go</button></form>'


def test_stored_markup_never_renders_as_markup_on_any_lab_page(backend, alice, call, settings):
    """Keys, values, tags and queries holding markup: every Lab page shows them as text, charts included (a chart's
    JSON rides in a <script>, where `</script>` would close it and the rest render)."""
    settings.LOOM_SEARCH_TRACE_LOG_ENABLED = True
    agent = Agent(call, alice.token("admin"))
    agent.call("namespace.register", {"namespace": "default", "text_capture": True}, agent.token)
    key = f"deploy{HOSTILE}"
    stored = agent.set({"memory_key": key, "value": f"production deploys run on tuesdays {HOSTILE}", "tags": [HOSTILE]})
    assert stored.status == 201, stored.json
    agent.search(f"when do production deploys run {HOSTILE}")
    uploaded = agent.call(
        "eval.set_upload",
        {"set_name": "hostile", "questions": [{"question": HOSTILE, "gold_keys": [key]}]},
        agent.token,
    )
    run = agent.call("eval.run", {"set_name": "hostile", "wait": True}, agent.token).json
    turn = {"role": "user", "name": f"Dana{HOSTILE}", "content": f"I moved to Lisbon {HOSTILE}"}
    conversation = {"session_id": f"s{HOSTILE}", "messages": [turn]}
    assert agent.call("memory.set_from_messages", conversation, agent.token).status == 201
    assert uploaded.status == 201 and run["status"] == "done", run
    client = operator_of(alice, role="admin")
    pages = {
        "search": client.get("/recall", {"query": f"production deploys {HOSTILE}"}),
        "compare": client.get("/recall/compare", {"query": f"production deploys {HOSTILE}", "b_search_mode": "rrf"}),
        "memories": client.get("/recall/memories", {"namespace": "default"}),
        "conversations": client.get("/recall/conversations", {"namespace": "default"}),
        "conversation": client.get("/recall/conversations", {"namespace": "default", "session_id": f"s{HOSTILE}"}),
        "memory": client.get(f"/recall/memories/{key}", {"namespace": "default"}),
        "traces": client.get("/recall/traces", {"namespace": "default"}),
        "evaluate": client.get("/recall/evaluate", {"namespace": "default", "set_name": "hostile"}),
        "run": client.get(f"/recall/evaluate/{run['run_id']}", {"namespace": "default"}),
        "calibration": client.get("/recall/calibration"),
        "audit": client.get("/recall/audit"),
    }
    for name, response in pages.items():
        page = response.content.decode()
        assert response.status_code == 200, (name, page[:500])
        assert '<h1 class="injected">' not in page and '<form action="/x">' not in page, name
        for script in page.split('class="plot"')[1:]:  # each chart's JSON reads back whole
            json.loads(script.split(">", 1)[1].split("</script>")[0])
    charted = pages["search"].content.decode().split('data-target="components-chart">')[1].split("</script>")[0]
    labels = [label for trace in json.loads(charted)["data"] for label in trace.get("y", [])]
    assert any(HOSTILE in label for label in labels)  # the chart still shows the key as it is, as text
