"""``python -m pytest_sglang load``: run a load against a server and print bench_serving's table."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from pytest_sglang.cli.common import api_key, check_auth, server_url, usage_error, writable
from pytest_sglang.errors import ConfigError, LoadGenError
from pytest_sglang.loadgen import LoadResult, LoadSpec, run_load
from pytest_sglang.loadgen.prompts.datasets import PromptSource, check_trace
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
    p.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:30000")
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
    p.add_argument("--api-key", default=None, metavar="KEY",
                   help="sent as 'Authorization: Bearer KEY' (default: env PYTEST_SGLANG_API_KEY or SGLANG_API_KEY)")
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


def spec_from_args(args: argparse.Namespace) -> LoadSpec:
    defaults = LoadSpec()
    return LoadSpec(
        requests=args.requests if args.requests is not None else MAX_REQUESTS,  # a trace: every row
        concurrency=args.concurrency,
        request_rate=args.request_rate,
        burstiness=args.burstiness,
        input_len=args.input_len if args.input_len is not None else defaults.input_len,
        output_len=args.output_len if args.output_len is not None else defaults.output_len,
        range_ratio=args.range_ratio,
        dataset=args.dataset,
        api=args.api,
        ignore_eos=not args.disable_ignore_eos,
        warmup=args.warmup,
        seed=args.seed,
        request_timeout_s=args.request_timeout,
        load_timeout_s=args.load_timeout,
        max_records=args.max_records,
        flush_cache=args.flush_cache,
        processes=args.processes,
        model=args.model,
        trace_time_scale=args.trace_time_scale,
        cancel_rate=args.cancel_rate,
        cancel_after_tokens=args.cancel_after_tokens,
    )


class ProgressBar:
    """A one-line progress bar on a terminal; silent otherwise (logs stay clean)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.enabled = stream.isatty()
        self.started = time.monotonic()
        self.last = -1

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or done == self.last:
            return
        self.last = done
        width = 30
        filled = width * done // max(total, 1)
        elapsed = time.monotonic() - self.started
        self.stream.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} requests, {elapsed:.1f} s"
        )
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


class CheckProgress:
    """Rows read while a trace is checked, on stderr: a trace of millions of rows takes a while.

    On a terminal one line, updated every :data:`~pytest_sglang.loadgen.workloads.traces.PROGRESS_ROWS` rows;
    otherwise (a log) a line at the first update and every 16th: visible, without flooding the log.
    """

    def __init__(self, stream: TextIO, dataset: str) -> None:
        self.stream, self.dataset = stream, dataset
        self.tty = stream.isatty()
        self.started = time.monotonic()
        self.calls = 0

    def __call__(self, rows: int) -> None:
        self.calls += 1
        if not self.tty and self.calls % 16 != 1:
            return
        line = f"checking {self.dataset}: {rows:,} rows read, {time.monotonic() - self.started:.1f} s"
        self.stream.write(f"\r{line}" if self.tty else f"{line}\n")
        self.stream.flush()

    def done(self, rows: int) -> None:
        if self.calls:
            start = "\r\033[K" if self.tty else ""  # over the progress line, cleared to its end
            self.stream.write(f"{start}checked {self.dataset}: {rows:,} rows in "
                              f"{time.monotonic() - self.started:.1f} s\n")
            self.stream.flush()


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


def _row(label: str, value: object) -> str:
    return f"{label:<40} {value:<10}"


def summary(result: LoadResult) -> str:
    """bench_serving's result table (same headings), plus the failures by kind."""
    spec = result.spec
    r = result
    lines = [
        "{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="),
        _row(
            "Backend:", {"native": "sglang", "completions": "sglang-oai", "chat": "sglang-oai-chat"}[spec.api]
        ),
        *_pace(spec),
        _row("Successful requests:", r.completed),
        _row("Failed requests:", r.failed),
    ]
    lines += [_row(f"  {kind}:", n) for kind, n in r.errors.items()]
    if r.not_sent:
        lines.append(_row("Requests not sent:", r.not_sent))
    if r.cancelled:  # gone on purpose: in no figure below
        lines.append(_row("Cancelled requests:", r.cancelled))
    lines += [
        _row("Benchmark duration (s):", f"{r.duration:.2f}"),
        _row("Total input tokens:", r.total_input_tokens),
        _row("Total generated tokens:", r.total_output_tokens),
        _row("Request throughput (req/s):", f"{r.request_throughput:.2f}"),
        _row("Input token throughput (tok/s):", f"{r.input_throughput:.2f}"),
        _row("Output token throughput (tok/s):", f"{r.output_throughput:.2f}"),
        _row("Peak output token throughput (tok/s):", f"{r.max_output_tokens_per_s:.2f}"),
        _row("Peak concurrent requests:", r.max_concurrent_requests),
        _row("Total token throughput (tok/s):", f"{r.total_throughput:.2f}"),
        _row("Concurrency:", f"{r.concurrency:.2f}"),
    ]
    sections = (
        ("End-to-End Latency", "E2E Latency", "e2e_latency", ("mean", "median", "p90", "p95", "p99")),
        ("Time to First Token", "TTFT", "ttft", ("mean", "median", "p99")),
        ("Time per Output Token (excl. 1st token)", "TPOT", "tpot", ("mean", "median", "p99")),
        ("Inter-Token Latency", "ITL", "itl", ("mean", "median", "p95", "p99")),
    )
    for title, label, key, stats in sections:
        lines.append("{s:{c}^{n}}".format(s=title, n=50, c="-"))
        for stat in stats:
            name = stat.capitalize() if stat in ("mean", "median") else stat.upper()
            lines.append(_row(f"{name} {label} (ms):", f"{getattr(r, f'{stat}_{key}_ms'):.2f}"))
        if key == "itl":
            lines.append(_row("Max ITL (ms):", f"{r.max_itl_ms:.2f}"))
    lines += _cache_section(r) + _images_section(r) + _replay_section(r)
    lines.append("=" * 50)
    return "\n".join(lines + _explanations(r))


