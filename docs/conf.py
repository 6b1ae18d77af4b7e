"""Sphinx configuration of eagle's documentation.

Build (from the repository root; warnings are errors, every notebook cell runs):

    python -m sphinx -W --keep-going -b html docs docs/_build/html

Pages are MyST Markdown notebooks (``file_format: mystnb``) executed by MyST-NB
at build time, so every output on the site was made by the code it documents.
eagle must be importable: installed (``pip install .``) or built in place
(``python setup.py build_ext --inplace``); the repository root is put on the
path of Sphinx and of the notebook kernels.

Each notebook page starts with the Colab/Kaggle first cell. Its text lives once,
in ``docs/_static/first_cell.py`` (with ``EAGLE_PIP_SOURCE``, where eagle is
pip-installed from on Colab/Kaggle); a page asks for it with a code cell whose
only line is ``# eagle-docs: first cell``, and the ``source-read`` hook below
puts the file's text in its place before the page is parsed.

Every notebook page can be downloaded as a notebook: MyST-NB writes each
executed page to ``jupyter_execute/<page>.ipynb`` beside the output folder;
the ``html-page-context`` hook below copies it into the site as
``_notebooks/<page>.ipynb`` and the sidebar (``_templates/notebook.html``)
links it, with outputs, first cell and all.
"""
import os
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent

# eagle for autodoc, and for the kernels that execute the notebook pages
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
# the kernels draw matplotlib figures inline (into the page), whatever the environment says
os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"

from sphinx.util.docstrings import prepare_docstring  # noqa: E402

import eagle  # noqa: E402  (fails the build early with eagle's own message if not built)

project = "eagle"
author = "eagle's authors"
copyright = "eagle's authors"
release = eagle.__version__
version = release

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]

exclude_patterns = ["_build", "upstream", "jupyter_execute", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints"]

# ---- MyST / MyST-NB -----------------------------------------------------------
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
nb_execution_mode = "force"            # run every page on every build
nb_execution_raise_on_error = True     # a failing cell fails the build
nb_execution_timeout = 120             # seconds per cell
nb_execution_show_tb = True            # print the traceback of a failing cell in the build log
nb_merge_streams = True                # one output block per cell for stdout

# ---- autodoc --------------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
napoleon_google_docstring = True
napoleon_numpy_docstring = True

# ---- HTML -------------------------------------------------------------------------
html_theme = "alabaster"
html_title = f"eagle {release}"
html_static_path = ["_static"]
templates_path = ["_templates"]
html_css_files = ["eagle.css"]
html_theme_options = {
    "description": "Record a compute step once, replay it with one call.",
    "fixed_sidebar": True,
    "page_width": "1180px",
    "sidebar_width": "220px",
    "code_font_family": '"DejaVu Sans Mono", "Menlo", "Consolas", monospace',
}
html_sidebars = {"**": ["about.html", "navigation.html", "notebook.html", "searchbox.html"]}

# ---- the Colab/Kaggle first cell, defined once ------------------------------------------
FIRST_CELL_MARK = "# eagle-docs: first cell"
FIRST_CELL = (DOCS / "_static" / "first_cell.py").read_text().rstrip("\n")


def _insert_first_cell(app, docname, source):
    if FIRST_CELL_MARK in source[0]:
        source[0] = source[0].replace(FIRST_CELL_MARK, FIRST_CELL)


NOTEBOOKS_DIR = "_notebooks"


def _notebook_download(app, pagename, templatename, context, doctree):
    """Copy the executed notebook of a notebook page into the site and give the sidebar its link."""
    context["notebook_download"] = None
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if app.builder.format != "html" or not executed.is_file():
        return
    target = Path(app.outdir) / NOTEBOOKS_DIR / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(executed, target)
    context["notebook_name"] = target.name
    context["notebook_download"] = context["pathto"](f"{NOTEBOOKS_DIR}/{pagename}.ipynb", 1)


def _literal_blocks(app, what, name, obj, options, lines):
    """eagle's docstrings show code as an indented block after a plain paragraph
    (plain-text style); reStructuredText needs ``::`` for that, so add it.
    A module docstring is taken as written: autodoc's dedent would flatten a body
    that is all code (``eagle``'s own) into prose."""
    if what == "property":
        # napoleon reads "text: more" on a property's first line as "type: description"
        doc = getattr(obj, "__doc__", None)
        if doc:
            lines[:] = prepare_docstring(doc)
        return
    if what == "module" and getattr(obj, "__doc__", None):
        raw = obj.__doc__.expandtabs().splitlines()
        lines[:] = [raw[0].strip()] + [line.rstrip() for line in raw[1:]] + [""]
    out, prev = [], ""
    for i, line in enumerate(lines):
        indented = line.startswith("    ") and line.strip()
        if (indented and out and not out[-1].strip() and prev.strip()
                and not prev.startswith(" ") and not prev.rstrip().endswith("::")
                and not prev.startswith("..")):
            out[-1:] = ["", "::", ""]
        out.append(line)
        if line.strip():
            prev = line
    lines[:] = out


def setup(app):
    app.connect("source-read", _insert_first_cell)
    app.connect("html-page-context", _notebook_download)
    app.connect("autodoc-process-docstring", _literal_blocks, priority=600)  # after napoleon
    return {"parallel_read_safe": True}
