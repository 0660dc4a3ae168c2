"""`make run` on a fresh var/ directory: the README's tour and docs/api.md's examples give the output they show, the
printed token works over real HTTP; a second run reuses it."""

import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.chserver import free_port
from tests.test_mcp import run_mcp
from tests.test_mcp_stdio import readme_lines

ROOT = Path(__file__).resolve().parent.parent


def http(method: str, url: str, body=None, token=None):
    request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def start(var: Path, port: int, **settings: str) -> tuple[subprocess.Popen, str, Path]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOM_", "DJANGO_"))}
    home = var.parent / "home"  # a $HOME of its own: what the server leaves there is seen
    home.mkdir(exist_ok=True)
    env |= {"LOOM_VAR_DIR": str(var), "HOME": str(home), **settings}
    log = var.parent / f"make-run-{port}.log"
    with open(log, "wb") as out:  # the server writes to its own copy of the descriptor
        process = subprocess.Popen(
            ["make", "--no-print-directory", "run", f"PORT={port}"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text()[-3000:]
        try:
            if http("GET", f"{base}/v1/health")[0] == 200:
                return process, base, log
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError("make run did not serve within 90 s:\n" + log.read_text()[-3000:])


def stop(process: subprocess.Popen, log: Path):
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        raise AssertionError("make run did not stop within 30 s of SIGTERM:\n" + log.read_text()[-3000:]) from None


def mirror_bytes(base: str, metrics_token: str) -> float:
    """What the server's vector mirrors hold, by its Prometheus metrics."""
    request = urllib.request.Request(f"{base}/metrics", headers={"Authorization": f"Bearer {metrics_token}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        text = answer.read().decode()
    return float(re.search(r"^loom_vector_mirror_bytes (\S+)$", text, re.M).group(1))


def threads_of_the_worker(process: subprocess.Popen) -> tuple[int, dict[int, tuple[str, set[int]]]]:
    """make run's worker process (make -> gunicorn -> worker): its id (its main thread's), and each thread's name and
    the CPUs it may run on."""

    def children(pid: int) -> list[int]:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]

    [master] = children(process.pid)
    [worker] = children(master)
    found = {}
    for task in Path(f"/proc/{worker}/task").iterdir():
        status = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines() if ":\t" in line)
        cpus = set()
        for part in status["Cpus_allowed_list"].strip().split(","):
            low, _, high = part.partition("-")
            cpus |= set(range(int(low), int(high or low) + 1))
        found[int(task.name)] = status["Name"].strip(), cpus
    return worker, found


def state_of(base: str, token: str, job_id: str) -> dict:
    """An extraction job as extraction.list shows it."""
    status, body = http("POST", f"{base}/v1/extraction.list", {}, token)
    assert status == 200, body
    [job] = [job for job in body["jobs"] if job["job_id"] == job_id]
    return job


def printed_token(log: Path) -> str:
    return [line.strip() for line in log.read_text().splitlines() if line.strip().startswith("loom_")][-1]


def tour() -> list[tuple[str, str]]:
    """The README's tour: (curl command, the output it shows) in order; `…` in an output stands for anything."""
    steps = []
    for block in (ROOT / "README.md").read_text().split("<!-- tour -->\n")[1:]:
        commands, shown = re.match(r"```sh\n(.*?)```\n```\n(.*?)```", block, re.S).groups()
        commands = re.split(
            r"\n(?=curl )", "\n".join(line for line in commands.splitlines() if line.startswith(("curl", " ")))
        )
        assert len(commands) == len(shown.splitlines()), commands
        steps += zip(commands, shown.splitlines())
    return steps


def documented() -> list[tuple[str, str | None]]:
    """docs/api.md's examples: (curl command, the output its `# ->` comment shows, if any) in order; a block marked
    `<!-- not run: … -->` (a model's answer) is left out."""
    steps = []
    for skipped, block in re.findall(
        r"(<!-- not run[^\n]*\n)?```sh\n(.*?)```", (ROOT / "docs" / "api.md").read_text(), re.S
    ):
        for line in [] if skipped else block.splitlines():
            if line.startswith("curl "):
                steps.append([line, None])
            elif line.startswith(" ") and steps and steps[-1][1] is None:
                steps[-1][0] += "\n" + line
            elif line.startswith("# -> "):
                steps[-1][1] = line.removeprefix("# -> ")
            elif line.startswith("#     ") and steps and steps[-1][1] is not None:
                steps[-1][1] += line.removeprefix("#")
    return [tuple(step) for step in steps]


def shows(output: str, shown: str, spaced: bool = False) -> bool:
    """Whether the output is what the docs show, `…` standing for anything; `spaced`: the docs space it out."""
    if spaced:  # compared without white space, which the docs add for reading
        output, shown = re.sub(r"\s+", "", output), re.sub(r"\s+", "", shown)
    return re.fullmatch(".*?".join(re.escape(part) for part in shown.split("…")), output, re.S) is not None


def paste(command: str, base: str, token: str) -> str:
    """A documented curl command, run as a reader pastes it, against the server at `base`."""
    return subprocess.run(
        ["bash", "-c", command.replace("http://127.0.0.1:8000", base).replace("localhost:8000", base)],
        env={"LOOM_TOKEN": token, "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout


def test_make_run_serves_and_the_printed_token_sets_and_gets(tmp_path):
    var = tmp_path / "var"
    port = free_port()
    process, base, log = start(var, port)
    try:
        token = printed_token(log)
        steps = tour()
        assert len(steps) == 10
        for command, shown in steps:
            output = paste(command, base, token)
            assert shows(output, shown), (command, output[:2000])
        assert "/recall   login admin /" in log.read_text()
        # No control socket in $HOME, which a second gunicorn on the host would take over and remove on its exit.
        assert not (var.parent / "home" / ".gunicorn").exists()
        status, body = http("POST", f"{base}/v1/memory.set", {"memory_key": "greeting", "value": "hello"}, token)
        assert status == 201, body
        status, body = http("POST", f"{base}/v1/memory.get", {"memory_key": "greeting"}, token)
        assert (status, body["value"]) == (200, "hello")
        status, body = http("POST", f"{base}/v1/memory.search", {"query": "a greeting saying hello"}, token)
        assert status == 200 and body["hits"][0]["memory_key"] == "greeting"
        # make run ships hybrid (cosine plus idf-weighted word overlap, alpha 0.25): the spec's wire default is
        # semantic, and hybrid measured better on every leave-one-conversation-out fold (docs/benchmarks.md, Quality).
        assert (body["search_mode"], body["mode_source"]) == ("hybrid", "default")
        # ...and logs every search, with the demo namespace's consent to keep the query's text.
        assert "Search trace log: on, every search (query text kept: consent recorded" in log.read_text()
        status, logged = http("POST", f"{base}/v1/memory.search_trace_log", {"limit": 5}, token)
        assert (status, logged["enabled"], logged["rows"][0]["query"]) == (200, True, "a greeting saying hello")
        health = http("GET", f"{base}/v1/health", token=token)[1]  # the demo token is an admin's
        assert health["embedder"]["model"] == "local:minilm" and "fake_embedder" not in health["problems"]

        # The README's lines connect the SDK's MCP client over streamable HTTP; loom_search finds what REST wrote.
        lines = readme_lines()
        url = lines["URL"].replace("http://127.0.0.1:8000", base)
        assert lines["Header"] == "Authorization: Bearer loom_3f9c…"

        async def calls(client):
            return await client.call_tool("loom_search", {"query": "a greeting saying hello"})

        found = run_mcp(url, token, calls).structured_content
        assert found["hits"][0]["memory_key"] == "greeting" and found["hits"][0]["plane"] == "memory"

        # docs/api.md's examples, in order (the last switch the org's model calls off): each answers, as shown.
        examples = documented()
        assert len(examples) >= 20 and sum(shown is not None for _, shown in examples) >= 18
        for command, shown in examples:
            output = paste(command, base, token)
            assert output.startswith("{") and '"error":' not in output[:10], (command, output[:2000])
            assert shown is None or shows(output, shown, spaced=True), (command, shown, output[:3000])

        # The org's model calls are off now (the last example): a deferred conversation's extraction waits in the
        # queue, which is the engine's and outlives this process (drained after the restart below).
        said = {"role": "user", "name": "Dana", "content": "I moved to Porto in the spring."}
        conversation = {"session_id": "s-restart", "messages": [said], "defer": True}
        status, body = http("POST", f"{base}/v1/memory.set_from_messages", conversation, token)
        assert (status, body["extraction"]) == (202, "queued"), body
        job_id = body["job_id"]

        # The worker runs its Python threads on one CPU and the engine's threads on every CPU (retrieval/cores.py).
        if hasattr(os, "sched_getaffinity") and len(allowed := os.sched_getaffinity(0)) > 1:
            main, threads = threads_of_the_worker(process)
            pinned = threads[main][1]
            assert len(pinned) == 1, threads[main]
            python = [cpus for name, cpus in threads.values() if name == "gunicorn"]
            assert sum(cpus == pinned for cpus in python) >= 2, threads  # the main thread, the request threads
            engine = {name: cpus for name, cpus in threads.values() if name != "gunicorn"}
            assert engine and all(cpus == allowed for cpus in engine.values()), engine
    finally:
        stop(process, log)

    # A second run reuses the org, the token and the data, and loads the demo namespace's vector mirror before any
    # request asks for it (LOOM_VECTOR_MIRROR_WARM): its first search after the restart reads no ClickHouse scan.
    process, base, log2 = start(var, free_port(), LOOM_METRICS_TOKEN="scraper")
    try:
        assert printed_token(log2) == token
        deadline = time.monotonic() + 60
        while mirror_bytes(base, "scraper") == 0:
            assert time.monotonic() < deadline, "the demo namespace's mirror was not loaded at the start"
            time.sleep(0.2)
        status, body = http("POST", f"{base}/v1/memory.get", {"memory_key": "greeting"}, token)
        assert (status, body["value"]) == (200, "hello")
        # The job queued before the restart is still there, and drains once the org's calls are back on.
        assert state_of(base, token, job_id)["state"] == "pending"
        on = {"enabled": True, "reason": "resumed"}
        assert http("POST", f"{base}/v1/org.set_model_calls", on, token)[0] == 200
        assert http("POST", f"{base}/v1/extraction.retry", {"job_id": job_id}, token)[0] == 200
        deadline = time.monotonic() + 60
        while (job := state_of(base, token, job_id))["state"] != "done":
            assert time.monotonic() < deadline, job
            time.sleep(0.2)
        key = "event.dana.i-moved-to-porto-in-the"
        status, fact = http("POST", f"{base}/v1/memory.get", {"memory_key": key}, token)
        assert (status, fact["value"]) == (200, "Dana: I moved to Porto in the spring."), fact
    finally:
        stop(process, log2)
