"""A ufunc node that runs through NumPy's iterator (a cast or where=) frees every iterator
it made, however the allocator left the memory: each thread's iterator is made new, never
NpyIter_Copy'd (NumPy's copy of a masked iterator leaves a member uninitialised, and its
free calls through it: docs/upstream/numpy_masked_transfer_clone.md). Each case runs in a
subprocess whose memory is poisoned: PYTHONMALLOC=debug (0xCD in a new block), or
tests/doubles/poison_malloc.c (0xA5 in every malloc'ed block)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = r"""
import gc, sys
import numpy as np
import eagle
from eagle.graph import ufunc

threads, case = int(sys.argv[1]), sys.argv[2]
eagle.set_num_threads(threads)
n = 4000
x = np.arange(n * 4, dtype=np.float64).reshape(n, 4)
mask = (np.arange(n * 4) % 3 != 0).reshape(n, 4)
if case == "view":          # an output that is not one contiguous block
    big = np.zeros((n, 6))
    out, want = big[:, 1:-1], np.zeros((n, 6))
    np.add(x, 1.0, out=want[:, 1:-1], where=mask)
elif case == "dtype":       # an output of another dtype than the loop's
    big = out = np.zeros((n, 4), np.float32)
    want = np.zeros((n, 4), np.float32)
    np.add(x, 1.0, out=want, where=mask)
else:                       # a cast input, no mask
    x = x.astype(np.int32)
    big = out = np.zeros((n, 4))
    want = np.add(x, 1.0)
    mask = True
g = eagle.Graph()
g.add_node(ufunc(np.add, x, 1.0, out=out, where=mask), name="u")
g.build(cpu=eagle.CpuOptions(teams="parallel" if threads > 1 else "serial"))
g.launch(3)
assert np.array_equal(big, want)
del g
gc.collect()
print("freed")
"""


def _poison_lib(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the poisoned allocator")
    lib = tmp_path / "poison_malloc.so"
    src = Path(__file__).parents[1] / "doubles" / "poison_malloc.c"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(lib), str(src)], check=True)
    return lib


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", ["view", "dtype", "cast"])
@pytest.mark.parametrize("poison", ["pymalloc-debug", "poisoned-malloc"])
def test_a_graph_with_an_iterator_node_is_freed_cleanly(tmp_path, poison, case, threads):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    if poison == "pymalloc-debug":
        env["PYTHONMALLOC"] = "debug"
    else:
        env["PYTHONMALLOC"] = "malloc"
        # after a sanitizer's runtime, if tests/sanitize.sh preloads one (its malloc wins
        # then; it fills new blocks itself)
        lib = str(_poison_lib(tmp_path))
        env["LD_PRELOAD"] = f"{env['LD_PRELOAD']}:{lib}" if env.get("LD_PRELOAD") else lib
    r = subprocess.run([sys.executable, "-c", PROGRAM, str(threads), case], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "freed", (r.returncode, r.stderr[-3000:])
