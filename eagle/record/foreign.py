"""Arrays from other libraries, seen as the views eagle schedules.

eagle's recording, staging and kernels work on NumPy arrays (the cpu backend)
and ``__cuda_array_interface__`` arrays (cuda). Anything else that shares its
memory through a standard protocol is turned into such a view when a node is
recorded, so its overlap is computed from its data pointer, shape and strides
like any other view, and a node that writes it writes the original's memory:

* DLPack (``__dlpack__`` and ``__dlpack_device__``: PyTorch, JAX, TensorFlow,
  CuPy, ...): host memory becomes ``np.from_dlpack(obj)``; CUDA memory
  (kDLCUDA, kDLCUDAManaged) is imported by ``cupy.from_dlpack(obj)`` (CuPy
  needed) and scheduled through its ``__cuda_array_interface__`` (``CudaView``).
* the array interface (``__array_interface__``, ``__array_struct__``):
  ``np.asarray(obj)``, checked to be a view, never a copy.

The view holds a reference to what exports the memory (DLPack's capsule or the
object itself), so the memory lives as long as the node does; read-only memory
(DLPack's read-only flag, the array interface's read-only data) stays read-only,
and ``eagle.record.arrays`` refuses it where a node writes it. Devices eagle has
no backend for are refused by name.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from eagle._text import with_article

__all__ = ["adopt", "dlpack_device", "host_view"]

# DLDeviceType (dlpack.h)
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_ROCM, KDL_ROCM_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 10, 11, 13
_DEVICE_NAMES = {
    1: "CPU", 2: "CUDA", 3: "CUDA host (pinned)", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 9: "VPI",
    10: "ROCm", 11: "ROCm host", 12: "ext_dev", 13: "CUDA managed", 14: "oneAPI", 15: "WebGPU",
    16: "Hexagon", 17: "MAIA",
}
#: memory the CPU reads and writes directly: NumPy imports it
HOST_DEVICES = frozenset({KDL_CPU, KDL_CUDA_HOST, KDL_ROCM_HOST})
#: memory the cuda backend schedules: CuPy imports it
CUDA_DEVICES = frozenset({KDL_CUDA, KDL_CUDA_MANAGED})


def has_dlpack(obj: Any) -> bool:
    return hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__")


def dlpack_device(obj: Any) -> tuple[int, int]:
    """``(device_type, device_id)`` of a DLPack exporter, as plain ints."""
    try:
        dev = obj.__dlpack_device__()
        device_type, device_id = dev
        return int(device_type), int(device_id)
    except Exception as exc:
        raise TypeError(f"{type(obj).__name__}.__dlpack_device__() did not give "
                        f"(device_type, device_id): {exc}") from exc


def device_name(device_type: int) -> str:
    return _DEVICE_NAMES.get(device_type, f"device type {device_type}")


def foreign_family(obj: Any) -> str | None:
    """'numpy' (host memory), 'cuda', or None: the backend family of a DLPack or
    array-interface object, from what it says about itself (nothing is imported)."""
    if has_dlpack(obj):
        device_type, _ = dlpack_device(obj)
        if device_type in HOST_DEVICES:
            return "numpy"
        if device_type in CUDA_DEVICES:
            return "cuda"
        return None
    if hasattr(obj, "__array_interface__") or hasattr(obj, "__array_struct__"):
        return "numpy"
    return None


def host_view(obj: Any, what: str = "the array") -> np.ndarray | None:
    """A NumPy view of ``obj``'s host memory, or None when ``obj`` exports none
    (no DLPack, no array interface). Raises ``TypeError`` when it exports memory
    eagle cannot use here: another device, a dtype NumPy has no type for, or a copy
    instead of a view."""
    if isinstance(obj, np.ndarray):
        return obj
    if has_dlpack(obj):
        device_type, _ = dlpack_device(obj)
        if device_type not in HOST_DEVICES:
            raise TypeError(f"{what} is a DLPack tensor on {device_name(device_type)} memory, not "
                            "host memory")
        try:
            view = np.from_dlpack(obj)
        except Exception as exc:
            raise TypeError(f"{what}: NumPy cannot import this {type(obj).__name__} through DLPack "
                            f"({exc})") from exc
        return view
    if hasattr(obj, "__array_interface__") or hasattr(obj, "__array_struct__"):
        try:
            view = np.asarray(obj)
            ptr = _interface_pointer(obj)
        except Exception as exc:
            raise TypeError(f"{what}: NumPy cannot read the array interface of this "
                            f"{type(obj).__name__} ({exc})") from exc
        # view is a base-class ndarray (np.asarray makes one), so its own interface is honest;
        # ptr is what obj says of itself (eagle.record.memory.data_pointer reads ndarrays)
        if view.size and ptr is not None and view.__array_interface__["data"][0] != ptr:
            raise TypeError(f"{what}: np.asarray() on this {type(obj).__name__} gives a copy, not a "
                            "view of its memory; eagle must see the memory a node uses")
        return view
    return None


def _interface_pointer(obj):
    iface = getattr(obj, "__array_interface__", None)
    if isinstance(iface, dict) and isinstance(iface.get("data"), tuple):
        return iface["data"][0]
    return None  # __array_struct__ or a buffer: NumPy reads the pointer itself


class CudaView:
    """A DLPack CUDA tensor as eagle schedules it: its ``__cuda_array_interface__``
    (from the CuPy view that imported it, which keeps the producer alive). Not a CuPy
    array on purpose: eagle cannot tell which allocation imported memory belongs to,
    so it compares it with every other CUDA array by address."""

    __slots__ = ("array", "source")

    def __init__(self, array, source):
        self.array, self.source = array, source

    @property
    def __cuda_array_interface__(self):
        return self.array.__cuda_array_interface__

    @property
    def shape(self):
        return tuple(self.__cuda_array_interface__["shape"])

    def __repr__(self):
        return f"<CUDA view of {with_article(type(self.source).__name__)} through DLPack, shape {self.shape}>"


def cuda_view(obj: Any, what: str = "the array"):
    """The CUDA memory of a DLPack CUDA tensor, imported by CuPy (needed)."""
    device_type, device_id = dlpack_device(obj)
    try:
        import cupy
    except ImportError:
        raise TypeError(f"{what} is a DLPack tensor on {device_name(device_type)} memory (device "
                        f"{device_id}); eagle imports CUDA tensors through CuPy, which is not "
                        'installed: pip install ".[cuda]"') from None
    try:
        view = cupy.from_dlpack(obj)
    except Exception as exc:
        raise TypeError(f"{what}: CuPy cannot import this {type(obj).__name__} through DLPack "
                        f"({exc})") from exc
    return CudaView(view, obj)


def adopt(obj: Any, what: str):
    """``obj`` itself when eagle schedules it as it is (a NumPy array, a
    ``__cuda_array_interface__`` array), else its NumPy or CuPy view; None when
    it is no array at all."""
    if isinstance(obj, np.ndarray):
        # a captured step's stand-in (eagle.stepcapture) is scheduled as the memory it stands for
        plain = None if type(obj) is np.ndarray else getattr(obj, "__eagle_view__", None)
        return obj if plain is None else plain()
    if hasattr(obj, "__cuda_array_interface__"):
        return obj
    if has_dlpack(obj):
        family = foreign_family(obj)
        if family == "numpy":
            return host_view(obj, what)
        if family == "cuda":
            return cuda_view(obj, what)
        device_type, _ = dlpack_device(obj)
        raise TypeError(f"{what} is a DLPack tensor on {device_name(device_type)} memory; eagle runs "
                        "graphs on host memory (the cpu backend) and CUDA memory (cuda)")
    return host_view(obj, what)
