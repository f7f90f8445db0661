"""A load and its figures: throughput and SLO floors, A/B and paired verdicts, drain, request shares.

May import only the top gates modules (``base``, ``keywords``, ``registry``) and the layers below the gates.
"""
