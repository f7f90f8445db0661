"""The OpenAI-compatible routes: /v1/completions and /v1/chat/completions.

Request features, the body, the stream. May import what front/ may import.
"""
