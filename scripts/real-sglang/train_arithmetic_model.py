"""Train a tiny Llama that answers pytest-sglang's ``arithmetic`` accuracy task, for real SGLang on CPU.

Usage (with the real-SGLang venv's python, which has torch, transformers and tokenizers):

    python train_arithmetic_model.py OUT_DIR [--steps 800] [--seed 0] [--min-score 0.95]

Writes a Hugging Face model folder (config.json, model.safetensors, tokenizer.json,
tokenizer_config.json, special_tokens_map.json, generation_config.json, training.json) that SGLang
0.5.23 serves with real weights. The questions come from the task's own generator
(``pytest_sglang/accuracy/arithmetic.py`` in this checkout, other seeds than the scored ones); before
saving, the model answers the harness's exact prompts (5-shot, seed 1234, the harness's stop strings
and answer extraction) and a score below ``--min-score`` fails the run instead of saving a weak model.

The tokenizer and the scratchpad answers the model learns are in ``arith_tokens.py`` (why it learns
exact arithmetic in minutes is explained there).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import random
import shutil
import sys
import time
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from arith_tokens import BOS, EOS, PAD, answer_ids, build_tokenizer, parse
from tokenizers import Tokenizer
from transformers import LlamaConfig, LlamaForCausalLM

REPO = Path(__file__).resolve().parents[2]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
    "{{ m['content'] }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def load_task_modules(repo: Path) -> tuple[types.ModuleType, types.ModuleType]:
    """``pytest_sglang.accuracy.arithmetic`` and ``.task`` from ``repo`` without the package's imports.

    This venv has no httpx_aiohttp (the package ``__init__`` files import the whole engine); both
    modules need only the standard library.
    """
    for name in ("pytest_sglang", "pytest_sglang.accuracy"):
        package = types.ModuleType(name)
        package.__path__ = [str(repo.joinpath(*name.split(".")))]
        sys.modules[name] = package
    return (importlib.import_module("pytest_sglang.accuracy.arithmetic"),
            importlib.import_module("pytest_sglang.accuracy.task"))


#: Share of training questions per shape, relative to the generator's uniform draw: the longer
#: scratchpads (two or three lines) need more examples than one-line sums.
SHAPE_WEIGHT = {"a+b": 0.5, "a-b": 0.7, "a*c": 0.5, "(a+b)*c": 1.0, "a*c-b": 1.0}


class Batches:
    """Training sequences: packed question/answer blocks, loss on the answers only.

    A share of the sequences starts with the harness's exact 5-shot prefix (reference answers,
    no loss), so the model meets the evaluation's context; later blocks see earlier questions, so it
    learns to read the most recent one.
    """

    def __init__(self, tok: Tokenizer, arithmetic: types.ModuleType, task_module: types.ModuleType,
                 seed: int, seq_len: int, prefix_share: float = 0.25) -> None:
        self.tok, self.arithmetic, self.seq_len, self.prefix_share = tok, arithmetic, seq_len, prefix_share
        # Seeds far from DEFAULT_SEED (1234, scored) and its shot seed (1234 + 7919).
        self.rng = random.Random(10_000_019 + seed)
        shots = arithmetic.task(1, 5).shot_pool
        self.prefix = self._encode("".join(task_module.qa_prompt(s, []) + f" {s.answer}\n\n" for s in shots))
        self.separator = self._encode("\n\n")
        self.bos = tok.token_to_id(BOS)

    def _encode(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False).ids)

    def _question(self) -> Any:
        while True:
            example = self.arithmetic.example(self.rng)
            if self.rng.random() < SHAPE_WEIGHT[parse(example.question)[0]]:
                return example

    def sequence(self) -> tuple[list[int], list[int]]:
        ids, mask = [self.bos], [0]
        if self.rng.random() < self.prefix_share:
            ids += self.prefix
            mask += [0] * len(self.prefix)
        while len(ids) <= self.seq_len:
            example = self._question()
            question = self._encode(f"Question: {example.question}\nAnswer:")
            answer = answer_ids(self.tok, example.question)
            ids += question + answer + self.separator
            mask += [0] * len(question) + [1] * len(answer) + [0] * len(self.separator)
        return ids[: self.seq_len + 1], mask[: self.seq_len + 1]

    def batch(self, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        rows = [self.sequence() for _ in range(size)]
        return torch.tensor([r[0] for r in rows]), torch.tensor([r[1] for r in rows])


def model_config(tok: Tokenizer, hidden: int, layers: int) -> LlamaConfig:
    heads = hidden // 32
    return LlamaConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=hidden, intermediate_size=4 * hidden,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads, head_dim=32,
        max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0, hidden_act="silu",
        tie_word_embeddings=False, bos_token_id=tok.token_to_id(BOS), eos_token_id=tok.token_to_id(EOS),
        pad_token_id=tok.token_to_id(PAD), dtype="float32",
    )


def native_bf16() -> bool:
    """Whether this CPU multiplies bf16 natively: autocast is then ~3x faster than fp32, else slower."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def train(model: LlamaForCausalLM, batches: Batches, steps: int, batch_size: int, lr: float, bf16: bool,
          log: Callable[[str], None]) -> None:
    """AdamW, linear warm-up then cosine decay; bf16 autocast where the CPU has bf16 matmuls."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))
    model.train()
    for step in range(steps):
        x, mask = batches.batch(batch_size)
        for group in opt.param_groups:
            group["lr"] = lr * min(1.0, (step + 1) / 30) * 0.5 * (1 + math.cos(math.pi * step / steps))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(input_ids=x[:, :-1]).logits.float()
        losses = torch.nn.functional.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten(), reduction="none")
        weights = mask[:, 1:].flatten().float()
        loss = (losses * weights).sum() / weights.sum()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if (step + 1) % 100 == 0:
            log(f"step {step + 1}/{steps} loss {loss.item():.4f}")


@torch.no_grad()
def evaluate(model: LlamaForCausalLM, tok: Tokenizer, arithmetic: types.ModuleType, task_module: types.ModuleType,
             num_examples: int = 200, shots: int = 5) -> dict[str, Any]:
    """The harness's score: its prompts, greedy, its stop strings and its answer extraction."""
    task = arithmetic.task(num_examples, shots)
    model.eval()
    pad, eos = tok.token_to_id(PAD), tok.token_to_id(EOS)
    per_shape: dict[str, list[int]] = {}
    wrong: list[str] = []
    for start in range(0, len(task.examples), 50):
        examples = task.examples[start:start + 50]
        encoded = [tok.encode(task.prompt(e, task.shots_for(e, shots))).ids for e in examples]
        width = max(map(len, encoded))
        x = torch.tensor([[pad] * (width - len(e)) + e for e in encoded])
        out = model.generate(input_ids=x, attention_mask=(x != pad).long(), max_new_tokens=96, do_sample=False,
                             pad_token_id=pad, eos_token_id=eos)
        for example, row in zip(examples, out[:, width:].tolist(), strict=True):
            text = tok.decode(row, skip_special_tokens=True)
            for stop in task.stop:
                text = text.split(stop)[0]
            ok = task.is_correct(task.extract(text), example)
            tally = per_shape.setdefault(parse(example.question)[0], [0, 0])
            tally[0] += ok
            tally[1] += 1
            if not ok and len(wrong) < 5:
                wrong.append(f"{example.question} -> {text!r} (expected {example.target})")
    correct = sum(c for c, _ in per_shape.values())
    return {"score": correct / len(task.examples), "correct": correct, "total": len(task.examples),
            "per_shape": {k: f"{c}/{n}" for k, (c, n) in sorted(per_shape.items())}, "wrong": wrong,
            "harness": {"seed": arithmetic.DEFAULT_SEED, "shots": shots, "stop": list(task.stop)}}


