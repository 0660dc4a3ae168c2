"""`from loom import Agent`, as the spec's examples write it: the same class as `loom_recall.Agent`."""

from loom_recall.agent import Agent, Result
from loom_recall.client import LoomError

__all__ = ["Agent", "LoomError", "Result"]
