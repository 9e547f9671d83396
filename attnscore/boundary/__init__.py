"""The worker's world: everything a sandboxed worker runs, and nothing else.

The sandbox copies this package whole into the worker's private folder; nothing here imports
anything of attnscore outside this package (``tests/test_layers.py``)."""
