"""The simulator's token-count faults and vocabulary (issue 33 item 6): ``template-tokens:N``, ``--sim-vocab-size``."""

from __future__ import annotations

import argparse

import httpx
import pytest

from pytest_sglang.simulator.failures.faults import check_fault
from pytest_sglang.simulator.failures.production import parse_production_faults
from pytest_sglang.simulator.launch.cli import parse
from tests.conftest import SimFactory


def test_template_tokens_parses_and_bad_arguments_name_the_fix() -> None:
    assert parse_production_faults(["template-tokens:12"]).template_tokens == 12
    for bad in ("template-tokens", "template-tokens:0", "template-tokens:-3", "template-tokens:x",
                "template-tokens:100001"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"template-tokens needs a whole number of tokens from "
                                                             r"1 to 100,000 .* e\.g\. template-tokens:12"):
            check_fault(bad)


@pytest.mark.parametrize("bad", ["0", "-1", "4.5", "many", "10000001"])
def test_bad_vocab_size_is_refused_naming_the_option(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(["--model-path", "m", "--sim-vocab-size", bad])
    err = capsys.readouterr().err
    assert "--sim-vocab-size" in err and "whole number of tokens from 1 to 10,000,000" in err and bad in err


def test_the_vocabulary_is_read_from_the_token_ids_logprob_check(sim_factory: SimFactory) -> None:
    sim = sim_factory("--sim-vocab-size", "401")
    body = {"input_ids": [10], "sampling_params": {"max_new_tokens": 1}, "return_logprob": True,
            "token_ids_logprob": [401]}
    resp = httpx.post(f"{sim.url}/generate", json=body, timeout=30)
    assert resp.status_code == 400
    assert resp.json()["error"]["message"] == (
        "token_ids_logprob contains out-of-vocabulary token id 401; valid range is [0, 401).")
    body["token_ids_logprob"] = [400]
    assert httpx.post(f"{sim.url}/generate", json=body, timeout=30).status_code == 200
