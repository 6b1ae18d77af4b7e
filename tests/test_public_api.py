"""eagle's public API as one whole: where each name lives, what dir() shows, the keywords and
signatures, the old spellings (a DeprecationWarning or an error naming the new one), the
numpydoc docstrings (their examples run) and docs/api.md listing every public name."""
import doctest
import importlib
import inspect
import re
import types
from pathlib import Path

import numpy as np
import pytest

import eagle
import eagle.graph as eg
import eagle.kernels as ek
from eagle.graph import compact, native, opaque, reorder, ufunc

ROOT = Path(__file__).resolve().parents[1]
PUBLIC_MODULES = ["eagle", "eagle.graph", "eagle.native", "eagle.kernels", "eagle.mpi", "eagle.cpu",
                  "eagle.cpu.threads", "eagle.cuda", "eagle.observe", "eagle.record", "eagle.look"]
#: the modules of the extension API (docs/api.md, "Extending eagle: new node kinds")
EXTENSION_MODULES = ["eagle.cpu.lowering", "eagle.cpu.spec", "eagle.cuda.capture", "eagle.observe.profiler",
                     "eagle.record.node", "eagle.record.recording", "eagle.record.plan", "eagle.record.options",
                     "eagle.record.backend", "eagle.record.hooks"]


def _public(name):
    try:
        return importlib.import_module(name)
    except ImportError as e:   # eagle.cuda without the cuda build
        pytest.skip(f"{name}: {e}")


# ---- where names live, what dir() shows ----------------------------------------------

@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_dir_of_a_public_module_shows_public_names_only(name):
    mod = _public(name)
    offered = set(getattr(mod, "__all__", ()))
    for k in dir(mod):
        if k.startswith("__") and k.endswith("__"):
            continue
        v = getattr(mod, k)
        is_submodule = isinstance(v, types.ModuleType) and v.__name__ == f"{name}.{k}"
        assert not k.startswith("_") and (k in offered or is_submodule), f"dir({name}) shows {k!r}"
    assert offered <= set(dir(mod)), f"dir({name}) hides {sorted(offered - set(dir(mod)))}"


@pytest.mark.parametrize("name", PUBLIC_MODULES + EXTENSION_MODULES)
def test_every_public_module_says_what_is_public(name):
    mod = _public(name)
    assert isinstance(getattr(mod, "__all__", None), list), f"{name} has no __all__"
    assert all(hasattr(mod, n) or importlib.import_module(f"{name}.{n}") for n in mod.__all__)


def test_the_packages_of_the_implementation_show_their_public_submodules_only():
    import eagle.cpu
    import eagle.look
    import eagle.record

    assert [n for n in dir(eagle.cpu) if not n.startswith("__")] == ["lowering", "spec", "threads"]
    assert [n for n in dir(eagle.look) if not n.startswith("__")] == []
    assert [n for n in dir(eagle.record) if not n.startswith("__")] == sorted(
        ["node", "recording", "plan", "options", "backend", "hooks"])
    import eagle.cuda.capture as capture
    assert sorted(capture.__all__) == ["CaptureContext", "Lowering", "Need", "SizedKernel", "register"]


def test_dir_hides_what_the_implementation_imports():
    import eagle.native

    assert "ctypes" not in dir(eagle.native) and "with_article" not in dir(eagle.native)
    assert "CpuBackend" not in dir(eg) and "shutil" not in dir(eg)
    assert "_Scalar" not in dir(ek) and "os" not in dir(eagle)


def test_the_constructors_have_one_public_home():
    constructors = {"opaque", "native", "ufunc", "cuda_kernel", "compact", "reorder", "random_bits",
                    "uniform", "normal", "while_loop", "if_else", "subgraph", "allreduce", "allgather",
                    "bcast", "sendrecv"}
    assert constructors <= set(eg.__all__)
    package = Path(eagle.__file__).parent
    assert not (package / "nodes.py").exists() and (package / "_nodes.py").exists()   # private now
    mpi = importlib.import_module("eagle.mpi")
    assert not constructors & (set(mpi.__all__) | set(dir(mpi)))


@pytest.mark.parametrize("name", ["allreduce", "allgather", "bcast", "sendrecv"])
def test_the_collectives_from_eagle_mpi_still_work_with_a_warning(name):
    import eagle.mpi

    with pytest.warns(DeprecationWarning, match=f"eagle.mpi.{name} is deprecated; use eagle.graph.{name}"):
        got = getattr(eagle.mpi, name)
    assert got is getattr(eg, name)
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        eagle.mpi.nothing  # noqa: B018


