"""Tests of pytest_sglang/gates/production."""
