"""Tests of pytest_sglang/loadgen/soak."""
