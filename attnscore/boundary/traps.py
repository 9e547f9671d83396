"""Traps: which of a spec's ruled calls the submission makes, seen in the worker while it runs.

A spec's rules (:mod:`attnscore.spec.rules`) forbid or require calls by their dotted names
(``torch.nn.functional.scaled_dot_product_attention``; ``torch.autograd.grad`` inside a backward).
Before the submission is imported, the worker replaces each named function, wherever a loaded
``torch`` module holds it under that name (``torch.nn.functional`` and ``torch._C._nn`` hold the
same SDPA), with a wrapper that notes the call and the phase it came in, then calls the original:

- ``"forward"``: while the graded function itself runs (the worker's call of it);
- ``"backward"``: while the backward pass the worker runs (``torch.autograd.backward(O, dO)``) is
  under way: the submission's own ``backward`` and anything it calls.

Calls made while the file is imported, or by the worker itself, are not noted. What the traps saw
goes back with every call's result (``"calls"`` in its inspection), as ``name@phase`` words.

This is a rule for honest students, not a security boundary: the submission's own code runs in this
process and can reach the originals another way (``torch._C._nn`` by another name, a copy taken
through ``gc``, its own kernel), or write its replies itself. A trap that is evaded only loses the
rule's finding; no point is ever earned by it (a rule's case counts only beside right values).
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["PHASES", "Traps", "resolve"]

PHASES = ("forward", "backward")
"""When a trapped call can be noted: while the function runs, or while its backward pass does."""


def resolve(name: str) -> tuple[Any, str, Any] | None:
    """``(owner, attribute, object)`` for a dotted ``name`` (the longest importable module prefix,
    then attributes: ``torch.Tensor.backward`` is the class ``torch.Tensor``'s ``backward``), or
    None when it names nothing here.

    >>> owner, attribute, found = resolve("os.path.join")
    >>> attribute, found is __import__("os").path.join
    ('join', True)
    >>> resolve("os.path.no_such_name") is None
    True
    """
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            owner: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attribute in parts[cut:-1]:
                owner = getattr(owner, attribute)
            return owner, parts[-1], getattr(owner, parts[-1])
        except AttributeError:
            return None
    return None


class Traps:
    """The worker's traps for the dotted ``names`` (see the module docstring).

    ``during(phase, function)`` wraps a function the worker calls so that trapped calls made while
    it runs are noted under ``phase``; :meth:`install` puts the traps in place (once, before the
    submission is imported); :meth:`report` lists what was seen, ``["name@phase", ...]``, sorted.

    >>> import math
    >>> traps = Traps(("math.sqrt",))
    >>> traps.install()
    ['math.sqrt']
    >>> traps.during("forward", lambda x: math.sqrt(x))(4.0), math.sqrt(9.0)
    (2.0, 3.0)
    >>> traps.report()
    ['math.sqrt@forward']
    >>> traps.uninstall()
    """

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = tuple(dict.fromkeys(names))
        self._phase: list[str | None] = [None]
        self._seen: set[str] = set()
        self._placed: list[tuple[Any, str, Any]] = []

    def during(self, phase: str, function: Callable[..., Any]) -> Callable[..., Any]:
        """``function`` with the trap phase set to ``phase`` while it runs (restored after)."""
        if not self.names:
            return function
        cell = self._phase

        def run(*args: Any, **kwargs: Any) -> Any:
            was = cell[0]
            cell[0] = phase
            try:
                return function(*args, **kwargs)
            finally:
                cell[0] = was

        return run

    def install(self) -> list[str]:
        """Replace each named function by its trap wherever a loaded module of its package holds
        it under that name; the names that were found (a name that names nothing is left out)."""
        found = []
        for name in self.names:
            place = resolve(name)
            if place is None:
                continue
            owner, attribute, original = place
            trap = self._trap(name, original)
            holders = [owner]
            package = name.split(".")[0] + "."
            for module_name, module in list(sys.modules.items()):
                if module is owner or not (module_name + ".").startswith(package):
                    continue
                try:
                    if module.__dict__.get(attribute) is original:
                        holders.append(module)
                except AttributeError:
                    continue
            for holder in holders:
                try:
                    setattr(holder, attribute, trap)
                except (AttributeError, TypeError):
                    continue
                self._placed.append((holder, attribute, original))
            found.append(name)
        return found

    def uninstall(self) -> None:
        """Put the originals back (for tests; a worker keeps its traps until it ends)."""
        for holder, attribute, original in reversed(self._placed):
            setattr(holder, attribute, original)
        self._placed.clear()

    def _trap(self, name: str, original: Any) -> Callable[..., Any]:
        cell, seen = self._phase, self._seen
        add = seen.add

        @functools.wraps(original)
        def trap(*args: Any, **kwargs: Any) -> Any:
            phase = cell[0]
            if phase is not None:
                add(f"{name}@{phase}")
            return original(*args, **kwargs)

        return trap

    def clear(self) -> None:
        """Forget what the traps saw so far (a worker serving several functions reports each call's own)."""
        self._seen.clear()

    def report(self) -> list[str]:
        """What the traps saw: ``name@phase`` words, sorted."""
        return sorted(self._seen)
