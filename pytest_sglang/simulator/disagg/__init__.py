"""Prefill-decode disaggregation (--disaggregation-mode prefill|decode).

The PD worker, its two sides, the KV wire, its metrics and errors.

May import launch/, model/, state, config and below; never front/.
"""
