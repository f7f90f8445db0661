"""Server facts, judged per member of the handle: KV capacity, hierarchical cache, requirements.

May import ``production`` (the storage restart), ``load``, the top gates modules (``base``, ``keywords``,
``registry``) and the layers below the gates; never ``fleet`` or ``correctness``.
"""
