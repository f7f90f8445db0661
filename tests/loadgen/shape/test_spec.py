"""LoadSpec validation and datasets: bad values name the field, the value and the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_sglang.errors import ConfigError
from pytest_sglang.loadgen import LoadSpec
from pytest_sglang.loadgen.prompts.datasets import build_prompts


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"requests": 0},
            "LoadSpec.requests=0: must be a whole number >= 1. Fix: give requests as a positive integer",
        ),
        ({"api": "grpc"}, "LoadSpec.api='grpc': unknown API. Fix: use one of native, chat, completions"),
        (
            {"range_ratio": 1.5},
            "LoadSpec.range_ratio=1.5: must be between 0 and 1. Fix: use 1.0 for fixed lengths, "
            "0.5 for lengths drawn in [L/2, L]",
        ),
        (
            {"dataset": "sharegpt"},
            "LoadSpec.dataset='sharegpt': unknown dataset. Fix: use random-ids, sharegpt:PATH, jsonl:PATH, "
            "mooncake:PATH, burstgpt:PATH, multiturn[:KEY=VALUE,...], image[:KEY=VALUE,...] or mmmu:PATH",
        ),
        (
            {"request_rate": 0.0},
            "LoadSpec.request_rate=0.0: must be a finite number > 0 requests/s. Fix: give a positive rate, or "
            "None for all requests at once",
        ),
        (
            {"concurrency": 2, "processes": 3},
            "LoadSpec.processes=3: is larger than concurrency=2. Fix: use at most one "
            "process per concurrent request",
        ),
    ],
)
def test_bad_spec_messages(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        LoadSpec(**kwargs)  # type: ignore[arg-type]
    assert str(info.value) == message


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"request_rate": "4"}, "LoadSpec.request_rate='4': expected a number or None, got str. Fix: give "
                            "request_rate as a number or None"),
    ({"burstiness": [1]}, "LoadSpec.burstiness=[1]: expected a number, got list"),
    ({"range_ratio": True}, "LoadSpec.range_ratio=True: expected a number, got bool"),
    ({"temperature": "0"}, "LoadSpec.temperature='0': expected a number, got str"),
    ({"temperature": -0.5}, "LoadSpec.temperature=-0.5: must be a finite number >= 0"),
    ({"temperature": float("nan")}, "LoadSpec.temperature=nan: must be a finite number >= 0"),
    ({"ignore_eos": "yes"}, "LoadSpec.ignore_eos='yes': expected True or False, got str"),
    ({"flush_cache": 1}, "LoadSpec.flush_cache=1: expected True or False, got int"),
    ({"sample_server_metrics": None}, "LoadSpec.sample_server_metrics=None: expected True or False"),
    ({"seed": "42"}, "LoadSpec.seed='42': expected a whole number, got str"),
    ({"seed": 4.2}, "LoadSpec.seed=4.2: expected a whole number, got float"),
    ({"dataset": ["random-ids"]}, "LoadSpec.dataset=['random-ids']: expected a string, got list"),
    ({"model": ""}, "LoadSpec.model='': is empty"),
])
def test_a_field_of_the_wrong_type_is_named_not_a_comparison_error(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        LoadSpec(**kwargs)  # type: ignore[arg-type]
    assert str(info.value).startswith(message), str(info.value)


def test_random_ids_exact_lengths_reproducible() -> None:
    spec = LoadSpec(requests=5, input_len=20, output_len=7)
    prompts = build_prompts(spec)
    assert [p.prompt_len for p in prompts] == [20] * 5 and [p.output_len for p in prompts] == [7] * 5
    assert all(isinstance(p.prompt, list) and len(p.prompt) == 20 for p in prompts)
    assert prompts == build_prompts(spec)
    assert prompts != build_prompts(spec.replace(seed=1))


def test_range_ratio_draws_like_bench_serving() -> None:
    prompts = build_prompts(LoadSpec(requests=200, input_len=100, output_len=10, range_ratio=0.5))
    assert {p.prompt_len for p in prompts} <= set(range(50, 101))
    assert min(p.output_len for p in prompts) == 5 and max(p.output_len for p in prompts) == 10


def test_sharegpt_and_jsonl(tmp_path: Path) -> None:
    share = tmp_path / "s.json"
    share.write_text(
        json.dumps(
            [
                {
                    "conversations": [
                        {"from": "human", "value": "hello there"},
                        {"from": "gpt", "value": "hi"},
                    ]
                },
                {"conversations": [{"from": "human", "value": "only one"}]},
            ]
        )
    )
    prompts = build_prompts(LoadSpec(requests=3, dataset=f"sharegpt:{share}", output_len=9))
    assert [p.prompt for p in prompts] == ["hello there"] * 3 and prompts[0].output_len == 9
    lines = tmp_path / "p.jsonl"
    lines.write_text('{"prompt": "a b c", "output_len": 4}\n\n{"prompt": [5, 6]}\n')
    prompts = build_prompts(LoadSpec(requests=3, dataset=f"jsonl:{lines}", output_len=8))
    assert [(p.prompt, p.output_len) for p in prompts] == [("a b c", 4), ([5, 6], 8), ("a b c", 4)]


def test_dataset_errors(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(ConfigError) as info:
        build_prompts(LoadSpec(dataset=f"jsonl:{missing}"))
    assert str(info.value) == (
        f"dataset={str(missing)!r}: cannot be read (No such file or directory). "
        "Fix: give an existing jsonl file, e.g. --dataset jsonl:data.json"
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\n{"nothing": 1}\n')
    with pytest.raises(ConfigError, match="line 2 has no prompt, text or messages"):
        build_prompts(LoadSpec(dataset=f"jsonl:{bad}"))
