"""Tests of pytest_sglang/loadgen/measure."""
