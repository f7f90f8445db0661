"""Request bodies per API: SGLang bench_serving's.

Plus ``stream_options.include_usage`` for the OpenAI-compatible APIs so that the server reports its
true token count.
"""

from __future__ import annotations

from typing import Any

from pytest_sglang.loadgen.prompts.datasets import Prompt, PromptValue
from pytest_sglang.loadgen.shape.spec import LoadSpec
from pytest_sglang.loadgen.workloads.imageset import image_shape

PATHS = {"native": "/generate", "completions": "/v1/completions", "chat": "/v1/chat/completions"}


def request_body(spec: LoadSpec, prompt: Prompt, output_len: int | None = None) -> dict[str, Any]:
    """The streaming request for ``spec.api`` (bench_serving's bodies, plus usage for OpenAI APIs)."""
    out = prompt.output_len if output_len is None else output_len
    p = prompt.prompt
    if spec.api == "native":
        key = "input_ids" if isinstance(p, list) and p and isinstance(p[0], int) else "text"
        body: dict[str, Any] = {
            key: p if key == "input_ids" else _as_text(p),
            "stream": True,
            "sampling_params": {
                "max_new_tokens": out,
                "temperature": spec.temperature,
                "ignore_eos": spec.ignore_eos,
            },
        }
        if prompt.images:  # the placeholders stand where bench_serving's processor chat template puts them
            body["text"] = image_token(spec) * len(prompt.images) + _as_text(p)
            body["image_data"] = list(prompt.images)
        return body
    # include_usage makes the server report the true token count (bench_serving falls back to
    # the requested length, which would hide a short answer).
    common = {
        "model": spec.model,
        "temperature": spec.temperature,
        "ignore_eos": spec.ignore_eos,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if spec.api == "completions":
        prompt_value = p if isinstance(p, list) and p and isinstance(p[0], int) else _as_text(p)
        return {"prompt": prompt_value, "max_tokens": out, **common}
    messages = (
        p
        if isinstance(p, list) and p and isinstance(p[0], dict)
        else [{"role": "user", "content": _content(prompt)}]
    )
    return {"messages": messages, "max_completion_tokens": out, **common}


def _content(prompt: Prompt) -> str | list[dict[str, Any]]:
    """The user message: its text, or bench_serving's image_url parts followed by the text part."""
    if not prompt.images:
        return _as_text(prompt.prompt)
    parts: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": url}} for url in prompt.images]
    return [*parts, {"type": "text", "text": _as_text(prompt.prompt)}]


def image_token(spec: LoadSpec) -> str:
    """The image placeholder of ``spec``'s image dataset (LoadSpec refuses a native image load without one)."""
    return image_shape(spec.dataset).image_token or ""


def _as_text(p: PromptValue) -> str:
    if isinstance(p, str):
        return p
    if p and isinstance(p[0], dict):
        return "\n".join(str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in p)
    return " ".join(str(i) for i in p)
