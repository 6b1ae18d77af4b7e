"""The real NVRTC, from NVIDIA's pip wheel (nvidia-cuda-nvrtc; no GPU or driver needed),
called through ctypes: compiles eagle's CUDA C as CuPy does on a GPU.

``load()`` returns an ``Nvrtc`` or raises ``Unavailable`` with the reason (the wheel is
not installed, or its library does not load here). Env ``EAGLE_TEST_NVRTC`` names a
libnvrtc.so to use instead of the wheel's.
"""
import ctypes
import glob
import os


class Unavailable(RuntimeError):
    pass


class CompileError(AssertionError):
    pass


def _wheel_library():
    try:
        import nvidia
    except ImportError:
        return None
    # cu13/lib/libnvrtc.so.13 (CUDA 13 wheels), cuda_nvrtc/lib/libnvrtc.so.12 (CUDA 12)
    for base in getattr(nvidia, "__path__", []):
        found = sorted(p for p in glob.glob(os.path.join(base, "*", "lib", "libnvrtc.so*"))
                       if "builtins" not in os.path.basename(p))
        if found:
            return found[-1]
    return None


class Nvrtc:
    def __init__(self, path):
        self.path = path
        # NVRTC dlopens its builtins library by name, found through its own RUNPATH
        # ($ORIGIN). Under AddressSanitizer (tests/sanitize.sh preloads it) dlopen is
        # intercepted, the lookup loses libnvrtc's RUNPATH and every compile failed
        # ("failed to open libnvrtc-builtins.so.13.5"); loaded here first by its full
        # path, the library is already in the process when NVRTC asks for it.
        for builtins in sorted(glob.glob(os.path.join(os.path.dirname(path), "libnvrtc-builtins.so*"))):
            ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
        lib = self._lib = ctypes.CDLL(path)
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._check(lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)))
        self.version = (major.value, minor.value)

    def _check(self, status):
        if status != 0:
            raise CompileError(self._lib.nvrtcGetErrorString(status).decode())

    def compile(self, source, options, name="eagle.cu"):
        """(PTX, log) of ``source`` compiled with ``options``; CompileError with the log
        when NVRTC refuses it."""
        lib = self._lib
        prog = ctypes.c_void_p()
        self._check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None))
        try:
            opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
            status = lib.nvrtcCompileProgram(prog, len(options), opts)
            n = ctypes.c_size_t()
            self._check(lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n)))
            buf = ctypes.create_string_buffer(n.value)
            self._check(lib.nvrtcGetProgramLog(prog, buf))
            log = buf.value.decode(errors="replace")
            if status != 0:
                raise CompileError(f"NVRTC {self.version} refused {name} with {' '.join(options)}:\n{log}")
            self._check(lib.nvrtcGetPTXSize(prog, ctypes.byref(n)))
            ptx = ctypes.create_string_buffer(n.value)
            self._check(lib.nvrtcGetPTX(prog, ptx))
            return ptx.value.decode(), log
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))


def load():
    path = os.environ.get("EAGLE_TEST_NVRTC") or _wheel_library()
    if path is None:
        raise Unavailable("NVIDIA's NVRTC wheel is not installed (pip install nvidia-cuda-nvrtc; the test "
                          "extra installs it on Linux)")
    try:
        return Nvrtc(path)
    except OSError as e:
        raise Unavailable(f"{path} does not load here: {e}") from None


def ptx_function(ptx, name):
    """The PTX text of entry ``name`` (from its .entry line to the next .entry or the end)."""
    start = ptx.find(f".entry {name}(")
    if start < 0:
        raise KeyError(name)
    end = ptx.find(".entry ", start + 1)
    return ptx[start:end if end >= 0 else len(ptx)]
