"""Compiling a generated C source into a shared library, cached on disk.

``load(source)`` returns the loaded library (``ctypes.CDLL``) of a C source, compiled by
the platform's C compiler: ``EAGLE_CC`` if set, else sysconfig's ``CC`` (the compiler
Python was built with), else ``cc``, found on ``PATH``. Flags: ``FLAGS`` (``-O3`` with
``-ffp-contract=off``, ``-fno-trapping-math`` and no fast-math: each C operation is the one IEEE operation
written, so generated loops give NumPy's results bit for bit), ``-march=native`` on
x86-64. The library is cached as ``<cache>/codegen/k_<hash>.so``: ``EAGLE_CACHE_DIR``
if set, else ``$XDG_CACHE_HOME/eagle``, else ``~/.cache/eagle``; the hash covers the
source, the compiler command and flags, the file (path, size, time) of each program the
command names (``ccache gcc``: both, so a new ``gcc`` behind the launcher is noticed) and
the CPU's flags (``-march=native`` code runs on this CPU only). A compile writes a temporary
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
import signal
import struct
import subprocess
import sys
import sysconfig
import tempfile
import threading

__all__ = ["CompileError", "load", "cache_dir", "compiler"]

# -fno-trapping-math: the selects that keep NaN payloads (eagle.cpu.codegen) are
# if-converted and the loop vectorized; it changes no value, only which FP exception flags
# a loop raises, which a replay does not report
FLAGS = ("-O3", "-ffp-contract=off", "-fno-fast-math", "-fno-trapping-math", "-fPIC", "-shared",
         "-std=c99")
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


def _programs(command: list) -> str:
    """Path, size and time of each program the compiler command names: the command's first
    word, and any later word that is not an option and is found on PATH (the compiler behind
    a launcher such as ``ccache gcc``)."""
    found = []
    for i, word in enumerate(command):
        path = word if i == 0 else (shutil.which(word) if not word.startswith("-") else None)
        if path is None:
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue
        found.append(f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}")
    return "\0".join(found)


def _key(source: str, argv: list, command: list) -> str:
    h = hashlib.sha256()
    for part in (source, "\0".join(argv), _programs(command), _cpu_identity(),
                 platform.platform()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def load(source: str, *, compiler_argv=None, symbol=None):
    """The ``ctypes.CDLL`` of ``source``, compiled or from the cache; ``CompileError``.
    A cached file that does not load, or lacks ``symbol``, is compiled again."""
    argv = compiler_argv if compiler_argv is not None else compiler()
    if argv is None:
        raise CompileError("no C compiler found (EAGLE_CC, sysconfig's CC, cc)")
    command = list(argv)
    argv = command + list(FLAGS) + list(_machine_flags())
    key = _key(source, argv, command)
    with _lock:
        got = _loaded.get(key)
        if got is None:
            try:
                got = _load_or_compile(source, argv, key, symbol)
            except CompileError as e:
                got = e
            _loaded[key] = got
    if isinstance(got, CompileError):
        raise got
    return got


def _whole_elf(path) -> bool:
    """Whether an ELF file holds every byte its headers point to: the loader maps a
    truncated library without complaint, then faults (SIGBUS) on the missing pages.
    Files of other formats pass (the loader's own checks are left to judge them)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(64)
            if head[:4] != b"\x7fELF":
                return len(head) >= 4 and not sys.platform.startswith("linux")
            wide, order = head[4] == 2, "<" if head[5] == 1 else ">"
            if len(head) < (64 if wide else 52):
                return False
            if wide:
                phoff, shoff = struct.unpack_from(order + "QQ", head, 32)
                phentsize, phnum, shentsize, shnum = struct.unpack_from(order + "HHHH", head, 54)
            else:
                phoff, shoff = struct.unpack_from(order + "II", head, 28)
                phentsize, phnum, shentsize, shnum = struct.unpack_from(order + "HHHH", head, 42)
            if phoff + phentsize * phnum > size or shoff + shentsize * shnum > size:
                return False
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            for k in range(phnum):
                at = k * phentsize
                if wide:
                    offset, filesz = (struct.unpack_from(order + "Q", table, at + 8)[0],
                                      struct.unpack_from(order + "Q", table, at + 32)[0])
                else:
                    offset, filesz = (struct.unpack_from(order + "I", table, at + 4)[0],
                                      struct.unpack_from(order + "I", table, at + 16)[0])
                if offset + filesz > size:
                    return False
            return True
    except (OSError, struct.error):
        return False


def _open(path, symbol):
    """The library at ``path`` if it is whole, loads and has ``symbol``, else None."""
    if not _whole_elf(path):
        return None
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    return lib if symbol is None or hasattr(lib, symbol) else None


def _open_fresh(path, symbol):
    """Open the library now at ``path`` under a name of its own: the loader matches a
    library by name, and may hold the foreign one that was there before."""
    alias = f"{path[:-3]}.{os.getpid()}.{threading.get_ident()}.so"
    try:
        try:
            os.link(path, alias)
        except OSError:
            shutil.copyfile(path, alias)
        return _open(alias, symbol)
    finally:
        try:
            os.unlink(alias)
        except OSError:
            pass


def _run(argv):
    """Run the compiler in a session of its own; on a timeout or Ctrl-C the whole session
    (the driver's cc1, as, ld; a wrapper's children) is ended, not the driver alone."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except BaseException as e:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        proc.communicate()
        if isinstance(e, subprocess.TimeoutExpired):
            raise CompileError(f"{argv[0]} could not run: no result after {TIMEOUT_S} s") from None
        raise
    return proc.returncode, out, err


def _load_or_compile(source, argv, key, symbol):
    folder = cache_dir()
    path = os.path.join(folder, f"k_{key}.so")
    stale = os.path.exists(path)
    if stale:
        lib = _open(path, symbol)
        if lib is not None:
            return lib
    try:
        os.makedirs(folder, exist_ok=True)
        fd, c_path = tempfile.mkstemp(prefix=f"k_{key}.", suffix=".c", dir=folder)
    except OSError as e:
        raise CompileError(f"cannot write in the cache folder {folder}: {e}") from None
    so_tmp = c_path[:-2] + ".so.tmp"
    try:
        with os.fdopen(fd, "w") as f:
            f.write(source)
        try:
            code, out, err = _run(argv + ["-o", so_tmp, c_path])
        except OSError as e:
            raise CompileError(f"{argv[0]} could not run: {e}") from None
        if code != 0:
            message = (err or out).strip()
            raise CompileError(f"{shlex.join(argv[:1])} failed (exit {code}): {message[-2000:]}")
        os.replace(so_tmp, path)
    except OSError as e:
        raise CompileError(f"cannot write in the cache folder {folder}: {e}") from None
    finally:
        for p in (c_path, so_tmp):
            try:
                os.unlink(p)
            except OSError:
                pass
    lib = _open_fresh(path, symbol) if stale else _open(path, symbol)
    if lib is None:
        raise CompileError(f"the compiled library {path} does not load or lacks {symbol}")
    return lib
