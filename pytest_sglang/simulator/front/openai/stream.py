"""Streamed OpenAI chunks of ``/v1/chat/completions`` and ``/v1/completions``, as 0.5.23 sends them.

Per choice (``index``; each has its own request id): chat sends a role chunk, then incremental
content chunks (``{"reasoning_content": null, "content": ...}``); with a reasoning parser, thoughts
go out as ``{"reasoning_content": ...}`` chunks; with a tool-call parser, the call goes out as
pydantic-style ``delta.tool_calls`` chunks: first ``{id, index, type, function: {name, arguments: ""}}``
then argument fragments with ``id`` and ``name`` null. Completions put ``finish_reason`` on their last
text chunk. Once every choice has finished, :class:`ChoiceGroup` sends chat's separate finish chunks,
the usage chunk (``stream_options.include_usage``) and ``data: [DONE]``.
Plain chunks are pre-serialised strings: the simulator must stream >100k tokens per CPU-second.
"""

from __future__ import annotations

from typing import Any

from pytest_sglang.simulator.front.openai.body import ChoiceOptions, Parts, finish, output_rows, parts, usage
from pytest_sglang.simulator.model import logprobs
from pytest_sglang.simulator.model.script import CONTENT, REASONING, TOOL_ARGS, TOOL_HEAD
from pytest_sglang.simulator.model.streams import DONE, dumps
from pytest_sglang.simulator.scheduling.request import Request

__all__ = ["ChoiceGroup", "OpenAIEmitter"]


class ChoiceGroup:
    """The choices of one streamed request, and the tail sent after the last of them finishes."""

    def __init__(
        self, *, chat: bool, model: str, created: int, include_usage: bool, cache_report: bool, n: int
    ) -> None:
        self.chat = chat
        self.model = model
        self.created = created
        self.include_usage = include_usage
        self.cache_report = cache_report
        self.n = n
        self.finished: list[tuple[int, Request, ChoiceOptions]] = []

    def head(self, rid: str) -> str:
        obj = "chat.completion.chunk" if self.chat else "text_completion"
        return f'data: {{"id":"{rid}","object":"{obj}","created":{self.created},"model":{dumps(self.model)}'

    def done(self, index: int, req: Request, opts: ChoiceOptions) -> None:
        self.finished.append((index, req, opts))
        if len(self.finished) < self.n:
            return
        last = req.rid  # 0.5.23 stamps the tail with the id of the last chunk it processed
        out: list[str] = []
        if self.chat:
            for i, r, o in sorted(self.finished, key=lambda e: e[0]):
                reason, matched = finish(r, parts(r, o.script), empty=o.empty_finish)
                out.append(
                    f'{self.head(last)},"choices":[{{"index":{i},"delta":{{"reasoning_content":null}},'
                    f'"logprobs":null,"finish_reason":{dumps(reason)},"matched_stop":{dumps(matched)}}}]}}\n\n'
                )
        if self.include_usage:
            u = usage([(r, o) for _, r, o in sorted(self.finished, key=lambda e: e[0])], cache_report=self.cache_report)
            if not self.chat:  # completions serialise the usage chunk with exclude_none
                u = {k: v for k, v in u.items() if v is not None}
            out.append(f'{self.head(last)},"choices":[],"usage":{dumps(u)}}}\n\n')
        out.append(DONE.decode())
        req.sink.push("".join(out).encode())


