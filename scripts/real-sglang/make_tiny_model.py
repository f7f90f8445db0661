"""Write a tiny Llama-architecture model folder for real SGLang on CPU (no weights, no hub access).

The folder holds ``config.json`` (LlamaForCausalLM: hidden 64, 2 layers, 4 heads / 2 KV heads,
context 2048), a byte-level BPE tokenizer trained here on a few sentences, a Llama-3-style chat
template and ``generation_config.json``. SGLang serves it with ``--load-format dummy`` (random
weights): every request goes through the real scheduler, radix cache and detokenizer; the generated
text is meaningless, which is all these tests need.

Usage: python make_tiny_model.py OUT_DIR    (run with the real-SGLang venv's python: needs tokenizers)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

BOS, EOS, PAD = "<|begin_of_text|>", "<|eot_id|>", "<|pad|>"
SPECIAL = [BOS, "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", EOS, PAD]
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world! This is a tiny tokenizer for testing an SGLang server.",
    "user assistant system: what is the capital of France? Paris is the capital.",
    "0 1 2 3 4 5 6 7 8 9 10 100 1000 and or not if then else for while return",
]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
    "{{ m['content'] }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def train_tokenizer() -> Tokenizer:
    """A 512-token byte-level BPE: any input text encodes, and BOS is prepended like Llama 3."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(SENTENCES * 50, trainer)
    bos = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos)]
    )
    return tok


def model_config(tok: Tokenizer) -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "vocab_size": tok.get_vocab_size(),
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "bos_token_id": tok.token_to_id(BOS),
        "eos_token_id": tok.token_to_id(EOS),
        "pad_token_id": tok.token_to_id(PAD),
    }


def write(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer()
    tok.save(str(out / "tokenizer.json"))
    tokens = {"bos_token": BOS, "eos_token": EOS, "pad_token": PAD}
    files: dict[str, dict[str, Any]] = {
        "tokenizer_config.json": {
            "tokenizer_class": "PreTrainedTokenizerFast", **tokens,
            "model_max_length": 2048, "add_bos_token": False, "chat_template": CHAT_TEMPLATE,
        },
        "special_tokens_map.json": tokens,
        "generation_config.json": {
            "bos_token_id": tok.token_to_id(BOS), "eos_token_id": tok.token_to_id(EOS), "do_sample": False,
        },
        # config.json last: setup.sh treats its presence as "model folder complete".
        "config.json": model_config(tok),
    }
    for name, payload in files.items():
        (out / name).write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {out} (vocab {tok.get_vocab_size()})")


if __name__ == "__main__":
    write(Path(sys.argv[1] if len(sys.argv) > 1 else "tiny-llama"))
