"""where= with aliased operands on a team (eagle/cpu/_ufunc.pyx, _masked_run): the mask
is the output itself (a bool ``out=m, where=m``, through another view of the same
layout, with the input the mask too, replayed so that each replay reads the mask the
last one wrote), with and without a cast, under every density of mask: NumPy's result
bit for bit. A mask or an input that overlaps the output other than element for element
(shifted, reversed, a zero-stride or 0-d view of it) is refused, naming both arrays."""
import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import eagle
from eagle.graph import ufunc

N = 6_007


def launch(node, replays=1):
    g = eagle.Graph()
    g.add_node(node, name="u")
    g.build()
    g.launch(replays)


def masks():
    rng = np.random.default_rng(5)
    return {"all": np.ones(N, bool), "none": np.zeros(N, bool), "alternating": np.arange(N) % 2 == 0,
            "half": rng.random(N) < 0.5, "sparse": rng.random(N) < 0.005}


@pytest.mark.parametrize("nthreads", [2, 3])
@pytest.mark.parametrize("density", sorted(masks()))
def test_the_mask_is_the_output(threads, nthreads, density):
    threads(nthreads)
    m0 = masks()[density]
    rng = np.random.default_rng(6)
    a, x = rng.random(N) < 0.5, rng.standard_normal(N)
    cases = {
        # the loop on the arrays (no cast), the mask read and written element by element
        "out=m, where=m": lambda m, uf: uf(np.logical_xor, a, True, out=m, where=m),
        "another view": lambda m, uf: uf(np.logical_xor, a, True, out=m, where=m[:]),
        "reversed": lambda m, uf: uf(np.logical_not, a, out=m[::-1], where=m[::-1]),
        "input too": lambda m, uf: uf(np.logical_xor, m, a, out=m, where=m),
        # through NumPy's iterator: float inputs cast to bool for logical_and's loop
        "cast": lambda m, uf: uf(np.logical_and, x, a, out=m, where=m),
    }
    for name, call in cases.items():
        for replays in (1, 3):
            want = m0.copy()
            for _ in range(replays):
                call(want, lambda f, *args, **kw: f(*args, **kw))
            got = m0.copy()
            call(got, lambda f, *args, **kw: launch(ufunc(f, *args, **kw), replays))
            assert got.tobytes() == want.tobytes(), (name, replays)


@pytest.mark.parametrize("mask_of", [
    lambda m: m[::-1],                                   # reversed
    lambda m: as_strided(m[:1], (N,), (0,)),             # every sample reads out[0]
    lambda m: m[7:8].reshape(()),                        # a 0-d view of one element of out
])
def test_a_mask_meeting_the_output_at_other_elements_is_refused_by_name(mask_of):
    m = np.zeros(N, bool)
    with pytest.raises(ValueError, match="output 'flags' overlaps 'mask' other than element for element"):
        ufunc(np.logical_not, np.ones(N, bool), out={"flags": m}, where={"mask": mask_of(m)})


def test_an_input_shifted_by_one_under_a_mask_is_refused_by_name():
    b = np.arange(N + 1.0)
    with pytest.raises(ValueError, match="output 'lo' overlaps 'hi' other than element for element"):
        ufunc(np.add, {"hi": b[1:]}, 1.0, out={"lo": b[:-1]}, where=np.ones(N, bool))
