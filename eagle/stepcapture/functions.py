"""NumPy functions inside a captured step: the table of what each becomes.

A NumPy function called on a stand-in reaches ``dispatch`` (``__array_function__``):

* ``np.where``, ``np.clip``, ``np.count_nonzero``, ``np.copyto``, ``np.copy``, ``np.round``, the
  ``*_like`` constructors: recorded here as ufunc and reduction nodes;
* functions NumPy itself writes with ufuncs, reductions and views (``np.sum``, ``np.max``,
  ``np.mean``, ``np.transpose``...): run as NumPy runs them, their ufunc calls recorded;
* anything else: refused at the line, with the way out (``eagle.graph.opaque``).
"""
from __future__ import annotations

import numpy as np

from eagle.stepcapture.refusals import NO_FORM, VALUE_READ, refuse

__all__ = ["dispatch"]


def _where(session, condition, x=None, y=None):
    if x is None or y is None:
        raise refuse(NO_FORM, what="np.where(condition) (the indices where it holds)")
    condition = _bool(session, condition)
    dtype = np.result_type(x, y)
    shape = np.broadcast_shapes(*(np.shape(v) for v in (condition, x, y)))
    out = session.temporary(shape, dtype)
    for value, mask in ((y, True), (x, condition)):
        uf, extra = session.copy_ufunc(np.result_type(value) if isinstance(value, np.ndarray) else dtype)
        if not isinstance(value, np.ndarray):
            value = np.asarray(value, dtype=dtype)[()]
        session.call(uf, (value,) + extra, out=(out,), where=mask)
    return out


def _bool(session, condition):
    if isinstance(condition, np.ndarray) and condition.dtype != bool:
        return session.call(np.not_equal, (condition, 0))
    return condition


def _clip(session, a, a_min=None, a_max=None, out=None, **kwargs):
    if kwargs:
        raise refuse(NO_FORM, what=f"np.clip(..., {', '.join(kwargs)}=...)")
    if a_min is None and a_max is None:
        raise ValueError("One of max or min must be given")
    out = None if out is None else (out,)
    if a_min is None:
        return session.call(np.minimum, (a, a_max), out=out)
    if a_max is None:
        return session.call(np.maximum, (a, a_min), out=out)
    return session.call(np._core.umath.clip, (a, a_min, a_max), out=out)


def _count_nonzero(session, a, axis=None, *, keepdims=False):
    return session.reduce(np.add, _bool(session, a), axis=axis, dtype=np.intp, keepdims=keepdims)


def _copyto(session, dst, src, casting="same_kind", where=True):
    session.assign(dst, Ellipsis, src, False) if where is True else session.fill(dst, src, where)


def _copy(session, a, order="K", subok=False):
    return session.copy(a, order)


def _round(session, a, decimals=0, out=None):
    """NumPy's own round (PyArray_Round), its ufunc calls: a float array times 10**decimals,
    np.rint, divided back (divided, then multiplied, for decimals < 0); an integer or bool
    array with decimals >= 0 is copied."""
    decimals = int(decimals)
    out = None if out is None else (out,)
    if a.dtype.kind in "biu" and decimals >= 0:
        if out is None:
            return session.copy(a)
        _copyto(session, out[0], a)
        return out[0]
    if a.dtype.kind != "f" or abs(decimals) > 22:
        raise refuse(NO_FORM, what=f"np.round of {a.dtype} to {decimals} decimals")
    if decimals == 0:
        return session.call(np.rint, (a,), out=out)
    f = a.dtype.type(10.0 ** abs(decimals))     # NumPy's factor, in the array's dtype
    first, second = (np.multiply, np.true_divide) if decimals > 0 else (np.true_divide, np.multiply)
    t = session.call(first, (a, f), out=out)
    session.call(np.rint, (t,), out=(t,))
    return session.call(second, (t, f), out=(t,))


def _like(fill):
    def make(session, prototype, dtype=None, order="K", subok=True, shape=None, **kwargs):
        value = kwargs.pop("fill_value", fill)
        if kwargs:
            raise refuse(NO_FORM, what=f"np.*_like(..., {', '.join(kwargs)}=...)")
        t = session.temporary(prototype.shape if shape is None else shape,
                              prototype.dtype if dtype is None else dtype)
        if value is not None:
            session.fill(t, value, None)
        return t
    return make


def _full_like(session, prototype, fill_value, dtype=None, order="K", subok=True, shape=None):
    return _like(None)(session, prototype, dtype, order, subok, shape, fill_value=fill_value)


_RECORDED = {
    np.where: _where,
    np.clip: _clip,
    np.count_nonzero: _count_nonzero,
    np.copyto: _copyto,
    np.copy: _copy,
    np.round: _round,
    np.around: _round,
    np.empty_like: _like(None),
    np.zeros_like: _like(0),
    np.ones_like: _like(1),
    np.full_like: _full_like,
}

#: NumPy's own implementation is ufuncs, reductions and views: it runs, and records
_AS_NUMPY_WRITES_IT = {
    np.sum, np.prod, np.max, np.min, np.amax, np.amin, np.any, np.all, np.mean,
    np.reshape, np.ravel, np.transpose, np.moveaxis, np.swapaxes, np.squeeze, np.expand_dims,
    np.atleast_1d, np.atleast_2d, np.atleast_3d, np.broadcast_to, np.broadcast_arrays,
    np.ndim, np.shape, np.size, np.may_share_memory, np.shares_memory, np.result_type,
    np.real, np.imag, np.iscomplexobj, np.isrealobj, np.flip, np.fliplr, np.flipud, np.diagonal,
    np.can_cast, np.min_scalar_type,
}

_IO = {np.save, np.savez, np.savetxt, np.array_repr, np.array_str, np.array2string}


def dispatch(session, func, types, args, kwargs):
    handler = _RECORDED.get(func)
    if handler is not None:
        return handler(session, *args, **kwargs)
    if func in _AS_NUMPY_WRITES_IT:
        return func._implementation(*args, **kwargs)
    name = f"np.{func.__name__}"
    if func in _IO:
        raise refuse(VALUE_READ, what=f"{name} (I/O)")
    raise refuse(NO_FORM, what=name)
