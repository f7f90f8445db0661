"""Tests of pytest_sglang/loadgen/client."""
