"""Backend options are values given to build(): eagle.CpuOptions and eagle.CudaOptions, checked
when they are made; the old spellings (build(teams=, fuse=), CudaBackend.library_branches = ...)
warn or are refused naming the new one."""
import re

import numpy as np
import pytest

import eagle
from eagle.graph import ufunc


def _graph(n_stages=2):
    x = np.ones(8)
    g = eagle.Graph()
    for k in range(n_stages):
        g.add_node(ufunc(np.multiply, {"x": x}, 2.0, out={"x": x}), name=f"s{k}")
    return g, x


def test_cpu_options_reach_the_cpu_backend():
    g, x = _graph()
    g.build(cpu=eagle.CpuOptions(teams=["serial", "parallel"]))
    assert [s.policy for s in g.plan().stages] == ["serial", "parallel"]
    g.build()
    assert "fused run: stages 0-1" in str(g.plan())
    g.build(cpu=eagle.CpuOptions(fuse=False))
    assert "fused" not in str(g.plan())
    g.launch(1)
    assert (x == 4.0).all()
    g.build(cpu=eagle.CpuOptions(fuse=64))
    assert "tiles of 64 samples" in str(g.plan())


def test_options_are_values():
    assert eagle.CpuOptions() == eagle.CpuOptions(teams="auto", fuse=True)
    assert eagle.CpuOptions(teams=["auto", "serial"]).teams == ("auto", "serial")
    assert eagle.CpuOptions(fuse=np.int64(32)).fuse == 32
    assert eagle.CpuOptions(fuse=2**70).fuse == 2**63 - 1
    assert eagle.CudaOptions().library_branches == "serial"
    with pytest.raises(AttributeError):
        eagle.CpuOptions().fuse = False        # frozen: a value, not a setting
    assert hash(eagle.CpuOptions(teams=["auto"])) == hash(eagle.CpuOptions(teams=("auto",)))
    # fuse=True (a tile sized for the cache) and fuse=1 (tiles of one sample) differ, though True == 1
    assert eagle.CpuOptions(fuse=True) != eagle.CpuOptions(fuse=1)
    assert eagle.CpuOptions(fuse=False) != eagle.CpuOptions(fuse=np.int64(1)) != eagle.CpuOptions(fuse=True)
    assert len({eagle.CpuOptions(fuse=True), eagle.CpuOptions(fuse=1)}) == 2
    assert eagle.CpuOptions(fuse=1) == eagle.CpuOptions(fuse=np.int64(1))
    assert hash(eagle.CpuOptions(fuse=1)) == hash(eagle.CpuOptions(fuse=np.int64(1)))
    assert eagle.CpuOptions() != eagle.CudaOptions()


@pytest.mark.parametrize("make, exc, says", [
    (lambda: eagle.CpuOptions(teams="fast"), ValueError, "a team policy is 'auto', 'serial' or 'parallel', got 'fast'"),
    (lambda: eagle.CpuOptions(teams=["auto", 3]), ValueError, "got 3"),
    (lambda: eagle.CpuOptions(teams=5), TypeError, "a sequence of them, one per stage; got int"),
    (lambda: eagle.CpuOptions(teams=b"serial"), TypeError, "one per stage; got bytes b'serial', which is no sequence"),
    (lambda: eagle.CpuOptions(teams={"serial": 1}), TypeError, "one per stage; got dict {'serial': 1}"),
    (lambda: eagle.CpuOptions(teams={"serial"}), TypeError, "one per stage; got set {'serial'}"),
    (lambda: eagle.CpuOptions("serial"), TypeError, "takes 1 positional argument but 2 were given"),
    (lambda: eagle.CudaOptions("branches"), TypeError, "takes 1 positional argument but 2 were given"),
    (lambda: eagle.CudaOptions(branches="no"), TypeError, "CudaOptions(branches=...) is True or False, got 'no'"),
    (lambda: eagle.CpuOptions(fuse=0), ValueError, "True, False or a tile size in samples"),
    (lambda: eagle.CpuOptions(fuse=np.bool_(True)), ValueError, "tile size"),
    (lambda: eagle.CpuOptions(fuse="yes"), ValueError, "tile size"),
    (lambda: eagle.CudaOptions(library_branches="parallel"), ValueError, "'serial' or 'branches', got 'parallel'"),
])
def test_bad_option_values_are_refused_where_they_are_made(make, exc, says):
    with pytest.raises(exc, match=re.escape(says)):
        make()


def test_build_checks_what_it_is_given():
    g, _ = _graph()
    with pytest.raises(TypeError, match=r"build\(cpu=...\) takes an eagle.CpuOptions, got str"):
        g.build(cpu="serial")
    with pytest.raises(TypeError, match=r"build\(cuda=...\) takes an eagle.CudaOptions, got CpuOptions"):
        g.build(cuda=eagle.CpuOptions())
    with pytest.raises(ValueError, match=r"needs one policy per stage \(2\), got 1"):
        g.build(cpu=eagle.CpuOptions(teams=["auto"]))
    with pytest.raises(TypeError, match="unexpected keyword argument 'tems'"):
        g.build(tems="serial")
    assert g.backend is None


def test_the_other_backends_options_are_not_used():
    g, x = _graph()
    g.build(cuda=eagle.CudaOptions(library_branches="branches", branches=False))   # one script carries both
    g.launch(1)
    assert g.backend == "cpu" and (x == 4.0).all()
    # and the cuda backend reads no CpuOptions: tests/cuda/test_backend_standin.py


def test_build_teams_and_fuse_still_work_with_a_deprecation_warning():
    g, x = _graph()
    with pytest.warns(DeprecationWarning, match=re.escape("build(teams=..., fuse=...) is deprecated; use "
                                                          "build(cpu=eagle.CpuOptions(teams=..., fuse=...))")):
        g.build(teams="serial", fuse=False)
    assert [s.policy for s in g.plan().stages] == ["serial", "serial"]
    with pytest.raises(TypeError, match="pass cpu=eagle.CpuOptions"):
        g.build(cpu=eagle.CpuOptions(), teams="serial")


def test_the_warning_points_at_the_callers_line():
    g, _ = _graph()
    with pytest.warns(DeprecationWarning) as caught:
        g.build(fuse=False)
    assert caught[0].filename == __file__


def test_library_branches_is_no_class_attribute_to_set():
    backend = pytest.importorskip("eagle.cuda.backend")
    with pytest.raises(AttributeError, match=re.escape(
            "CudaBackend.library_branches is no longer a setting: pass it to build(), "
            "g.build(cuda=eagle.CudaOptions(library_branches=...))")):
        backend.CudaBackend.library_branches = "branches"
    assert not hasattr(backend.CudaBackend, "library_branches")
