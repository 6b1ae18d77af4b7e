"""eagle's exception types, and the one way eagle attaches a note to an exception.

Below every other module: nothing here imports eagle.
"""


class NotBuiltError(RuntimeError):
    """launch() on a graph that was never built or was recorded into since build()."""


class GroupConflictError(ValueError):
    """``add_group()`` of nodes that are not independent: one writes memory another reads
    or writes. The message names both nodes and the array."""


class CudaError(RuntimeError):
    """A CUDA driver call made by eagle failed.

    Attributes: ``status`` (the driver's ``CUresult`` value, or a negative eagle
    shim code such as -1 for "no CUDA driver found"), ``name`` (e.g.
    ``"CUDA_ERROR_INVALID_VALUE"``, as ``cuGetErrorName`` gives it), ``text``
    (the driver's sentence for it, ``cuGetErrorString``), ``detail`` (what eagle
    was doing), and, when a graph failed to instantiate or a capture failed,
    ``node_index`` / ``node_name`` of the eagle node responsible (``None``
    otherwise).
    """

    def __init__(self, status, name, text, detail=None, node_index=None, node_name=None):
        self.status = status
        self.name = name
        self.text = text
        self.detail = detail
        self.node_index = node_index
        self.node_name = node_name
        msg = f"{name}: {text}"
        if detail:
            msg = f"{detail}: {msg}"
        super().__init__(msg)

    def __reduce__(self):
        return (type(self), (self.status, self.name, self.text, self.detail,
                             self.node_index, self.node_name))


def add_note(exc, note):
    """Attach ``note`` to ``exc`` whatever its ``__notes__`` holds (a tuple, a string,
    something odd); never raise: the node's exception must reach the caller as it is."""
    try:
        if hasattr(exc, "add_note"):
            try:
                exc.add_note(note)
                return
            except TypeError:   # __notes__ is not a list
                pass
        notes = getattr(exc, "__notes__", None)
        kept = list(notes) if isinstance(notes, (list, tuple)) else ([] if notes is None else [notes])
        # as text: tools that print notes (traceback, pytest) expect strings
        exc.__notes__ = [n if isinstance(n, str) else str(n) for n in kept] + [note]
    except Exception:
        pass
