"""A newcomer's first hour: the tour (``python -m eagle``) and ``help()`` on eagle's objects."""
import pydoc
import re
import subprocess
import sys

import pytest

import eagle
import eagle.kernels
import eagle.native
from eagle import __main__ as tour

CYTHON_INTERNALS = ("__reduce_cython__", "__setstate_cython__", "__pyx_capi__", "__pyx_vtable__",
                    "__test__")


def test_help_exits_zero_and_says_what_the_flags_do():
    proc = subprocess.run([sys.executable, "-m", "eagle", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "usage: python -m eagle" in proc.stdout
    assert "--replays" in proc.stdout and "--repeats" in proc.stdout
    assert "native" in proc.stdout and "opaque" in proc.stdout
    assert "``" not in proc.stdout and "python -m eagle: the tour" in proc.stdout   # plain text, not RST


def test_the_monte_carlo_example_says_what_each_option_does():
    proc = subprocess.run([sys.executable, "-m", "eagle.examples.monte_carlo", "--help"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    options = proc.stdout.split("options:")[1]
    for flag, words in (("--particles", "particles over all ranks"), ("--steps", "replays of the graph"),
                        ("--cells", "cells of the slab"), ("--seed", "random streams")):
        assert flag in options and words in " ".join(options.split()), flag
    assert "``" not in proc.stdout and "mpiexec" in proc.stdout


def test_plain_renders_rst_markup_as_words():
    from eagle._text import plain
    assert plain("``python -m eagle``: see :func:`eagle.graph.opaque` and :class:`~eagle.Graph`") == \
        "python -m eagle: see eagle.graph.opaque and eagle.Graph"


@pytest.mark.parametrize("argv", [["--replays", "0"], ["--repeats", "-1"], ["--replays", "x"]])
def test_bad_flags_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as info:
        tour.main(argv)
    assert info.value.code == 2
    assert "error" in capsys.readouterr().err


def test_the_timing_shows_the_native_and_ufunc_cases_beside_the_opaque_one(capsys):
    tour.main(["--replays", "50", "--repeats", "1"])
    text = capsys.readouterr().out
    rows = [line for line in text.splitlines() if "ratio eagle/loop" in line]
    assert len(rows) == len(tour.CASES) == 3
    assert [row.split(":")[0].strip() for row in rows] == ["opaque", "native", "ufunc"]
    for row in rows:
        ratio = float(re.search(r"ratio eagle/loop ([0-9.e+-]+):", row).group(1))
        assert ratio > 0
        assert ("faster than the loop" in row) == (ratio < 0.5)


def test_every_timing_says_how_many_samples_it_is_on(capsys):
    # "73x faster" without the size misled: the seed graph is 4 samples; at 1e6 the same
    # step costs NumPy's arithmetic, and the tour shows that too
    tour.main(["--replays", "20", "--repeats", "1", "--size", "20000"])
    text = capsys.readouterr().out
    assert "seed graph (4 samples)" in text and "over 20,000 samples" in text
    rows = [line for line in text.splitlines() if "ratio eagle/NumPy" in line]
    assert [row.split(":")[0].strip() for row in rows] == ["ufunc", "native"]
    for row in rows:
        ratio = float(re.search(r"ratio eagle/NumPy ([0-9.e+-]+):", row).group(1))
        assert ratio > 0
        assert ("faster than NumPy" in row) == (ratio < 0.8)
        assert ("slower than NumPy" in row) == (ratio > 1.25)


def test_the_real_size_timing_computes_the_seed_step_and_can_be_skipped(capsys):
    lines = tour.real_size_table(1000, 1, replays=3)
    assert "over 1,000 samples, launch(3)" in lines[0] and len(lines) == 2 + len(tour.REAL_SIZE_FORMS)
    tour.main(["--replays", "5", "--repeats", "1", "--size", "0"])
    assert "ratio eagle/NumPy" not in capsys.readouterr().out
    with pytest.raises(SystemExit):
        tour.main(["--size", "-1"])


def test_a_case_is_one_function():
    def case_constant(replays, repeats):
        return "a constant", 1e-9, 4e-9

    lines = tour.timing_table(10, 1, cases=[case_constant])
    assert len(lines) == 3 and "(4 samples)" in lines[0]
    assert "a constant" in lines[-1] and "ratio eagle/loop 0.25: 4x faster than the loop" in lines[-1]


def test_the_native_seed_graph_computes_what_the_opaque_one_does():
    import numpy as np

    from eagle.bench.cases import native_seed_graph
    seed = native_seed_graph()
    g, out = seed.graph, seed.out
    g.build()
    g.launch(2)
    np.testing.assert_array_equal(out, [1.0, 4.0, 7.0, 10.0])


@pytest.mark.parametrize("obj", [eagle.native.Kernel, eagle.native, eagle.kernels, eagle.Graph, eagle,
                                 type(eagle.kernels.scale(2.0))], ids=repr)
def test_help_shows_no_cython_internals(obj):
    text = pydoc.render_doc(obj, renderer=pydoc.plaintext)
    for name in CYTHON_INTERNALS:
        assert name not in text, f"help({obj!r}) shows {name}"


def test_help_on_kernel_still_shows_its_documentation():
    text = pydoc.render_doc(eagle.native.Kernel, renderer=pydoc.plaintext)
    assert "A native kernel eagle can call without the GIL" in text
    module = pydoc.render_doc(eagle.native, renderer=pydoc.plaintext)
    assert "SIGNATURE" in module and "class Kernel" in module


def test_cimport_still_finds_the_c_api():
    # hidden from help(), but present: it is how `cimport eagle.native` finds wrap_kernel
    assert "wrap_kernel" in eagle.native.__pyx_capi__
    assert "__pyx_capi__" not in dir(eagle.native) and "Kernel" in dir(eagle.native)


def test_the_tour_starts_with_a_captured_numpy_step(capsys):
    tour.main(["--replays", "20", "--repeats", "1", "--size", "0"])
    text = capsys.readouterr().out
    assert text.index("== 0. Capture") < text.index("== 1. Record by hand")
    assert "_seed_step:" in text and "np.multiply" in text and "temporaries:" in text
    assert "out = [ 1.  4.  7. 10.] (three replays; calling the step eagerly gives [ 1.  4.  7. 10.] )" in text
