"""Attack: raises a BaseException subclass that is not an Exception."""


class Escape(BaseException):
    pass


def scores(q, keys):
    raise Escape("out of the handler")
