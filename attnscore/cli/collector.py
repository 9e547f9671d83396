"""The console script's garbage collector: what a short-lived ``attnscore`` process never rescans.

CPython's full (generation 2) collection scans every object a process holds that is not frozen.
torch's import makes over a million, and attnscore imports torch lazily, wherever a command first
needs it (loading a submission, building a callable, the grader's diagnoses), after hundreds of
its own modules. So in a cold ``attnscore check`` torch's import ran one full collection more than
a bare ``import torch`` does, over attnscore's objects and torch's (0.06 to 0.13 s on this 2-core
machine, most of what the check then cost beyond ``import torch``), and collected nothing of them:
module-level objects live until the process ends.

:func:`freeze_after_imports` moves what is there into the collector's permanent generation
(:func:`gc.freeze`) at once, again right before ``torch``'s code runs, and again after it, by
whoever imports it. Objects made later are collected as always, so a long class run's memory
stays flat. :func:`freeze_at_exit` freezes once more as the command ends: the interpreter's own
full collections while it shuts down then scan nothing (without it, about 0.1 s at the end of a
class run; 0.5 s in a process that imported torch and matplotlib and froze neither). Only the
console script (:func:`attnscore.cli.run`) calls them: a process that calls
:func:`attnscore.cli.main` itself (tests, notebooks) keeps its collector as it is.
"""

from __future__ import annotations

import gc
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

__all__ = ["FreezeAfterImport", "freeze_after_imports", "freeze_at_exit"]

HEAVY = ("torch",)
"""The modules after whose import the collector is frozen again: those whose import makes most of
a process's long-lived objects."""


class FreezeAfterImport(importlib.abc.MetaPathFinder):
    """A finder that finds nothing of its own: for ``name`` it asks the finders after it, and the
    module they find, once its code has run, is followed by :func:`gc.freeze`. It then leaves
    ``sys.meta_path`` (one import, one freeze); a module whose code fails to run leaves it there,
    for the next try.

    The module keeps the loader that found it (``__loader__``, ``__spec__.loader``): this one only
    stands between the import system and that loader while the module's code runs.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.asking = False  # while it asks the finders after it (which find_spec asks again)

    def find_spec(
        self, fullname: str, path: object = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name or self.asking:
            return None
        self.asking = True
        try:  # the finders after this one, as the import would ask them
            spec = importlib.util.find_spec(fullname)
        finally:
            self.asking = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec  # nothing to stand in for (a namespace package, or not installed)
        # A spec asked for without an import (importlib.util.find_spec) is answered the same way:
        # this finder stays until the module's code has run.
        spec.loader = _Freezing(self, spec.loader)
        return spec


class _Freezing(importlib.abc.Loader):
    """The loader that stands in for ``loader`` while ``finder``'s module runs its code."""

    def __init__(self, finder: FreezeAfterImport, loader: importlib.abc.Loader) -> None:
        self.finder, self.loader = finder, loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        gc.freeze()  # what came before: its full collections during the import would scan it too
        self.loader.exec_module(module)
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        gc.freeze()


def freeze_after_imports(heavy: tuple[str, ...] = HEAVY) -> None:
    """Freeze the collector now (:func:`gc.freeze`), and again after each of ``heavy`` that is not
    imported yet has been (:class:`FreezeAfterImport`, first in ``sys.meta_path``)."""
    gc.freeze()
    for name in heavy:
        if name not in sys.modules and not any(
            isinstance(f, FreezeAfterImport) and f.name == name for f in sys.meta_path
        ):
            sys.meta_path.insert(0, FreezeAfterImport(name))


def freeze_at_exit() -> None:
    """Freeze the collector once more as the command ends, so that the interpreter's own full
    collections while it shuts down scan nothing: whatever the command built after torch's import
    (matplotlib for the report, the cases, the results) is freed by reference counting as the
    modules are cleared, as it would be anyway. Called last by :func:`attnscore.cli.run`, after
    every file the command writes is written and closed."""
    gc.freeze()