class OpenAIEmitter:
    """The chunks of one choice; called by the engine after each step (``done`` on the last)."""

    __slots__ = (
        "_head",
        "_named",
        "_null",
        "_role_sent",
        "_sent",
        "_suffix",
        "_tail",
        "_tokens",
        "cache_report",
        "chat",
        "continuous",
        "group",
        "index",
        "interval",
        "opts",
    )

    def __init__(
        self,
        req: Request,
        *,
        group: ChoiceGroup,
        index: int,
        opts: ChoiceOptions,
        continuous_usage: bool,
        cache_report: bool,
        interval: int,
    ) -> None:
        self.chat = group.chat
        self.index = index
        self.opts = opts
        self.group = group
        self.continuous = continuous_usage
        self.cache_report = cache_report
        self.interval = max(1, interval)
        self._head = f'{group.head(req.rid)},"choices":[{{"index":{index},'
        self._sent = 0  # characters of req.text already sent
        self._tokens = 0  # output tokens already sent
        self._role_sent = False
        # --sim-fault empty-finish-reason: "" where 0.5.23 sends null (sglang#3912)
        self._null = '""' if opts.empty_finish else "null"
        self._named = False
        # constant chunk parts, serialised once (the per-token path must stay cheap)
        self._suffix = ',"usage":null' if not self.chat else ""
        self._tail = f',"finish_reason":{self._null},"matched_stop":null}}]{self._suffix}}}\n\n'

    def _usage_suffix(self, req: Request) -> str:
        if self.continuous:
            return f',"usage":{dumps(usage([(req, self.opts)], cache_report=self.cache_report))}'
        return self._suffix

    def _logprobs(self, req: Request) -> str:
        if self.opts.top_logprobs is None or len(req.out_ids) <= self._tokens:
            return "null"
        rows = output_rows(req, self.opts, self._tokens)
        return dumps(logprobs.chat_logprobs(rows) if self.chat else logprobs.completion_logprobs(rows))

    def _content(self, req: Request, text: str, lp: str, key: str = "content") -> str:
        delta = (
            f'"reasoning_content":null,"content":{dumps(text)}'
            if key == "content"
            else f'"reasoning_content":{dumps(text)}'
        )
        return self._chunk(req, delta, lp)

    def _chunk(self, req: Request, delta: str, lp: str) -> str:
        if self.continuous:
            return (
                f'{self._head}"delta":{{{delta}}},"logprobs":{lp},"finish_reason":{self._null},'
                f'"matched_stop":null}}]{self._usage_suffix(req)}}}\n\n'
            )
        return f'{self._head}"delta":{{{delta}}},"logprobs":{lp}{self._tail}'

    def _tool(self, call: dict[str, Any]) -> str:
        # tool-call chunks are pydantic's model_dump_json: every delta key, and "usage": null
        return (
            f'{self._head}"delta":{{"role":null,"content":null,"reasoning_content":null,"tool_calls":[{dumps(call)}]}},'
            f'"logprobs":null,"finish_reason":{self._null},"matched_stop":null}}],"usage":null}}\n\n'
        )

    def _routed(self, req: Request, lp: str) -> list[str]:
        """Chunks for tokens since the last call, routed by channel (reasoning/tool parsers)."""
        script, pieces = self.opts.script, req.pieces or []
        assert script is not None
        out: list[str] = []
        k, end = self._tokens, len(req.out_ids)
        while k < end:
            channel, j = script.channel(k), k
            while j < end and script.channel(j) == channel:
                j += 1
            before = sum(len(p) for p in pieces[:k])
            # A matched stop string was cut from req.text: never stream past it.
            text = "".join(pieces[k:j])[: max(0, len(req.text) - before)]
            if channel in (CONTENT, REASONING) and text:
                out.append(self._content(req, text, lp, "content" if channel == CONTENT else "reasoning"))
                lp = "null"
            elif channel == TOOL_HEAD and not self._named and script.tool_calls:
                self._named = True
                spec = script.tool_calls[0]
                out.append(
                    self._tool(
                        {
                            "id": spec.call_id,
                            "index": 0,
                            "type": "function",
                            "function": {"name": spec.name, "arguments": ""},
                        }
                    )
                )
            elif channel == TOOL_ARGS and text:
                out.append(
                    self._tool(
                        {"id": None, "index": 0, "type": "function", "function": {"name": None, "arguments": text}}
                    )
                )
            k = j
        if lp != "null":
            # 0.5.23 with a parser sends the logprobs of a step that made no chunk (markup such as
            # <think>) alone, with an empty delta (serving_chat.py: "flush any leftover at the end").
            out.append(self._chunk(req, '"reasoning_content":null', lp))
        return out

    def __call__(self, req: Request, done: bool) -> None:
        if not done and len(req.out_ids) % self.interval:
            return
        out: list[str] = []
        if self.chat and not self._role_sent:
            self._role_sent = True
            out.append(
                f'{self._head}"delta":{{"reasoning_content":null,"role":"assistant","content":""}},'
                f'"logprobs":null,"finish_reason":{self._null},"matched_stop":null}}]}}\n\n'
            )
        lp = "null" if self.opts.top_logprobs is None else self._logprobs(req)
        script = self.opts.script
        if self.chat and script is not None and script.routed:
            out += self._routed(req, lp)
        else:
            delta, self._sent = req.text[self._sent :], len(req.text)
            if self.chat and delta:
                out.append(self._content(req, delta, lp))
            elif not self.chat:
                reason, matched = finish(req, Parts(req.text), empty=self.opts.empty_finish) if done else (None, None)
                shown = self._null if reason is None else dumps(reason)
                out.append(
                    f'{self._head}"text":{dumps(delta)},"logprobs":{lp},"finish_reason":{shown},'
                    f'"matched_stop":{dumps(matched)}}}]{self._usage_suffix(req)}}}\n\n'
                )
        self._tokens = len(req.out_ids)
        if out:
            req.sink.push("".join(out).encode())
        if done:
            self.group.done(self.index, req, self.opts)
