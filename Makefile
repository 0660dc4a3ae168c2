# Two commands: `make run` (set up and serve on the embedded ClickHouse) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
# Threads per process. One process on the embedded engine (it lets one process own its data directory);
# with LOOM_CLICKHOUSE_URL naming a server, WORKERS=4 serves from four.
THREADS ?= 8
WORKERS ?= 1

.PHONY: run test client screenshots bench bench-quality bench-extraction clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.runtime: requirements.txt | $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

$(VENV)/.dev: requirements-dev.txt requirements-anthropic.txt client/pyproject.toml $(VENV)/.runtime
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

# `make run` embeds with the local model (all-MiniLM-L6-v2, CPU, offline; loads in ~1 s)
# unless LOOM_EMBEDDING_MODEL says otherwise. Tests keep the fake.
run: export LOOM_EMBEDDING_MODEL ?= local
# ...and ranks by hybrid (cosine plus idf-weighted word overlap) where the spec's wire default is semantic:
# better on every leave-one-conversation-out fold of the dev split (docs/benchmarks.md, Quality).
run: export LOOM_MEMORY_SEARCH_DEFAULT_MODE ?= hybrid
# ...and logs every search (the Recall Lab's Traces page; the demo namespace consents to keeping query text).
run: export LOOM_SEARCH_TRACE_LOG_ENABLED ?= true
# A stop waits at most 10 s for the worker, then kills it: a request takes milliseconds and an acknowledged write
# is already durable. (Under CI load a worker once outlasted gunicorn's default 30 s on SIGTERM; cause not found.)
run: $(VENV)/.runtime
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py loom_bootstrap --host $(HOST) --port $(PORT) --workers $(WORKERS)
	exec $(BIN)/gunicorn loom_site.wsgi:application --config python:loom_site.serving --bind $(HOST):$(PORT) \
		--workers $(WORKERS) --threads $(THREADS) --graceful-timeout 10 --access-logfile - --error-logfile -

test: $(VENV)/.dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The Python client's typed ops (client/loom_recall/_ops.py), written anew from the API's OpenAPI schema.
client: $(VENV)/.dev
	$(BIN)/python manage.py spectacular --format openapi-json --file var/schema.json
	$(BIN)/python client/codegen.py var/schema.json | $(BIN)/ruff format --stdin-filename _ops.py - \
		> client/loom_recall/_ops.py

# The browser tests, saving their screenshots into docs/ (the pictures the docs show).
screenshots: $(VENV)/.dev
	SCREENSHOTS_DIR=$(CURDIR)/docs $(BIN)/python -m pytest -n 0 -m browser

bench: $(VENV)/.dev
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/search.py
	$(BIN)/python bench/search.py --backend server
	$(BIN)/python bench/http_load.py
	$(BIN)/python bench/gates.py
	$(BIN)/python bench/first_write.py
	$(BIN)/python bench/embedding_cache.py

bench-quality: $(VENV)/.dev
	LOOM_EMBEDDING_MODEL=local LOOM_MEMORY_SEARCH_DEFAULT_MODE=hybrid $(BIN)/python bench/quality.py

# memory.set_from_messages against memory.set on the same turns, searched as make run serves.
bench-extraction: $(VENV)/.dev
	LOOM_EMBEDDING_MODEL=local LOOM_MEMORY_SEARCH_DEFAULT_MODE=hybrid $(BIN)/python bench/extraction.py

clean:
	rm -rf $(VENV) var
