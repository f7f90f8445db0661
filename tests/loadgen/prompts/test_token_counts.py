"""Prompt tokens as the server counted them against those sent (issue 33 item 6), against the simulator.

The simulator's ``template-tokens:N`` fault makes every prompt N tokens longer than sent, as a chat
template applied twice would: the load is flagged and the throughput gate fails; the healthy twin passes.
"""

from __future__ import annotations

from typing import Any

import pytest

from loadgen.sim_model import MODEL, SHAPE
from pytest_sglang.errors import ConfigError
from pytest_sglang.gates.load.throughput import evaluate_throughput
from pytest_sglang.loadgen import LoadSpec, run_load
from pytest_sglang.loadgen.client.vocab import resolve_vocab, vocab_text
from pytest_sglang.loadgen.soak.run import SoakSpec, run_soak
from pytest_sglang.sockets import free_port
from tests.server.fakehttp import SERVER_INFO, fake_server, json_answer


def test_healthy_server_counts_exactly_the_ids_sent(sim_url: str) -> None:
    result = run_load(sim_url, LoadSpec(**SHAPE))
    tokens = result.prompt_tokens
    assert tokens["basis"] == "exact" and tokens["requests_compared"] == 16
    assert tokens["sent_prompt_tokens"] == tokens["server_prompt_tokens"] == 16 * 64
    assert tokens["difference"] == 0 and not tokens["flagged"]
    outcome = evaluate_throughput(result)
    assert outcome.passed, outcome.message()
    assert outcome.context["prompt tokens"] == (
        "server counted 1,024 (prompt_tokens), client sent 1,024 (+0, +0.0%; token ids sent)")


@pytest.mark.parametrize("api", ["native", "completions"])
def test_added_template_tokens_are_flagged_and_fail_the_gate(sim_factory: Any, api: str) -> None:
    sim = sim_factory(*MODEL, "--sim-fault", "template-tokens:16")
    result = run_load(sim.url, LoadSpec(**{**SHAPE, "api": api}))
    assert result.completed == 16, result.failure_examples()
    tokens = result.prompt_tokens
    assert tokens["sent_prompt_tokens"] == 16 * 64 and tokens["server_prompt_tokens"] == 16 * 80
    assert tokens["difference_pct"] == 25.0 and tokens["flagged"]
    outcome = evaluate_throughput(result)
    assert not outcome.passed
    check = outcome.failed[0]
    assert check.metric == "prompt tokens (server/sent)" and check.measured == "+25.0%"
    msg = outcome.message()
    assert "1,280 counted, 1,024 sent (token ids sent)" in msg  # the figures and where they came from
    assert "raise prompt_token_tolerance_pct=" in msg  # the fix
    assert "FLAGGED: beyond the 5% tolerance" in msg


def test_a_tolerance_wide_enough_passes_the_same_fault(sim_factory: Any) -> None:
    sim = sim_factory(*MODEL, "--sim-fault", "template-tokens:16")
    result = run_load(sim.url, LoadSpec(**{**SHAPE, "prompt_token_tolerance_pct": 30.0}))
    assert result.prompt_tokens["difference"] == 16 * 16 and not result.prompt_tokens["flagged"]
    assert evaluate_throughput(result).passed


def test_a_chat_load_is_reported_and_judged_only_against_a_tolerance_given(sim_factory: Any) -> None:
    # A chat load's words become the server's template plus its tokenizer's split (+200 % on the tiny real
    # model): a default tolerance would fail healthy servers, so the count is reported, not judged.
    sim = sim_factory(*MODEL, "--sim-fault", "template-tokens:16")
    result = run_load(sim.url, LoadSpec(**{**SHAPE, "api": "chat"}))
    tokens = result.prompt_tokens
    assert tokens["basis"] == "chat" and tokens["difference"] > 0
    assert tokens["tolerance_pct"] is None and not tokens["flagged"]
    outcome = evaluate_throughput(result)
    assert outcome.passed, outcome.message()
    assert "not judged: a chat load's count includes the server's chat template and tokenizer (give " \
           "prompt_token_tolerance_pct= to judge it)" in outcome.context["prompt tokens"]
    judged = run_load(sim.url, LoadSpec(**{**SHAPE, "api": "chat", "prompt_token_tolerance_pct": 5.0}))
    assert judged.prompt_tokens["flagged"] and not evaluate_throughput(judged).passed


@pytest.mark.parametrize("bad", [-1.0, 1000.5, float("nan"), float("inf"), True, "5"])
def test_bad_tolerance_is_refused_naming_it(bad: Any) -> None:
    with pytest.raises(ConfigError) as info:
        LoadSpec(prompt_token_tolerance_pct=bad)
    text = str(info.value)
    assert "prompt_token_tolerance_pct" in text and "from 0 to 1000" in text and "use 5.0" in text


# -- random-ids from the model's vocabulary, read from the server ---------------------------------------------------

