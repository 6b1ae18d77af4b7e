import numpy as np, eagle, eagle.kernels as ek
from eagle.graph import native
import eagle._nodes as nd
nd.self_overlap = lambda node: None
for t in (1, 2):
    eagle.set_num_threads(t)
    n = 2_000_001
    a = np.arange(float(n))
    g = eagle.Graph(); g.add_node(native(ek.copy(), reads={"x": a[:-1]}, writes={"y": a[1:]}), name="s"); g.build(teams="parallel"); g.launch(2)
    print(t, g.plan().stages, np.unique(a)[:5])
