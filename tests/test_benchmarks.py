"""The asv suite runs: every benchmark in asv_bench/benchmarks, set up and called
once with every parameter combination, in quick mode (minimal sizes), so a
broken benchmark fails pytest. Nothing is timed and nothing is compared.

GPU benchmarks skip (as asv would) when CuPy, a GPU or eagle's cuda backend is
missing; a CPU benchmark that skips is a failure.
"""
import importlib
import importlib.util
import inspect
import itertools
import json
import pathlib
import re
import sys

import pytest

ASV_DIR = pathlib.Path(__file__).resolve().parents[1] / "asv_bench"
BENCH_DIR = ASV_DIR / "benchmarks"
PACKAGE = "eagle_asv_benchmarks"   # not "benchmarks": keep clear of anything else by that name
PREFIXES = ("time_", "timeraw_", "mem_", "peakmem_", "track_")
MAY_SKIP = {"bench_cuda", "bench_mpi"}   # bench_mpi: without mpi4py


def _load_package():
    if PACKAGE in sys.modules:
        return sys.modules[PACKAGE]
    spec = importlib.util.spec_from_file_location(PACKAGE, BENCH_DIR / "__init__.py",
                                                  submodule_search_locations=[str(BENCH_DIR)])
    pkg = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = pkg
    spec.loader.exec_module(pkg)
    return pkg


def _param_combos(params):
    """asv's convention: a list of lists is one list per parameter; a flat list is one parameter."""
    if not params:
        return [()]
    if not all(isinstance(p, (list, tuple)) for p in params):
        params = [params]
    return list(itertools.product(*params))


def _cases():
    pkg = _load_package()
    cases = []
    for path in sorted(BENCH_DIR.glob("bench_*.py")):
        mod = importlib.import_module(f"{PACKAGE}.{path.stem}")
        for name, cls in vars(mod).items():
            if not (inspect.isclass(cls) and cls.__module__ == mod.__name__ and not name.startswith("_")):
                continue
            methods = sorted(m for m in dir(cls) if m.startswith(PREFIXES) and callable(getattr(cls, m)))
            if not methods:
                continue
            for combo in _param_combos(getattr(cls, "params", [])):
                ids = "-".join(str(p) for p in combo)
                cases.append(pytest.param(path.stem, name, combo, methods,
                                          id=f"{path.stem}.{name}" + (f"[{ids}]" if ids else "")))
        for name, fn in vars(mod).items():
            if name.startswith(PREFIXES) and inspect.isfunction(fn) and fn.__module__ == mod.__name__:
                for combo in _param_combos(getattr(fn, "params", [])):
                    cases.append(pytest.param(path.stem, name, combo, None, id=f"{path.stem}.{name}"))
    return pkg, cases


_PKG, _CASES = _cases()


@pytest.fixture(autouse=True)
def _quick_and_threads_restored():
    import eagle

    threads = eagle.get_num_threads()
    _PKG.QUICK = True
    yield
    _PKG.QUICK = False
    eagle.set_num_threads(threads)


def test_every_module_has_benchmarks():
    modules = {p.values[0] for p in _CASES}
    expected = {p.stem for p in BENCH_DIR.glob("bench_*.py")}
    assert modules == expected
    assert {"bench_replay", "bench_build", "bench_retune", "bench_picture", "bench_cuda"} <= expected


@pytest.mark.parametrize("module, name, combo, methods", _CASES)
def test_benchmark_runs_once(module, name, combo, methods):
    mod = sys.modules[f"{PACKAGE}.{module}"]
    obj = getattr(mod, name)
    if methods is None:  # a module-level benchmark function
        getattr(mod, "setup", lambda *a: None)(*combo)
        obj(*combo)
        return
    bench = obj()
    try:
        if hasattr(bench, "setup"):
            bench.setup(*combo)
    except NotImplementedError as exc:  # asv's way of skipping a benchmark
        if module in MAY_SKIP:
            pytest.skip(f"{module}.{name}: {exc}")
        raise AssertionError(f"{module}.{name}{combo} skipped itself on a CPU-only path: {exc}")
    try:
        for m in methods:
            getattr(bench, m)(*combo)
    finally:
        if hasattr(bench, "teardown"):
            bench.teardown(*combo)


def test_asv_conf_points_at_the_suite():
    text = (ASV_DIR / "asv.conf.json").read_text()
    conf = json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))  # asv allows // comment lines
    assert conf["version"] == 1
    assert (ASV_DIR / conf["repo"]).resolve() == ASV_DIR.parent
    assert (ASV_DIR / conf["benchmark_dir"]).resolve() == BENCH_DIR