def test_random_ids_come_from_the_vocabulary_the_server_reports(sim_factory: Any) -> None:
    sim = sim_factory(*MODEL, "--sim-vocab-size", "401")  # 0.5.23 dies on a prompt id >= 401
    result = run_load(sim.url, LoadSpec(**{**SHAPE, "input_len": 256}))
    assert result.completed == 16 and result.errors == {}, result.failure_examples()
    assert result.spec.vocab_size == 401
    assert result.workload["vocab"] == {
        "size": 401, "read": True, "source": f"POST /generate token_ids_logprob check ('valid range is [0, N)') of "
                                             f"{sim.url}"}
    assert "vocabulary: token ids drawn from [10, 401): vocabulary size from POST /generate" in \
        evaluate_throughput(result).message()
    assert sim.proc is not None and sim.proc.poll() is None  # alive


def test_a_vocabulary_larger_than_the_models_kills_it_as_on_0_5_23(sim_factory: Any) -> None:
    """The twin: the old fixed range [10, 1000) on a 401-token model (what vocab_size=1000 still asks for)."""
    sim = sim_factory(*MODEL, "--sim-vocab-size", "401")
    result = run_load(sim.url, LoadSpec(**{**SHAPE, "input_len": 256, "vocab_size": 1000, "warmup": 0}))
    assert result.completed == 0
    assert sim.proc is not None and sim.proc.wait(timeout=30) == 1
    assert "IndexError: index out of range in self" in sim.log_text()


@pytest.mark.parametrize("bad", [11, 0, -5, True, 401.0, "401", 10_000_001])
def test_bad_vocab_size_is_refused_naming_it(bad: Any) -> None:
    with pytest.raises(ConfigError) as info:
        LoadSpec(vocab_size=bad)
    text = str(info.value)
    assert "vocab_size" in text and "from 12 to 10,000,000" in text and "config.json vocab_size" in text


def test_a_soak_draws_from_the_servers_vocabulary_too(sim_factory: Any) -> None:
    sim = sim_factory("--enable-metrics", "--sim-vocab-size", "401")
    run = run_soak(sim.url, SoakSpec(2.0, concurrency=2, input_len=256, output_len=4, sample_interval_s=0.5))
    assert run.completed > 0 and not run.errors, run.errors
    assert sim.proc is not None and sim.proc.poll() is None


def test_a_vocabulary_not_read_is_said_with_the_fix() -> None:
    url = f"http://127.0.0.1:{free_port('127.0.0.1')}"  # nothing listens: no answer to read the range from
    spec, fact = resolve_vocab(url, LoadSpec(), None)
    assert spec.vocab_size == 1000 and fact["vocab"]["read"] is False
    text = vocab_text(fact["vocab"])
    assert text.startswith(f"NOT READ: {url} could not be asked: ConnectError: ") and "refused" in text
    assert "ids drawn from [10, 1,000)" in text and "Fix: give vocab_size=" in text
    given, fact = resolve_vocab(url, LoadSpec(vocab_size=401), None)  # given: nothing is read
    assert given.vocab_size == 401 and fact["vocab"]["source"] == "vocab_size= given"
    chat, fact = resolve_vocab(url, LoadSpec(api="chat"), None)  # words, not ids: nothing to read
    assert chat.vocab_size == 1000 and fact == {}


@pytest.mark.parametrize("version", ["0.4.10", "0.5.22", None, "dev"])
def test_the_out_of_range_id_goes_only_to_a_release_known_to_check_it(version: str | None) -> None:
    # An older server might index its table with the probe's id and die, as 0.5.23 does on a prompt's ids.
    info = {**SERVER_INFO, "version": version}
    with fake_server({"/server_info": lambda _: json_answer(info)}) as fake:
        spec, fact = resolve_vocab(fake.url, LoadSpec(), None)
    assert spec.vocab_size == 1000 and fact["vocab"]["read"] is False
    assert fact["vocab"]["source"] == (f"not read: GET {fake.url}/server_info gave no SGLang release from 0.5.23 on "
                                       f"(version {version!r}), whose token_ids_logprob check names the vocabulary")
    assert [path for path, _ in fake.hits] == ["/server_info"]  # no POST /generate was sent (its answer: 501)


def test_counts_add_up_over_client_processes(sim_factory: Any) -> None:
    sim = sim_factory(*MODEL, "--sim-fault", "template-tokens:16", "--sim-vocab-size", "401")
    result = run_load(sim.url, LoadSpec(**{**SHAPE, "processes": 2}))
    assert result.completed == 16, result.failure_examples()
    assert result.spec.vocab_size == 401
    tokens = result.prompt_tokens
    assert (tokens["sent_prompt_tokens"], tokens["server_prompt_tokens"], tokens["requests_compared"]) == (
        16 * 64, 16 * 80, 16)


def test_an_image_loads_count_is_said_to_hold_the_images_and_never_flagged() -> None:
    # The server's prompt_tokens of an image load hold each image's tokens (thousands): read as a template's
    # extra tokens it showed "+3787.5 %, estimate"; it is reported as what it is, never flagged.
    from pytest_sglang.loadgen.prompts.tokencount import token_report, token_text

    spec = LoadSpec(requests=4, dataset="image:count=2,resolution=360p", api="chat", prompt_token_tolerance_pct=5.0)
    report = token_report(spec, [400, 15_550, 4, 0])
    assert report["basis"] == "images" and not report["flagged"], report
    assert "images' tokens" in token_text(report)
