"""Prompt tokens as the server counted them (``prompt_tokens`` / ``usage``) against those the client sent.

A server's input tok/s counts the tokens it computed. When a chat template (or special tokens added
twice) makes a prompt longer than the client meant, the figure is inflated: it is not the server's
speed on the load that was asked for. What the client's figure is depends on the load:

- ``exact``: token ids were sent (random-ids, traces; native and completions APIs): their number.
- ``chat``: random-ids words sent as chat text; the figure is the words asked for, and the server's
  count adds its chat template and tokenizer (a real tokenizer splits a word into several tokens: +200 %
  on the tiny real model). Judged only against a tolerance the user gives; else reported.
- ``estimate``: text from a data set, which the client does not tokenize (about 4 characters a token):
  the difference is reported, never flagged.
- ``images``: an image load; the server's count includes each image's tokens (its processor's, thousands
  an image), so the difference is reported with that said, never flagged (the images' own figures are
  the load's ``images`` report).
"""

from __future__ import annotations

from typing import Any

from pytest_sglang.loadgen.shape.spec import IMAGE_KINDS, LoadSpec, dataset_parts

#: The tolerance where token ids were sent and none was given (% of the ids sent).
DEFAULT_TOLERANCE_PCT = 5.0

BASES = {
    "exact": "token ids sent",
    "chat": "words asked for, sent as chat text (the server adds its chat template and tokenizer)",
    "estimate": "estimated from text at ~4 characters a token (the client does not tokenize)",
    "images": "the text sent; the server's count also holds the images' tokens (see the images figures)",
}


def basis(spec: LoadSpec) -> str:
    """What the client's prompt-token figure is for ``spec`` (a key of :data:`BASES`)."""
    kind = dataset_parts(spec.dataset)[0]
    if kind in IMAGE_KINDS:
        return "images"
    if kind not in ("random-ids", "mooncake", "burstgpt"):
        return "estimate"
    return "chat" if spec.api == "chat" else "exact"


def token_report(spec: LoadSpec, counts: list[int]) -> dict[str, Any]:
    """The comparison of ``counts`` = [sent, counted by the server, requests compared, requests not reporting]."""
    sent, counted, compared, unreported = counts
    diff = counted - sent
    pct = round(100 * diff / sent, 2) if sent else None
    how = basis(spec)
    given = spec.prompt_token_tolerance_pct
    # A chat load's count includes what the server's template and tokenizer make of the words: judged only
    # against a tolerance the user chose for that server (a default would fail healthy servers).
    tolerance = given if given is not None else DEFAULT_TOLERANCE_PCT if how == "exact" else None
    return {
        "sent_prompt_tokens": sent,
        "server_prompt_tokens": counted,
        "difference": diff,
        "difference_pct": pct,
        "basis": how,
        "requests_compared": compared,
        "requests_not_reporting": unreported,
        "tolerance_pct": tolerance,
        "flagged": (how not in ("estimate", "images") and tolerance is not None and pct is not None
                    and abs(pct) > tolerance),
    }


def token_text(report: dict[str, Any]) -> str:
    """``server counted 3,300 prompt tokens, client sent 3,200 (+100, +3.1%; token ids sent)`` plus the flag."""
    if not report or not report.get("requests_compared"):
        if report.get("requests_not_reporting"):
            return "no answer reported prompt_tokens: the server's token count could not be checked"
        return ""
    pct = report["difference_pct"]
    text = (f"server counted {report['server_prompt_tokens']:,} (prompt_tokens), client sent "
            f"{report['sent_prompt_tokens']:,} ({report['difference']:+,}"
            f"{'' if pct is None else f', {pct:+.1f}%'}; {BASES[report['basis']]})")
    if report["basis"] == "chat" and report.get("tolerance_pct") is None:
        text += ("; not judged: a chat load's count includes the server's chat template and tokenizer "
                 "(give prompt_token_tolerance_pct= to judge it)")
    if report.get("flagged"):
        text += (f"; FLAGGED: beyond the {report['tolerance_pct']:g}% tolerance (prompt_token_tolerance_pct): "
                 "input tok/s counts tokens the client did not send (a chat template, special tokens added "
                 "twice?); fix the server's template or judge output tok/s, or raise the tolerance")
    return text


def merge_token_reports(spec: LoadSpec, reports: list[dict[str, Any]]) -> dict[str, Any]:
    """The comparison over several runs of ``spec`` (repeats): counts summed, then judged again."""
    keys = ("sent_prompt_tokens", "server_prompt_tokens", "requests_compared", "requests_not_reporting")
    if not any(reports):
        return {}
    return token_report(spec, [sum(r.get(k, 0) for r in reports) for k in keys])
