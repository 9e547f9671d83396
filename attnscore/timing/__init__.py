"""Kernel timing for engineers: ``attnscore bench`` (see :mod:`attnscore.timing.benchmark`)."""
