"""Compare the simulator with real SGLang 0.5.23, request by request. The real server is the referee.

    python scripts/real-sglang/compare_simulator.py REAL_URL SIM_URL [--api-key KEY] [--all]

Both servers should run the same launch args (tests/real/test_simulator_parity.py starts them).
The same requests go to both; status codes, the headers clients rely on, empty bodies, JSON shapes
(keys and types, by JSON path), SSE framing, selected values and Prometheus families are compared.
Generated text is not compared (the real model has random weights). Each difference is one line;
``critical`` ones break a client or the plugin, the others (keys only the simulator has, metric
families it lacks) are fidelity gaps. Exit status 1 when a critical difference exists.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class Diff:
    check: str  # the request, e.g. "GET /health"
    where: str  # "status", "header content-type", "$.meta_info.cached_tokens", "family sglang:x"
    real: str
    sim: str
    critical: bool = True

    def __str__(self) -> str:
        level = "CRITICAL" if self.critical else "gap"
        return f"[{level}] {self.check} {self.where}: real {self.real} | sim {self.sim}"


@dataclass(frozen=True)
class Probe:
    method: str
    path: str
    kind: str  # empty | json | sse | metrics | any
    body: dict[str, Any] | None = None
    auth: bool = True
    label: str = ""  # tells apart probes of one endpoint, e.g. "max_new_tokens=-1"

    @property
    def name(self) -> str:
        suffix = " (stream)" if self.body and self.body.get("stream") else ""
        label = f" [{self.label}]" if self.label else ""
        return f"{self.method} {self.path}{'' if self.auth else ' (no key)'}{suffix}{label}"


GEN = {"text": "The capital of France is", "sampling_params": {"max_new_tokens": 4, "temperature": 0,
                                                             "ignore_eos": True}}
CHAT = {"model": "default", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4,
        "temperature": 0}
PROBES = (
    Probe("GET", "/health", "empty", auth=False),
    Probe("HEAD", "/health", "any", auth=False),
    Probe("GET", "/health_generate", "empty", auth=False),
    Probe("GET", "/ready", "empty", auth=False),
    Probe("GET", "/", "json"),
    Probe("GET", "/server_info", "json", auth=False),
    Probe("GET", "/server_info", "json"),
    Probe("GET", "/get_server_info", "json"),
    Probe("GET", "/model_info", "json"),
    Probe("GET", "/v1/models", "json"),
    Probe("POST", "/generate", "json", GEN),
    Probe("POST", "/generate", "sse", {**GEN, "stream": True}),
    Probe("POST", "/generate", "json", {"text": "Hi", "sampling_params": {"max_new_tokens": -1}},
          label="max_new_tokens=-1"),
    Probe("POST", "/generate", "json", {"sampling_params": {"max_new_tokens": 2}}, label="no text"),
    Probe("POST", "/v1/completions", "json", {"model": "default", "prompt": "Hi", "max_tokens": 4}),
    Probe("POST", "/v1/chat/completions", "json", CHAT),
    Probe("POST", "/v1/chat/completions", "sse", {**CHAT, "stream": True}),
    Probe("POST", "/v1/chat/completions", "json", {**CHAT, "messages": []}, label="no messages"),
    Probe("POST", "/v1/chat/completions", "sse",
          {**CHAT, "stream": True, "stream_options": {"include_usage": True}}, label="include_usage"),
    Probe("POST", "/v1/completions", "sse", {"model": "default", "prompt": "Hi", "max_tokens": 4,
                                             "stream": True}),
    # a LoRA adapter on a server without LoRA: refused (400, or in-band once a stream started)
    Probe("POST", "/v1/chat/completions", "json", {**CHAT, "model": "default:no-such-adapter"}, label="adapter"),
    Probe("POST", "/v1/chat/completions", "sse", {**CHAT, "model": "default:no-such-adapter", "stream": True},
          label="adapter"),
    Probe("POST", "/generate", "json", {**GEN, "lora_path": "no-such-adapter"}, label="lora_path"),
    Probe("POST", "/generate", "sse", {**GEN, "lora_path": "no-such-adapter", "stream": True}, label="lora_path"),
    Probe("POST", "/generate", "json", {"input_ids": [5, 6, 7], "sampling_params": {"max_new_tokens": 2}},
          label="input_ids"),
    Probe("POST", "/generate", "json", {"text": ["a", "b"], "sampling_params": {"max_new_tokens": 2}},
          label="batch"),
    Probe("POST", "/generate", "json", GEN, auth=False),
    Probe("POST", "/v1/chat/completions", "json", CHAT, auth=False),
    Probe("GET", "/metrics", "any"),
    Probe("POST", "/flush_cache", "any"),
    Probe("GET", "/metrics", "metrics", auth=False),
    Probe("GET", "/no_such_endpoint", "json"),
)
#: Values that must agree for the same launch args (JSON path in the /server_info body).
SERVER_INFO_VALUES = (
    ("version",), ("max_total_num_tokens",), ("max_running_requests",), ("context_length",),
    ("internal_states", 0, "memory_usage", "token_capacity"),
    ("internal_states", 0, "effective_max_running_requests_per_dp"),
    ("enable_hierarchical_cache",), ("enable_metrics",),
)
HEADERS = ("content-type", "content-length")


def _type(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def shape_diff(check: str, real: Any, sim: Any, where: str = "$") -> Iterator[Diff]:
    """Keys and types by JSON path (lists: their first items). A value of another type is critical;
    a key or value one side lacks is a fidelity gap."""
    if _type(real) != _type(sim) and not {_type(real), _type(sim)} <= {"int", "float"}:
        # null on one side is a missing value, not a different shape
        critical = "null" not in (_type(real), _type(sim))
        yield Diff(check, where, f"{_type(real)} {_short(real)}", f"{_type(sim)} {_short(sim)}", critical)
    elif isinstance(real, dict):
        for key in real.keys() - sim.keys():
            yield Diff(check, f"{where}.{key}", f"{_type(real[key])} {_short(real[key], 40)}", "missing",
                       critical=False)
        for key in sim.keys() - real.keys():
            yield Diff(check, f"{where}.{key}", "missing", _type(sim[key]), critical=False)
        for key in real.keys() & sim.keys():
            yield from shape_diff(check, real[key], sim[key], f"{where}.{key}")
    elif isinstance(real, list) and real and sim:
        yield from shape_diff(check, real[0], sim[0], f"{where}[0]")
    elif isinstance(real, list) and bool(real) != bool(sim):
        yield Diff(check, where, f"{len(real)} items", f"{len(sim)} items", critical=False)


def _dig(payload: Any, path: tuple[str | int, ...]) -> Any:
    for step in path:
        try:
            payload = payload[step]
        except (KeyError, IndexError, TypeError):
            return "<absent>"
    return payload


def sse_events(body: bytes) -> tuple[list[str], list[Any]]:
    """(framing problems, decoded data payloads) of an SSE body; ``[DONE]`` is kept as a string."""
    problems, events = [], []
    for block in body.decode(errors="replace").split("\n\n"):
        if not block.strip():
            continue
        if not block.startswith("data: "):
            problems.append(f"block not 'data: ': {block[:40]!r}")
            continue
        data = block[len("data: "):]
        events.append(data if data == "[DONE]" else json.loads(data))
    if not events or events[-1] != "[DONE]":
        problems.append("does not end with 'data: [DONE]'")
    return problems, events


def sse_traits(events: list[Any]) -> dict[str, Any]:
    """What a client relies on in a stream, independent of the generated text."""
    chunks = [e for e in events if isinstance(e, dict)]
    traits: dict[str, Any] = {"chunks>1": len(chunks) > 1}
    if chunks and "text" in chunks[0]:  # native /generate: cumulative text, meta_info each chunk
        texts = [c["text"] for c in chunks]
        traits["cumulative text"] = all(b.startswith(a) for a, b in itertools.pairwise(texts))
        traits["finish_reason only in last"] = all(c["meta_info"].get("finish_reason") is None
                                                   for c in chunks[:-1])
    elif chunks:  # OpenAI: (chat: role first, content deltas), a separate finish chunk, usage
        if chunks[0].get("choices") and "delta" in chunks[0]["choices"][0]:
            traits["first delta has role"] = "role" in chunks[0]["choices"][0]["delta"]
        traits["finish_reason only in last"] = all(
            c["choices"][0].get("finish_reason") is None for c in chunks[:-1] if c.get("choices"))
        traits["usage chunk"] = any(c.get("usage") for c in chunks)
    return traits


def metric_families(text: str) -> dict[str, str]:
    return {parts[2]: parts[3] for line in text.splitlines()
            if line.startswith("# TYPE ") and len(parts := line.split()) == 4}


def compare_bodies(probe: Probe, real: httpx.Response, sim: httpx.Response) -> Iterator[Diff]:
    name = probe.name
    if probe.kind == "empty":
        if real.content != sim.content:
            yield Diff(name, "body", repr(real.content[:60]), repr(sim.content[:60]))
    elif probe.kind == "json" and real.content and sim.content:
        try:
            yield from shape_diff(name, real.json(), sim.json())
        except json.JSONDecodeError as exc:
            yield Diff(name, "body", real.text[:60], f"not JSON ({exc})")
    elif probe.kind == "sse":
        real_problems, real_events = sse_events(real.content)
        sim_problems, sim_events = sse_events(sim.content)
        if real_problems != sim_problems:
            yield Diff(name, "framing", str(real_problems), str(sim_problems))
        rt, st = sse_traits(real_events), sse_traits(sim_events)
        for trait in rt.keys() | st.keys():
            if rt.get(trait) != st.get(trait):
                yield Diff(name, f"stream: {trait}", str(rt.get(trait)), str(st.get(trait)))
        real_chunks = [e for e in real_events if isinstance(e, dict)]
        sim_chunks = [e for e in sim_events if isinstance(e, dict)]
        if real_chunks and sim_chunks:
            yield from shape_diff(name, real_chunks[0], sim_chunks[0], "$chunk[0]")
            yield from shape_diff(name, real_chunks[-1], sim_chunks[-1], "$chunk[-1]")
    elif probe.kind == "metrics" and real.status_code == 200 == sim.status_code:
        rf, sf = metric_families(real.text), metric_families(sim.text)
        for family in sorted(rf.keys() - sf.keys()):
            yield Diff(name, f"family {family}", rf[family], "missing", critical=False)
        for family in sorted(sf.keys() - rf.keys()):
            yield Diff(name, f"family {family}", "missing", sf[family], critical=False)
        for family in sorted(rf.keys() & sf.keys()):
            if rf[family] != sf[family]:
                yield Diff(name, f"family {family} type", rf[family], sf[family])


def compare_probe(probe: Probe, real: httpx.Response, sim: httpx.Response) -> Iterator[Diff]:
    if real.status_code != sim.status_code:
        yield Diff(probe.name, "status", str(real.status_code), str(sim.status_code))
        return
    for header in HEADERS:
        rv, sv = real.headers.get(header), sim.headers.get(header)
        if header == "content-length" and probe.kind != "empty":
            continue  # lengths differ with the generated text; only an empty body's 0 matters
        if rv != sv:
            # a different media type breaks clients; a missing header or charset parameter does not
            main_differs = None not in (rv, sv) and str(rv).split(";")[0] != str(sv).split(";")[0]
            yield Diff(probe.name, f"header {header}", str(rv), str(sv), critical=main_differs)
    yield from compare_bodies(probe, real, sim)
    if probe.path == "/server_info" and probe.auth and real.status_code == 200:
        for path in SERVER_INFO_VALUES:
            rv, sv = _dig(real.json(), path), _dig(sim.json(), path)
            if rv != sv:
                yield Diff(probe.name, "value $." + ".".join(map(str, path)), _short(rv), _short(sv))


def client(url: str) -> httpx.Client:
    """A client with a new connection per request: the probes compare answers, not connection reuse.

    Real SGLang closes the connection after a 500 from an unhandled exception (``/v1/loads?include=
    bogus``), so the next request on a kept connection can be reset by the peer.
    """
    return httpx.Client(base_url=url, timeout=60, limits=httpx.Limits(max_keepalive_connections=0))


def compare(real_url: str, sim_url: str, api_key: str | None = None) -> list[Diff]:
    diffs: list[Diff] = []
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with client(real_url) as real, client(sim_url) as sim:
        for probe in PROBES:
            kwargs: dict[str, Any] = {"headers": headers if probe.auth else {}}
            if probe.body is not None:
                kwargs["json"] = probe.body
            responses = [c.request(probe.method, probe.path, **kwargs) for c in (real, sim)]
            diffs += compare_probe(probe, *responses)
    return diffs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("real_url")
    parser.add_argument("sim_url")
    parser.add_argument("--api-key", help="the --api-key both servers were launched with")
    parser.add_argument("--all", action="store_true", help="also list non-critical fidelity gaps")
    ns = parser.parse_args(argv)
    diffs = compare(ns.real_url, ns.sim_url, ns.api_key)
    shown = [d for d in diffs if ns.all or d.critical]
    for diff in shown:
        print(str(diff).replace(ns.api_key, "***") if ns.api_key else diff)
    critical = sum(d.critical for d in diffs)
    print(f"{critical} critical differences, {len(diffs) - critical} fidelity gaps")
    return 1 if critical else 0


if __name__ == "__main__":
    sys.exit(main())
