"""``python -m pytest_sglang load``: run a load against a server and print bench_serving's table."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from pytest_sglang.cli.common import add_server_flags, api_key, check_auth, server_url, usage_error, writable
from pytest_sglang.cli.load_table import CheckProgress, ProgressBar, summary
from pytest_sglang.errors import ConfigError, LoadGenError
from pytest_sglang.loadgen import LoadSpec, run_load
from pytest_sglang.loadgen.prompts.datasets import PromptSource, check_trace
from pytest_sglang.loadgen.shape.load import SPEC_FIELDS, LoadShape
from pytest_sglang.loadgen.shape.spec import DATASET_FORMS, DATASET_KINDS, MAX_REQUESTS, dataset_parts
from pytest_sglang.loadgen.workloads.forms import TRACE_KINDS
from pytest_sglang.plugin.settings import parse_positive_float
from pytest_sglang.redaction import scrub

EXIT_OK, EXIT_FAILED_REQUESTS, EXIT_USAGE, EXIT_CANNOT_RUN = 0, 1, 2, 3
#: As a shell reports a command ended by SIGINT (128 + 2).
EXIT_INTERRUPTED = 130


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid int value: {text!r} (expected a whole number >= 1)"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _nonneg_int(text: str) -> int:
    return 0 if text.strip() == "0" else _positive_int(text)


def _positive(text: str) -> float:
    try:
        return parse_positive_float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value: {text!r} (expected a number > 0)") from None


def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"invalid value: {text!r} (expected a number between 0 and 1)")
    return value


def _dataset(text: str) -> str:
    """The dataset's form (a multiturn dataset's options and a file's rows are LoadSpec's to check)."""
    kind, sep, path = text.partition(":")
    if (kind == "random-ids" and not sep) or kind in ("multiturn", "image") or (kind in DATASET_KINDS and path):
        return text
    raise argparse.ArgumentTypeError(f"invalid value: {text!r} (use {DATASET_FORMS})")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m pytest_sglang load",
        description="Run a load against an SGLang server and print SGLang bench_serving's metrics.",
        epilog="exit status: 0 all requests completed, 1 some requests failed or were not sent, 2 bad "
        "options, 3 the load could not run (server unreachable, warmup rejected), 130 interrupted",
    )
    add_server_flags(p)
    # Required unless the dataset paces itself (a trace's clock, multi-turn sessions): checked in main().
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--concurrency", type=_positive_int, metavar="N",
                       help="requests in flight at most (traces: the in-flight cap; multiturn: sessions at once)")
    shape.add_argument("--request-rate", type=_positive, metavar="R", help="Poisson arrivals, requests/s")
    p.add_argument("--burstiness", type=_positive, default=1.0, help="gamma shape of arrivals (default 1.0)")
    # Required unless the dataset is a trace, whose rows are the requests: checked in main().
    p.add_argument("--requests", type=_positive_int, metavar="N",
                   help="timed requests (traces: the first N rows; default every row)")
    p.add_argument("--input-len", type=_positive_int, metavar="L",
                   help="prompt tokens (not with a trace, which gives them; multiturn: the first message)")
    p.add_argument("--output-len", type=_positive_int, metavar="L", help="output tokens (not with a trace)")
    p.add_argument(
        "--range-ratio",
        type=_ratio,
        default=1.0,
        metavar="F",
        help="lengths drawn in [L*F, L] (default 1.0: fixed; bench_serving's default is 0.0)",
    )
    p.add_argument(
        "--dataset",
        type=_dataset,
        default="random-ids",
        help="random-ids (default), sharegpt:PATH, jsonl:PATH, the traces mooncake:PATH and burstgpt:PATH, "
        "or multiturn[:sessions=S,turns=T,think_s=X,system_len=N,first_len=N,turn_len=N] (see docs/loadgen.md)",
    )
    p.add_argument("--trace-time-scale", type=_positive, default=1.0, metavar="F",
                   help="trace replay: send each request at its trace time x F (SGLang's "
                   "--mooncake-slowdown-factor; 0.1 = 10x faster; default 1.0)")
    p.add_argument(
        "--api",
        choices=("native", "chat", "completions"),
        default="native",
        help="/generate (default), /v1/chat/completions or /v1/completions",
    )
    p.add_argument(
        "--warmup", type=_nonneg_int, default=1, metavar="N", help="untimed warmup requests (default 1)"
    )
    p.add_argument(
        "--processes", type=_positive_int, default=1, metavar="N", help="client processes (default 1)"
    )
    p.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="PATH",
        help="append the result as one JSON line with bench_serving's keys",
    )
    p.add_argument("--seed", type=int, default=42, help="dataset and arrival seed (default 42)")
    _add_limits(p)
    p.add_argument("--flush-cache", action="store_true", help="POST /flush_cache after the warmup")
    p.add_argument("--disable-ignore-eos", action="store_true", help="let the model stop early")
    p.add_argument("--cancel-rate", type=float, default=0.0, metavar="F",
                   help="share of requests whose client goes away mid-answer (AIPerf's --request-cancellation-rate "
                   "as a fraction; counted apart, not as errors; default 0)")
    p.add_argument("--cancel-after-tokens", type=int, default=None, metavar="N",
                   help="a cancelled request closes its stream after N tokens (default: half of --output-len)")
    p.add_argument("--model", default="default", help="model name sent to the OpenAI-compatible APIs")
    p.add_argument("--records", action="store_true", help="include per-request records in --json")
    return p


def _add_limits(p: argparse.ArgumentParser) -> None:
    """Deadlines and the records kept: what bounds a load's time and memory."""
    p.add_argument(
        "--request-timeout",
        type=_positive,
        default=None,
        metavar="S",
        help="seconds one request may take (default: derived from the lengths, at least 60)",
    )
    p.add_argument("--timeout", type=_positive, dest="request_timeout", help=argparse.SUPPRESS)  # old name
    p.add_argument(
        "--load-timeout",
        type=_positive,
        default=None,
        metavar="S",
        help="one deadline for the whole load; requests in flight then count as timeouts "
        "(default: derived from requests and concurrency)",
    )
    p.add_argument(
        "--max-records",
        type=_positive_int,
        default=100_000,
        metavar="N",
        help="per-request records kept; beyond, percentiles come from a uniform sample of N (default 100000)",
    )


