"""Tests of pytest_sglang/loadgen/workloads."""
