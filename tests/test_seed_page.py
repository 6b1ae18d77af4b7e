"""The user's page "How eagle records and replays a graph", cell by cell: every cell
runs as written and prints what the page shows (the pictures' spacing fixed once)."""
import contextlib
import io
import textwrap

CELLS = [
    """
    import numpy as np
    import eagle
    from eagle.graph import opaque
    """,
    """
    x, left, right, out = np.arange(4.0), np.zeros(4), np.zeros(4), np.zeros(4)
    calls = {"l": 0, "r": 0, "join": 0}
    def run_l():
        calls["l"] += 1
        left[:] = 2 * x
    def run_r():
        calls["r"] += 1
        right[:] = x + 1
    def run_join():
        calls["join"] += 1
        out[:] = left + right
    g = eagle.Graph()
    g.add_group([opaque(run_l, reads={"x": x}, writes={"a": left}),
                 opaque(run_r, reads={"x": x}, writes={"b": right})], names=["l", "r"])
    g.add_node(opaque(run_join, reads={"a": left, "b": right}, writes={"out": out}), name="join")
    print(g)
    """,
    """
    g.build()
    print(g)
    """,
    """
    g.launch(3)
    print(calls)
    print(out)
    """,
]

OUTPUTS = [
    "",
    """\
eagle.Graph 3 nodes · 1 group · backend: (not built)
stage 0  ┌─────┐   ┌─────┐
         │ <l> │   │ <r> │
         └──┬──┘   └──┬──┘
            a         b
            └────┬────┘
stage 1     ┌────┴────┐
            │ <join>  │
            └─────────┘
""",
    """\
eagle.Graph 3 nodes · 1 group · backend: cpu
stage 0 work_share  ┌─────┐   ┌─────┐
                    │ <l> │   │ <r> │
                    └──┬──┘   └──┬──┘
                       a         b
                       └────┬────┘
stage 1 work_share     ┌────┴────┐
                       │ <join>  │
                       └─────────┘
""",
    """\
{'l': 3, 'r': 3, 'join': 3}
[ 1.  4.  7. 10.]
""",
]


def test_every_cell_prints_what_the_page_shows():
    ns = {}
    for cell, expected in zip(CELLS, OUTPUTS):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(textwrap.dedent(cell), ns)
        assert buf.getvalue() == expected


def test_the_shared_seed_graph_prints_what_the_page_shows():
    """eagle.bench.cases.seed_graph, the one definition of the seed graph that the tour,
    ``python -m eagle.bench`` and the asv suite use, prints what the page's cells print."""
    from eagle.bench import cases

    calls = cases.seed_calls()
    seed = cases.seed_graph(calls=calls)
    g = seed.graph

    def built():
        g.build()
        print(g)

    def replayed():
        g.launch(3)
        print(calls)
        print(seed.out)

    for step, expected in zip([lambda: print(g), built, replayed], OUTPUTS[1:]):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            step()
        assert buf.getvalue() == expected


def test_the_page_holds_in_any_thread_count(monkeypatch):
    import eagle

    before = eagle.get_num_threads()
    try:
        for n in (1, 2, 4):
            eagle.set_num_threads(n)
            test_every_cell_prints_what_the_page_shows()
            test_the_shared_seed_graph_prints_what_the_page_shows()
    finally:
        eagle.set_num_threads(before)


def test_the_tour_runs(capsys):
    from eagle.__main__ import main

    main(["--replays", "200", "--repeats", "2"])
    text = capsys.readouterr().out
    assert "backend: (not built)" in text and "backend: cpu" in text
    assert "{'l': 3, 'r': 3, 'join': 3}" in text and "[ 1.  4.  7. 10.]" in text
    assert "z = [0. 2. 4. 0. 0. 0. 0. 0.]" in text
    assert "ratio eagle/loop" in text
