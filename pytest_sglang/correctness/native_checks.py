"""SGLang's native ``/generate``: the same promises as the OpenAI routes, in its own shape.

Per 0.5.23: ``{"text", "output_ids", "meta_info": {"finish_reason": {"type": "length", "length": N} |
{"type": "stop", "matched": ...} | null, "completion_tokens", "output_token_logprobs": [[logprob, id,
text|null], ...], ...}}``; a stream sends the text and ids so far in every chunk (deltas with
``--incremental-streaming-output``) and ends with ``data: [DONE]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_sglang.correctness.context import CheckContext
from pytest_sglang.correctness.openai_checks import mode, pick_stop
from pytest_sglang.correctness.payload import as_list
from pytest_sglang.correctness.result import CheckReport, Unsupported, excerpt

TOP_LOGPROBS = 2


@dataclass
class NativeAnswer:
    text: str = ""
    ids: list[int] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def generate(ctx: CheckContext, body: dict[str, Any], *, stream: bool = False) -> NativeAnswer:
    """One native request (a single prompt), batch or stream, assembled."""
    if not stream:
        reply = ctx.post("/generate", body)
        item = reply.obj()
        if reply.status != 200 or not item:
            problem = f"POST /generate: expected HTTP 200 with a JSON object, got {reply.describe()}"
            return NativeAnswer(problems=[problem])
        return _answer(item)
    sr = ctx.stream("/generate", body)
    answer = NativeAnswer()
    if sr.status != 200:
        answer.problems.append(f"POST /generate (stream): expected HTTP 200, got {sr.describe()}")
        return answer
    answer.problems += [p for p, bad in (("no 'data: [DONE]' at the end", not sr.done),
                                         (f"{sr.after_done} data line(s) after [DONE]", sr.after_done > 0),
                                         (f"the stream broke off: {sr.failure}", sr.failure is not None)) if bad]
    for n, event in enumerate(sr.events):
        part = _answer(event)
        answer.problems += [f"chunk {n}: {p}" for p in part.problems]
        final = n == len(sr.events) - 1
        reason = part.meta.get("finish_reason")
        if not final and reason is not None:
            answer.problems.append(f"chunk {n}: finish_reason {reason!r} before the last chunk")
        answer.text = answer.text + part.text if ctx.features.incremental_stream else part.text
        answer.ids = answer.ids + part.ids if ctx.features.incremental_stream else part.ids
        answer.meta = part.meta
    if not sr.events:
        answer.problems.append("the stream carried no chunk")
    return answer


def _answer(item: dict[str, Any]) -> NativeAnswer:
    answer = NativeAnswer()
    if "error" in item:
        answer.problems.append(f"in-band error {excerpt(item['error'], 200)}")
        return answer
    text, ids, meta = item.get("text"), item.get("output_ids"), item.get("meta_info")
    answer.text = text if isinstance(text, str) else ""
    answer.ids = [i for i in ids if isinstance(i, int)] if isinstance(ids, list) else []
    answer.meta = meta if isinstance(meta, dict) else {}
    for key, ok in (("text", isinstance(text, str)), ("output_ids", isinstance(ids, list)),
                    ("meta_info", isinstance(meta, dict))):
        if not ok:
            answer.problems.append(f"field {key!r} missing or of the wrong type")
    return answer


def check_native(ctx: CheckContext, stream: bool) -> CheckReport:
    """Exactly ``max_new_tokens`` ids with ``ignore_eos``, usage and logprobs that match them."""
    report = CheckReport(f"/generate {mode(stream)}")
    n = ctx.settings.max_tokens
    for i in range(min(ctx.settings.samples, 4)):
        body = ctx.native(i, ignore_eos=True) | {"return_logprob": True, "top_logprobs_num": TOP_LOGPROBS}
        a = generate(ctx, body, stream=stream)
        report.problems += [f"prompt {i}: {p}" for p in a.problems]
        if a.problems and not a.meta:
            continue
        meta = a.meta
        report.expect(len(a.ids) == n, f"prompt {i}: {len(a.ids)} output_ids for max_new_tokens={n} with ignore_eos")
        report.expect(meta.get("completion_tokens") == len(a.ids),
                      f"prompt {i}: meta_info.completion_tokens={meta.get('completion_tokens')} but "
                      f"{len(a.ids)} output_ids arrived")
        reason = meta.get("finish_reason")
        report.expect(isinstance(reason, dict) and reason.get("type") == "length",
                      f"prompt {i}: finish_reason {reason!r}, expected {{'type': 'length', ...}}")
        _check_logprobs(report, i, meta, a.ids)
    return report


def _check_logprobs(report: CheckReport, i: int, meta: dict[str, Any], ids: list[int]) -> None:
    entries, tops = as_list(meta.get("output_token_logprobs")), meta.get("output_top_logprobs")
    if not report.expect(bool(entries) or not ids, f"prompt {i}: no output_token_logprobs"):
        return
    got = [e[1] for e in entries if isinstance(e, list) and len(e) >= 2]
    report.expect(got == ids, f"prompt {i}: output_token_logprobs ids {excerpt(got)} differ from output_ids "
                              f"{excerpt(ids)}")
    bad = [e for e in entries if not (isinstance(e, list) and e and isinstance(e[0], (int, float)) and e[0] <= 1e-3)]
    report.expect(not bad, f"prompt {i}: logprob entries that are not [logprob <= 0, id, text]: {excerpt(bad[:2])}")
    ok = len(as_list(tops)) == len(ids) and all(isinstance(t, list) and len(t) == TOP_LOGPROBS for t in as_list(tops))
    report.expect(ok, f"prompt {i}: output_top_logprobs is not {len(ids)} lists of {TOP_LOGPROBS}: {excerpt(tops)}")


def check_native_agrees(ctx: CheckContext) -> CheckReport:
    """The stream, the batch and a list of prompts give the same greedy ids for the same prompt.

    Behind a gateway (which takes one prompt per request) the list part is left out and said so.
    """
    report = CheckReport("/generate batch, stream and list agree")
    count = min(ctx.settings.samples, 4)
    single = [generate(ctx, ctx.native(i, ignore_eos=True)) for i in range(count)]
    streamed = [generate(ctx, ctx.native(i, ignore_eos=True), stream=True) for i in range(count)]
    listed: list[object] = []
    if ctx.features.gateway is None:
        body = ctx.native(0, ignore_eos=True) | {"text": [ctx.native(i)["text"] for i in range(count)]}
        reply = ctx.post("/generate", body)
        listed = reply.body if isinstance(reply.body, list) else []
        report.expect(len(listed) == count, f"a list of {count} prompts got {reply.describe()}")
    else:
        report.figures["list of prompts"] = f"not sent: the gateway ({ctx.features.gateway}) takes one per request"
    for i in range(count):
        report.problems += [f"prompt {i}: {p}" for p in single[i].problems + streamed[i].problems]
        report.expect(streamed[i].ids == single[i].ids,
                      f"prompt {i}: stream ids {excerpt(streamed[i].ids)} != batch ids {excerpt(single[i].ids)}")
        report.expect(streamed[i].text == single[i].text, f"prompt {i}: stream text {excerpt(streamed[i].text)} != "
                                                          f"batch text {excerpt(single[i].text)}")
        if ctx.features.gateway is None:
            entry = listed[i] if i < len(listed) else None
            item = entry if isinstance(entry, dict) else {}
            report.expect(item.get("output_ids") == single[i].ids, f"prompt {i}: in a list of prompts the ids "
                          f"are {excerpt(item.get('output_ids'))}, alone {excerpt(single[i].ids)}")
    return report


def check_native_stop(ctx: CheckContext) -> CheckReport:
    """``sampling_params.stop`` ends the text before the string, ``finish_reason`` type stop."""
    report = CheckReport("/generate stop strings")
    tried = 0
    for i in range(ctx.settings.samples):
        long = ctx.settings.max_tokens * 2
        free = generate(ctx, ctx.native(i, max_new_tokens=long, ignore_eos=True))
        stop = pick_stop(free.text)
        if free.problems or stop is None:
            continue
        tried += 1
        got = generate(ctx, ctx.native(i, max_new_tokens=long, ignore_eos=True, stop=[stop]))
        report.problems += [f"prompt {i}: {p}" for p in got.problems]
        expected = free.text[: free.text.find(stop)]
        report.expect(got.text == expected, f"prompt {i}: with stop {stop!r} expected {excerpt(expected)}, "
                                            f"got {excerpt(got.text)}")
        reason = got.meta.get("finish_reason")
        report.expect(isinstance(reason, dict) and reason.get("type") == "stop" and reason.get("matched") == stop,
                      f"prompt {i}: finish_reason {reason!r}, expected {{'type': 'stop', 'matched': {stop!r}}}")
    if not tried:
        raise Unsupported("no greedy output of the model has a word to stop at, so stop strings cannot be checked")
    return report
