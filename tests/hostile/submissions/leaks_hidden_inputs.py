"""Attack: remembers every input it is given and puts all of them in every later exception's
message, in its exception's class name and in its printed output, hoping a hidden case's inputs
reach the student through a later case."""

SEEN = []


def _token(values, safe=False):
    text = "_".join(f"{v:g}" for v in values)
    return text.replace("-", "m").replace(".", "p") if safe else text


def scores(q, keys):
    SEEN.append([float(x) for x in q.flatten().tolist()])
    tokens = [_token(v) for v in SEEN]
    print("seen so far:", " ".join(tokens))
    leaky = type("Leak_" + "__".join(_token(v, safe=True) for v in SEEN), (ValueError,), {})
    raise leaky(" ".join(tokens))
