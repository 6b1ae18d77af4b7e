"""eagle: record a compute step once as a graph, replay it many times with one call.

    import eagle
    from eagle.graph import opaque, native

    g = eagle.Graph()
    g.add_node(opaque(step, reads={"x": x}, writes={"y": y}), name="step")
    g.build()          # cpu for NumPy arrays, cuda for CuPy arrays
    g.launch(1000)     # 1000 replays, one call
    g.set_logical_size(500)   # sized nodes now process 500 samples, no re-recording
"""
import os as _os   # not eagle.os: dir(eagle) lists only what eagle offers


def _defer_to_installed_copy():
    """Run from a source checkout that has no compiled modules (``python -m eagle``
    right after ``pip install .`` puts the checkout first on sys.path), import
    eagle's modules from the installed copy instead."""
    import importlib.machinery
    import sys

    here = _os.path.dirname(_os.path.abspath(__file__))
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    if any(f.startswith("_core") and f.endswith(suffixes) for f in _os.listdir(here)):
        return
    for entry in sys.path:
        candidate = _os.path.join(_os.path.abspath(entry or _os.curdir), "eagle")
        if candidate != here and _os.path.isdir(candidate) and any(
                f.startswith("_core") and f.endswith(suffixes) for f in _os.listdir(candidate)):
            __path__[:] = [candidate]
            return
    raise ImportError(f"eagle's compiled modules are missing in {here} and no installed eagle was "
                      "found: run `pip install .` (or `pip install -e .` to work on the source)")


_defer_to_installed_copy()

# Idle OpenMP threads spin before they sleep; libgomp's default spin (300,000
# rounds, milliseconds) burns a core after every launch and, beside a busy
# process, steals the CPU from the threads doing the work. Unless the user
# chose (OMP_WAIT_POLICY or GOMP_SPINCOUNT), eagle asks for a short spin. It
# is read once, when libgomp loads with eagle's executor (not if another
# library loaded it first); the setting is not left in the environment.
_SPIN_SET = not ({"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"} & set(_os.environ))
if _SPIN_SET:
    _os.environ["GOMP_SPINCOUNT"] = "10000"
try:
    from eagle.cpu.threads import get_num_threads, have_openmp, max_threads, set_num_threads  # noqa: E402
finally:
    if _SPIN_SET:
        _os.environ.pop("GOMP_SPINCOUNT", None)

from eagle import kernels, native  # noqa: E402
from eagle._errors import CudaError, GroupConflictError, NotBuiltError
from eagle.graph import CpuOptions, CudaOptions, Graph
from eagle.observe import Profile, profile
from eagle.stepcapture import CaptureError, CapturedGraph, capture

__version__ = "0.1.0"
__all__ = ["Graph", "capture", "CapturedGraph", "CaptureError", "CpuOptions", "CudaOptions", "GroupConflictError", "NotBuiltError", "CudaError", "Profile",
           "profile", "get_num_threads", "set_num_threads", "max_threads", "have_openmp", "show_config",
           "get_include", "__version__"]


def __getattr__(name):
    if name == "GroupConflict":
        from eagle._public import probed_by_import, warn_renamed

        if not probed_by_import():
            warn_renamed("eagle.GroupConflict", "eagle.GroupConflictError")
        return GroupConflictError
    raise AttributeError(f"module 'eagle' has no attribute {name!r}")


def __dir__():
    from eagle._public import public_dir

    return public_dir(globals())


def get_include() -> str:
    """Directory of eagle's C and C++ headers (``eagle/kernel.h``, ``eagle/cuda.hpp``)."""
    return _os.path.join(__path__[0], "include")


def show_config() -> None:
    """Print how this eagle was built and what it will use at run time."""
    import numpy as np

    from eagle.cpu.threads import usable_cpus

    print(f"eagle {__version__}")
    print(f"  numpy            {np.__version__}")
    print(f"  OpenMP executor  {'yes' if have_openmp() else 'NO: built without OpenMP, the cpu backend runs serially'}")
    print(f"  threads          {get_num_threads()} (usable CPUs: {usable_cpus()}, "
          f"OMP_NUM_THREADS={_os.environ.get('OMP_NUM_THREADS', 'unset')}, at most {max_threads()})")
    spin = ("GOMP_SPINCOUNT=10000 (eagle's default: idle threads sleep soon)" if _SPIN_SET else
            f"yours: OMP_WAIT_POLICY={_os.environ.get('OMP_WAIT_POLICY', 'unset')}, "
            f"GOMP_SPINCOUNT={_os.environ.get('GOMP_SPINCOUNT', 'unset')}")
    print(f"  idle spin        {spin}")
    try:
        from eagle.cuda import _driver as _cuda
    except ImportError:
        print("  cuda backend     not built")
    else:
        print(f"  cuda backend     {_cuda.driver_status()}")
