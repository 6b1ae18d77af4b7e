"""Cython code that cimports eagle: a kernel written in another package's .pyx.

At test time a .pyx module is written into a temporary directory, compiled with
``cythonize`` + setuptools against the eagle under test (its ``native.pxd`` is
found through ``include_path``: the directory that holds the ``eagle`` package,
so this works for an in-place build and for ``pip install .`` alike), imported,
and its graph replayed with 1 and 2 threads.
"""
from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import eagle
import eagle.native

EAGLE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(eagle.__file__)))
MODULE = "eagle_embedding_probe"

PYX = r'''
# cython: language_level=3, boundscheck=False, wraparound=False
"""A downstream module that hands eagle its own nogil kernels."""
from libc.stdint cimport int64_t

from eagle.native cimport Kernel, kernel_t, wrap_kernel

import eagle
from eagle.graph import native


cdef void affine(int64_t start, int64_t stop, char **data, const int64_t *strides,
                 void *user_data) noexcept nogil:
    """y[i] = a * x[i] + 1, a = *(double *)user_data."""
    cdef double a = (<double *>user_data)[0]
    cdef int64_t i
    for i in range(start, stop):
        (<double *>(data[1] + i * strides[1]))[0] = a * (<double *>(data[0] + i * strides[0]))[0] + 1.0


cdef void accumulate(int64_t start, int64_t stop, char **data, const int64_t *strides,
                     void *user_data) noexcept nogil:
    """acc[i] += y[i]."""
    cdef int64_t i
    for i in range(start, stop):
        (<double *>(data[1] + i * strides[1]))[0] += (<double *>(data[0] + i * strides[0]))[0]


cdef class Scalar:
    """Keeps the kernel's user_data alive as long as the Kernel does."""
    cdef double value

    def __cinit__(self, double value):
        self.value = value


def affine_kernel(double a):
    s = Scalar(a)
    return wrap_kernel(affine, "affine", &(<Scalar>s).value, s, 1, 1, "float64")


def accumulate_kernel():
    cdef kernel_t fn = accumulate
    return wrap_kernel(fn, "accumulate")


def is_kernel(obj):
    return isinstance(obj, Kernel)


def build(x, y, acc, double a, teams="auto"):
    g = eagle.Graph()
    g.add_node(native(affine_kernel(a), reads={"x": x}, writes={"y": y}))
    g.add_node(native(accumulate_kernel(), reads={"y": y}, writes={"acc": acc}))
    g.build(cpu=eagle.CpuOptions(teams=teams))
    return g


def run(x, y, acc, double a, int64_t replays, teams="auto", logical_size=None):
    g = build(x, y, acc, a, teams)
    if logical_size is not None:
        g.set_logical_size(logical_size)
    g.launch(replays)
    return g
'''

