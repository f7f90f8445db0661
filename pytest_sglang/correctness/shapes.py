"""Assemble OpenAI answers (batch and stream) into one shape, noting every protocol fault on the way.

What OpenAI clients rely on, per SGLang 0.5.23's ``protocol.py``: each choice ends with a
``finish_reason`` in {stop, length, tool_calls} (``null`` before that, never ``""``: sglang#3912 broke
clients that way), a stream ends with ``data: [DONE]`` and nothing after it, and with
``stream_options.include_usage`` the last chunk carries ``usage`` and no choices.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_sglang.correctness.http import Reply, StreamReply
from pytest_sglang.correctness.payload import as_dict, as_list, as_str
from pytest_sglang.correctness.result import excerpt

FINISH_REASONS = ("stop", "length", "tool_calls")
_OBJECTS = {("chat", False): "chat.completion", ("chat", True): "chat.completion.chunk",
            ("completions", False): "text_completion", ("completions", True): "text_completion"}


@dataclass
class Choice:
    index: int
    text: str = ""  # message content / completion text (streams: the deltas joined)
    content_null: bool = False  # chat: message.content was null
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: object = None
    matched_stop: object = None
    logprobs: list[dict[str, Any]] = field(default_factory=list)  # one entry per token, when asked for
    has_logprobs: bool = False

    @property
    def tokens(self) -> int | None:
        """The tokens returned, counted from the logprobs (None when none were returned)."""
        return len(self.logprobs) if self.has_logprobs else None


@dataclass
class Answer:
    """One request's outcome: its choices by index, its usage, and the protocol faults seen."""

    route: str
    stream: bool
    choices: dict[int, Choice] = field(default_factory=dict)
    usage: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)
    reported: set[str] = field(default_factory=set)  # stream faults already noted (one line each, not per chunk)

    def once(self, key: str, problem: str) -> None:
        if key not in self.reported:
            self.reported.add(key)
            self.problems.append(problem)

    def choice(self, index: int = 0) -> Choice:
        return self.choices.setdefault(index, Choice(index))


def from_reply(route: str, reply: Reply) -> Answer:
    """A batch (non-streaming) answer of ``route`` ("chat" or "completions")."""
    answer = Answer(route, False)
    body = reply.obj()
    if reply.status != 200 or not body:
        answer.problems.append(f"{route}: expected HTTP 200 with a JSON object, got {reply.describe()}")
        return answer
    _common_fields(answer, body, "response")
    for raw in as_list(body.get("choices")):
        if isinstance(raw, dict):
            _batch_choice(answer, raw)
    usage = body.get("usage")
    answer.usage = usage if isinstance(usage, dict) else None
    if answer.usage is None:
        answer.problems.append(f"{route}: the response has no usage object")
    for c in answer.choices.values():
        _finish_reason(answer, c.finish_reason, f"choice {c.index}", final=True)
    return answer


def _batch_choice(answer: Answer, raw: dict[str, Any]) -> None:
    choice = answer.choice(raw.get("index", 0) if isinstance(raw.get("index"), int) else 0)
    choice.finish_reason = raw.get("finish_reason")
    choice.matched_stop = raw.get("matched_stop")
    if answer.route == "chat":
        _chat_message(answer, choice, as_dict(raw.get("message")))
    else:
        choice.text = as_str(raw.get("text"))
    _logprobs(answer, choice, raw.get("logprobs"))


def _chat_message(answer: Answer, choice: Choice, message: dict[str, Any]) -> None:
    if message.get("role") not in ("assistant", None):
        answer.problems.append(f"choice {choice.index}: message.role is {message.get('role')!r}, not 'assistant'")
    content = message.get("content")
    choice.content_null = content is None
    choice.text += content if isinstance(content, str) else ""
    reasoning = message.get("reasoning_content")
    choice.reasoning += reasoning if isinstance(reasoning, str) else ""
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        choice.tool_calls.extend(c for c in calls if isinstance(c, dict))


def _logprobs(answer: Answer, choice: Choice, raw: object) -> None:
    if raw is None:
        return
    choice.has_logprobs = True
    if answer.route == "chat":
        entries = raw.get("content") if isinstance(raw, dict) else None
        if isinstance(entries, list):
            choice.logprobs.extend(e for e in entries if isinstance(e, dict))
        return
    if not isinstance(raw, dict):
        return
    tokens, values, tops = (as_list(raw.get(k)) for k in ("tokens", "token_logprobs", "top_logprobs"))
    for i, token in enumerate(tokens):
        choice.logprobs.append({"token": token, "logprob": values[i] if i < len(values) else None,
                                "top_logprobs": tops[i] if i < len(tops) else None})
    if len(values) != len(tokens):
        answer.problems.append(f"choice {choice.index}: logprobs has {len(tokens)} tokens but "
                               f"{len(values)} token_logprobs")


