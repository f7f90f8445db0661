# Near 330 lines: the image checks share the colour judge and the control question; apart they would import each other.
"""Images, on a vision-language server: inputs accepted on both routes, counted, seen, refused cleanly.

Every image is generated here (:mod:`pytest_sglang.images`) and sent inline as a ``data:`` URL: no
check fetches anything. The server says whether its model sees images (``/model_info``
``has_image_understanding``, as 0.5.23's own warmup reads it); on a text-only model each check is
skipped with that reason. Where the served model's processor is one SGLang 0.5.23 ships that
:mod:`pytest_sglang.sglang.vision` reproduces (Kimi-K2.5, Qwen2-VL), image tokens are checked
against its arithmetic and native ``/generate`` text carries its placeholder; otherwise those
checks say why they are skipped.

What the model is asked is one a real VLM answers reliably: the dominant colour of solid images,
named from six colours; an answer is right when the colour words it contains are the expected ones,
in order (a text-only answer, or one that ignored the image, names none or the wrong ones).

Whether the model can do it at all is asked when an answer is wrong: the same question and judging
in plain text, the colour stated in it (:func:`judging_control`). A model that cannot name a colour
it is told (dummy weights: 0.5.23's real tier) cannot be judged on an image either: the check then
skips with "cannot judge" and the model's answers, never a silent pass, and its other findings
(status, counts, agreement) still fail it.
"""

from __future__ import annotations

import base64
import re
import statistics
import uuid
from dataclasses import dataclass, field
from typing import Any

from pytest_sglang import images
from pytest_sglang.correctness.context import ROUTES, CheckContext
from pytest_sglang.correctness.http import Reply
from pytest_sglang.correctness.result import CheckReport, Unsupported, excerpt
from pytest_sglang.sglang.vision import Processor, processor_for

#: Resolutions whose token counts are compared with the processor's (W x H; none a multiple of 28).
TOKEN_RESOLUTIONS = ((100, 60), (333, 500), (640, 480), (1280, 720), (1000, 1500))
_BASE = (56, 56)  # the reference image the others are counted against (cancels the template's tokens)
#: Enough for "The dominant colours are blue, yellow and green." without thinking.
_ANSWER_TOKENS = 48
_COLOUR_WORDS = re.compile(r"\b(" + "|".join(images.COLOURS) + r")\b", re.IGNORECASE)
#: Sent with every chat: thinking models (Kimi-K2.5) answer directly; other templates ignore it.
_NO_THINKING = {"thinking": False, "enable_thinking": False}


@dataclass(frozen=True)
class Vision:
    """The served model as ``/model_info`` describes it."""

    model_path: str
    model_type: str
    processor: Processor | None

    def need_processor(self, what: str) -> Processor:
        if self.processor is None:
            raise Unsupported(f"{what} needs the served model's image processor, and model_type "
                              f"{self.model_type!r} ({self.model_path}) is not one pytest-sglang reproduces "
                              "(Kimi-K2.5, Qwen2-VL)")
        return self.processor


def vision_of(ctx: CheckContext) -> Vision:
    """The server's model, if it sees images (Unsupported with the reason otherwise)."""
    reply = ctx.get("/model_info")
    info = reply.obj() if reply.status == 200 else {}
    if not info:
        raise Unsupported(f"GET /model_info: {reply.describe()}: whether the model sees images is unknown")
    if info.get("has_image_understanding") is not True:
        raise Unsupported(f"the served model ({info.get('model_path')}) has no image understanding "
                          "(/model_info has_image_understanding is false): image checks need a vision-language model")
    path, kind = str(info.get("model_path") or ""), str(info.get("model_type") or "")
    return Vision(path, kind, processor_for(path, kind))


def colour_words(text: str) -> list[str]:
    """The palette colours named in ``text``, in order."""
    return [m.lower() for m in _COLOUR_WORDS.findall(text)]


def _question(count: int) -> str:
    palette = ", ".join(images.COLOURS)
    if count == 1:
        return f"What is the dominant colour of this image? Answer with one word from: {palette}."
    return (f"For each of the {count} images, in order, name its dominant colour with one word from: {palette}. "
            "Answer with the words only, separated by commas.")


