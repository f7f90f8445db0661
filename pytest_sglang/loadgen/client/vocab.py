"""The model's vocabulary size, read from the server, so random-ids prompts hold only ids the model has.

SGLang 0.5.23 does not report the vocabulary in ``/server_info`` or ``/model_info``, and it does not check a
prompt's ``input_ids``: an id past the embedding table kills the server (a 401-token model died on
random-ids drawn from [10, 1000)). It does check ``token_ids_logprob`` (``TokenizerManager.
_validate_token_ids_logprob``) and answers an id outside the vocabulary with a 400 naming the range,
``... valid range is [0, N).``, before anything is scheduled: that N is read here, with one request.
"""

from __future__ import annotations

import re
from typing import Any

import httpx

from pytest_sglang.errors import LoadGenError, ServerUnavailable
from pytest_sglang.loadgen.client.http import describe_exc
from pytest_sglang.loadgen.measure.record import one_line
from pytest_sglang.loadgen.shape.spec import DEFAULT_VOCAB_SIZE, LoadSpec, dataset_parts
from pytest_sglang.loadgen.workloads.forms import TRACE_KINDS
from pytest_sglang.server.client import make_client

#: An id no model has: the server's check names its vocabulary's range in the answer.
PROBE_ID = 2**31 - 1
READ_TIMEOUT_S = 10.0
_RANGE = re.compile(r"valid range is \[0, (\d+)\)")
_PROBE = {"input_ids": [10], "sampling_params": {"max_new_tokens": 1, "temperature": 0.0},
          "return_logprob": True, "token_ids_logprob": [PROBE_ID]}
SOURCE = "POST /generate token_ids_logprob check ('valid range is [0, N)')"
#: The first release whose check was read (TokenizerManager._validate_token_ids_logprob in 0.5.23).
CHECKED_SINCE = (0, 5, 23)
#: /server_info is about 37 KB on 0.5.23.
MAX_INFO_BYTES = 1024 * 1024


def needs_vocab(spec: LoadSpec) -> bool:
    """Whether ``spec`` sends token ids it draws itself (random-ids, traces; not as chat text)."""
    return spec.api != "chat" and dataset_parts(spec.dataset)[0] in ("random-ids", *TRACE_KINDS)


def _checked_release(version: object) -> bool:
    """Whether ``version`` (``/server_info``) is a release known to check ``token_ids_logprob`` (0.5.23 on)."""
    found = re.match(r"(\d+)\.(\d+)\.(\d+)", version) if isinstance(version, str) else None
    return found is not None and tuple(map(int, found.groups())) >= CHECKED_SINCE


def read_vocab_size(url: str, api_key: str | None) -> tuple[int | None, str]:
    """(the vocabulary size, where it came from), or (None, why it could not be read).

    The out-of-range id is sent only to a server whose ``/server_info`` names a release that checks it: an
    older server might index past its table with it, and die, as it does on a prompt's ids.
    """
    try:
        with make_client(url, api_key, timeout=READ_TIMEOUT_S, max_body_bytes=MAX_INFO_BYTES) as client:
            info = client.get("/server_info")
            version = info.json().get("version") if info.status_code == 200 else None
            if not _checked_release(version):
                return None, (f"not read: GET {url}/server_info gave no SGLang release from "
                              f"{'.'.join(map(str, CHECKED_SINCE))} on (version {version!r}), whose "
                              "token_ids_logprob check names the vocabulary")
            resp = client.post("/generate", json=_PROBE)
            text = resp.text
    except (httpx.HTTPError, ServerUnavailable, ValueError, AttributeError) as exc:
        return None, f"{url} could not be asked: {describe_exc(exc) if isinstance(exc, httpx.HTTPError) else exc}"
    found = _RANGE.search(text)
    if resp.status_code == 400 and found:
        return int(found.group(1)), f"{SOURCE} of {url}"
    return None, (f"POST {url}/generate with token_ids_logprob=[{PROBE_ID}] answered {resp.status_code} without "
                  f"SGLang 0.5.23's 'valid range is [0, N)': {one_line(text)[:120]}")


def resolve_vocab(url: str, spec: LoadSpec, api_key: str | None) -> tuple[LoadSpec, dict[str, Any]]:
    """``spec`` with its ``vocab_size`` settled, and the workload fact saying where it came from."""
    if spec.vocab_size is not None:
        return spec, ({"vocab": {"size": spec.vocab_size, "source": "vocab_size= given", "read": True}}
                      if needs_vocab(spec) else {})
    if not needs_vocab(spec):
        return spec.replace(vocab_size=DEFAULT_VOCAB_SIZE), {}
    size, source = read_vocab_size(url, api_key)
    if size is None:
        return spec.replace(vocab_size=DEFAULT_VOCAB_SIZE), {
            "vocab": {"size": DEFAULT_VOCAB_SIZE, "source": source, "read": False}}
    if size <= 11:  # ids are drawn from [10, size): nothing to draw from
        raise LoadGenError(f"the server at {url} reports a vocabulary of {size} tokens ({source}): random-ids "
                           "prompts draw from ids [10, vocab_size). Fix: use a text dataset (dataset='jsonl:PATH')")
    return spec.replace(vocab_size=size), {"vocab": {"size": size, "source": source, "read": True}}


def vocab_text(fact: dict[str, Any]) -> str:
    """``ids from [10, 401): vocabulary of 401 read from ...`` or, when it was not read, the warning."""
    if fact.get("read"):
        return f"token ids drawn from [10, {fact['size']:,}): vocabulary size from {fact['source']}"
    return (f"NOT READ: {fact['source']}; ids drawn from [10, {fact['size']:,}), which kills a 0.5.23 server whose "
            "model has fewer tokens. Fix: give vocab_size= (the model's config.json vocab_size)")