def _required(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The shape options a dataset needs: argparse's own words for what is missing."""
    kind = dataset_parts(args.dataset)[0]
    if kind not in TRACE_KINDS and args.requests is None:
        parser.error("the following arguments are required: --requests")
    if kind in TRACE_KINDS:
        given = [flag for flag, value in (("--input-len", args.input_len), ("--output-len", args.output_len),
                                          ("--request-rate", args.request_rate)) if value is not None]
        if given:
            parser.error(f"argument {given[0]}: not allowed with a {kind} trace, which gives the lengths and "
                         "the arrival times (use --trace-time-scale to replay faster or slower)")
        return
    if kind != "multiturn" and args.concurrency is None and args.request_rate is None:
        parser.error("one of the arguments --concurrency --request-rate is required")
    missing = [flag for flag, value in (("--input-len", args.input_len), ("--output-len", args.output_len))
               if value is None and not (kind == "multiturn" and flag == "--input-len")]
    if missing:
        parser.error(f"the following arguments are required: {', '.join(missing)}")


def shape_flag(name: str) -> str:
    """The load command's flag of a load-shape keyword (``request_timeout_s`` -> ``--request-timeout``)."""
    return "--" + name.removesuffix("_s").replace("_", "-")


def spec_from_args(args: argparse.Namespace) -> LoadSpec:
    # The load-shape keywords (loadgen/shape/load.py), by their flags; unset ones keep LoadShape's defaults.
    given = {name: getattr(args, shape_flag(name)[2:].replace("-", "_")) for name in SPEC_FIELDS}
    shape = LoadShape(**cast("dict[str, Any]", {k: v for k, v in given.items() if v is not None}))
    return shape.spec(
        requests=args.requests if args.requests is not None else MAX_REQUESTS,  # a trace: every row
        burstiness=args.burstiness,
        range_ratio=args.range_ratio,
        ignore_eos=not args.disable_ignore_eos,
        warmup=args.warmup,
        seed=args.seed,
        max_records=args.max_records,
        flush_cache=args.flush_cache,
        processes=args.processes,
        model=args.model,
    )


def _checked(spec: LoadSpec, *, given: bool) -> LoadSpec:
    """``spec`` once its dataset file is checked (ConfigError otherwise); a trace without ``--requests``: its rows."""
    if not spec.is_trace():
        PromptSource(spec)  # a bad or oversized --dataset file
        return spec
    progress = CheckProgress(sys.stderr, spec.dataset)
    found = check_trace(spec, progress)  # run_load checks it again: kept, not read again
    progress.done(found.rows)
    if given:
        return spec
    if found.rows == MAX_REQUESTS:
        print(f"note: replaying the first {MAX_REQUESTS:,} rows of the trace, the most one load sends; give "
              "--requests N for fewer", file=sys.stderr)
    return spec.replace(requests=found.rows)  # the rows it has (the result's spec says so)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 with an argparse-style message on bad options
    _required(parser, args)
    key = api_key(args.api_key)
    try:
        spec = spec_from_args(args)
        url = server_url(args.url)  # the plugin's URL check: "no scheme://" is a usage error, not a traceback
        writable(args.json, "--json", "the result line")
        spec = _checked(spec, given=args.requests is not None)  # a bad --dataset file: usage error, nothing sent
        check_auth(url, key)
    except ConfigError as exc:
        usage_error(parser, exc)
    try:
        result = run_load(args.url.strip(), spec, api_key=key.value, progress=ProgressBar(sys.stderr))
    except (LoadGenError, ConfigError) as exc:
        print(f"error: {scrub(str(exc))}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    except KeyboardInterrupt:
        print("\ninterrupted: the load was stopped and every request in flight cancelled", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(scrub(summary(result)))
    if args.json is not None:
        with args.json.open("a", encoding="utf-8") as fh:
            fh.write(scrub(json.dumps(result.to_dict(records=args.records))) + "\n")
    return EXIT_FAILED_REQUESTS if result.failed or result.not_sent else EXIT_OK
