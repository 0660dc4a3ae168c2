"""What a model takes, learned from its 400 answers, once per model per process.

No model name decides what a request carries: each client asks for the request it
would like (temperature, an output cap, an effort) and a 400 teaches it otherwise.
A 400 naming a field the model does not take drops that field from then on; a 400
refusing a value and listing the ones the model supports (a reasoning effort) settles on
the lowest of them; a 400 naming the model's output limit clamps every later cap to it.
Each way the call is sent again at once. The fields a call cannot do without (the model, the prompt, the
asked-for JSON format) are never dropped.

Hidden reasoning counts against the output cap, so the reasoning tokens a reply
reports become the model's reserve (twice the most seen, at most
LOOM_LLM_HIDDEN_REASONING_RESERVE_MAX), added to every caller's cap; a reply that hit
the cap with no visible text is sent again once with the whole ceiling as reserve.
"""

import logging
import re

from django.conf import settings

log = logging.getLogger(__name__)

# "at most 16384 completion tokens" (OpenAI), "max_tokens: 100000 > 64000, which is the maximum" (Anthropic).
_LIMIT = re.compile(r"(?:at most|>)\s*(\d+)")
_NEVER_DROPPED = frozenset({"model", "messages", "system", "response_format"})
# OpenAI's reasoning efforts, lowest first: a call asks for the lowest a model takes.
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
# "Supported values are: 'low', 'medium', and 'high'." (OpenAI's answer to an effort a model does not take)
_SUPPORTED = re.compile(r"[Ss]upported values (?:are|is)[:\s]*(.*)")


class Traits:
    def __init__(self, model: str, cap_field: str):
        self.model, self.cap_field = model, cap_field
        self.refused: set[str] = set()
        self.settled: dict[str, str] = {}  # a field whose value the model refused: the lowest value it listed
        self.cap: int | None = None
        self.reserve = 0  # output tokens hidden reasoning takes before the visible answer

    def shape(self, wanted: dict, reserve: int | None = None) -> dict:
        """The request fields to send: `wanted` less what the model refuses, its cap raised by the reasoning
        reserve and clamped to the model's limit."""
        fields = {name: self.settled.get(name, value) for name, value in wanted.items() if name not in self.refused}
        if self.cap_field in fields:
            fields[self.cap_field] += self.reserve if reserve is None else reserve
            if self.cap is not None:
                fields[self.cap_field] = min(fields[self.cap_field], self.cap)
        return fields

    def reasoned(self, tokens: int) -> None:
        """A reply reported this much hidden reasoning: the reserve grows to twice the most seen."""
        wanted = min(2 * tokens, settings.LOOM_LLM_HIDDEN_REASONING_RESERVE_MAX)
        if wanted > self.reserve:
            log.info("%s reasons before it answers: %d output tokens reserved from now on", self.model, wanted)
            self.reserve = wanted

    def learn(self, status: int | None, message: str, param: str | None, sent: dict) -> bool:
        """Whether this answer taught something, so the call is worth sending again now."""
        if status != 400:
            return False
        if param == self.cap_field or (param is None and self.cap_field in message):
            if (limit := _LIMIT.search(message)) and int(limit.group(1)) < sent.get(self.cap_field, 0):
                self.cap = int(limit.group(1))
                log.info("%s takes at most %d output tokens: caps clamp to it from now on", self.model, self.cap)
                return True
            return False
        named = param if param in sent else next((name for name in sent if re.search(rf"\b{name}\b", message)), None)
        if named is None or named in _NEVER_DROPPED or named == self.cap_field:
            return False
        if named == "reasoning_effort" and (listed := _SUPPORTED.search(message)):
            supported = [value for value in EFFORTS if f"'{value}'" in listed.group(1)]
            if supported and supported[0] != sent[named] and self.settled.get(named) != supported[0]:
                self.settled[named] = supported[0]
                log.info("%s takes reasoning_effort %s at the lowest: sent from now on", self.model, supported[0])
                return True
            return False
        self.refused.add(named)
        log.info("%s does not take %s: leaving it out from now on", self.model, named)
        return True
