"""What the server under test offers, read from ``/server_info`` and ``/v1/models``.

A check that needs a feature the server does not offer is skipped with the reason (never passed
silently, never failed for the wrong cause). The field names are SGLang 0.5.23's ``ServerArgs``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from pytest_sglang.correctness import http
from pytest_sglang.correctness.result import Unsupported
from pytest_sglang.errors import ServerUnavailable

#: Grammar backends that take an EBNF grammar (outlines takes JSON schema and regex only).
EBNF_BACKENDS = ("xgrammar", "llguidance")
INFO_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ServerFeatures:
    model: str  # the served model name, sent as "model" in OpenAI requests
    context_length: int | None
    tool_call_parser: str | None
    reasoning_parser: str | None
    grammar_backend: str | None
    deterministic: bool
    radix_cache: bool
    max_running_requests: int | None
    incremental_stream: bool  # native /generate streams deltas instead of the text so far
    hicache: bool
    #: The gateway in front of the workers ("smg", "sglang-router"), None for a single server.
    gateway: str | None = None

    def need_list_of_prompts(self) -> None:
        """SGLang takes a list of prompts in one ``/generate``; its gateways answer that with 422."""
        if self.gateway:
            raise Unsupported(f"the gateway ({self.gateway}) takes one prompt per /generate (a list of prompts "
                              "is answered 422): behind a gateway each prompt is its own request")

    def need_tool_parser(self) -> None:
        if not self.tool_call_parser:
            raise Unsupported("the server has no --tool-call-parser (server_info tool_call_parser is null)")

    def need_reasoning_parser(self) -> None:
        if not self.reasoning_parser:
            raise Unsupported("the server has no --reasoning-parser (server_info reasoning_parser is null)")

    def need_grammar(self, kind: str = "json_schema") -> None:
        if not self.grammar_backend or self.grammar_backend == "none":
            raise Unsupported(f"the server has no grammar backend (server_info grammar_backend is "
                              f"{self.grammar_backend!r}), so {kind} output cannot be constrained")
        if kind == "ebnf" and self.grammar_backend not in EBNF_BACKENDS:
            raise Unsupported(f"grammar backend {self.grammar_backend!r} takes no EBNF "
                              f"(only {', '.join(EBNF_BACKENDS)} do)")

    def need_radix_cache(self) -> None:
        if not self.radix_cache:
            raise Unsupported("the radix cache is disabled (--disable-radix-cache): nothing is served from cache")


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _max_running(info: Mapping[str, Any]) -> int | None:
    # 0.5.23 leaves the top-level value null unless it was given; the effective one is per DP rank.
    top = _int(info.get("max_running_requests"))
    if top is not None:
        return top
    states = info.get("internal_states")
    if isinstance(states, list) and states and isinstance(states[0], dict):
        per_dp = _int(states[0].get("effective_max_running_requests_per_dp"))
        if per_dp is not None:
            return per_dp * (_int(info.get("dp_size")) or 1)
    return None


def read_features(info: Mapping[str, Any], models: Mapping[str, Any] | None = None) -> ServerFeatures:
    """The features from a ``/server_info`` body and (for the context length) a ``/v1/models`` body."""
    first: Mapping[str, Any] = {}
    if models is not None and isinstance(models.get("data"), list) and models["data"]:
        entry = models["data"][0]
        first = entry if isinstance(entry, dict) else {}
    model = _str(info.get("served_model_name")) or _str(first.get("id")) or _str(info.get("model_path")) or "default"
    return ServerFeatures(
        model=model,
        context_length=_int(first.get("max_model_len")) or _int(info.get("context_length")),
        tool_call_parser=_str(info.get("tool_call_parser")),
        reasoning_parser=_str(info.get("reasoning_parser")),
        grammar_backend=_str(info.get("grammar_backend")),
        deterministic=info.get("enable_deterministic_inference") is True,
        radix_cache=info.get("disable_radix_cache") is not True,
        max_running_requests=_max_running(info),
        incremental_stream=info.get("incremental_streaming_output") is True,
        hicache=info.get("enable_hierarchical_cache") is True,
    )


def fetch_features(client: httpx.Client, info: Mapping[str, Any] | None = None) -> ServerFeatures:
    """Read the features from the server (``info``: an already read ``/server_info`` body)."""
    if info is None:
        reply = http.get(client, "/server_info", timeout_s=INFO_TIMEOUT_S)
        if reply.status == 404:  # before 0.5.x the route was /get_server_info
            reply = http.get(client, "/get_server_info", timeout_s=INFO_TIMEOUT_S)
        if reply.status != 200 or not reply.obj():
            raise ServerUnavailable(f"GET /server_info: {reply.describe()}\nFix: check that the URL points at a "
                                    "healthy SGLang server and that the API key is right.")
        info = reply.obj()
    models = http.get(client, "/v1/models", timeout_s=INFO_TIMEOUT_S)
    return read_features(info, models.obj() if models.status == 200 else None)
