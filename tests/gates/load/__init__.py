"""Tests of pytest_sglang/gates/load."""
