"""What a model takes, learned from its 400 answers, once per model per process.

No model name decides what a request carries: each client asks for the request it
would like (temperature, an output cap, an effort) and a 400 teaches it otherwise.
A 400 naming a field the model does not take drops that field from then on; a 400
naming the model's output limit clamps every later cap to it. Either way the call is
sent again at once. The fields a call cannot do without (the model, the prompt, the
asked-for JSON format) are never dropped.
"""

import logging
import re

log = logging.getLogger(__name__)

# "at most 16384 completion tokens" (OpenAI), "max_tokens: 100000 > 64000, which is the maximum" (Anthropic).
_LIMIT = re.compile(r"(?:at most|>)\s*(\d+)")
_NEVER_DROPPED = frozenset({"model", "messages", "system", "response_format"})


class Traits:
    def __init__(self, model: str, cap_field: str):
        self.model, self.cap_field = model, cap_field
        self.refused: set[str] = set()
        self.cap: int | None = None

    def shape(self, wanted: dict) -> dict:
        """The request fields to send: `wanted` less what the model refuses, its cap clamped to the model's limit."""
        fields = {name: value for name, value in wanted.items() if name not in self.refused}
        if self.cap is not None and self.cap_field in fields:
            fields[self.cap_field] = min(fields[self.cap_field], self.cap)
        return fields

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
        self.refused.add(named)
        log.info("%s does not take %s: leaving it out from now on", self.model, named)
        return True
