"""Attack: loops forever in every call."""


def scores(q, keys):
    while True:
        pass
