"""A ufunc node on 0-d arrays that reads and writes one array (``np.divide(s, 3, out=s)``)."""
import numpy as np

import eagle
from eagle.graph import ufunc


def test_a_named_zero_d_array_read_and_written_is_one_array():
    s = np.full((), 6.0)
    g = eagle.Graph()
    g.add_node(ufunc(np.divide, {"s": s}, 3.0, out={"s": s}), name="third")
    g.add_node(ufunc(np.add, s, 1.0, out=s), name="inc")
    g.build().launch(2)
    assert s == ((6.0 / 3 + 1) / 3 + 1)
    rec = g.recording()
    assert "s" in rec.nodes[0].writes and "s" in rec.nodes[0].updated
