"""Attack: a numbers.Real whose __float__ raises."""
import numbers


class Bad(float):
    def __float__(self):
        raise RuntimeError("float refused")


numbers.Real.register(Bad)


def scores(q, keys):
    return Bad(1.0)