SETUP = r'''
import sys
import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

eagle_root = sys.argv.pop(1)
setup(
    name="{module}",
    ext_modules=cythonize(
        [Extension("{module}", ["{module}.pyx"], include_dirs=[np.get_include()])],
        include_path=[eagle_root],
        compiler_directives={{"language_level": "3"}},
    ),
    script_args=["build_ext", "--inplace", "--build-temp", "build"],
)
'''


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    pytest.importorskip("Cython")
    pytest.importorskip("setuptools")
    if not (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")):
        pytest.skip("no C compiler")
    assert os.path.exists(os.path.join(EAGLE_ROOT, "eagle", "native.pxd")), \
        f"eagle's native.pxd is not installed beside the package in {EAGLE_ROOT}"
    d = tmp_path_factory.mktemp("cython_embedding")
    (d / f"{MODULE}.pyx").write_text(PYX)
    (d / "setup.py").write_text(SETUP.format(module=MODULE))
    env = dict(os.environ)
    env["PYTHONPATH"] = EAGLE_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    p = subprocess.run([sys.executable, "setup.py", EAGLE_ROOT], cwd=d, capture_output=True, text=True,
                       env=env, timeout=600)
    assert p.returncode == 0, f"building the Cython module failed:\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    sys.path.insert(0, str(d))
    try:
        mod = importlib.import_module(MODULE)
    finally:
        sys.path.remove(str(d))
    return mod




def test_kernels_from_cython_are_eagle_kernels(probe):
    k = probe.affine_kernel(2.0)
    assert probe.is_kernel(k)
    assert isinstance(k, eagle.native.Kernel)
    assert (k.name, k.n_reads, k.n_writes, k.dtype) == ("affine", 1, 1, "float64")
    assert k.address != 0 and k.user_data_address != 0
    acc = probe.accumulate_kernel()
    assert (acc.name, acc.n_reads, acc.n_writes, acc.dtype) == ("accumulate", None, None, None)
    assert acc.user_data_address == 0


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("teams", ["auto", "serial", "parallel"])
def test_cython_kernel_graph_replays(probe, threads, n_threads, teams):
    threads(n_threads)
    n = 300_001
    x = np.arange(n, dtype=np.float64) % 97.0
    y = np.zeros(n)
    acc = np.zeros(n)
    g = probe.run(x, y, acc, 3.0, 4, teams)
    np.testing.assert_array_equal(y, 3.0 * x + 1.0)
    np.testing.assert_array_equal(acc, 4 * (3.0 * x + 1.0))
    assert g.nodes == ["affine", "accumulate"]
    assert "[affine]" in str(g) and "[accumulate]" in str(g)
    plan = g.plan()
    assert plan.num_threads == n_threads
    if teams == "parallel":
        assert all(st.team == n_threads for st in plan.stages)
    if teams == "serial":
        assert all(st.team == 1 for st in plan.stages)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_cython_kernel_graph_respects_logical_size(probe, threads, n_threads):
    threads(n_threads)
    n = 10_000
    x = np.arange(n, dtype=np.float64)
    y = np.full(n, -1.0)
    acc = np.full(n, -2.0)
    probe.run(x, y, acc, 0.5, 2, "parallel", logical_size=4321)
    np.testing.assert_array_equal(y[:4321], 0.5 * x[:4321] + 1.0)
    assert (y[4321:] == -1.0).all()
    np.testing.assert_array_equal(acc[:4321], -2.0 + 2 * (0.5 * x[:4321] + 1.0))
    assert (acc[4321:] == -2.0).all()


def test_cython_kernel_checks_apply(probe):
    with pytest.raises(TypeError, match="float64"):
        probe.build(np.zeros(4, dtype=np.float32), np.zeros(4), np.zeros(4), 1.0)


def test_cython_kernel_user_data_outlives_its_maker(probe):
    import gc

    from eagle.graph import native
    x = np.arange(50.0)
    y = np.zeros(50)
    g = eagle.Graph()
    g.add_node(native(probe.affine_kernel(-2.0), reads={"x": x}, writes={"y": y}))
    gc.collect()
    g.build().launch(1)
    np.testing.assert_array_equal(y, -2.0 * x + 1.0)


def test_pxd_is_where_include_path_points():
    pxd = os.path.join(EAGLE_ROOT, "eagle", "native.pxd")
    text = open(pxd).read()
    assert "ctypedef void (*kernel_t)" in text and "wrap_kernel" in text


# ---- a package of one's own, as docs/cython.md packages it ----------------------------------

def _package_from_the_docs():
    """({path: text} of the package's files, the usage example) from docs/cython.md's
    "Your own package": each file a fenced block whose first line names it (``# setup.py``)."""
    import re

    page = open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "docs", "cython.md")).read()
    section = page.split("## Your own package", 1)[1].split("\n## ", 1)[0]
    files, example = {}, None
    for lang, body in re.findall(r"```(\w+)\n(.*?)```", section, re.S):
        first = body.splitlines()[0]
        if lang in ("toml", "python", "cython") and re.fullmatch(r"# [\w/]+\.(toml|py|pyx)", first):
            files[first[2:]] = body
        elif lang == "python":
            example = body
    return files, example


def test_the_docs_package_builds_without_build_isolation_and_runs(tmp_path):
    """docs/cython.md's package (a mixed-dtype kernel with updates=) installs with
    ``pip install --no-build-isolation`` against the eagle under test, which is not on the
    package index, and its example prints what the page says."""
    pytest.importorskip("Cython")
    pytest.importorskip("setuptools")
    if not (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")):
        pytest.skip("no C compiler")
    files, example = _package_from_the_docs()
    assert set(files) == {"pyproject.toml", "setup.py", "eagle_age/_age.pyx", "eagle_age/__init__.py"}
    pkg, site = tmp_path / "eagle-age", tmp_path / "site"
    for path, text in files.items():
        (pkg / path).parent.mkdir(parents=True, exist_ok=True)
        (pkg / path).write_text(text)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([EAGLE_ROOT, *filter(None, [os.environ.get("PYTHONPATH")])]),
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    # --no-index: nothing is fetched (eagle is on no index); --target: the environment is left as it is
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
                        "--target", str(site), str(pkg)], capture_output=True, text=True, env=env, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])
    r = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    said = example.split("print(age, weight)   # ", 1)[1].splitlines()[0]
    assert r.stdout.split() == said.split(), (r.stdout, said)
