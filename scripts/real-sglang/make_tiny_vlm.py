"""Write a tiny Qwen2-VL model folder for real SGLang on CPU (no weights, no hub access).

``config.json`` (Qwen2VLForConditionalGeneration: hidden 64, 2 layers, a 2-layer vision tower of width
32, 14x14 patches merged 2x2), a byte-level BPE tokenizer trained here with Qwen2-VL's special tokens,
a chat template that puts ``<|vision_start|><|image_pad|><|vision_end|>`` per image, and
``preprocessor_config.json`` for transformers' Qwen2VLImageProcessor with Qwen2-VL's own pixel bounds
(3136 to 12845056), so image-token counts are the real model's (a 360p image is 299 tokens). SGLang
0.5.23 serves it with ``--load-format dummy``; bench_serving's image dataset reads its processor.

Usage: python make_tiny_vlm.py OUT_DIR    (run with the real-SGLang venv's python: needs tokenizers)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
           "<|image_pad|>", "<|video_pad|>", "<|vision_pad|>"]
SENTENCES = ["The quick brown fox jumps over the lazy dog.", "What colour is this image? red green blue",
             "user assistant system 0 1 2 3 4 5 6 7 8 9"]
CHAT = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
        "{% if m['content'] is string %}{{ m['content'] }}"
        "{% else %}{% for c in m['content'] %}{% if c['type'] in ('image', 'image_url') or 'image' in c %}"
        "<|vision_start|><|image_pad|><|vision_end|>{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}"
        "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(SENTENCES * 50, trainers.BpeTrainer(vocab_size=512, special_tokens=SPECIAL,
                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(str(out / "tokenizer.json"))
    ids = {t: tok.token_to_id(t) for t in SPECIAL}
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
        "model_max_length": 4096, "chat_template": CHAT, "processor_class": "Qwen2VLProcessor",
        "extra_special_tokens": {"image_token": "<|image_pad|>", "video_token": "<|video_pad|>",
                                 "vision_start_token": "<|vision_start|>", "vision_end_token": "<|vision_end|>"}}))
    (out / "chat_template.json").write_text(json.dumps({"chat_template": CHAT}))
    (out / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen2VLProcessor",
        "min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "temporal_patch_size": 2, "merge_size": 2,
        "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711]}))
    (out / "generation_config.json").write_text(json.dumps({"eos_token_id": ids["<|im_end|>"], "do_sample": False}))
    cfg = {"architectures": ["Qwen2VLForConditionalGeneration"], "model_type": "qwen2_vl",
           "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "vocab_size": tok.get_vocab_size(), "max_position_embeddings": 4096,
           "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False,
           "torch_dtype": "float32", "max_window_layers": 2, "use_sliding_window": False,
           "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
           "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|im_end|>"],
           "image_token_id": ids["<|image_pad|>"], "video_token_id": ids["<|video_pad|>"],
           "vision_start_token_id": ids["<|vision_start|>"], "vision_end_token_id": ids["<|vision_end|>"],
           "vision_config": {"depth": 2, "embed_dim": 32, "hidden_size": 64, "hidden_act": "quick_gelu",
                             "mlp_ratio": 2, "num_heads": 2, "in_chans": 3, "in_channels": 3, "patch_size": 14,
                             "spatial_merge_size": 2, "temporal_patch_size": 2}}
    # config.json last: setup.sh treats its presence as "model folder complete".
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    print("wrote", out, ids)

if __name__ == "__main__":
    main(Path(sys.argv[1]))
