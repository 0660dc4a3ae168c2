"""Loom Recall's Python client.

    from loom_recall import Client

    with Client() as loom:  # LOOM_URL, LOOM_TOKEN
        loom.memory_set(memory_key="deploy.window", value="production deploys run on tuesdays after 10am")
        hits = loom.memory_search(query="when do deploys run?")["hits"]

One method per op (`memory.search` is `memory_search`), its body as keyword arguments, its answer a typed dict.
`Agent` is the spec's shape of the same (`await agent.memory.search("...")`, attributes for fields), and `loom`
the command line (`loom memory-search "..."`).
"""

from loom_recall._ops import *  # noqa: F403 (the body and answer types)
from loom_recall.agent import Agent, Result
from loom_recall.client import AsyncClient, Client, LoomError

__all__ = ["Agent", "AsyncClient", "Client", "LoomError", "Result"]
