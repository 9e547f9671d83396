"""How what the submission raised or lacked reads, and its verdict: an exception in a call or at import
(GPU memory, ``torch.compile`` that could not compile here, a failed import statement), a missing
entry file or function (:mod:`attnscore.boundary.worker`, and the self-check in process).
"""

from __future__ import annotations

import os
import traceback
from typing import Any

from attnscore.boundary.modules import ModuleFailure
from attnscore.boundary.verdict import Verdict


def verdict_of_backward(failure: Any) -> Verdict:
    """A backward pass that could not run: an exception verdict when it raised, else a bad return."""
    return Verdict.EXCEPTION if failure.exception else Verdict.BAD_RETURN_TYPE


def failure_verdict(exc: BaseException) -> Verdict:
    """The verdict of an exception the submission raised (in a call or at import):
    :attr:`Verdict.MEMORY_LIMIT` when it says memory ran out (host or GPU), else :attr:`Verdict.EXCEPTION`."""
    from attnscore.boundary.calls import exception_text, type_name

    if type(exc) is ModuleFailure:  # a module handed in: its own verdict, or that of what it raised
        return exc.verdict if exc.cause is None else failure_verdict(exc.cause)
    text = exception_text(exc) or ""
    if gpu_out_of_memory(type_name(exc), text):
        return Verdict.MEMORY_LIMIT
    if isinstance(exc, MemoryError) or "can't allocate memory" in text or "not enough memory" in text:
        return Verdict.MEMORY_LIMIT
    return Verdict.EXCEPTION


def raised_name(exc: BaseException) -> str:
    """The type name of what the submission raised: ``exc``'s own, or for a module's failure
    (:class:`attnscore.boundary.modules.ModuleFailure`) that of the exception it stands for (``""``
    when it stands for none: a parameter mismatch is no exception of the submission's)."""
    from attnscore.boundary.calls import type_name

    if type(exc) is ModuleFailure:
        return exc.exception
    return type_name(exc)


def gpu_out_of_memory(type_name: str, text: str) -> bool:
    """Whether an exception of class ``type_name`` with message ``text`` says the GPU ran out of
    memory (``torch.cuda.OutOfMemoryError``, or a CUDA/cuBLAS allocation failure)."""
    return (
        type_name == "OutOfMemoryError"
        or "CUDA out of memory" in text
        or "CUBLAS_STATUS_ALLOC_FAILED" in text
        or "cudaErrorMemoryAllocation" in text
    )


def describe_failure(exc: BaseException) -> str:
    """How a call's exception reads in feedback; GPU memory exhaustion says so first; a module's
    failure (:class:`attnscore.boundary.modules.ModuleFailure`) is its own message."""
    from attnscore.boundary.calls import describe_exception, exception_text, type_name

    if type(exc) is ModuleFailure:
        return exc.message
    text = describe_exception(exc)
    if gpu_out_of_memory(type_name(exc), exception_text(exc) or ""):
        return f"ran out of GPU memory (it allocated more than the GPU holds): {text}"
    return text


def compiler_clue(exc: BaseException) -> str | None:
    """A few words when ``exc`` says that ``torch.compile`` could not compile on this machine: an
    exception of Dynamo or Inductor whose chain (causes, contexts, wrapped exceptions) holds no
    working C++ compiler, a failed C++ compilation, or a permission or disk error; else None."""
    todo: list[Any] = [exc]
    seen: list[int] = []
    inside, found = False, None
    while todo and len(seen) < 16:
        current = todo.pop()
        try:
            if current is None or id(current) in seen:
                continue
            seen.append(id(current))
            kind = type(current)
            module, name = str(getattr(kind, "__module__", "")), kind.__name__
            inside = inside or module.startswith(("torch._inductor", "torch._dynamo"))
            if name == "InvalidCxxCompiler":
                found = found or "no working C++ compiler"
            elif name == "CppCompileError":
                found = found or "the C++ compiler failed on the generated code"
            elif isinstance(current, PermissionError):
                found = found or "permission denied"
            elif isinstance(current, OSError) and current.errno in (28, 27, 122):  # ENOSPC, EFBIG, EDQUOT
                found = found or "no room to write the compiled code"
            todo += [current.__cause__, current.__context__, getattr(current, "inner_exception", None)]
        except BaseException:  # noqa: BLE001 - attributes of a hostile exception
            break
    return found if inside else None


