"""What a captured step cannot do is refused at capture time, at its line, with the way out."""
import numpy as np
import pytest

import eagle
from eagle import CaptureError

GLOBAL_RNG = np.random.default_rng(0)
escaped = []
stash = None


def line_of(fn, k):
    return fn.__code__.co_firstlineno + k


def refused(step, *args, match):
    with pytest.raises(CaptureError, match=match) as info:
        eagle.capture(step, *args)
    return str(info.value)


def test_python_control_flow_on_a_value_points_to_while_loop():
    def step(x):
        residual = np.abs(x).max()
        if residual > 1e-3:
            x *= 0.5
    msg = refused(step, np.ones(4), match="control flow")
    assert f"step, line {line_of(step, 2)} of test_capture_refusals.py: `if residual > 1e-3:`" in msg
    assert "while_loop" in msg and "if_else" in msg


def test_reading_values_is_refused():
    for body in (lambda x: float(x.sum()), lambda x: x.tolist(), lambda x: int(x[0])):
        with pytest.raises(CaptureError, match="nothing is computed while capturing"):
            eagle.capture(body, np.ones(3))


def test_numpy_function_without_a_ufunc_form_names_the_way_out():
    def step(x, y):
        y[...] = np.convolve(x, [1, 2, 1], mode="same")
    msg = refused(step, np.ones(8), np.ones(8), match="np.convolve has no ufunc or reduction form")
    assert "eagle.graph.opaque" in msg


def test_sort_cumsum_and_fancy_indexing_are_refused():
    with pytest.raises(CaptureError, match=r"x.sort\(\)"):
        eagle.capture(lambda x: x.sort(), np.ones(3))
    with pytest.raises(CaptureError, match="accumulate"):
        eagle.capture(lambda x: np.add.accumulate(x), np.ones(3))
    with pytest.raises(CaptureError, match="gathers"):
        eagle.capture(lambda x: x[np.array([0, 2])] + 1, np.ones(3))
    with pytest.raises(CaptureError, match="gathers"):
        eagle.capture(lambda x: x[x > 0] + 1, np.ones(3))


def test_numpy_generator_is_refused_wherever_the_step_reaches_it():
    def from_global(z):
        z[...] = GLOBAL_RNG.standard_normal(z.shape)
    msg = refused(from_global, np.ones(3), match="Generator draws now")
    assert f"line {line_of(from_global, 1)}" in msg and "eagle.graph.normal" in msg

    def from_module(z):
        z[...] = np.random.normal(size=3)
    refused(from_module, np.ones(3), match="Generator")

    rng = np.random.default_rng(1)

    def from_closure(z):
        rng.random(out=z)
    refused(from_closure, np.ones(3), match="Generator")
    with pytest.raises(CaptureError, match="argument 'rng'"):
        eagle.capture(lambda z, rng: None, np.ones(3), rng)


def test_a_stand_in_stored_outside_the_step_is_refused():
    def to_global(x):
        global stash
        stash = x * 2
    msg = refused(to_global, np.ones(3), match="escapes the step")
    assert "global stash" in msg and "g.result" in msg

    def to_list(x):
        escaped.append(x + 1)
    refused(to_list, np.ones(3), match="escapes")
    escaped.clear()


def test_returning_a_temporary_is_fine_and_a_scalar_is_refused():
    g = eagle.capture(lambda x: x + 1, np.ones(3))
    assert isinstance(g.result, np.ndarray)
    with pytest.raises(CaptureError, match="returned float"):
        eagle.capture(lambda x: 1.5, np.ones(3))


def test_writing_an_array_the_step_was_not_given_is_refused():
    other = np.zeros(3)

    def step(x):
        np.add(x, 1, out=other)
    refused(step, np.ones(3), match="neither an argument")


def test_unsafe_casts_are_refused():
    def step(i, x):
        i[...] = x * 2
    msg = refused(step, np.zeros(3, np.int64), np.ones(3), match="casting='unsafe'")
    assert "np.rint" in msg


def test_io_inside_the_step_is_refused():
    with pytest.raises(CaptureError, match="I/O"):
        eagle.capture(lambda x: np.savetxt("/dev/null", x), np.ones(3))

    def step(x):
        print(x.max())
    with pytest.raises(CaptureError, match=r"print\(t1\) or str\(\) \(I/O\)"):
        eagle.capture(step, np.ones(3))
    with pytest.raises(CaptureError, match="formatting x"):
        eagle.capture(lambda x: f"{x:.3}", np.ones(3))


def test_after_the_capture_stand_ins_compute_again():
    class Box:
        pass
    box = Box()   # an object's attribute: not a place capture looks

    def step(x):
        box.view = x[1:]
    eagle.capture(step, np.arange(4.0))
    view = box.view
    np.testing.assert_array_equal(view + 1, [2.0, 3.0, 4.0])
    assert bool(view.max() == 3.0)