def _common_fields(answer: Answer, body: dict[str, Any], what: str) -> None:
    expected = _OBJECTS[(answer.route, answer.stream)]
    if body.get("object") != expected:
        answer.problems.append(f"{what}: object is {body.get('object')!r}, expected {expected!r}")
    for key, kind in (("id", str), ("created", int), ("model", str), ("choices", list)):
        if not isinstance(body.get(key), kind):
            answer.problems.append(f"{what}: field {key!r} is {excerpt(body.get(key), 60)}, expected a {kind.__name__}")


def _finish_reason(answer: Answer, value: object, where: str, *, final: bool) -> None:
    if value == "":
        answer.once("empty finish_reason", f"{where}: finish_reason is \"\" (an empty string breaks OpenAI "
                                           "clients; it must be null until the choice ends)")
    elif final and value not in FINISH_REASONS:
        answer.problems.append(f"{where}: finish_reason is {value!r}, expected one of {', '.join(FINISH_REASONS)}")
    elif not final and value is not None and value not in FINISH_REASONS:
        answer.problems.append(f"{where}: finish_reason is {value!r}")


def from_stream(route: str, reply: StreamReply, *, include_usage: bool = False) -> Answer:
    """A streamed answer of ``route``: deltas joined per choice, every chunk's shape checked."""
    answer = Answer(route, True)
    if reply.status != 200:
        answer.problems.append(f"{route} stream: expected HTTP 200, got {reply.describe()}")
        return answer
    _stream_framing(answer, reply)
    _ids_per_choice(answer, reply)
    for n, event in enumerate(reply.events):
        _chunk(answer, event, n)
    _usage_chunk(answer, reply, include_usage)
    for c in answer.choices.values():
        if c.finish_reason is None:
            answer.problems.append(f"choice {c.index}: no chunk carried a finish_reason")
    return answer


def _ids_per_choice(answer: Answer, reply: StreamReply) -> None:
    """One id across the chunks of a one-choice stream.

    With ``n > 1`` SGLang 0.5.23 runs one request per choice and sends every finish chunk with the
    last request's id (``serving_chat.py``), so ids are not compared there.
    """
    indices = {as_dict(raw).get("index") for e in reply.events for raw in as_list(e.get("choices"))}
    ids = {e.get("id") for e in reply.events if "error" not in e}
    if len(indices) <= 1 and len(ids) > 1:
        answer.problems.append(f"the chunks carry {len(ids)} different ids")


def _stream_framing(answer: Answer, reply: StreamReply) -> None:
    if reply.failure:
        answer.problems.append(f"the stream broke off: {reply.failure}")
    if not reply.done:
        answer.problems.append("the stream did not end with 'data: [DONE]'")
    if reply.after_done:
        answer.problems.append(f"{reply.after_done} data line(s) came after [DONE]")
    if reply.bad_lines:
        answer.problems.append(f"{len(reply.bad_lines)} data line(s) are not JSON objects, e.g. "
                               f"{excerpt(reply.bad_lines[0], 80)}")


def _chunk(answer: Answer, event: dict[str, Any], n: int) -> None:
    if "error" in event:
        answer.problems.append(f"chunk {n} is an in-band error: {excerpt(event['error'], 200)}")
        return
    _common_fields(answer, event, f"chunk {n}")
    for raw in as_list(event.get("choices")):
        if not isinstance(raw, dict):
            continue
        choice = answer.choice(raw.get("index", 0) if isinstance(raw.get("index"), int) else 0)
        reason = raw.get("finish_reason")
        _finish_reason(answer, reason, f"chunk {n} choice {choice.index}", final=False)
        if choice.finish_reason is not None and reason is None and _has_payload(raw):
            answer.problems.append(f"chunk {n}: choice {choice.index} got more output after its finish_reason")
        if reason is not None:
            choice.finish_reason, choice.matched_stop = reason, raw.get("matched_stop")
        if answer.route == "chat":
            _chat_message(answer, choice, as_dict(raw.get("delta")))
            choice.content_null = False
        else:
            choice.text += as_str(raw.get("text"))
        _logprobs(answer, choice, raw.get("logprobs"))


def _has_payload(raw: dict[str, Any]) -> bool:
    delta = as_dict(raw.get("delta"))
    return bool(raw.get("text") or delta.get("content") or delta.get("reasoning_content") or delta.get("tool_calls"))


def _usage_chunk(answer: Answer, reply: StreamReply, include_usage: bool) -> None:
    usages = [(n, e["usage"]) for n, e in enumerate(reply.events) if isinstance(e.get("usage"), dict)]
    if not include_usage:
        return
    if not usages:
        answer.problems.append("stream_options.include_usage was set but no chunk carried usage")
        return
    last_n, usage = usages[-1]
    answer.usage = usage
    if last_n != len(reply.events) - 1 or reply.events[last_n].get("choices"):
        answer.problems.append("the usage chunk must be the last one before [DONE], with an empty choices list")
