"""What a captured step cannot do, and what to write instead: the refusals of capture.

Every refusal is raised at capture time, from inside the step, with the line of the
step that asked for it and the way to say it that capture can record.
"""
from __future__ import annotations

from eagle.stepcapture.source import user_site

__all__ = ["CaptureError", "refuse", "CONTROL_FLOW", "VALUE_READ", "NO_FORM", "GENERATOR", "ESCAPE",
           "UNSAFE_CAST", "WRITE_OUTSIDE", "FANCY_INDEX", "NOT_AN_ARRAY_RESULT", "ELEMENT_ORDER",
           "OVERLAP_STEPS"]


class CaptureError(TypeError):
    """An operation a captured step cannot record (the message names the line and the way out)."""


CONTROL_FLOW = ("Python control flow on an array's value ({what}): a replay runs no Python, so the "
                "branch would be decided once, now, on values that are not computed yet; put the "
                "test in the graph: a 0-d bool array (`more = residual > tol`) drives "
                "eagle.graph.while_loop(more, eagle.capture(body, ...)) or "
                "eagle.graph.if_else(flag, eagle.capture(then, ...), eagle.capture(otherwise, ...))")
VALUE_READ = ("reading an array's values ({what}) inside a captured step: nothing is computed while "
              "capturing; read the arrays after g.launch(), or wrap the code that needs values in "
              "eagle.graph.opaque(fn, reads=..., writes=...)")
NO_FORM = ("{what} has no ufunc or reduction form, so capture cannot record it as a node; write it "
           "with ufuncs and reductions (np.add, np.where, x.max()...), or run it as "
           "eagle.graph.opaque(fn, reads=..., writes=...), which calls it on every replay")
GENERATOR = ("NumPy's random Generator draws now, once, not on every replay; draw with eagle's "
             "random nodes inside the step: eagle.graph.normal(z, key=7) (also uniform, exponential, "
             "poisson, binomial, integers), reproducible whatever the threads")
ESCAPE = ("the stand-in for {what} escapes the step ({where}): a replay cannot update it; return "
          "it instead (the returned arrays are the graph's result, g.result) or pass the array "
          "to keep as an argument of the step")
UNSAFE_CAST = ("{what} casts {src} to {dst}, which NumPy does here under casting='unsafe'; a ufunc "
               "node casts under 'same_kind' only: say the conversion with a ufunc (np.rint, np.floor, "
               "np.trunc... then assign), or use eagle.graph.opaque")
WRITE_OUTSIDE = ("{what} writes an array that is neither an argument of the step nor made inside it: "
                 "an eager call would write it once per call, a replay must know it; pass it as an "
                 "argument of the step")
FANCY_INDEX = ("{what}: indexing with an integer array or a boolean mask gathers elements into a new "
               "array, which no ufunc node does; keep the shape and mask instead "
               "(np.where(mask, x, y), np.add(x, y, out=z, where=mask), x[mask] = value)")
ELEMENT_ORDER = ("{what}: the source overlaps the target with another step, and NumPy copies such a "
                 "1-d assignment element by element, in order, without a buffer: its result depends on "
                 "that order, which a node split across threads does not keep; copy the source first "
                 "({what_fixed})")
OVERLAP_STEPS = ("{what}: the input {name} overlaps the output other than element for element; NumPy "
                 "runs {what}'s loop over the overlapping views where their order allows it, which takes "
                 "its scalar code path, a node runs it over a copy, which may take its vector path: the "
                 "last bits differ; copy the input first ({name}.copy())")
NOT_AN_ARRAY_RESULT = ("the step returned {what}; a captured step returns nothing, an array, or a tuple "
                       "of arrays (the graph's result, g.result)")


def refuse(template: str, **fields) -> CaptureError:
    """A ``CaptureError`` quoting the user's line, ``template`` filled with ``fields``."""
    return CaptureError(f"capture: {user_site().describe()}: {template.format(**fields)}")
