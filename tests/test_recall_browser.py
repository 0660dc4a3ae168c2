"""The Recall Lab in a real headless Chromium (Debian's, driven by Playwright): log in, search, see the chart,
compare two modes, switch an org's model calls off and see a search change. Screenshots go to test-output/."""

import json
import os
import shutil
import uuid
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from tenancy.models import Membership
from tests.conftest import Agent

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Screenshots: under test-output/ on every run; `make screenshots` writes docs/'s, which the docs show (not a LOOM_
# variable: the test settings clear those).
SHOTS = Path(os.environ.get("SCREENSHOTS_DIR") or Path(__file__).resolve().parent.parent / "test-output")
# No background traffic: this machine's network is closed, and a refused connection is noise in every test.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-sync",
    "--disable-background-networking",
    "--disable-component-update",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (.ci/run installs it)"),
]


@pytest.fixture
def browser(operator):
    """Launched after the operator's rows are written: Playwright's sync API runs an event loop in this thread,
    and Django refuses ORM calls beside one."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def operator(transactional_db, alice, call, live_server, settings):
    """An admin of alice's org with a namespace worth searching (its searches logged), and a browser page logged in
    as them."""
    settings.LOOM_SEARCH_TRACE_LOG_ENABLED = True
    name, password = f"op-{uuid.uuid4().hex[:8]}", "correct horse battery"
    user = get_user_model().objects.create_user(name, password=password)
    Membership.objects.create(user=user, org=alice.org, role="admin")
    agent = Agent(call, alice.token("admin"))
    agent.set(
        {"memory_key": "deploy.window", "value": "production deploys run on tuesdays after 10am"},
        {"memory_key": "deploy.rollback", "value": "to roll back a deploy, run kubectl rollout undo"},
        {"memory_key": "lunch", "value": "the cafeteria serves soup on fridays"},
        # Equally relevant to "deploy window": the confidence prior puts the long one first; without it
        # (personalization none) the closer cosine puts the short one first.
        {"memory_key": "window.short", "value": "the deploy window", "confidence": 0.0},
        {
            "memory_key": "window.long",
            "value": "our deploy window is set by the release managers every quarter after a review",
            "confidence": 1.0,
        },
    )
    Agent(call, alice.token("admin"), namespace="archive").set({"memory_key": "old", "value": "an archived note"})
    return {"name": name, "password": password, "url": live_server.url, "agent": agent, "org": alice.name}


def log_in(page, operator):
    page.goto(f"{operator['url']}/recall")
    page.fill("#id_username", operator["name"])
    page.fill("#id_password", operator["password"])
    page.click("form.login button[type=submit]")
    page.wait_for_url("**/recall")


def test_an_operator_searches_compares_and_switches_model_calls(browser, operator):
    SHOTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    refused = []  # what the Lab's Content-Security-Policy blocked: nothing, or a page broke under it
    page.on(
        "console", lambda message: refused.append(message.text) if "Content Security Policy" in message.text else None
    )
    fetched, failed = [], []  # every URL the pages loaded; any answered 4xx/5xx (a missing favicon was one)
    page.on(
        "response",
        lambda response: (fetched.append(response.url), response.status >= 400 and failed.append(response.url)),
    )
    page.goto(f"{operator['url']}/recall/login")
    assert fetched and not [url for url in fetched if "plotly" in url]  # the login page loads no chart library
    log_in(page, operator)

    page.fill("#q", "when do production deploys run")
    page.press("#q", "Enter")
    page.wait_for_selector("table.hits tbody tr")
    page.wait_for_selector("#components-chart .main-svg")  # plotly drew the stacked components
    assert page.locator("table.hits tbody tr").first.inner_text().startswith("1\tdeploy.window")
    # Keyword matches count the query's analysed terms (stemmed, stop words out): "when" and "do" are not words here.
    assert "deploy.window 3 of 3 words" in page.inner_text("section.keywords")
    assert "query=when%20do%20production%20deploys%20run" in page.url  # the pushed URL is the shareable link
    assert "fake_embedder" in page.inner_text(".banner.warn")  # the health problems, on every page
    # A second search on the same page: the chart is drawn again with its layout (plotly's class kept).
    page.fill("#q", "how do I roll back a deploy")
    page.press("#q", "Enter")
    page.wait_for_selector("table.hits tbody tr:first-child >> text=deploy.rollback")
    page.wait_for_selector("#components-chart.js-plotly-plot .main-svg")
    page.wait_for_timeout(200)  # past htmx's settle delay (20 ms): the class must still be there
    assert page.locator("#components-chart.js-plotly-plot .main-svg").count() >= 1
    page.screenshot(path=str(SHOTS / "recall-lab.png"), full_page=True)

    page.click("nav >> text=Compare")
    page.fill("#q", "deploy window")
    page.select_option("select[name=a_search_mode]", "lexical")
    page.select_option("select[name=b_search_mode]", "lexical")
    page.select_option("select[name=b_personalization]", "none")
    page.press("#q", "Enter")
    page.wait_for_selector("p.summary")
    assert "overlap@" in page.inner_text("p.summary")
    a_side = page.locator("section[aria-label='Window A']")
    assert a_side.locator("li", has_text="window.long").locator(".move.down").count() == 1  # B ranks it lower
    assert a_side.locator("li", has_text="window.short").locator(".move.up").count() == 1
    assert a_side.locator("li", has_text="window.short").locator(".excerpt").inner_text() == "the deploy window"
    page.screenshot(path=str(SHOTS / "recall-compare.png"), full_page=True)

    # A direct link to the memories list (the memory page's back link is one): the picker shows its namespace,
    # and each key shows its value.
    page.goto(f"{operator['url']}/recall/memories?org={operator['org']}&namespace=default")
    assert page.locator("select[name=namespace] option:checked").inner_text() == "default"
    page.goto(f"{operator['url']}/recall/memories")  # no namespace named: default, though "archive" sorts first
    assert page.locator("select[name=namespace] option:checked").inner_text() == "default"
    row = page.locator("table.hits tbody tr", has_text="deploy.rollback")
    assert row.locator(".excerpt").inner_text().startswith("to roll back a deploy, run kubectl rollout undo")
    page.screenshot(path=str(SHOTS / "recall-memories.png"), full_page=True)

    page.click("nav >> text=Model calls")
    page.on("dialog", lambda dialog: dialog.accept())  # hx-confirm asks before the switch
    row = page.locator("tbody", has_text=operator["org"])
    row.locator("input[name=reason]").fill("customer asked to pause AI processing")
    row.locator("button", has_text="Switch off").click()
    page.wait_for_selector(f"tbody:has-text('{operator['org']}') >> text=Switch on")
    page.screenshot(path=str(SHOTS / "recall-orgs.png"), full_page=True)

    page.goto(f"{operator['url']}/recall?query=when+do+production+deploys+run")
    page.wait_for_selector("table.hits tbody tr")
    assert "leg:vector:model_calls_off" in page.inner_text(".degraded")  # the switch took effect on a search

    # The trace log's chart over the few seconds this test searched: a time axis, not the raw timestamps.
    page.click("nav >> text=Trace log")
    page.wait_for_selector("#trace-chart .xtick text")
    ticks = [tick.text_content() for tick in page.locator("#trace-chart .xtick text").all()]
    assert ticks and all("+00:00" not in tick and "T" not in tick for tick in ticks), ticks
    page.screenshot(path=str(SHOTS / "recall-traces.png"), full_page=True)
    assert refused == [] and failed == []


@pytest.fixture
def strayed(local_embedder, operator):
    """The operator's namespace calibrated from "distractors" that are paraphrases: its abstain gate lands far
    above the model's (written before the browser starts: no ORM call beside Playwright's loop)."""
    from django.core.management import call_command

    from retrieval.gates import probe_corpora

    call_command("recalibrate")
    agent = operator["agent"]
    similar = [list(pair) for pair in probe_corpora.QUESTION_FACT[:6]]
    same = [list(pair) for pair in probe_corpora.PARAPHRASES[:4]]  # mislabelled: two wordings of one fact
    assert agent.call("calibration.run", {"similar": similar, "distractors": same}, agent.token).status == 200
    return operator


@pytest.mark.parametrize("backend", ["embedded"], indirect=True)
def test_an_admin_reads_the_gates_sees_a_stray_one_and_recalibrates(strayed, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    log_in(page, strayed)
    page.click("nav >> text=Calibration")
    page.wait_for_selector(".chart .main-svg")
    warning = page.inner_text(".banner.warn:has-text('far from the model')")
    assert "default abstain" in warning  # the namespace's own gate, and the model's beside it
    labels = [text.text_content() for text in page.locator(".chart .annotation-text").all()]
    assert labels and {"min_similarity", "abstain"} <= {name for label in labels for name in label.split(" = ")}
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / "recall-calibration.png"), full_page=True)

    page.on("dialog", lambda dialog: dialog.accept())  # hx-confirm asks before the probe
    page.click("button:has-text('Recalibrate now')")
    page.wait_for_selector(".banner.ok:has-text('Recalibrated local:minilm')")


def test_an_admin_uploads_a_question_set_runs_it_and_reads_the_wins_and_losses(browser, operator, tmp_path):
    questions = [
        {"id": "deploys", "question": "when do production deploys run", "gold_keys": ["deploy.window"]},
        {"id": "rollback", "question": "how do I roll back a deploy", "gold_keys": ["deploy.rollback"]},
        {"id": "window", "question": "deploy window", "gold_keys": ["window.short", "window.long"], "category": "ops"},
        {"id": "lunch", "question": "what does the cafeteria serve on fridays", "gold_keys": ["lunch"]},
        {"id": "off", "question": "quantum chromodynamics lecture", "should_abstain": True, "category": "negative"},
    ]
    path = tmp_path / "support-faq.jsonl"
    path.write_text("\n".join(json.dumps(q) for q in questions) + "\n")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    log_in(page, operator)
    page.click("nav >> text=Evaluate")
    page.fill("input[name=set_name]", "support-faq")
    page.set_input_files("input[name=file]", str(path))
    page.click("button:has-text('Upload')")
    page.wait_for_selector(".banner.ok:has-text('Uploaded support-faq version 1: 5 questions.')")

    page.fill("input[name=c0_name]", "default")
    page.fill("input[name=c1_name]", "lexical-top1")
    page.select_option("select[name=c1_search_mode]", "lexical")
    page.fill("input[name=c1_top_k]", "1")
    page.click("button:has-text('Run')")
    page.wait_for_url("**/recall/evaluate/*")
    page.wait_for_selector("#metrics-chart .main-svg")  # drawn, whether the run was done or polled till done
    page.wait_for_selector("text=Done: 10 searches")
    page.wait_for_selector("#metrics-chart .main-svg")  # drawn again after the last poll's swap
    assert page.locator("#metrics tbody tr").count() == 2
    caption = page.inner_text("#wins-losses caption")
    assert caption.startswith("lexical-top1 against default: ") and "1 loss" in caption
    assert "deploy window" in page.inner_text("#wins-losses tbody tr:first-child")
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / "recall-evaluate-run.png"), full_page=True)

    page.click("#wins-losses tbody tr:first-child >> text=Compare")  # the question, under both configurations
    page.wait_for_selector("#compare-chart, .sides")
    assert page.input_value("#q") == "deploy window"
    page.click("nav >> text=Evaluate")
    page.wait_for_selector("#history-chart .main-svg")
    assert "default 1.000" in page.inner_text("table.hits:has(caption:has-text('Newest first'))")
    page.screenshot(path=str(SHOTS / "recall-evaluate.png"), full_page=True)
