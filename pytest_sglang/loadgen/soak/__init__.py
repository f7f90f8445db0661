"""A soak: a load held for a duration while the server is sampled, and how a growth is judged.

May import ``run`` and everything below it.
"""
