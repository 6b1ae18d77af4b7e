"""eagle's benchmark harness.

* ``python -m eagle.bench`` (``eagle/bench/__main__.py``): eagle's per-replay time beside
  what you would otherwise use (a Python loop, a loop in C, a thread pool, dask), the
  recording rows, and eagle's fixed costs;
* ``python -m eagle.bench.finished``: what compaction of finished samples buys;
* ``python -m eagle.bench.mpi``: collective nodes beside mpi4py, and replays as ranks grow.

The graphs they time are :mod:`eagle.bench.cases` -- the seed graph defined once, as
opaque, ufunc and native nodes, with the plain-Python-loop reference -- shared with the
tour (``python -m eagle``) and the asv suite (``asv_bench/``). :mod:`eagle.bench.timing`
is the timing harness, :mod:`eagle.bench.chelpers` the C compiled at run time.

The names below are importable from ``eagle.bench`` itself; nothing is imported (and
nothing compiled or timed) until one is used, so ``python -m eagle.bench.mpi`` and
``python -m eagle.bench.finished`` load only what they need.
"""
import importlib

#: name -> the submodule that defines it
_EXPORTS = {
    **{name: "cases" for name in (
        "TINY", "BIG", "SEED_OUT", "Case", "SeedGraph", "seed_arrays", "seed_calls", "seed_functions",
        "seed_graph", "seed_opaque_graph", "seed_ufunc_graph", "seed_ufunc_calls", "native_seed_graph",
        "RECORDING_SHAPES", "RECORDING_SIZES", "recording_nodes", "record_shape", "measure_recording",
        "bench_cases")},
    **{name: "timing" for name in ("WARMUP", "Runner", "measure", "fmt_time")},
    **{name: "__main__" for name in ("main", "print_table", "print_recording")},
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
