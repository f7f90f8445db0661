"""A load spread over Ray nodes: placement, the start barrier, the shards merged on one timeline.

May import ``run`` and everything below it; ``ray`` itself is an optional extra, imported where used.
"""
