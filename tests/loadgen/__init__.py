"""Tests of pytest_sglang/loadgen (a package: its subfolders mirror the code)."""
