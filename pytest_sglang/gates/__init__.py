"""Gates: checks that turn server facts and load results into pass/fail (see :mod:`.base`)."""