def environment_clues(exc: BaseException) -> dict[str, str]:
    """The module a ``ModuleNotFoundError`` or the file a ``PermissionError`` in ``exc``'s chain
    was about, and whether ``torch.compile`` could not compile (:func:`compiler_clue`), for the
    grader to decide whether the machine, not the student, is at fault."""
    clues: dict[str, str] = {}
    compiler = compiler_clue(exc)
    if compiler:
        clues["compiler"] = compiler
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 8:
        try:
            if isinstance(current, ModuleNotFoundError) and isinstance(current.name, str):
                clues.setdefault("module", current.name[:300])
            elif isinstance(current, PermissionError) and isinstance(current.filename, str):
                clues.setdefault("file", current.filename[:1000])
            current = current.__cause__ or current.__context__
        except BaseException:  # noqa: BLE001 - attributes of a hostile exception
            break
        seen += 1
    return clues


def describe_import_error(exc: BaseException, path: str, machine: str = "this grader") -> str:
    """How an exception raised while importing the submission's file ``path`` reads in feedback:
    its class, the line of ``path`` it came from (a syntax error's own line) and its message. An
    ``import`` statement of the submission's own files that failed is named with its line
    (``line 3: `import pandas as pd` failed: pandas is not installed on this grader``, ``machine``
    saying where; :func:`attnscore.boundary.standins.failed_import_text`), never a line of a module
    the package imports."""
    from attnscore.boundary.calls import exception_text, type_name
    from attnscore.boundary.standins import failed_import_text

    if isinstance(exc, SyntaxError):
        try:
            where = f" (line {int(exc.lineno)})" if exc.lineno else ""
            return f"your file could not be imported: SyntaxError{where}: {str(exc.msg)[:300]}"
        except BaseException:  # noqa: BLE001 - a SyntaxError subclass with hostile attributes
            return "your file could not be imported: SyntaxError"
    folder = os.path.dirname(path)
    try:
        tb = traceback.extract_tb(exc.__traceback__)
        frames = [f for f in tb if f.filename == path]
        own = [f for f in tb if isinstance(f.filename, str) and f.filename.startswith(folder + os.sep)]
    except BaseException:  # noqa: BLE001
        frames, own = [], []
    statement = _import_statement(own[-1].filename, own[-1].lineno) if own and own[-1].lineno else None
    if statement is not None:
        name = os.path.relpath(own[-1].filename, folder)
        where = f"line {own[-1].lineno}" if own[-1].filename == path else f"{name}, line {own[-1].lineno}"
        return "your file could not be imported: " + failed_import_text(where, statement, exc, machine)[0]
    where = f" (line {frames[-1].lineno})" if frames else ""
    text = exception_text(exc)
    return f"your file could not be imported: {type_name(exc)}{where}" + (f": {text}" if text else "")


def _import_statement(filename: str, line: int) -> str | None:
    """The source of the ``import`` or ``from ... import`` statement that starts at ``line`` of
    ``filename`` (a file of the submission), or None when none does."""
    import ast

    try:
        with open(filename, "rb") as f:
            source = f.read(1 << 22).decode("utf-8", errors="replace")
        tree = ast.parse(source)
    except BaseException:  # noqa: BLE001 - unreadable or unparsable: no statement to name
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno == line:
            return ast.get_source_segment(source, node) or None
    return None


def missing_entry_text(entry: str, files: list[str]) -> str:
    """The load failure of a submission that has no file ``entry`` (its top-level ``.py`` ``files``;
    at most 12 are named, then how many more)."""
    from attnscore.boundary.untrusted import cut, shown_list

    listed = shown_list(sorted(files)) or "none"
    return f"your submission has no file named {cut(entry, 200)!r} (its .py files: {listed})"


def missing_function_text(function_name: str, value: object, namespace: dict[str, Any], module_name: str) -> str:
    """The load failure of a file whose module ``module_name`` (globals ``namespace``) binds
    ``function_name`` to ``value``, which is None or not callable; it lists the functions the
    file itself defines (at most 20, then how many more: the text is bounded where it is made)."""
    from attnscore.boundary.untrusted import shown_list

    defined = sorted(
        n
        for n, v in namespace.items()
        if callable(v) and not n.startswith("_") and getattr(v, "__module__", None) == module_name
    )
    found = f"; it defines: {shown_list(defined, most=20)}" if defined else "; it defines no functions"
    kind = type(value).__name__[:100]
    what = "no function" if value is None else f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}, not a function,"
    return f"your file has {what} named {function_name!r}{found}"
