"""The simulated model's generation: a KV that is not the prompt's never decodes the right text."""

from __future__ import annotations

from pytest_sglang.simulator import tokenizer


def test_a_scrambled_seed_never_writes_the_same_tokens() -> None:
    seed, size = 12345, len(tokenizer.VOCAB)
    # mix() alone lands on the same tokens for 1 key in len(VOCAB): such a key exists within a few thousand
    colliding = next(k for k in range(100 * size) if (tokenizer.mix(seed, k) - seed) % size == 0)
    for key in (colliding, colliding + 1, 0):
        other = tokenizer.other_seed(seed, key)
        assert [tokenizer.output_token(other, k) for k in range(4)] != [
            tokenizer.output_token(seed, k) for k in range(4)]
