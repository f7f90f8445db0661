"""What every check gets: the client, the server's features and the settings, plus request builders."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from pytest_sglang.correctness import http
from pytest_sglang.correctness.deadline import Budget
from pytest_sglang.correctness.features import ServerFeatures
from pytest_sglang.correctness.prompts import prompt
from pytest_sglang.correctness.settings import AcceptanceSettings

#: The OpenAI routes by short name (the check ids use these names).
ROUTES = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


@dataclass(frozen=True)
class CheckContext:
    """What a check talks to, knows and tolerates.

    ``client`` talks to the server under test (a gateway for a fleet); ``metrics_clients`` read the
    ``/metrics`` of each worker behind a gateway (empty: the server's own ``/metrics``).
    """

    client: httpx.Client
    features: ServerFeatures
    settings: AcceptanceSettings
    metrics_clients: tuple[httpx.Client, ...] = ()
    #: The deadlines of the running check and of the suite (None: each request has only its own timeout).
    budget: Budget | None = None

    def post(self, path: str, body: object) -> http.Reply:
        return http.post(self.client, path, body, timeout_s=self.settings.request_timeout_s, budget=self.budget)

    def get(self, path: str) -> http.Reply:
        return http.get(self.client, path, timeout_s=self.settings.request_timeout_s, budget=self.budget)

    def stream(self, path: str, body: dict[str, Any],
               until: Callable[[http.StreamReply], bool] | None = None) -> http.StreamReply:
        """POST ``body`` with ``"stream": true`` and collect the events (see :func:`http.stream`)."""
        return http.stream(self.client, path, {**body, "stream": True}, timeout_s=self.settings.request_timeout_s,
                           until=until, budget=self.budget)

    def body(self, route: str, i: int, **extra: object) -> dict[str, Any]:
        """A greedy request for the ``i``-th prompt on ``route`` ("chat" or "completions")."""
        base: dict[str, Any] = {"model": self.features.model, "max_tokens": self.settings.max_tokens,
                                "temperature": 0}
        if route == "chat":
            base["messages"] = [{"role": "user", "content": prompt(i)}]
        else:
            base["prompt"] = prompt(i)
        return {**base, **extra}

    def native(self, i: int | str, **sampling: object) -> dict[str, Any]:
        """A greedy native ``/generate`` request for the ``i``-th prompt (or the text ``i``)."""
        text = i if isinstance(i, str) else prompt(i)
        return {"text": text, "sampling_params": {"max_new_tokens": self.settings.max_tokens, "temperature": 0,
                                                  **sampling}}

    def concurrency(self) -> int:
        """How many requests a check may send at once: the setting, capped by the server's limit."""
        limit = self.features.max_running_requests
        return max(1, min(self.settings.concurrency, limit)) if limit else self.settings.concurrency
