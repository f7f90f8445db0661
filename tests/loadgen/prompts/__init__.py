"""Tests of pytest_sglang/loadgen/prompts."""
