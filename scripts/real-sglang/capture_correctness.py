"""Record raw responses of real SGLang 0.5.23 for the simulator's layout tests.

    python scripts/real-sglang/capture_correctness.py --url http://127.0.0.1:PORT \\
        --out fixtures/captures-0.5.23/correctness

The server is the CPU one of ``setup.sh`` (tiny dummy Llama, ``--enable-metrics``). Each file holds
``HTTP <status>``, ``request: POST <path> <body>``, a blank line, then the raw response body; the
simulator's test (``tests/simulator/test_recorded_shapes.py``) replays the request.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import httpx

MSG = [{"role": "user", "content": "hi"}]
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
CASES = {
    "chat_logprobs": (
        "/v1/chat/completions",
        {"messages": MSG, "max_tokens": 3, "logprobs": True, "top_logprobs": 2, "temperature": 0},
    ),
    "chat_logprobs_stream": (
        "/v1/chat/completions",
        {"messages": MSG, "max_tokens": 2, "logprobs": True, "top_logprobs": 2, "temperature": 0, "stream": True},
    ),
    "completions_logprobs": (
        "/v1/completions",
        {"prompt": "hi there", "max_tokens": 3, "logprobs": 2, "temperature": 0},
    ),
    "completions_logprobs_stream": (
        "/v1/completions",
        {"prompt": "hi there", "max_tokens": 2, "logprobs": 2, "temperature": 0, "stream": True},
    ),
    "generate_logprobs": (
        "/generate",
        {
            "text": "hi there",
            "sampling_params": {"max_new_tokens": 3, "temperature": 0},
            "return_logprob": True,
            "top_logprobs_num": 2,
            "logprob_start_len": 0,
        },
    ),
    "generate_logprobs_stream": (
        "/generate",
        {
            "text": "hi there",
            "sampling_params": {"max_new_tokens": 2, "temperature": 0},
            "return_logprob": True,
            "top_logprobs_num": 1,
            "stream": True,
        },
    ),
    "generate_n2": ("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 3, "n": 2, "temperature": 1}}),
    "chat_n2": ("/v1/chat/completions", {"messages": MSG, "max_tokens": 3, "n": 2, "temperature": 0}),
    "chat_n2_stream": (
        "/v1/chat/completions",
        {
            "messages": MSG,
            "max_tokens": 2,
            "n": 2,
            "temperature": 1,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    ),
    "chat_json_schema": (
        "/v1/chat/completions",
        {
            "messages": MSG,
            "max_tokens": 8,
            "temperature": 0,
            "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}},
        },
    ),
    "chat_regex": ("/v1/chat/completions", {"messages": MSG, "max_tokens": 10, "temperature": 0, "regex": "(yes|no)"}),
    "error_bad_regex": ("/v1/chat/completions", {"messages": MSG, "max_tokens": 5, "regex": "(a"}),
    "error_bad_regex_stream": (
        "/v1/chat/completions",
        {"messages": MSG, "max_tokens": 5, "regex": "(a", "stream": True},
    ),
    "error_unsupported_schema": (
        "/v1/chat/completions",
        {
            "messages": MSG,
            "max_tokens": 5,
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "x",
                    "schema": {"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 3}}},
                },
            },
        },
    ),
    "error_two_constraints": (
        "/v1/chat/completions",
        {"messages": MSG, "max_tokens": 5, "regex": "a", "ebnf": 'root ::= "a"'},
    ),
    "error_negative_max_tokens": ("/v1/chat/completions", {"messages": MSG, "max_tokens": -1}),
    "error_n0": ("/v1/chat/completions", {"messages": MSG, "max_tokens": 5, "n": 0}),
    "unknown_model": ("/v1/chat/completions", {"model": "nope", "messages": MSG, "max_tokens": 2, "temperature": 0}),
}
RAW = {"error_malformed_json": ("/v1/chat/completions", b'{"messages": [')}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="base URL of the real server")
    parser.add_argument("--out", required=True, type=Path, help="folder for the .txt captures")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    requests = [(n, p, json.dumps(b).encode()) for n, (p, b) in CASES.items()] + [
        (n, p, raw) for n, (p, raw) in RAW.items()
    ]
    with httpx.Client(base_url=args.url, timeout=120) as c:
        for name, path, payload in requests:
            r = c.post(path, content=payload, headers={"Content-Type": "application/json"})
            (args.out / f"{name}.txt").write_text(
                f"HTTP {r.status_code}\nrequest: POST {path} {payload.decode()}\n\n{r.text}"
            )
            print(f"{name}: HTTP {r.status_code}")


if __name__ == "__main__":
    main()
