"""Example implementations for ``attnscore test`` and the pytest plugin."""
