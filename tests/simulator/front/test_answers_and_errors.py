"""Correct arithmetic answers (what an accuracy gate scores) and SGLang 0.5.23's 4xx for bad requests."""

from __future__ import annotations

import json
import random
import re

import httpx

from pytest_sglang.simulator.model.arithmetic import last_question
from tests.conftest import SimFactory
from tests.simulator.sse import SHOTS, disconnect_mid_stream, last_number


def test_questions_are_found_in_few_shot_prompts() -> None:
    q = last_question(SHOTS + "Question: What is (12 - 4) * 3?\nAnswer:")
    assert q is not None and q.expression == "(12 - 4) * 3" and q.value == 24
    assert last_question("What is seven plus five?") is None
    assert last_question("what is 9 divided by 3 plus 2?") is not None
    assert last_question("What is the capital of France?") is None


def test_arithmetic_answers_are_right_on_every_route(sim_factory: SimFactory) -> None:
    sim = sim_factory()
    rng = random.Random(7)
    questions = [(rng.randint(1, 99), rng.choice("+-*"), rng.randint(1, 99)) for _ in range(20)]
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        for a, op, b in questions:
            want = str(eval(f"{a} {op} {b}"))
            prompt = f"{SHOTS}Question: What is {a} {op} {b}?\nAnswer:"
            native = c.post(
                "/generate",
                json={
                    "text": prompt,
                    "sampling_params": {"max_new_tokens": 64, "temperature": 0, "stop": ["Question"]},
                },
            ).json()["text"]
            compl = c.post("/v1/completions", json={"prompt": prompt, "max_tokens": 64, "temperature": 0}).json()[
                "choices"
            ][0]["text"]
            reply = c.post(
                "/v1/chat/completions", json={"messages": [{"role": "user", "content": prompt}], "temperature": 0}
            ).json()["choices"][0]["message"]
            for text in (native, compl, reply["content"]):
                assert last_number(text) == want and text.endswith(f"#### {want}")


def test_prompt_longer_than_the_context_is_a_400(sim_factory: SimFactory) -> None:
    sim = sim_factory("--context-length", "256")
    long = " ".join(["word"] * 300)
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        chat = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": long}], "stream": True})
        compl = c.post("/v1/completions", json={"prompt": long})
        native = c.post("/generate", json={"text": long})
        over = c.post("/v1/completions", json={"prompt": "hello there", "max_tokens": 255})
    for r in (chat, compl):
        assert r.status_code == 400 and r.json()["type"] == "BadRequestError"
        assert re.fullmatch(
            r"The input \(\d+ tokens\) is longer than the model's context length \(256 tokens\)\.", r.json()["message"]
        )
    assert native.status_code == 400 and "longer than the model's context length (256 tokens)" in native.text
    assert re.match(
        r"Requested token count exceeds the model's maximum context length of 256 tokens\. You requested a "
        r"total of (\d+) tokens: (\d+) tokens from the input messages and 255 tokens for the completion\.",
        over.json()["message"],
    )


def test_malformed_requests_get_sglang_4xx(sim_factory: SimFactory) -> None:
    sim = sim_factory()
    msg = [{"role": "user", "content": "hi"}]
    with httpx.Client(base_url=sim.url, timeout=30) as c:
        bad_json = c.post(
            "/v1/chat/completions", content=b'{"messages": [', headers={"content-type": "application/json"}
        )
        bad_native = c.post("/generate", content=b'{"text": ', headers={"content-type": "application/json"})
        negative = c.post("/v1/chat/completions", json={"messages": msg, "max_tokens": -1})
        zero = c.post("/v1/completions", json={"prompt": "hi", "max_tokens": 0})
        native_neg = c.post("/generate", json={"text": "hi", "sampling_params": {"max_new_tokens": -1}})
        no_n = c.post("/v1/chat/completions", json={"messages": msg, "n": 0})
        unknown_model = c.post("/v1/chat/completions", json={"model": "nope", "messages": msg, "max_tokens": 2})
    for r, path, pos in ((bad_json, "/v1/chat/completions", 14), (bad_native, "/generate", 9)):
        assert r.status_code == 400 and r.json()["type"] == "Bad Request"
        assert (
            r.json()["message"].startswith(
                f"1 validation error:\n  {{'type': 'json_invalid', 'loc': ('body', {pos}), 'msg': 'JSON decode error'"
            )
            and f"POST {path}" in r.json()["message"]
        )
    assert (negative.status_code, negative.json()["message"]) == (400, "max_new_tokens must be at least 0, got -1.")
    assert zero.status_code == 400 and "max_tokens must be positive" in zero.json()["message"]
    assert native_neg.json() == {"error": {"message": "max_new_tokens must be at least 0, got -1."}}
    assert no_n.status_code == 400 and no_n.json()["message"] == "range() arg 3 must not be zero"
    # 0.5.23 does not check `model`: any name is served and echoed (recorded on the real server)
    assert unknown_model.status_code == 200 and unknown_model.json()["model"] == "nope"


def test_a_client_that_disconnects_frees_its_slot(sim_factory: SimFactory) -> None:
    running = disconnect_mid_stream(sim_factory("--enable-metrics").url)
    assert running == 0.0


def test_a_lora_adapter_is_refused_as_sglang_refuses_it(sim_factory: SimFactory) -> None:
    msg = [{"role": "user", "content": "hi"}]
    no_lora = sim_factory()
    with httpx.Client(base_url=no_lora.url, timeout=30) as c:
        model = c.get("/v1/models").json()["data"][0]["id"]
        chat = c.post("/v1/chat/completions", json={"model": f"{model}:mine", "messages": msg, "max_tokens": 2})
        stream = c.post("/v1/completions", json={"model": "x:mine", "prompt": "hi", "max_tokens": 2, "stream": True})
        native = c.post("/generate", json={"text": "hi", "lora_path": "mine"})
        native_stream = c.post("/generate", json={"text": "hi", "lora_path": ["mine"], "stream": True})
        served = c.post("/v1/chat/completions", json={"model": model, "messages": msg, "max_tokens": 2})
    refusal = ("LoRA adapter 'mine' was requested, but LoRA is not enabled. Please launch the server with "
               "--enable-lora flag and preload adapters using --lora-paths or /load_lora_adapter endpoint.")
    # OpenAI routes wait for the first chunk before answering, so a stream is refused with a 400 too
    for r in (chat, stream):
        assert (r.status_code, r.json()["type"], r.json()["message"]) == (400, "BadRequestError", refusal)
    assert native.status_code == 400 and native.json() == {"error": {"message": refusal}}
    assert native_stream.status_code == 200  # the native stream reports it in-band, then [DONE]
    event = json.loads(native_stream.text.split("\n\n")[0].removeprefix("data: "))
    assert event["error"]["message"] == refusal and native_stream.text.endswith("data: [DONE]\n\n")
    assert served.status_code == 200

    with_lora = sim_factory("--lora-paths", "mine=/adapters/mine")
    with httpx.Client(base_url=with_lora.url, timeout=30) as c:
        known = c.post("/v1/chat/completions", json={"model": "m:mine", "messages": msg, "max_tokens": 2})
        unknown = c.post("/generate", json={"text": "hi", "lora_path": "other"})
    assert known.status_code == 200
    assert unknown.json()["error"]["message"] == ("Got LoRA adapter that has never been loaded: other\n"
                                                  "All loaded adapters: dict_keys(['mine']).")
