"""/v1/docs in a real headless Chromium: authorize with a token, then *Try it out* → *Execute* every op with the
example the schema gives it, in the order the page lists them; each answers 2xx."""

import pytest

from memories import urls
from tests.test_recall_browser import CHROMIUM, FLAGS, SHOTS, pytestmark  # noqa: F401 (the browser marks)


@pytest.mark.parametrize("backend", ["embedded"], indirect=True)
def test_try_it_out_succeeds_for_every_op_with_its_example(
    backend, local_embedder, transactional_db, live_server, alice
):
    from playwright.sync_api import sync_playwright

    token = alice.token("admin")  # before the browser: Django refuses ORM calls beside Playwright's event loop
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{live_server.url}/v1/docs")
        page.locator(".btn.authorize").first.click()
        page.locator(".modal-ux input").first.fill(token)
        page.locator(".modal-ux .btn.authorize").click()
        page.locator(".modal-ux .btn-done").click()

        blocks = page.locator(".opblock")
        paths = blocks.evaluate_all("all => all.map(b => b.querySelector('.opblock-summary-path').dataset.path)")
        assert len(paths) == len(urls.OPS) + 1, paths  # and GET /v1/health
        answered = {}
        for index, path in enumerate(paths):
            op, block = path.removeprefix("/v1/"), blocks.nth(index)
            block.locator(".opblock-summary").first.click()
            block.locator(".try-out__btn").click()
            block.locator(".execute").click()
            status = block.locator(".live-responses-table tbody .response-col_status").first
            status.wait_for(timeout=60_000)
            answered[op] = status.inner_text().strip()
            if op == "memory.search":
                SHOTS.mkdir(exist_ok=True)
                block.screenshot(path=str(SHOTS / "api-docs-try-it-out.png"))
            block.locator(".opblock-summary").first.click()  # fold it again: the page stays short
        browser.close()

    assert all(code in ("200", "201", "202") for code in answered.values()), answered
    assert list(answered)[:2] == ["memory.set", "memory.get"] and "calibration.run" in answered
