"""The seed deployment's numbers, shared by the tests (pytest.ini holds the launch under test)."""

from __future__ import annotations

#: The simulator runs this much faster than real time (pytest.ini --sim-time-scale).
TIME_SCALE = 0.02
#: The seed's hardware on the simulator: 8 x 96 GB GPUs, 449 GB host RAM, Kimi-K2.5 (MLA).
SIM = ["--sim-profile", "kimi-k2.5-rtx6000x8", "--sim-time-scale", str(TIME_SCALE)]
#: The launch the seed finally ran: 8 TP ranks and the KV pool at --mem-fraction-static 0.93.
SEED = ["--model-path", "moonshotai/Kimi-K2.5", "--tp-size", "8", "--mem-fraction-static", "0.93"]


def real_rate(tokens_per_s: float) -> float:
    """A throughput floor stated in real seconds, converted to the simulator's compressed clock."""
    return tokens_per_s / TIME_SCALE
