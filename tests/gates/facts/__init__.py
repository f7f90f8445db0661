"""Tests of pytest_sglang/gates/facts."""
