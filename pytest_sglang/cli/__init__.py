"""Command-line tools behind ``python -m pytest_sglang``."""
