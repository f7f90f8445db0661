"""Tests of pytest_sglang/gates (a package: its subfolders mirror the code)."""
