"""Tasks read the datasets' own layouts and build SGLang's harness prompts; extraction like SGLang's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_sglang.accuracy import Harness, arithmetic, gsm8k, mmlu
from pytest_sglang.accuracy.harness import answer_text
from pytest_sglang.accuracy.task import as_number, last_number
from pytest_sglang.errors import ConfigError

GSM8K_ROWS = [
    {"question": "Tom has 3 apples and buys 4 more. How many?", "answer": "3 + 4 = <<3+4=7>>7\n#### 7"},
    {"question": "A box holds 12 eggs. How many in 2 boxes?", "answer": "12 * 2 = 24\n#### 24"},
    {"question": "What is 1,000 + 234?", "answer": "1,000 + 234 = 1,234\n#### 1,234"},
]


def _gsm8k(tmp_path: Path) -> Path:
    path = tmp_path / "test.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in GSM8K_ROWS))
    return path


def test_gsm8k_prompt_is_sglangs_few_shot_format(tmp_path: Path) -> None:
    task = gsm8k.task(_gsm8k(tmp_path), num_examples="all", shots=1)
    assert [e.target for e in task.examples] == ["24", "1234"]  # the shot row is not scored
    prompt = task.prompt(task.examples[0], task.shots_for(task.examples[0], 1))
    assert prompt == ("Question: Tom has 3 apples and buys 4 more. How many?\nAnswer: 3 + 4 = <<3+4=7>>7\n#### 7\n\n"
                      "Question: A box holds 12 eggs. How many in 2 boxes?\nAnswer:")
    assert task.stop == ("Question", "Assistant:", "<|separator|>")


def test_extraction_is_the_last_number_without_commas() -> None:
    assert last_number("so 3 + 4 = 7, and then 1,234.") == "1234."
    assert last_number("no digits here") is None
    assert as_number("1234.") == as_number("1234") == as_number("1234.0")
    task = arithmetic.task(3, 0)
    assert task.is_correct("42.0", arithmetic.Example("q", "a", "42")) and not task.is_correct(None, task.examples[0])


def test_bad_gsm8k_files_name_the_line_and_the_fix(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "a"}\n')
    with pytest.raises(ConfigError, match=r'line 1.*lacks "question" or an "answer" ending in a number'):
        gsm8k.read_rows(bad)
    bad.write_text("not json\n")
    with pytest.raises(ConfigError, match=r"line 1.*is not JSON"):
        gsm8k.read_rows(bad)
    with pytest.raises(ConfigError, match="cannot be read"):
        gsm8k.read_rows(tmp_path / "missing.jsonl")
    with pytest.raises(ConfigError, match="leaves nothing to score after 5 shots"):
        gsm8k.task(_gsm8k(tmp_path), 10, 5)


def test_arithmetic_is_reproducible_and_needs_no_data() -> None:
    a, b = arithmetic.generate(20, seed=3), arithmetic.generate(20, seed=3)
    assert a == b and a != arithmetic.generate(20, seed=4)
    assert all(e.question.startswith("What is ") and e.answer.endswith(f"#### {e.target}") for e in a)
    assert Harness(task="arithmetic").load().source == "generated, seed 1234"




def test_mmlu_hendrycks_directory_with_dev_shots(tmp_path: Path) -> None:
    (tmp_path / "test").mkdir()
    (tmp_path / "dev").mkdir()
    (tmp_path / "test" / "high_school_math_test.csv").write_text('"What is 2+2?",3,4,5,6,B\n"What is 3+3?",5,6,7,8,B\n')
    (tmp_path / "dev" / "high_school_math_dev.csv").write_text("1+1?,1,2,3,4,B\n")
    task = mmlu.task(tmp_path, num_examples="all", shots=1)
    assert len(task.examples) == 2 and task.examples[0].subject == "high school math"
    prompt = task.prompt(task.examples[0], task.shots_for(task.examples[0], 1))
    assert prompt == ("The following are multiple choice questions (with answers) about high school math.\n\n"
                      "1+1?\nA. 1\nB. 2\nC. 3\nD. 4\nAnswer: B\n\n"
                      "What is 2+2?\nA. 3\nB. 4\nC. 5\nD. 6\nAnswer:")
    assert task.template == "mmlu-few-shot" and task.extract(" B\n\nQuestion") == "B"


def test_mmlu_simple_evals_csv_zero_shot(tmp_path: Path) -> None:
    path = tmp_path / "mmlu.csv"
    path.write_text(",Question,A,B,C,D,Answer,Subject\n0,What is 2+2?,3,4,5,6,B,elementary_mathematics\n")
    task = mmlu.task(path, num_examples="all", shots=0)
    assert task.template == "simple-evals-multichoice" and task.examples[0].subject == "elementary mathematics"
    prompt = task.prompt(task.examples[0], [])
    assert prompt.startswith("Answer the following multiple choice question.") and "\n\nA) 3\nB) 4\n" in prompt
    assert task.extract("Let me think. 2+2=4.\nAnswer: b") == "B"
    assert Harness(task="mmlu", data=path, shots=0).resolved(task).route == "chat"


def test_mmlu_jsonl_and_bad_rows(tmp_path: Path) -> None:
    path = tmp_path / "mmlu.jsonl"
    path.write_text(json.dumps({"question": "q?", "choices": ["a", "b", "c", "d"], "answer": 2, "subject": "x"}) + "\n")
    rows, _ = mmlu.read(path)
    assert rows[0].target == "C"
    bad = tmp_path / "bad_test.csv"
    bad.write_text("q,a,b,c,d,E\n")
    with pytest.raises(ConfigError, match="has answer 'E'"):
        mmlu.read(bad)


def test_harness_records_what_changes_a_score_and_refuses_bad_values(tmp_path: Path) -> None:
    h = Harness(task="gsm8k", data=_gsm8k(tmp_path), shots=1, num_examples="all")
    fp = h.fingerprint(h.load())
    assert fp == {"runner": "builtin", "task": "gsm8k", "template": "gsm8k-qa", "shots": 1, "route": "completions",
                  "max_tokens": 512, "temperature": 0.0, "top_p": 1.0,
                  "stop": ["Question", "Assistant:", "<|separator|>"], "source": str(tmp_path / "test.jsonl"),
                  "num_examples": 2, "extraction": "last_number"}
    with pytest.raises(ConfigError, match="hub_timeout_s=0: must be > 0"):
        Harness(task="gsm8k", hub_timeout_s=0)
    with pytest.raises(ConfigError, match="route='rpc': is not one of completions, chat, generate"):
        Harness(task="arithmetic", route="rpc")
    with pytest.raises(ConfigError, match="concurrency=0: must be an integer >= 1"):
        Harness(task="arithmetic", concurrency=0)


def test_request_bodies_per_route() -> None:
    h = Harness(task="arithmetic", shots=0, max_tokens=7)
    task = h.load()
    path, body = h.request(task, task.examples[0], "m")
    assert path == "/v1/completions" and body["stop"] == ["Question", "Assistant:", "<|separator|>"]
    path, body = Harness(task="arithmetic", shots=0, route="chat").request(task, task.examples[0], "m")
    assert path == "/v1/chat/completions" and "stop" not in body and body["max_tokens"] == 512
    path, body = Harness(task="arithmetic", shots=0, route="generate").request(task, task.examples[0], "m")
    assert path == "/generate" and body["sampling_params"]["max_new_tokens"] == 512
    assert answer_text("chat", {"choices": [{"message": {"content": "x"}}]}) == "x"
    assert answer_text("generate", {"text": "y"}) == "y" and answer_text("completions", {"choices": []}) is None
