"""Tests of pytest_sglang/loadgen/shape."""