def _url(colour: str, width: int = 96, height: int = 64, fmt: str = "png") -> str:
    return images.data_url(images.solid_image(colour, width, height, fmt), fmt)


def chat_body(ctx: CheckContext, urls: list[str], text: str, **extra: object) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": u}} for u in urls]
    parts.append({"type": "text", "text": text})
    return {"model": ctx.features.model, "messages": [{"role": "user", "content": parts}],
            "max_tokens": max(ctx.settings.max_tokens, _ANSWER_TOKENS), "temperature": 0,
            "chat_template_kwargs": _NO_THINKING, **extra}


def _content(reply: Reply) -> str | None:
    try:
        text = reply.obj()["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    return text if isinstance(text, str) else None


def _prompt_tokens(reply: Reply) -> int | None:
    usage = reply.obj().get("usage") if reply.status == 200 else None
    value = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return value if isinstance(value, int) else None


#: The text-only control's colours (two: one lucky answer is not a model that can do it).
CONTROL_COLOURS = ("red", "green")


def control_question(colour: str) -> str:
    """The control: the image question's form and palette, the colour stated in the text (no image word)."""
    return (f"The colour of the square is {colour}. What is the colour of the square? "
            f"Answer with one word from: {', '.join(images.COLOURS)}.")


def judging_control(ctx: CheckContext) -> str | None:
    """None when the model names a colour stated in plain text; else why its image answers cannot be judged."""
    for colour in CONTROL_COLOURS:
        reply = ctx.post(ROUTES["chat"], chat_body(ctx, [], control_question(colour)))
        text = _content(reply) if reply.status == 200 else None
        if text is None:
            return f"the text-only control (the colour stated in the text) got {reply.describe()}"
        if colour_words(text) != [colour]:
            return (f"cannot judge the answer with this model: asked in text alone \"The colour of the square is "
                    f"{colour}...\", it answered {excerpt(text, 120)} (a model that cannot name a colour it is told "
                    "cannot show that it saw one)")
    return None


@dataclass
class Judge:
    """Judges colour answers; a wrong one is a problem only if the model passes the text-only control."""

    ctx: CheckContext
    report: CheckReport
    unjudged: list[str] = field(default_factory=list)
    _control: str | None = None
    _asked: bool = False

    def __call__(self, what: str, text: str | None, expected: list[str]) -> None:
        if not self.report.expect(text is not None, f"{what}: no answer text"):
            return
        assert text is not None
        said = colour_words(text)
        if said == expected:
            return
        problem = (f"{what}: expected the colour(s) {', '.join(expected)}, the answer names "
                   f"{', '.join(said) or 'none'}: {excerpt(text, 200)}")
        if not self._asked:
            self._control, self._asked = judging_control(self.ctx), True
        if self._control is None:
            self.report.problems.append(problem)
        else:
            self.unjudged.append(f"{what} answered {excerpt(text, 80)}")

    def verdict(self) -> CheckReport:
        """The report; a "cannot judge" skip (Unsupported) when nothing else was wrong and an answer was unjudged."""
        if self.unjudged:
            self.report.figures["answers judged"] = f"no: {self._control}"
            if self.report.ok:
                raise Unsupported(f"{self.report.name}: served, but {self._control}; unjudged: "
                                  + "; ".join(self.unjudged))
        return self.report


#: One image, then several in one request (distinct colours, PNG and JPEG, different sizes).
CASES = {1: [("red", "png", 96, 64)], 3: [("blue", "jpeg", 128, 96), ("yellow", "png", 64, 64),
                                          ("green", "jpeg", 200, 120)]}


def check_image_chat(ctx: CheckContext, count: int) -> CheckReport:
    """OpenAI chat with ``count`` image_url parts (data: URLs): 200, and the answer names their colours."""
    vision_of(ctx)
    report = CheckReport(f"chat with {count} image(s)")
    judge = Judge(ctx, report)
    case = CASES[count]
    urls = [_url(colour, w, h, fmt) for colour, fmt, w, h in case]
    reply = ctx.post(ROUTES["chat"], chat_body(ctx, urls, _question(count)))
    if report.expect(reply.status == 200, f"chat with {count} image(s): {reply.describe()}"):
        judge(f"chat with {count} image(s)", _content(reply), [c for c, *_ in case])
        report.figures["prompt_tokens"] = _prompt_tokens(reply) or 0
    return judge.verdict()


def check_image_stream_agrees(ctx: CheckContext) -> CheckReport:
    """The same image request streamed and not: the same greedy text and the same prompt_tokens."""
    vision_of(ctx)
    report = CheckReport("image request streamed and not")
    judge = Judge(ctx, report)
    urls = [_url(colour, w, h, fmt) for colour, fmt, w, h in CASES[3]]
    body = chat_body(ctx, urls, _question(3))
    whole = ctx.post(ROUTES["chat"], body)
    streamed = ctx.stream(ROUTES["chat"], {**body, "stream_options": {"include_usage": True}})
    if not (report.expect(whole.status == 200, f"non-streamed: {whole.describe()}")
            and report.expect(streamed.status == 200 and streamed.done, f"streamed: {streamed.describe()}")):
        return report
    text = "".join(str((c.get("delta") or {}).get("content") or "")
                   for e in streamed.events for c in e.get("choices") or [])
    usage = [e["usage"] for e in streamed.events if isinstance(e.get("usage"), dict)]
    report.expect(text == _content(whole), f"streamed text {excerpt(text, 120)!r} differs from the non-streamed "
                                           f"{excerpt(_content(whole), 120)!r}")
    report.expect(bool(usage) and usage[-1].get("prompt_tokens") == _prompt_tokens(whole),
                  f"streamed prompt_tokens {usage[-1].get('prompt_tokens') if usage else None} differ from the "
                  f"non-streamed {_prompt_tokens(whole)}")
    judge("streamed", text, [c for c, *_ in CASES[3]])
    return judge.verdict()


def native_body(ctx: CheckContext, processor: Processor, urls: list[str], question: str) -> dict[str, Any]:
    """A /generate request whose text carries one placeholder per image (the chat template's form)."""
    text = processor.placeholder * len(urls) + "\n" + question + "\nAnswer:"
    return {"text": text, "image_data": urls[0] if len(urls) == 1 else urls,
            "sampling_params": {"max_new_tokens": max(ctx.settings.max_tokens, _ANSWER_TOKENS), "temperature": 0}}


def check_native_images(ctx: CheckContext) -> CheckReport:
    """Native /generate with ``image_data`` (one string, then a list): 200 and the colours named."""
    processor = vision_of(ctx).need_processor("/generate with image_data (its text carries a placeholder per image)")
    report = CheckReport("/generate with image_data")
    judge = Judge(ctx, report)
    for count, case in CASES.items():
        urls = [_url(colour, w, h, fmt) for colour, fmt, w, h in case]
        reply = ctx.post("/generate", native_body(ctx, processor, urls, _question(count)))
        what = f"/generate with {count} image(s)"
        if report.expect(reply.status == 200, f"{what}: {reply.describe()}"):
            text = reply.obj().get("text")
            judge(what, text if isinstance(text, str) else None, [c for c, *_ in case])
    return judge.verdict()


def check_image_tokens(ctx: CheckContext) -> CheckReport:
    """usage.prompt_tokens grows by the processor's image tokens, at several resolutions."""
    processor = vision_of(ctx).need_processor("counting image tokens")
    report = CheckReport(f"image tokens ({processor.name} arithmetic)")
    question = "Describe the image in one word."

    def counted(width: int, height: int) -> int | None:
        url = _url("white", width, height)
        reply = ctx.post(ROUTES["chat"], chat_body(ctx, [url], question, max_tokens=1))
        report.expect(reply.status == 200, f"{width}x{height}: {reply.describe()}")
        return _prompt_tokens(reply)

    base = counted(*_BASE)
    no_image = ctx.post(ROUTES["chat"], {**chat_body(ctx, [], question, max_tokens=1)})
    plain = _prompt_tokens(no_image)
    expected_base = processor.grid(*_BASE).tokens
    if base is not None and plain is not None:
        report.expect(base - plain >= expected_base, f"an image of {_BASE[0]}x{_BASE[1]} adds {base - plain} prompt "
                                                     f"tokens, fewer than its {expected_base} image tokens")
    for width, height in TOKEN_RESOLUTIONS:
        got = counted(width, height)
        if got is None or base is None:
            continue
        want = processor.grid(width, height).tokens - expected_base
        report.figures[f"{width}x{height} image tokens"] = got - base + expected_base
        report.expect(got - base == want, f"{width}x{height}: prompt_tokens {got - base:+d} against a "
                                          f"{_BASE[0]}x{_BASE[1]} image, the {processor.name} processor counts "
                                          f"{want:+d} ({processor.grid(width, height).tokens} image tokens)")
    return report


#: Images a server must refuse with a 4xx and a message: (what, data URL).
BAD_IMAGES = (
    ("corrupt PNG", images.data_url(images.corrupt_png(), "png")),
    ("unsupported format (SVG)", "data:image/svg+xml;base64," + base64.b64encode(images.unsupported_image()).decode()),
    ("oversize image (400 MP)", images.data_url(images.oversize_png(), "png")),
)


def check_bad_images(ctx: CheckContext) -> CheckReport:
    """A corrupt, an unsupported and an oversize image each get a 4xx with a message, not a 500 or a hang."""
    vision = vision_of(ctx)
    report = CheckReport("bad images refused")
    for what, url in BAD_IMAGES:
        replies = [("chat", ctx.post(ROUTES["chat"], chat_body(ctx, [url], _question(1), max_tokens=4)))]
        if vision.processor is not None:
            replies.append(("/generate", ctx.post("/generate", native_body(ctx, vision.processor, [url], "?"))))
        for route, reply in replies:
            where = f"{what} on {route}"
            if reply.status is None:
                report.problems.append(f"{where}: {reply.failure} (a hang, not an error answer)")
                continue
            if report.expect(400 <= reply.status < 500, f"{where}: expected a 4xx answer, got {reply.describe()}"):
                report.expect(len(reply.text.strip()) > 2, f"{where}: the {reply.status} carries no message")
                report.figures[f"{where} s"] = round(reply.elapsed_s, 3)
            elif reply.status >= 500:
                # 0.5.23's /generate raises out of the ASGI app on a bomb: its 500 goes out, then the kept-alive
                # connection is closed. Asked here, so the failed request is this check's, not the next one's.
                after = ctx.get("/model_info")
                report.expect(after.status is not None, f"{where}: after its {reply.status} the server dropped the "
                                                        f"connection: the next request on it got {after.describe()}")
    return report


def check_vision_share(ctx: CheckContext) -> CheckReport:
    """The vision encoder's share of a first token stays within ``max_vision_share``.

    A new image (never sent before) against the same image again behind a new prompt prefix: the
    second misses the prefix cache too, but its embedding is cached, so the difference is the encoder.
    Medians over three pairs; each request asks for one token, so its time is its first token's.
    """
    vision_of(ctx)
    bound = ctx.settings.max_vision_share
    report = CheckReport("vision encoder share of the first token")
    run = uuid.uuid4().int
    fresh: list[float] = []
    cached: list[float] = []
    for i in range(3):
        url = images.data_url(images.speckled_image("blue", 1280, 720, run + i), "png")
        for times in (fresh, cached):
            nonce = uuid.uuid4().hex[:12]  # a new prefix: nothing of the prompt is in the radix cache
            body = chat_body(ctx, [url], "Name the colour.", max_tokens=1)
            body["messages"].insert(0, {"role": "system", "content": f"Request {nonce}."})
            reply = ctx.post(ROUTES["chat"], body)
            if not report.expect(reply.status == 200, f"1280x720 image: {reply.describe()}"):
                return report
            times.append(reply.elapsed_s)
    new, again = statistics.median(fresh), statistics.median(cached)
    share = max(0.0, new - again) / new if new > 0 else 0.0
    report.figures.update({"first token, new image s": round(new, 3), "first token, cached image s": round(again, 3),
                           "vision share": round(share, 3)})
    report.expect(share <= bound, f"the vision encoder takes {share:.0%} of the first token of a 1280x720 image "
                                  f"({new:.3f} s new, {again:.3f} s with its embedding cached), over max_vision_share "
                                  f"{bound:g} (--sglang-acceptance-max-vision-share)")
    return report
