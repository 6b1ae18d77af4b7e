"""The array arguments of every node constructor: one parser, one set of checks and messages.

Every array argument (``reads=``, ``writes=``, ``updates=``, a ``while_loop``/``if_else``
condition, ``compact``'s ``alive``, ``reorder``'s sort key, ``send``/``recv`` of the
collectives, the operands of ``ufunc`` and the random nodes) is either an array, named by
the argument's default name, or a one-entry dict ``{name: array}`` naming it for the
picture, the profile and the messages. ``reads``, ``writes`` and ``updates`` also take a
dict of several entries. An array is a NumPy array, a ``__cuda_array_interface__`` array
(CuPy), or an object exporting DLPack or the array interface (PyTorch, JAX...), which
becomes the NumPy or CuPy view eagle schedules (``eagle.record.foreign``).
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from eagle._text import check_name
from eagle.record.foreign import adopt, has_dlpack
from eagle.record.memory import array_kind

__all__ = ["named_array", "named_arrays"]

_DLPACK = (" through DLPack, or through the old, unversioned DLPack protocol, which carries no "
           "read-only flag and which NumPy therefore imports read-only")
_AN_ARRAY = ("a NumPy array, a CUDA array (__cuda_array_interface__), or an object exporting "
             "DLPack or the array interface")


def _check_name(name, what):
    check_name(name, f"{what}: an array name")


def _array(a, what, write, expected=None):
    """``a`` as the NumPy or CUDA view eagle schedules, or TypeError naming ``what``;
    ValueError when the node writes it (``write``) and its memory is read-only."""
    view = adopt(a, what)
    if view is None or array_kind(view) is None:
        raise TypeError(f"{what} must be {expected or _AN_ARRAY}, got {type(a).__name__}")
    if write and _read_only(view):
        how = "" if view is a else f" ({type(a).__name__} exports it read-only{_DLPACK if has_dlpack(a) else ''})"
        raise ValueError(f"{what} is read-only{how}, and the node writes it: pass a writable array")
    return view


def _read_only(view):
    if isinstance(view, np.ndarray):
        return not view.flags.writeable
    iface = getattr(view, "__cuda_array_interface__", None)
    return bool(iface and (iface["data"][1] or iface.get("readonly")))


def named_array(arg: Any, what: str, default: str, *, write: bool = False,
                expected: str | None = None) -> tuple[str, Any]:
    """``(name, array)`` of one array argument: an array (named ``default``) or a one-entry
    dict ``{name: array}``. ``what`` names the argument in messages (``"compact(): alive"``);
    ``write``: the node writes it (read-only memory is refused); ``expected``:
    what the argument may be, for the message when it is neither (default: an array)."""
    if isinstance(arg, Mapping):
        if len(arg) != 1:
            got = (f"a dict of {len(arg)} entries ({', '.join(map(repr, arg))}): it takes one array"
                   if arg else "an empty dict: no array to take")
            raise TypeError(f"{what} is an array or a one-entry dict {{name: array}}, got {got}")
        (name, a), = arg.items()
        _check_name(name, what)
        return name, _array(a, f"{what} {name!r}", write)
    return default, _array(arg, what, write, expected)


def named_arrays(arg: Any, what: str, default: str, *, write: bool = False) -> dict:
    """``reads=``/``writes=``/``updates=``: None (nothing), an array (named ``default``), or a
    dict of name -> array, as a plain ordered dict of the views eagle schedules."""
    if arg is None:
        return {}
    if not isinstance(arg, Mapping):
        return {default: _array(arg, what, write, "an array or a dict {name: array} (" + _AN_ARRAY + ")")}
    out = {}
    for name, a in arg.items():
        _check_name(name, what)
        out[name] = _array(a, f"{what}[{name!r}]", write)
    return out
