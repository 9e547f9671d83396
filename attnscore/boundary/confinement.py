"""What the worker may search and read: modules through their readable mirrors, Python's C header
folders, no editable-install hooks, and Landlock's grants (the module folders but the denied ones,
the system, the submission's folder; :mod:`attnscore.boundary.landlock`).
"""

from __future__ import annotations

import os
import sys
from typing import Any


def use_mirrors(mirrors: list[list[str]]) -> None:
    """Search for modules through readable copies: rewrite ``sys.path`` and loaded packages' paths."""
    if not mirrors:
        return
    pairs = [(str(a).rstrip("/"), str(b)) for a, b in mirrors]

    def through(path: str) -> str:
        for original, copy in pairs:
            if path == original or path.startswith(original + "/"):
                return copy + path[len(original) :]
        return path

    sys.path[:] = [through(p) if isinstance(p, str) else p for p in sys.path]
    for module in list(sys.modules.values()):
        search = getattr(module, "__path__", None)
        if isinstance(search, list):
            search[:] = [through(p) if isinstance(p, str) else p for p in search]
    sys.path_importer_cache.clear()
    _headers_through(through)
    real = os.path.realpath(sys.executable) if sys.executable else ""
    if real and through(real) != real:  # torch.compile starts the interpreter again (a CPU probe)
        sys.executable = through(real)


_HEADER_PATHS = ("include", "platinclude")


def _headers_through(through: Any) -> None:
    """Point ``sysconfig``'s C header folders at their readable copies: ``torch.compile``'s C++
    backend (Inductor, and Triton on a GPU) compiles against ``sysconfig.get_path("include")``
    in every install scheme, and the original may lie where the worker's user cannot go (root's
    0700 home). Each scheme's entry is replaced by the copy's literal path; ``INCLUDEPY`` too."""
    import sysconfig

    schemes = getattr(sysconfig, "_INSTALL_SCHEMES", None)
    if not isinstance(schemes, dict):
        return
    for scheme in sysconfig.get_scheme_names():
        for name in _HEADER_PATHS:
            try:
                original = sysconfig.get_path(name, scheme)
            except (KeyError, ValueError, TypeError):
                continue
            copy = through(original)
            if copy != original and "{" not in copy and isinstance(schemes.get(scheme), dict):
                schemes[scheme][name] = copy
    variables = sysconfig.get_config_vars()
    if isinstance(variables.get("INCLUDEPY"), str):
        variables["INCLUDEPY"] = through(variables["INCLUDEPY"])


def header_folders() -> list[str]:
    """The folders of Python's C headers as this process's ``sysconfig`` names them (through the
    readable copies once :func:`attnscore.boundary.worker.prepare` has run), existing ones only: read access for
    ``torch.compile``'s C++ backend."""
    import sysconfig

    found = []
    for name in _HEADER_PATHS:
        try:
            path = sysconfig.get_path(name)
        except (KeyError, ValueError, TypeError):
            continue
        if isinstance(path, str) and os.path.isdir(path):
            found.append(path)
    return list(dict.fromkeys(found))


_KEPT_HEADERS: list[list[str]] = []  # header_folders() as the worker template found them, once


def keep_header_folders() -> None:
    """Find :func:`header_folders` now and let :func:`confine` use them: the worker template
    calls this once it has loaded the runtime (the folders depend only on ``sysconfig``, which
    only :func:`use_mirrors` changes, before), so that no forked worker expands ``sysconfig``'s
    variables again (a quarter of a millisecond, and a copy of every page those variables lie on)."""
    _KEPT_HEADERS[:] = [header_folders()]


def forget_project() -> None:
    """Drop import hooks that editable installs add: they would map names to the project's source."""
    sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
    sys.path[:] = [p for p in sys.path if not (isinstance(p, str) and p.startswith("__editable__"))]
    sys.path_hooks[:] = [h for h in sys.path_hooks if "__editable__" not in getattr(h, "__module__", "")]
    sys.path_importer_cache.clear()


_SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/proc", "/sys")
_ETC_FILES = ("ld.so.cache", "ld.so.conf", "localtime", "passwd", "group", "nsswitch.conf", "hosts")
_DEVICES = ("null", "zero", "full", "random", "urandom")


def granted_paths(path: str, deny: list[str], depth: int = 0) -> list[str]:
    """``path``, or when it holds a ``deny`` folder (the grader's own installed package inside
    site-packages, its project on ``sys.path``), each of its entries but the denied ones."""
    if path in deny:
        return []
    inside = [d for d in deny if d.startswith(path.rstrip("/") + "/")]
    if not inside:
        return [path]
    if depth > 8 or not os.path.isdir(path):
        return []
    granted = []
    for name in sorted(os.listdir(path)):
        granted += granted_paths(os.path.join(path, name), deny, depth + 1)
    return granted


def _list_ahead(modules: list[str], deny: list[str]) -> None:
    """Have Python list each module folder that holds a ``deny`` folder (a site-packages holding the
    grader's installed package) now, before Landlock: Python finds a module by listing each folder
    of ``sys.path`` once and keeping the names, and Landlock grants such a folder's entries but
    not the folder itself, so a worker that confines itself before importing (a fresh worker,
    which loads torch after) could import nothing from there. The listing (top-level names only)
    is what the worker template's imports keep anyway; nothing below a denied folder is listed,
    and nothing in it can be read."""
    import importlib.machinery

    for path in modules:
        top = path.rstrip("/")
        if path not in deny and os.path.isdir(path) and any(d.startswith(top + "/") for d in deny):
            try:
                importlib.machinery.PathFinder.find_spec("_attnscore_list_ahead_", [path])
            except (ImportError, OSError, ValueError):
                pass


def confine(folder: str, deny: list[str], device_files: list[str] | None = None) -> str:
    """Apply Landlock: read the module folders, the system and ``folder``; write the working folder;
    read, write and ioctl the GPU's ``device_files`` (``/dev/nvidia*``, for a GPU worker).

    The ``deny`` folders (the grader's project and its installed packages) are never granted,
    even inside a granted module folder.
    """
    from attnscore.boundary import landlock

    modules = [p for p in sys.path if isinstance(p, str) and os.path.isabs(p) and os.path.exists(p) and p != "/"]
    read = [g for p in dict.fromkeys(modules) for g in granted_paths(p, deny)] + list(_SYSTEM_READ) + [folder]
    headers = _KEPT_HEADERS[0] if _KEPT_HEADERS else header_folders()
    read += [g for p in headers for g in granted_paths(p, deny)]  # torch.compile's C++ backend
    read += ["/etc/ld.so.conf.d", "/etc/fonts"]  # fonts: a leftover matplotlib import stays quiet
    files = [(f"/etc/{name}", landlock.READ_FILE) for name in _ETC_FILES]
    if sys.executable and os.path.isfile(sys.executable):  # torch.compile starts it again to probe the CPU
        files.append((os.path.realpath(sys.executable), landlock.READ_FILE | landlock.EXECUTE))
        venv = os.path.join(sys.prefix, "pyvenv.cfg")  # which a virtual environment's interpreter reads first
        if os.path.isfile(venv):
            files.append((venv, landlock.READ_FILE))
    files += [(f"/dev/{name}", landlock.READ_FILE | landlock.WRITE_FILE) for name in _DEVICES]
    rights = landlock.READ_FILE | landlock.WRITE_FILE | landlock.IOCTL_DEV
    files += [(node, rights) for node in device_files or [] if isinstance(node, str) and node.startswith("/dev/nvidia")]
    _list_ahead(list(dict.fromkeys(modules)), deny)
    return landlock.confine(read, [os.getcwd()], files)


# Names an upload's graded file usually has: they break a tie with an older attempt kept beside it.
