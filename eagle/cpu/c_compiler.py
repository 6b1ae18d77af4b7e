"""Compiling a generated C source into a shared library, cached on disk.

``load(source)`` returns the loaded library (``ctypes.CDLL``) of a C source, compiled by
the platform's C compiler: ``EAGLE_CC`` if set, else sysconfig's ``CC`` (the compiler
Python was built with), else ``cc``, found on ``PATH``. Flags: ``FLAGS`` (``-O3`` with
``-ffp-contract=off`` and no fast-math: each C operation is the one IEEE operation
written, so generated loops give NumPy's results bit for bit), ``-march=native`` on
x86-64. The library is cached as ``<cache>/codegen/k_<hash>.so``: ``EAGLE_CACHE_DIR``
if set, else ``$XDG_CACHE_HOME/eagle``, else ``~/.cache/eagle``; the hash covers the
source, the compiler command and flags, the compiler's file (path, size, time) and the
CPU's flags (``-march=native`` code runs on this CPU only). A compile writes a temporary
name in the cache then renames it, so processes compiling the same source at once each
get a whole library. A library cached once is loaded without calling the compiler.

``CompileError`` says why there is no library (no compiler, the compiler's message).
A source that failed is not compiled again in this process.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
import threading

__all__ = ["CompileError", "load", "cache_dir", "compiler"]

FLAGS = ("-O3", "-ffp-contract=off", "-fno-fast-math", "-fPIC", "-shared", "-std=c99")
#: a compile taking longer is given up (a hung compiler must not hang build())
TIMEOUT_S = 120

_lock = threading.Lock()
_loaded: dict = {}       # hash -> CDLL, or the CompileError it raised
_cpu_flags = None


class CompileError(RuntimeError):
    """No library for a generated source: no compiler, or the compiler failed."""


def cache_dir() -> str:
    """Where compiled libraries are kept (see the module's docstring)."""
    root = os.environ.get("EAGLE_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(xdg, "eagle")
    return os.path.join(root, "codegen")


def compiler() -> list | None:
    """The compiler command (a list: the program's full path, then its own flags), or None."""
    asked = os.environ.get("EAGLE_CC")
    candidates = [shlex.split(asked)] if asked else [shlex.split(sysconfig.get_config_var("CC") or ""),
                                                      ["cc"]]
    for argv in candidates:
        path = shutil.which(argv[0]) if argv else None
        if path is not None:
            return [path] + argv[1:]
    return None


def _machine_flags() -> tuple:
    return ("-march=native",) if platform.machine() in ("x86_64", "AMD64") else ()


def _cpu_identity() -> str:
    global _cpu_flags
    if _cpu_flags is None:
        try:
            with open("/proc/cpuinfo") as f:
                _cpu_flags = next((ln for ln in f if ln.startswith(("flags", "Features"))), "")
        except OSError:
            _cpu_flags = platform.processor()
    return _cpu_flags


def _key(source: str, argv: list) -> str:
    st = os.stat(argv[0])
    h = hashlib.sha256()
    for part in (source, "\0".join(argv), f"{st.st_size}:{st.st_mtime_ns}", _cpu_identity(),
                 platform.platform()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def load(source: str, *, compiler_argv=None):
    """The ``ctypes.CDLL`` of ``source``, compiled or from the cache; ``CompileError``."""
    argv = compiler_argv if compiler_argv is not None else compiler()
    if argv is None:
        raise CompileError("no C compiler found (EAGLE_CC, sysconfig's CC, cc)")
    argv = list(argv) + list(FLAGS) + list(_machine_flags())
    key = _key(source, argv)
    with _lock:
        got = _loaded.get(key)
        if got is None:
            try:
                got = _load_or_compile(source, argv, key)
            except CompileError as e:
                got = e
            _loaded[key] = got
    if isinstance(got, CompileError):
        raise got
    return got


def _load_or_compile(source, argv, key):
    folder = cache_dir()
    path = os.path.join(folder, f"k_{key}.so")
    if os.path.exists(path):
        try:
            return ctypes.CDLL(path)
        except OSError:
            pass   # a truncated or foreign file: compile it again
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise CompileError(f"cannot create the cache folder {folder}: {e}") from None
    fd, c_path = tempfile.mkstemp(prefix=f"k_{key}.", suffix=".c", dir=folder)
    so_tmp = c_path[:-2] + ".so.tmp"
    try:
        with os.fdopen(fd, "w") as f:
            f.write(source)
        try:
            done = subprocess.run(argv + ["-o", so_tmp, c_path], capture_output=True, text=True,
                                  timeout=TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as e:
            raise CompileError(f"{argv[0]} could not run: {e}") from None
        if done.returncode != 0:
            message = (done.stderr or done.stdout).strip()
            raise CompileError(f"{shlex.join(argv[:1])} failed (exit {done.returncode}): "
                               f"{message[-2000:]}")
        os.replace(so_tmp, path)
    finally:
        for p in (c_path, so_tmp):
            try:
                os.unlink(p)
            except OSError:
                pass
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        raise CompileError(f"the compiled library {path} does not load: {e}") from None
