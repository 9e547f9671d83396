"""Honest but odd: 110,000 functions and none named as the spec asks. The worker lists what the file
defines; the list must be cut where the worker writes it (its reply would otherwise hold more items
than the grader reads), so the load failure still reads "no function named ...", never a crash."""


def helper(q, keys):
    return keys @ q


globals().update({f"helper_{i}": helper for i in range(110_000)})
