"""``python -m pytest_sglang golden record|check``: greedy golden outputs without a dataset.

``record --url URL --out golden.json [--prompts FILE] [--tokens 32]`` stores, from a known-good
server, the greedy token ids and top logprobs of a prompt set (shipped, or one prompt per line /
JSON lines with ``prompt`` in FILE). ``check --url URL --golden golden.json [--min-match 1.0]
[--max-logprob-delta D] [--json OUT]`` compares a server with the recording. The API key is
``--api-key``, else env ``PYTEST_SGLANG_API_KEY`` or ``SGLANG_API_KEY`` (as for the plugin); values
are checked against ``@pytest.mark.sglang_golden``'s keywords.

Exit codes: 0 recorded / matches, 1 differs beyond the limits, 2 bad input, 3 the server could not be used.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from pytest_sglang.cli.common import api_key, check_auth, keyword_type, server_url, usage_error, writable
from pytest_sglang.correctness import golden
from pytest_sglang.correctness.http import get
from pytest_sglang.errors import ConfigError, ServerUnavailable
from pytest_sglang.gates.correctness.golden import run_marker
from pytest_sglang.redaction import scrub
from pytest_sglang.server.client import make_client

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
    chk.add_argument("--min-match", type=keyword_type(run_marker, "min_match", "--min-match"), default=1.0,
                     help="share of prompts that must match exactly, from 0 to 1 (default 1.0)")
    chk.add_argument("--max-logprob-delta", type=keyword_type(run_marker, "max_logprob_delta", "--max-logprob-delta"),
                     default=None, help="largest logprob difference allowed")
    chk.add_argument("--json", type=Path, default=None, metavar="OUT",
                     help="write the verdict, figures and problems as JSON to OUT")
    for command in (rec, chk):
        command.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:30000")
        command.add_argument("--api-key", default=None, metavar="KEY", help="sent as 'Authorization: Bearer KEY' "
                             "(default: env PYTEST_SGLANG_API_KEY or SGLANG_API_KEY)")
        timeout = keyword_type(run_marker, "request_timeout_s", "--request-timeout")
        command.add_argument("--request-timeout", type=timeout, default=120.0, help="seconds per request")
    return p


def _server(client: httpx.Client) -> dict[str, Any]:
    info = get(client, "/server_info", timeout_s=30).obj()
    return {k: info[k] for k in SERVER_FIELDS if k in info}


def _prepare(args: argparse.Namespace) -> list[str] | dict[str, Any]:
    """Everything read or checked before the server is asked: files in, files out, values."""
    if args.command == "check":
        writable(args.json, "--json", "the golden check's verdict")
        return golden.load(args.golden, "--golden")
    writable(args.out, "--out", "the golden recording")
    if args.tokens < 1:
        raise ConfigError("--tokens", args.tokens, "must be >= 1", "pass --tokens 32, for example")
    return golden.read_prompts(args.prompts, "--prompts") if args.prompts else golden.default_prompts()


def _record(args: argparse.Namespace, client: httpx.Client, prompts: list[str]) -> int:
    doc = golden.record(client, prompts, args.tokens, timeout_s=args.request_timeout, server=_server(client))
    golden.save(doc, args.out)
    print(f"recorded {len(prompts)} prompts x {args.tokens} greedy tokens to {args.out}")
    return EXIT_OK


def _check(args: argparse.Namespace, client: httpx.Client, doc: dict[str, Any]) -> int:
    result = golden.compare(client, doc, min_match=args.min_match, max_logprob_delta=args.max_logprob_delta,
                            timeout_s=args.request_timeout)
    print(scrub(result.message() if result.problems else "golden outputs match: " + ", ".join(
        f"{k}={v}" for k, v in result.figures.items())))
    if args.json is not None:
        out = {"golden": str(args.golden), "passed": not result.problems, "problems": list(result.problems),
               "figures": result.figures, "limits": {"min_match": args.min_match,
                                                     "max_logprob_delta": args.max_logprob_delta}}
        args.json.write_text(scrub(json.dumps(out, indent=1, default=str)) + "\n")
    return EXIT_DIFFERS if result.problems else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    key = api_key(args.api_key)
    try:
        url = server_url(args.url)
        work = _prepare(args)
        check_auth(url, key)
        with make_client(url, key.value) as client:
            if isinstance(work, dict):
                return _check(args, client, work)
            return _record(args, client, work)
    except ConfigError as exc:
        usage_error(parser, exc)
    except ServerUnavailable as exc:
        print(f"error: {scrub(str(exc))}", file=sys.stderr)
        return EXIT_CANNOT_RUN
