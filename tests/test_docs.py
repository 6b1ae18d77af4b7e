"""The documentation site builds with every notebook page executed, and the seed page
shows what the user's page shows.

The build is the documented command (warnings are errors):

    python -m sphinx -W --keep-going -b html docs docs/_build/html

here into a temporary directory. Skipped, with the reason, where the docs extra
(``pip install ".[docs]"``: sphinx, myst-nb, matplotlib, ipykernel) is not installed.

Each notebook page also runs on its own, as a reader who converted it (jupytext) or
pasted its cells would run it: its code cells, in order, in a fresh interpreter, with
the Colab/Kaggle first cell left as the page's placeholder comment (so every page
imports what it uses), without building the site.
"""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
NOTEBOOK_PAGES = ["capture", "graph", "record_replay", "cuda_graphs", "launch_geometry", "cython", "finished_samples",
                  "transport", "monte_carlo", "stencils", "solver_sweep", "particle_filter", "scale_out"]
ALL_PAGES = ["index", *NOTEBOOK_PAGES, "api", "cpp", "running_locally", "architecture"]
#: every page with code cells, found by reading the pages (whatever they hold when this runs)
CELL_PAGES = sorted(p.name for p in DOCS.glob("*.md") if "{code-cell}" in p.read_text())

_missing = [m for m in ("sphinx", "myst_nb", "matplotlib", "ipykernel") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(
    bool(_missing), reason=f"the docs extra is not installed (missing {', '.join(_missing)}): "
                           'pip install ".[docs]"')


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("docs") / "html"
    env = dict(os.environ, PYTHONHASHSEED="0")
    # a guard against a hung cell, not a speed requirement: thirteen executed pages take
    # minutes on two cores, and five times that under tests/sanitize.sh or a busy neighbour
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", str(DOCS), str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=2400)
    if proc.returncode != 0:
        pytest.fail(f"the docs build failed (exit {proc.returncode}):\n"
                    f"{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}")
    return out


def test_every_page_is_built(site):
    for page in ALL_PAGES:
        assert (site / f"{page}.html").is_file(), page


def _executed(site, page):
    path = site.parent / "jupyter_execute" / f"{page}.ipynb"
    assert path.is_file(), f"no executed notebook for {page}: {path}"
    return json.loads(path.read_text())


def _stdout(cell):
    return "".join("".join(o["text"]) if isinstance(o["text"], list) else o["text"]
                   for o in cell.get("outputs", []) if o.get("output_type") == "stream"
                   and o.get("name") == "stdout")


def test_every_notebook_page_ran_every_cell_and_starts_with_the_colab_cell(site):
    for page in NOTEBOOK_PAGES:
        nb = _executed(site, page)
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        assert code, page
        for c in code:
            assert c.get("execution_count") is not None, (page, "".join(c["source"])[:80])
            assert not [o for o in c.get("outputs", []) if o.get("output_type") == "error"], page
        first = "".join(code[0]["source"])
        assert "KAGGLE_KERNEL_RUN_TYPE" in first and "google.colab" in first, page
        assert "EAGLE_PIP_SOURCE" in first, page


def test_the_seed_page_shows_what_the_user_wrote(site):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        from test_seed_page import CELLS, OUTPUTS
    finally:
        sys.path.pop(0)
    nb = _executed(site, "record_replay")
    code = {"".join(c["source"]).strip(): c for c in nb["cells"] if c["cell_type"] == "code"}
    import textwrap
    for cell, expected in zip(CELLS, OUTPUTS):
        source = textwrap.dedent(cell).strip()
        assert source in code, f"the seed page's cell is missing from docs/record_replay.md:\n{source}"
        assert _stdout(code[source]) == expected


def test_the_pictures_are_in_monospace_blocks(site):
    html = (site / "record_replay.html").read_text()
    assert "┌────┴────┐" in html and "│ &lt;join&gt;  │" in html
    css = (site / "_static" / "eagle.css").read_text()
    assert '"DejaVu Sans Mono"' in css and "monospace" in css


def test_every_notebook_page_can_be_downloaded_as_the_executed_notebook(site):
    for page in NOTEBOOK_PAGES:
        download = site / "_notebooks" / f"{page}.ipynb"
        assert download.is_file(), page
        assert json.loads(download.read_text()) == _executed(site, page)
        html = (site / f"{page}.html").read_text()
        assert f'href="_notebooks/{page}.ipynb"' in html and 'href="running_locally.html"' in html
    for page in ("index", "api", "cpp", "running_locally"):
        assert 'href="_notebooks/' not in (site / f"{page}.html").read_text(), page


# ---- every page on its own ---------------------------------------------------------------

def test_the_pages_with_cells_are_the_notebook_pages():
    assert set(CELL_PAGES) >= {f"{page}.md" for page in NOTEBOOK_PAGES}


@pytest.mark.parametrize("page", CELL_PAGES)
def test_the_page_runs_on_its_own_in_a_fresh_interpreter(page, tmp_path):
    from cell_runner import page_cells
    from test_readme import run_cells

    cells = page_cells((DOCS / page).read_text(), page)
    assert cells, page
    # the site's build runs a page in docs/ (myst-nb's default): so does this, from a copy,
    # so that what a page writes stays out of the checkout
    work = tmp_path / "docs"
    shutil.copytree(DOCS, work, ignore=shutil.ignore_patterns("_build", "jupyter_execute"))
    run_cells(cells, work, timeout=900)


def test_the_cells_are_read_with_their_tags_from_either_option_form():
    from cell_runner import page_cells

    page = "\n".join([
        "# t", "```{code-cell} ipython3", ":tags: [hide-input, raises-exception]", "1/0", "```",
        "text", "````{code-cell} ipython3", "---", "tags: [skip-execution]", "---", "x = 1",
        "```", "still this cell", "````", "```python", "not a cell", "```",
        "```{code-cell}", "y = 2", "```"])
    cells = page_cells(page, "p.md")
    assert [c["tags"] for c in cells] == [["hide-input", "raises-exception"], ["skip-execution"], []]
    assert [c["source"] for c in cells] == ["1/0", "x = 1\n```\nstill this cell", "y = 2"]
    assert cells[0]["where"] == "p.md:2"   # the line of its fence