def test_an_old_name_imported_with_from_warns_once_at_the_import():
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from eagle.mpi import bcast
        from eagle import GroupConflict
    assert [str(w.message) for w in caught] == [
        "eagle.mpi.bcast is deprecated; use eagle.graph.bcast",
        "eagle.GroupConflict is deprecated; use eagle.GroupConflictError"]
    assert all(w.filename == __file__ for w in caught)
    assert bcast is eg.bcast and GroupConflict is eagle.GroupConflictError


def test_exceptions_are_named_error_and_the_old_name_warns():
    assert eagle.GroupConflictError is eg.GroupConflictError
    assert issubclass(eagle.GroupConflictError, ValueError)
    for mod in (eagle, eg):
        with pytest.warns(DeprecationWarning, match="GroupConflict is deprecated; use .*GroupConflictError"):
            assert mod.GroupConflict is eagle.GroupConflictError
    exported = [n for n in eagle.__all__ if isinstance(getattr(eagle, n), type)
                and issubclass(getattr(eagle, n), Exception)]
    assert sorted(exported) == ["CaptureError", "CudaError", "GroupConflictError", "NotBuiltError"]
    x = np.zeros(2)
    g = eagle.Graph()
    with pytest.raises(eagle.GroupConflictError, match="'a' and 'b'"):
        g.add_group([opaque(lambda: None, writes={"x": x}), opaque(lambda: None, writes={"x": x})],
                    names=["a", "b"])


# ---- keywords and signatures ---------------------------------------------------------

_B = lambda: np.zeros(4, bool)   # noqa: E731
_BODY = eagle.Graph()
_BODY.add_node(opaque(lambda: None, writes={"q": np.zeros(2)}))


@pytest.mark.parametrize("make, positional, keywords", [
    (lambda x, y: opaque(lambda: None, {"x": x}, {"y": y}), "opaque() takes 1 positional argument, got 3",
     "reads=, writes=, updates=, per_sample=, sized="),
    (lambda x, y: native(ek.copy(), {"x": x}, {"y": y}), "native() takes 1 positional argument, got 3",
     "reads=, writes=, updates=, user_data="),
    (lambda x, y: eg.cuda_kernel(object(), [x, eg.SIZE], {"x": x}, {"y": y}),
     "cuda_kernel() takes 2 positional arguments, got 4", "reads=, writes=, size_arg="),
    (lambda x, y: compact(_B(), {"x": x}, np.arange(4)), "compact() takes 2 positional arguments, got 3",
     "ids=, count=, every=, min_dead_fraction="),
    (lambda x, y: reorder(np.zeros(4, np.int64), {"x": x}, 2), "reorder() takes 2 positional arguments, got 3",
     "n_keys=, ids=, every="),
    (lambda x, y: eg.uniform(x, 1), "uniform() takes 1 positional argument, got 2", "key=, low=, high=, ids="),
    (lambda x, y: eg.normal(x, 1), "normal() takes 1 positional argument, got 2", "key=, loc=, scale=, ids="),
    (lambda x, y: eg.random_bits(np.zeros((4, 4), np.uint32), 1), "random_bits() takes 1 positional argument, "
     "got 2", "key=, ids="),
    (lambda x, y: eg.while_loop(np.zeros(1, bool), _BODY, 3), "while_loop() takes 2 positional arguments, got 3",
     "max_iterations="),
    (lambda x, y: eg.allreduce(x, y, "sum"), "allreduce() takes 2 positional arguments, got 3", "op=, comm="),
    (lambda x, y: eg.allgather(x, y, None), "allgather() takes 2 positional arguments, got 3", "comm="),
    (lambda x, y: eg.bcast(x, 0), "bcast() takes 1 positional argument, got 2", "root=, comm="),
    (lambda x, y: eg.sendrecv(x, y, 0, 0), "sendrecv() takes 2 positional arguments, got 4",
     "dest=, source=, tag=, comm="),
])
def test_options_given_positionally_are_refused_naming_the_constructors_keywords(make, positional, keywords):
    with pytest.raises(TypeError, match=re.escape(positional) + r": its other arguments are keywords \(" +
                       re.escape(keywords) + r".*\), e.g. "):
        make(np.ones(4), np.zeros(4))


def test_if_else_takes_three_arguments_and_no_option():
    with pytest.raises(TypeError, match=re.escape("if_else() takes 3 positional arguments, got 4: it takes no more")):
        eg.if_else(np.zeros(1, bool), _BODY, _BODY, 1)


@pytest.mark.parametrize("name", ["opaque", "native", "cuda_kernel", "compact", "reorder", "random_bits",
                                  "uniform", "normal", "while_loop", "allreduce", "allgather", "bcast",
                                  "sendrecv"])
