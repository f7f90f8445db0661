"""The answers are right: the acceptance suite, accuracy, golden answers, launch consistency.

May import ``load`` (comparable figures) and the top gates modules; never ``fleet``, ``facts`` or
``production``.
"""