def test_only_with_no_matching_graph_says_which_titles_there_are(capsys):
    from eagle import bench

    with pytest.raises(SystemExit) as exit_:
        bench.main(["--quick", "--only", "no graph is called this", "--big", "4096"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "no graph's title contains it" in err and "seed graph: 3 opaque nodes" in err


def test_comparison_command_prints_its_table(capsys):
    """``python -m eagle.bench`` in its smallest form: every graph gets its rows, and
    a peer that is missing is named in a note rather than left out silently."""
    import eagle
    from eagle import bench

    threads = eagle.get_num_threads()
    bench.main(["--quick", "--rounds", "1", "--target-ms", "1", "--big", "4096", "--paths", "4096",
                "--steps", "2"])
    assert eagle.get_num_threads() == threads
    out = capsys.readouterr().out
    for title in ("seed graph: 3 opaque nodes", "native diamond: 3 nodes", "native chain: 10 nodes",
                  "1 native node"):
        assert title in out
    assert "Python loop, same functions" in out and "ThreadPoolExecutor" in out
    try:
        import dask  # noqa: F401
    except ImportError:
        assert "dask skipped" in out
    else:
        assert "dask.threaded.get" in out
    assert ("C loop, same kernels" in out) or ("C loop skipped" in out)
    # each graph says its size, the lines fit a 100-column terminal (they were 180 wide), and
    # the polynomial row says what differs from eagle's kernel
    assert "seed graph: 3 opaque nodes (4 samples)" in out and "(4,096 samples)" in out
    wide = [line for line in out.splitlines() if len(line) >= 100]
    assert not wide, wide
    assert ("not vectorised" in out) or ("plain C loops skipped" in out)
    assert re.search(r"\(\d+\.\d s, \d+\.\d s of CPU\)", out)
    # the stencils of npbench, each beside its NumPy function (and numba, JAX where installed)
    for name in ("jacobi_1d", "jacobi_2d", "heat_3d", "fdtd_2d"):
        assert re.search(rf"^{name} .* steps\n.* NumPy ", out, re.M), name
    # the user's step at real size (here tiny): every way, each with its price
    assert "Monte Carlo call (GBM), 4,096 paths × 2 steps" in out
    for way in ("numpy loop", "numexpr", "numba prange", "eagle, opaque draw", "eagle, normal node",
                "eagle, fused"):
        assert re.search(rf"^{way} .* \d+\.\d{{3}} ± \d+\.\d{{3}}", out, re.M), way


def test_the_launch_row_never_prints_a_negative_cost(monkeypatch):
    """Under load the empty loop's best can beat a call's best: the launch(1) row then gives
    both times whole (with the loop) instead of a negative difference ("-150 ns")."""
    import types

    bench_main = importlib.import_module("eagle.bench.__main__")
    per_call = {"run_launch": 1.0e-7, "run_noop": 5.0e-8, "run_empty": 2.0e-7}   # the empty loop "slowest"
    monkeypatch.setattr(bench_main, "best_per_call", lambda fn, n, k: per_call[fn.__name__])
    dll = types.SimpleNamespace(eagle_bench_noop=types.SimpleNamespace())
    what, t, ref_name, ref = bench_main.row_launch1(dll, rounds=1)
    assert (t, ref) == (1.0e-7, 5.0e-8) and "included" in what
    per_call["run_empty"] = 1.0e-8
    what, t, ref_name, ref = bench_main.row_launch1(dll, rounds=1)
    assert t == pytest.approx(9.0e-8) and ref == pytest.approx(4.0e-8) and "taken off" in what


def test_the_distribution_rows_give_each_nodes_thread_scaling():
    import eagle
    from eagle.bench.__main__ import rows_distributions
    from eagle.bench.cases import DISTRIBUTIONS

    before = eagle.get_num_threads()
    eagle.set_num_threads(2)
    try:
        rows = rows_distributions(1, samples=2_000)
    finally:
        eagle.set_num_threads(before)
    assert len(rows) == 2 * len(DISTRIBUTIONS)
    for (one, t1, _, _), (two, t2, _, _) in zip(rows[::2], rows[1::2]):
        assert one.endswith("1 thread")
        assert f"2 threads (team: {t1 / t2:.2f}x its 1 thread)" in two, two
