"""Tests of pytest_sglang/gates/fleet."""