def save(model: LlamaForCausalLM, tok: Tokenizer, out: Path, report: dict[str, Any]) -> None:
    """Write the folder next to ``out`` and move it in place, so ``out`` is never half-written."""
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.generation_config.update(do_sample=False, bos_token_id=tok.token_to_id(BOS),
                                   eos_token_id=tok.token_to_id(EOS), pad_token_id=tok.token_to_id(PAD))
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save(str(tmp / "tokenizer.json"))
    tokens = {"bos_token": BOS, "eos_token": EOS, "pad_token": PAD}
    files: dict[str, dict[str, Any]] = {
        "tokenizer_config.json": {"tokenizer_class": "PreTrainedTokenizerFast", **tokens, "model_max_length": 2048,
                                  "add_bos_token": False, "chat_template": CHAT_TEMPLATE},
        "special_tokens_map.json": tokens,
        "training.json": report,
    }
    for name, payload in files.items():
        (tmp / name).write_text(json.dumps(payload, indent=2) + "\n")
    for path in tmp.iterdir():
        path.chmod(0o644)  # save_pretrained writes the weights 0600
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path, help="the model folder to write (replaced when it exists)")
    p.add_argument("--steps", type=int, default=800, help="optimizer steps (default 800)")
    p.add_argument("--batch-size", type=int, default=32, help="sequences per step (default 32)")
    p.add_argument("--seq-len", type=int, default=256, help="tokens per sequence (default 256)")
    p.add_argument("--hidden", type=int, default=128, help="hidden size, a multiple of 32 (default 128)")
    p.add_argument("--layers", type=int, default=3, help="decoder layers (default 3)")
    p.add_argument("--lr", type=float, default=5e-3, help="peak learning rate (default 5e-3)")
    p.add_argument("--seed", type=int, default=0, help="torch and data seed (default 0)")
    p.add_argument("--min-score", type=float, default=0.95, help="refuse to save below this score (default 0.95)")
    p.add_argument("--repo", type=Path, default=REPO, help="the pytest-sglang checkout (default: this one)")
    args = p.parse_args(argv)
    if args.steps < 1 or args.hidden < 32 or args.hidden % 32 or args.layers < 1:
        p.error("--steps and --layers must be >= 1; --hidden a multiple of 32")
    started = time.monotonic()

    def log(message: str) -> None:
        print(f"[train-arith {time.monotonic() - started:5.0f}s] {message}", flush=True)

    torch.manual_seed(args.seed)
    arithmetic, task_module = load_task_modules(args.repo)
    tok = build_tokenizer()
    model = LlamaForCausalLM(model_config(tok, args.hidden, args.layers))
    bf16 = native_bf16()
    log(f"{sum(p.numel() for p in model.parameters())} parameters, vocab {tok.get_vocab_size()}, "
        f"{args.steps} steps x {args.batch_size} x {args.seq_len} tokens, {torch.get_num_threads()} threads, "
        + ("bf16 autocast" if bf16 else "fp32 (no native bf16 on this CPU: about 3x slower)"))
    train(model, Batches(tok, arithmetic, task_module, args.seed, args.seq_len), args.steps, args.batch_size,
          args.lr, bf16, log)
    trained_s = time.monotonic() - started
    report = evaluate(model, tok, arithmetic, task_module)
    report.update(steps=args.steps, seed=args.seed, train_seconds=round(trained_s, 1), bf16=bf16,
                  torch=torch.__version__)
    log(f"score {report['score']:.3f} ({report['correct']}/{report['total']}) per shape {report['per_shape']}")
    if report["score"] < args.min_score:
        print("train_arithmetic_model.py: the model scores below --min-score "
              f"{args.min_score:g}; not saved. Wrong answers:\n  " + "\n  ".join(report["wrong"]), file=sys.stderr)
        return 1
    save(model, tok, args.out, report)
    log(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
