"""Attack: raises KeyboardInterrupt."""


def scores(q, keys):
    raise KeyboardInterrupt
