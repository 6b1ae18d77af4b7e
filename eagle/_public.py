"""The public face of eagle's modules: what ``dir()`` shows, and old spellings.

A public module's ``dir()`` lists what it offers (its ``__all__`` and its public
submodules), not what its implementation imports. An old spelling either still works
with a ``DeprecationWarning`` naming the new one, or is refused with an error that names it.

Below every other module: nothing here imports eagle.
"""
from __future__ import annotations

import types
import warnings


def public_dir(namespace: dict, *, submodules: bool = True) -> list[str]:
    """``dir()`` of the module whose globals are ``namespace``: its ``__all__``, its public
    submodules that are imported (``submodules=False``: only those its ``__all__`` names),
    and the dunders a module has (``__doc__``...)."""
    name = namespace["__name__"]
    offered = set(namespace.get("__all__", ()))
    for k, v in namespace.items():
        if (submodules and isinstance(v, types.ModuleType) and not k.startswith("_")
                and getattr(v, "__name__", "") == f"{name}.{k}"):
            offered.add(k)
        elif k.startswith("__") and k.endswith("__") and k not in ("__pyx_capi__", "__dir__", "__getattr__"):
            offered.add(k)
    return sorted(offered)


def warn_renamed(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that ``old`` is spelled ``new`` now (``stacklevel``: the user's call, by default
    the caller of the function that calls this)."""
    warnings.warn(f"{old} is deprecated; use {new}", DeprecationWarning, stacklevel=stacklevel)


def probed_by_import() -> bool:
    """Whether the module ``__getattr__`` that calls this was called by the import system's
    probe of ``from package import name`` (importlib's ``_handle_fromlist`` asks
    ``hasattr`` first, then the statement gets the name): an old name warns on the
    second call only, once per import statement."""
    import sys

    caller = sys._getframe(2).f_code
    return caller.co_name == "_handle_fromlist" and "importlib" in caller.co_filename


def renamed_keyword(given: dict, old: str, new: str, value, where: str, missing=None, stacklevel=4):
    """``value`` of keyword ``new``, or the one passed under ``old`` (popped from ``given``,
    the function's ``**old`` keywords) with a warning; a TypeError for both, or for any
    other unknown keyword left in ``given``. ``missing``: what ``value`` is when not given;
    ``stacklevel``: the user's frame, counted from here as for ``warnings.warn``."""
    if old in given:
        if value is not missing:
            raise TypeError(f"{where} got both {new}= and its old spelling {old}=; pass {new}= only")
        warn_renamed(f"{where}'s {old}=", f"{new}=", stacklevel=stacklevel)
        value = given.pop(old)
    if given:
        raise TypeError(f"{where} got an unexpected keyword argument {next(iter(given))!r}")
    return value


def keywords_after(n: int, example: str):
    """Decorate a constructor that takes ``n`` positional arguments (its other arguments are
    keyword-only), so that an old positional call (``opaque(fn, {"x": x}, {"y": y})``) is
    refused naming the keywords it takes and a call spelled the new way (``example``)
    instead of Python's bare count of positional arguments. The check costs a call only."""
    import functools
    import inspect

    def wrap(fn):
        keywords = [p.name + "=" for p in inspect.signature(fn).parameters.values()
                    if p.kind is p.KEYWORD_ONLY]
        said = f"its other arguments are keywords ({', '.join(keywords)})" if keywords else "it takes no more"

        @functools.wraps(fn)
        def constructor(*args, **kwargs):
            if len(args) > n:
                raise TypeError(f"{fn.__name__}() takes {n} positional argument{'s' * (n > 1)}, "
                                f"got {len(args)}: {said}, e.g. {example}")
            return fn(*args, **kwargs)
        return constructor
    return wrap
