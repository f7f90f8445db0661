"""``python -m pytest_sglang golden record|check``: greedy golden outputs without a dataset.

``record --url URL --out golden.json [--prompts FILE] [--tokens 32]`` stores, from a known-good
server, the greedy token ids and top logprobs of a prompt set (shipped, or one prompt per line /
JSON lines with ``prompt`` in FILE). ``check --url URL --golden golden.json [--min-match 1.0]
[--max-logprob-delta D]`` compares a server with the recording.

Exit codes: 0 recorded / matches, 1 differs beyond the limits, 2 bad input, 3 the server could not be used.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from pytest_sglang.correctness import golden
from pytest_sglang.correctness.http import get
from pytest_sglang.errors import ConfigError, ServerUnavailable
from pytest_sglang.redaction import register, scrub
from pytest_sglang.server.client import make_client
from pytest_sglang.server.url import parse_server_url

EXIT_OK, EXIT_DIFFERS, EXIT_USAGE, EXIT_CANNOT_RUN = 0, 1, 2, 3
#: ``/server_info`` fields kept in a recording: what identifies the server, never its launch args.
SERVER_FIELDS = ("version", "model_path", "served_model_name", "tp_size", "dtype", "quantization",
                 "attention_backend", "enable_deterministic_inference")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pytest_sglang golden", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="record golden outputs from a known-good server")
    rec.add_argument("--out", type=Path, required=True, help="the golden JSON file to write")
    rec.add_argument("--prompts", type=Path, default=None, help="prompts file (default: the shipped set)")
    rec.add_argument("--tokens", type=int, default=golden.DEFAULT_TOKENS, help="greedy tokens per prompt")
    chk = sub.add_parser("check", help="compare a server with a recording")
    chk.add_argument("--golden", type=Path, required=True, help="a file written by golden record")
    chk.add_argument("--min-match", type=float, default=1.0, help="share of prompts that must match exactly")
    chk.add_argument("--max-logprob-delta", type=float, default=None, help="largest logprob difference allowed")
    for command in (rec, chk):
        command.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:30000")
        command.add_argument("--api-key", default=None, metavar="KEY", help="sent as 'Authorization: Bearer KEY'")
        command.add_argument("--request-timeout", type=float, default=120.0, help="seconds per request")
    return p


def _server(client: httpx.Client) -> dict[str, Any]:
    info = get(client, "/server_info", timeout_s=30).obj()
    return {k: info[k] for k in SERVER_FIELDS if k in info}


def _record(args: argparse.Namespace, client: httpx.Client) -> int:
    prompts = golden.read_prompts(args.prompts) if args.prompts else golden.default_prompts()
    if args.tokens < 1:
        raise ConfigError("--tokens", args.tokens, "must be >= 1", "pass --tokens 32, for example")
    doc = golden.record(client, prompts, args.tokens, timeout_s=args.request_timeout, server=_server(client))
    golden.save(doc, args.out)
    print(f"recorded {len(prompts)} prompts x {args.tokens} greedy tokens to {args.out}")
    return EXIT_OK


def _check(args: argparse.Namespace, client: httpx.Client) -> int:
    if not 0 <= args.min_match <= 1:
        raise ConfigError("--min-match", args.min_match, "must be between 0 and 1", "pass --min-match 1.0")
    doc = golden.load(args.golden)
    result = golden.compare(client, doc, min_match=args.min_match, max_logprob_delta=args.max_logprob_delta,
                            timeout_s=args.request_timeout)
    print(scrub(result.message() if result.problems else "golden outputs match: " + ", ".join(
        f"{k}={v}" for k, v in result.figures.items())))
    return EXIT_DIFFERS if result.problems else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    register(args.api_key)
    try:
        with make_client(parse_server_url(args.url, source="--url"), args.api_key) as client:
            return _record(args, client) if args.command == "record" else _check(args, client)
    except ConfigError as exc:
        parser.error(scrub(str(exc)))
    except ServerUnavailable as exc:
        print(f"error: {scrub(str(exc))}", file=sys.stderr)
        return EXIT_CANNOT_RUN
