"""Where in the user's code an operation of a captured step comes from.

The innermost frame outside NumPy and eagle is the user's line: a node is named
``step:3 np.exp`` (the function and the line of the file), a refusal quotes the line.
"""
from __future__ import annotations

import linecache
import os
import sys

import numpy as np

__all__ = ["Site", "user_site"]

_SKIP = tuple(os.path.dirname(os.path.abspath(m.__file__)) + os.sep
              for m in (np, sys.modules["eagle"]))


class Site:
    """A line of the user's code: its function, file and line number."""

    __slots__ = ("function", "filename", "lineno")

    def __init__(self, function, filename, lineno):
        self.function, self.filename, self.lineno = function, filename, lineno

    def label(self) -> str:
        return f"{self.function}:{self.lineno}"

    def text(self) -> str:
        return linecache.getline(self.filename, self.lineno).strip()

    def describe(self) -> str:
        """``step, line 7 of model.py: `if residual > tol:```"""
        line = self.text()
        quoted = f": `{line}`" if line else ""
        return f"{self.function}, line {self.lineno} of {os.path.basename(self.filename)}{quoted}"


def _users(path) -> bool:
    """eagle's own steps (the tour, the benchmarks, the examples) are users of capture."""
    return (path.endswith(os.sep + "__main__.py") or os.sep + "examples" + os.sep in path
            or os.sep + "bench" + os.sep in path)


def user_site() -> Site:
    """The innermost caller that is neither NumPy nor eagle (eagle's own tests and examples
    count as users)."""
    frame = sys._getframe(1)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(_SKIP) or _users(path):
            return Site(frame.f_code.co_name, frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return Site("<unknown>", "<unknown>", 0)
