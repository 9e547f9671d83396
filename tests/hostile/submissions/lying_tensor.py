"""Attack: a tensor subclass whose comparisons always say "equal"."""
import torch


class Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in ("allclose", "equal", "eq", "__eq__", "isclose"):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


def scores(q, keys):
    return torch.ones(len(keys), dtype=q.dtype).as_subclass(Liar)
