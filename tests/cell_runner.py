"""Run code cells in order, in this fresh interpreter, as a notebook would: ``python
cell_runner.py cells.json``, where the file holds ``[{"source": ..., "tags": [...],
"where": ...}, ...]``.

Each cell runs in one IPython shell (so ``%`` magics and ``!`` lines work as in
Jupyter, and later cells see earlier cells' names); a cell tagged ``raises-exception``
may raise, one tagged ``skip-execution`` is not run. The first cell that raises
otherwise ends the run with exit status 1, after printing where it is (``where``) and
its traceback. Used by tests/test_readme.py and tests/test_docs.py.
"""
import json
import sys


def main(path):
    from IPython.core.interactiveshell import InteractiveShell

    cells = json.loads(open(path).read())
    shell = InteractiveShell.instance()
    shell.colors = "nocolor"   # plain tracebacks in the test's output
    for cell in cells:
        if "skip-execution" in cell["tags"]:
            continue
        print(f"---- {cell['where']}", flush=True)
        result = shell.run_cell(cell["source"], store_history=True)
        failed = result.error_before_exec or result.error_in_exec
        if failed and "raises-exception" not in cell["tags"]:
            print(f"\nFAILED: the cell at {cell['where']} raised {failed!r}:\n{cell['source']}",
                  file=sys.stderr, flush=True)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))


# ---- finding the cells (imported by the tests) ----------------------------------------

FENCE = "```"


def page_cells(text, page):
    """The ``{code-cell}`` blocks of a MyST notebook page, in order: dicts of source, tags
    and where (``page:line``). Options (``:tags: [a, b]`` lines, or a ``---`` YAML block)
    are read off the top of each block."""
    lines = text.splitlines()
    cells, i = [], 0
    while i < len(lines):
        stripped = lines[i].lstrip()
        if stripped.startswith(FENCE) and stripped.lstrip("`").startswith("{code-cell}"):
            fence = stripped[:len(stripped) - len(stripped.lstrip("`"))]
            start, i = i + 1, i + 1
            body = []
            while i < len(lines) and lines[i].strip() != fence:
                body.append(lines[i])
                i += 1
            tags = []
            if body and body[0].strip() == "---":   # a YAML options block
                end = body.index("---", 1) if "---" in body[1:] else 0
                options, body = body[1:end], body[end + 1:]
            else:
                options = []
                while body and body[0].startswith(":"):
                    options.append(body.pop(0))
            for opt in options:
                key, _, value = opt.strip().lstrip(":").partition(":")
                if key.strip() == "tags":
                    tags += [t.strip(" '\"") for t in value.strip().strip("[]").split(",") if t.strip()]
            cells.append({"source": "\n".join(body), "tags": tags, "where": f"{page}:{start}"})
        i += 1
    return cells


#: the HTML comment that marks how a README block runs: put on the line before the block
README_MARK = "<!-- eagle-test:"


def readme_blocks(text):
    """The ```python blocks of the README, in order: dicts of source, where (``README.md:line``)
    and how (what the ``<!-- eagle-test: ... -->`` comment on the line before says, e.g.
    ``mpiexec -n 2`` or ``gpu``; "" for a plain block)."""
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].strip() == FENCE + "python":
            how = ""
            before = lines[i - 1].strip() if i else ""
            if before.startswith(README_MARK) and before.endswith("-->"):
                how = before[len(README_MARK):-3].strip()
            start, i = i + 1, i + 1
            body = []
            while i < len(lines) and lines[i].strip() != FENCE:
                body.append(lines[i])
                i += 1
            blocks.append({"source": "\n".join(body), "tags": [], "where": f"README.md:{start}", "how": how})
        i += 1
    return blocks