def _pace(spec: LoadSpec) -> list[str]:
    """bench_serving's rate and concurrency rows; a trace and multi-turn sessions say how they are paced."""
    kind = dataset_parts(spec.dataset)[0]
    cap = spec.concurrency if spec.concurrency is not None else "not set"
    if kind in TRACE_KINDS:  # not "inf": each request goes out at its trace time
        return [_row("Traffic request rate:", f"request times from the trace, scaled by {spec.trace_time_scale:g}"),
                _row("Max request concurrency:", f"{spec.in_flight()} (in-flight cap)")]
    if kind == "multiturn":  # closed loop: a session's next turn follows its answer
        return [_row("Traffic request rate:", "each session's next turn follows its answer"),
                _row("Max request concurrency:", f"{spec.concurrency or 'every'} session(s) at once")]
    return [_row("Traffic request rate:", spec.request_rate if spec.request_rate is not None else "inf"),
            _row("Max request concurrency:", cap)]


def _cache_section(r: LoadResult) -> list[str]:
    """bench_serving's ``Cache Hit Details`` (``--cache-report``), plus the server's own /metrics figures."""
    cache = r.cache_report
    if not cache:
        return []
    lines = ["{s:{c}^{n}}".format(s="Cache Hit Details", n=50, c="-")]
    if cache.get("requests_reporting"):
        lines += [_row("Total prompt tokens:", cache["total_prompt_tokens"]),
                  _row("Total cached tokens:", cache["total_cached_tokens"]),
                  _row("Cache hit rate:", f"{cache['cache_hit_rate_pct']:.1f}%")]
    else:
        lines.append(_row("Cache hit rate:", "not reported (chat/completions: server --enable-cache-report)"))
    if cache.get("server_cache_hit_rate_pct") is not None:
        lines.append(_row("Server cache hit rate (/metrics):", f"{cache['server_cache_hit_rate_pct']:.1f}%"))
    if cache.get("server_mean_cache_hit_rate_pct") is not None:
        lines.append(_row("Mean sglang:cache_hit_rate:", f"{cache['server_mean_cache_hit_rate_pct']:.1f}%"))
    return lines


def _images_section(r: LoadResult) -> list[str]:
    """An image load's figures: images and image tokens per request, TTFT with images."""
    facts = r.images
    if not facts:
        return []
    tokens = facts["image_tokens_per_request"]
    return ["{s:{c}^{n}}".format(s="Images", n=50, c="-"),
            _row("Images per request:", f"{facts['images_per_request']:g}"),
            _row("Image tokens per request:", "not reported (no prompt_tokens in the answers)" if tokens is None
                 else f"{tokens:,.1f} ({facts['image_tokens_basis']})"),
            _row("Mean TTFT with images (ms):", f"{facts['mean_ttft_ms']:.2f}"),
            _row("P99 TTFT with images (ms):", f"{facts['p99_ttft_ms']:.2f}")]


def _replay_section(r: LoadResult) -> list[str]:
    facts = r.workload
    if "trace" not in facts:
        return []
    err = facts.get("timing_error_ms") or {}
    lines = ["{s:{c}^{n}}".format(s="Trace Replay", n=50, c="-"),
             _row("Trace rows replayed:", f"{facts['rows']} ({facts['trace']})"),
             _row("Time scale:", f"{facts['time_scale']:g}"),
             _row("Replay span (s):", f"{facts['span_s']:.2f}")]
    lines += [_row(f"{q.upper()} send timing error (ms):", f"{err.get(q, 0.0):.2f}") for q in ("p50", "p99", "max")]
    lines.append(_row("Sent late by the in-flight cap:", f"{facts['cap_waits']} (cap {facts['in_flight_cap']})"))
    if facts.get("skipped_rows"):
        lines.append(_row("Rows skipped (0 tokens):", facts["skipped_rows"]))
    return lines


def _explanations(r: LoadResult) -> list[str]:
    """Below the table: the first failure of each kind, why the load stopped, how figures were sampled."""
    lines = [f"failed: {example}" for example in r.failure_examples()]
    if r.stopped:
        lines.append(f"stopped early: {r.stopped}")
    note = r.sampling_note()
    if note:
        lines.append(f"note: {note}")
    return lines


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
