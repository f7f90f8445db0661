"""Tests of pytest_sglang/gates/correctness."""
