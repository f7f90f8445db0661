"""Which tokens have text of their own, asked of the server's own tokenizer as SGLang decodes a stream.

SGLang 0.5.23's detokenizer decodes a request's output with the request's ``skip_special_tokens``
(default True, ``protocol.py``), so a special token (Llama-3's ``<|eot_id|>``, ``<|start_header_id|>``)
adds no text and its streamed step sends no chunk (``serving_chat.py``: an empty-delta step has no
chunk). The logprobs' token strings are decoded without that flag (``tokenizer_manager.py``
``detokenize_logprob_tokens``), so they show the token's name and cannot tell. Which tokens are
special is the tokenizer's to say: ``/v1/detokenize`` decodes token ids with the server's tokenizer and
the flag given, and the unstreamed chat answer names its token ids (``return_token_ids``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pytest_sglang.correctness.context import CheckContext
from pytest_sglang.correctness.payload import as_dict, as_list

#: SGLang's default for ``skip_special_tokens`` (``ChatCompletionRequest``, ``CompletionRequest``).
SKIP_SPECIAL_TOKENS_DEFAULT = True


@dataclass(frozen=True)
class AloneDecodes:
    """Token index -> its text decoded alone by the server; ``unknown`` says why some are missing."""

    texts: dict[int, str] = field(default_factory=dict)
    unknown: str = ""


def skip_special_tokens(body: dict[str, object]) -> bool:
    """The request's own ``skip_special_tokens``, else SGLang's default."""
    value = body.get("skip_special_tokens", SKIP_SPECIAL_TOKENS_DEFAULT)
    return value if isinstance(value, bool) else SKIP_SPECIAL_TOKENS_DEFAULT


def response_token_ids(choice: object) -> list[int] | None:
    """The output token ids of an unstreamed chat choice asked with ``return_token_ids`` (None if absent)."""
    ids = as_list(as_dict(choice).get("response_token_ids"))
    return ids if ids and all(isinstance(t, int) and not isinstance(t, bool) for t in ids) else None


def decode_alone(ctx: CheckContext, wanted: dict[int, int], *, skip: bool) -> AloneDecodes:
    """Decode each token id of ``wanted`` (index -> id) alone, as the server's detokenizer does."""
    if not wanted:
        return AloneDecodes()
    indices = sorted(wanted)
    body = {"model": ctx.features.model, "tokens": [[wanted[k]] for k in indices], "skip_special_tokens": skip}
    reply = ctx.post("/v1/detokenize", body)
    texts = as_list(reply.obj().get("text"))
    if reply.status != 200 or len(texts) != len(indices) or not all(isinstance(t, str) for t in texts):
        return AloneDecodes(unknown=f"POST /v1/detokenize gave {reply.describe()[:200]}")
    return AloneDecodes(dict(zip(indices, texts, strict=True)))


def decode_lost(ctx: CheckContext, lost: Sequence[int], ids: list[int] | None, *, skip: bool) -> AloneDecodes:
    """The alone-decodes of the ``lost`` token indices, given the answer's token ids."""
    if not lost:
        return AloneDecodes()
    if ids is None:
        return AloneDecodes(unknown="the unstreamed answer gave no response_token_ids")
    if any(k >= len(ids) for k in lost):
        return AloneDecodes(unknown=f"the unstreamed answer gave {len(ids)} token ids for more logprob entries")
    return decode_alone(ctx, {k: ids[k] for k in lost}, skip=skip)