def test_options_are_keyword_only(name):
    params = inspect.signature(getattr(eg, name)).parameters
    arrays = {"opaque": ["fn"], "native": ["kernel"], "cuda_kernel": ["kernel", "args"],
              "compact": ["alive", "state"], "reorder": ["by", "state"], "random_bits": ["out"],
              "uniform": ["out"], "normal": ["out"], "while_loop": ["cond", "body"],
              "allreduce": ["send", "recv"], "allgather": ["send", "recv"], "bcast": ["buf"],
              "sendrecv": ["send", "recv"]}[name]
    positional = [p for p, v in params.items() if v.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    assert positional == arrays
    for p in ("reads", "writes", "updates"):
        if p in params:
            assert params[p].kind is inspect.Parameter.KEYWORD_ONLY


def test_launch_and_launch_until_done_take_n_and_progress_by_keyword():
    alive = np.ones(4, dtype=bool)
    g = eagle.Graph()
    g.add_node(ufunc(np.logical_and, {"alive": alive}, False, out={"alive": alive}), name="finish")
    g.add_node(compact(alive, {}), name="compact")
    g.build()
    assert g.launch_until_done(n=2) == 1            # was refused: the parameter was max_replays
    g.set_logical_size(4)
    alive[:] = True
    with pytest.warns(DeprecationWarning, match=r"launch_until_done\(\)'s max_replays= is deprecated; use n="):
        assert g.launch_until_done(max_replays=3) == 1
    with pytest.raises(TypeError, match="got both n= and its old spelling max_replays="):
        g.launch_until_done(3, max_replays=3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'replays'"):
        g.launch_until_done(replays=3)
    with pytest.raises(TypeError, match="needs n"):
        g.launch_until_done()
    with pytest.raises(TypeError, match=r"launch\(\) takes 1 positional argument \(n\), got 2: progress is a keyword"):
        g.launch(1, True)
    with pytest.raises(TypeError, match=r"launch_until_done\(\) takes 1 positional argument \(n\), got 2: progress"):
        g.launch_until_done(1, True)
    g.launch(n=1, progress=False)


def test_the_sort_key_and_the_random_key_no_longer_share_a_name():
    assert "by" in inspect.signature(reorder).parameters and "key" not in inspect.signature(reorder).parameters
    assert "key" in inspect.signature(eg.normal).parameters
    cell, x = np.array([1, 0]), np.array([1.0, 0.0])
    with pytest.warns(DeprecationWarning, match=r"reorder\(\)'s key= is deprecated; use by="):
        node = reorder(key=cell, state={"x": x}, n_keys=2)
    assert node.writes["key"] is cell
    with pytest.raises(TypeError, match="got both by= and its old spelling key="):
        reorder(cell, {"x": x}, n_keys=2, key=cell)
    with pytest.raises(TypeError, match=r"reorder\(\) needs by, the sort key"):
        reorder(state={"x": x}, n_keys=2)


# ---- docstrings and docs/api.md ------------------------------------------------------

def _documented():
    out = [(n, getattr(eg, n)) for n in eg.__all__ if inspect.isfunction(getattr(eg, n))]
    out += [(f"Graph.{n}", getattr(eagle.Graph, n)) for n in dir(eagle.Graph)
            if not n.startswith("_") and callable(getattr(eagle.Graph, n))]
    return out + [("CpuOptions", eagle.CpuOptions), ("CudaOptions", eagle.CudaOptions), ("Graph", eagle.Graph)]


@pytest.mark.parametrize("name, obj", _documented(), ids=[n for n, _ in _documented()])
def test_every_constructor_and_graph_method_has_a_numpydoc_docstring(name, obj):
    doc = inspect.getdoc(obj) or ""
    sections = ["Parameters", "Returns", "Raises", "Examples"] if not isinstance(obj, type) else \
        ["Parameters", "Raises", "Examples"] if name != "Graph" else ["Examples"]   # Graph() takes nothing
    for section in sections:
        if section == "Parameters" and name in ("Graph.plan", "Graph.recording", "Graph.to_dot"):
            continue   # they take no argument
        assert re.search(rf"^{section}\n-{{{len(section)}}}$", doc, re.M), f"{name}: no {section} section"
    assert ">>> " in doc


@pytest.mark.parametrize("name, obj", _documented(), ids=[n for n, _ in _documented()])
def test_every_docstring_example_runs(name, obj):
    if name in ("allreduce", "allgather", "bcast", "sendrecv"):
        pytest.importorskip("mpi4py")
    tests = doctest.DocTestFinder(recurse=False).find(obj, name, globs={})
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for t in tests:
        runner.run(t)
    assert runner.failures == 0, f"{name}'s example failed (see the output above)"


def test_docs_api_md_mentions_every_public_name():
    text = (ROOT / "docs" / "api.md").read_text()
    missing = []
    for name in PUBLIC_MODULES + EXTENSION_MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        for n in getattr(mod, "__all__", ()):
            if not re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", text):
                missing.append(f"{name}.{n}")
    assert not missing, f"docs/api.md does not mention {missing}"
