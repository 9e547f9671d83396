"""Attack: raises an exception whose __str__ raises, from a class whose metaclass lies about its name."""


class Liar(type):
    @property
    def __name__(cls):
        raise RuntimeError("no name either")


class Unprintable(Exception, metaclass=Liar):
    def __str__(self):
        raise RuntimeError("cannot print me")


def scores(q, keys):
    raise Unprintable()
