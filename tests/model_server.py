"""A model provider on 127.0.0.1 for the tests: speaks OpenAI's embeddings and chat, Anthropic's messages,
Gemini's embeddings and Cohere's rerank APIs, and records every request. A chat answer names the dated snapshot of
the model asked for, as the real APIs do.

Answers are scripted per test (`server.script(...)`: a status, a delay, a
malformed vector); unscripted requests get real vectors of the asked width
from the fake embedder, so searches over them behave like searches.
"""

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from retrieval.providers.embedders import FakeEmbedder

# The dated snapshot a real API reports for the model asked for (ask gpt-4o, read gpt-4o-2024-08-06); a name that is
# already a snapshot is reported as it is.
SNAPSHOT_DATE = {"openai": "-2024-08-06", "anthropic": "-20251001"}
_DATED = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})$")


def snapshot(model: str, provider: str) -> str:
    return model if _DATED.search(model) else model + SNAPSHOT_DATE[provider]


@dataclass
class Answer:
    status: int = 200
    delay_s: float = 0.0
    vector: list | None = None  # replaces every vector of the answer (malformed-output tests)
    param: str | None = None  # the request field a 400 names
    content: str | None = None  # a chat answer's text (else the model echoes the prompt)
    code: str | None = None  # an error's code (a gateway's refusal)
    retry_after: str | None = None
    message: str | None = None  # an error's message (a model's output limit, a field it refuses)
    reasoning_tokens: int = 0  # hidden reasoning a chat answer reports spending
    finish_reason: str = "stop"  # "length": the answer hit its output cap
    ranking: list | None = None  # a rerank answer: document indexes, best first (else by words shared with the query)


@dataclass
class Seen:
    path: str
    headers: dict
    body: dict


@dataclass
class ModelServer:
    requests: list[Seen] = field(default_factory=list)
    # A chat answer's text when none is scripted, from the request's last message (else the model echoes it).
    respond: Callable[[str], str] | None = None
    _script: list[Answer] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, port: int = 0) -> "ModelServer":
        """Serve on a free loopback port, or on `port` (the same server started again after a stop)."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
                with server._lock:
                    server.requests.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    answer = server._script.pop(0) if server._script else Answer()
                if answer.delay_s:
                    threading.Event().wait(answer.delay_s)
                if answer.status != 200:
                    error = {
                        "message": answer.message or f"scripted {answer.status}",
                        "code": answer.code,
                        "param": answer.param,
                    }
                    return self._send(answer.status, {"error": error}, answer.retry_after)
                if self.path.endswith("/chat/completions"):
                    content = answer.content
                    if content is None and server.respond is not None:
                        content = server.respond(body["messages"][-1]["content"])
                    return self._send(200, chat_answer(body, content, answer))
                if self.path.endswith("/messages"):
                    return self._send(200, messages_answer(body, answer.content))
                if self.path.endswith("/rerank"):
                    return self._send(200, rerank_answer(body, answer.ranking))
                if self.path.endswith(":batchEmbedContents"):
                    return self._send(200, gemini_answer(body, answer))
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                dim = body.get("dimensions") or 64
                vectors = FakeEmbedder(dim).embed_many(texts)
                data = [
                    {
                        "object": "embedding",
                        "index": i,
                        "embedding": answer.vector if answer.vector is not None else [float(x) for x in vectors[i]],
                    }
                    for i in range(len(texts))
                ]
                usage = {"prompt_tokens": sum(len(t.split()) for t in texts), "total_tokens": 0}
                self._send(200, {"object": "list", "data": data, "model": body["model"], "usage": usage})

            def _send(self, status, payload, retry_after=None):
                raw = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    if retry_after:
                        self.send_header("Retry-After", retry_after)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test): nothing to answer

            def log_message(self, *args):  # quiet
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._http.daemon_threads = True
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def script(self, *answers: Answer) -> None:
        with self._lock:
            self._script.extend(answers)

    def embedding_requests(self) -> list[Seen]:
        return [seen for seen in self.requests if seen.path.endswith(("/embeddings", ":batchEmbedContents"))]

    def rerank_requests(self) -> list[Seen]:
        return [seen for seen in self.requests if seen.path.endswith("/rerank")]

    def chat_requests(self) -> list[Seen]:
        return [seen for seen in self.requests if seen.path.endswith(("/chat/completions", "/messages"))]

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()


def gemini_answer(body: dict, answer: Answer) -> dict:
    texts = [request["content"]["parts"][0]["text"] for request in body["requests"]]
    dim = body["requests"][0].get("outputDimensionality") or 64
    vectors = FakeEmbedder(dim).embed_many(texts)
    return {
        "embeddings": [
            {"values": answer.vector if answer.vector is not None else [float(x) for x in v]} for v in vectors
        ]
    }


def chat_answer(body: dict, content: str | None = None, answer: Answer | None = None) -> dict:
    """The scripted text, else what it was asked, so a test can tell which prompt and model it served."""
    answer = answer or Answer()
    user = body["messages"][-1]["content"]
    text = content if content is not None else f"{body['model']} says: {user}"
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": snapshot(body["model"], "openai"),
        "choices": [
            {"index": 0, "finish_reason": answer.finish_reason, "message": {"role": "assistant", "content": text}}
        ],
        "usage": {
            "prompt_tokens": len(user.split()),
            "completion_tokens": len(text.split()) + answer.reasoning_tokens,
            "total_tokens": len(user.split()) + len(text.split()) + answer.reasoning_tokens,
            "completion_tokens_details": {"reasoning_tokens": answer.reasoning_tokens},
        },
    }


def messages_answer(body: dict, content: str | None = None) -> dict:
    """Anthropic's Messages API: the scripted text, else what it was asked."""
    user = body["messages"][-1]["content"]
    text = content if content is not None else f"{body['model']} says: {user}"
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": snapshot(body["model"], "anthropic"),
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": len(user.split()),
            "output_tokens": len(text.split()),
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": len(body["system"][0]["text"].split()),
        },
    }


NAN = float(np.nan)


def rerank_answer(body: dict, ranking: list | None) -> dict:
    """Cohere's v2 rerank: the scripted order, else the documents by how many query words they share."""
    documents = body["documents"]
    if ranking is None:
        words = set(body["query"].lower().split())
        ranking = sorted(range(len(documents)), key=lambda i: (-len(words & set(documents[i].lower().split())), i))
    results = [{"index": i, "relevance_score": 1.0 - rank / (len(ranking) + 1)} for rank, i in enumerate(ranking)]
    return {"id": "rerank-test", "results": results, "meta": {"billed_units": {"search_units": 1}}}
