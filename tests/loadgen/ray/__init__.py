"""Tests of pytest_sglang/loadgen/ray."""
