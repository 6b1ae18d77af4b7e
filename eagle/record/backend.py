"""The backend contract: what a backend offers the graph, its compiled core, the profile
and scale-out.

``Graph.build()`` makes a backend from the graph's ``Recording`` (a read-only
view, ``eagle.record.recording``), one team policy per stage and the backend's own
options (``eagle.record.options``). From then on
the graph, its compiled core (``eagle._core.GraphCore``), ``eagle.profile`` and
``eagle.mpi`` use the backend only through the attributes and methods below.
Every method is called with the graph's lock held (so never two at once on one
backend), except ``plan()``, ``stage_notes()`` and the properties, which only
read and may run while another thread launches.
"""
from __future__ import annotations

from eagle._errors import add_note
from eagle.record import hooks

__all__ = ["Backend"]


#: options that were class attributes a user set, and where they are given now
_MOVED_OPTIONS = {"library_branches": "g.build(cuda=eagle.CudaOptions(library_branches=...))"}


class _BackendType(type):
    """A backend class takes no options as attributes: they are values given to ``build()``."""

    def __setattr__(cls, name, value):
        if name in _MOVED_OPTIONS:
            raise AttributeError(f"{cls.__name__}.{name} is no longer a setting: pass it to "
                                 f"build(), {_MOVED_OPTIONS[name]}")
        super().__setattr__(name, value)


class Backend(metaclass=_BackendType):
    """Base of the cpu and cuda backends, made by ``Graph.build()`` as
    ``Backend(recording, options)``: the graph's ``Recording`` and the backend's own
    options (``eagle.CpuOptions``, ``eagle.CudaOptions``); a backend reads no other's."""

    #: ``"cpu"`` or ``"cuda"``: the header and ``g.backend`` show it
    name = "?"
    #: whether a node of the graph sets the next replay's logical size (compaction)
    resizes = False
    #: a compiled launch path (``eagle._core.CompiledLaunch``) the core runs without a
    #: Python call, or None (then it calls ``launch``)
    compiled = None
    #: whether the core calls ``after_launch`` / ``after_failed_launch``
    checks_launches = False
    #: for the profile: the graph index of each node whose calls the backend times, in
    #: the order its spans number them (empty: it times whole launches only)
    timed_nodes = ()
    #: the span indexes (of ``timed``) that are control nodes: a profile keeps their own
    #: calls past ``max_spans`` (a loop keeps its row)
    timed_controls = frozenset()

    @property
    def timed(self):
        """Per timed node (the profile's span index): (name, stage, counted per call).
        A control node's body nodes (cpu) come after the graph's, named "loop/step" and
        counted once per call (per iteration); the graph's nodes once per replay."""
        rec = self.recording
        return tuple((rec.names[i], rec.stage_of[i], False) for i in self.timed_nodes)
    #: the replays run over all launches, failed ones' completed replays included
    #: (``g.replays``; the random nodes draw replay ``r`` when it is ``r``); assignable
    #: between launches. Each backend counts its own (cpu: the executor; cuda: the host
    #: and a device counter the graph advances)
    replays = 0

    def __init__(self, recording):
        #: the ``Recording`` the backend was built from (the profile and scale-out read it)
        self.recording = recording

    # ---- launching ----

    def launch(self, n: int, until_done: bool = False) -> int:
        """Replay n times (until_done: until the logical size is 0, at most n); the replays done."""
        raise NotImplementedError

    def launch_observed(self, n: int, until_done: bool, progress, record) -> int:
        """``launch``, showing ``progress`` (a bar with ``update(done)``, or None) and
        timing node calls into ``record`` (an ``eagle.observe.profile.LaunchRecord``, or None)."""
        return self.launch(n, until_done)

    def after_launch(self, n: int) -> None:
        """After a launch that did not raise: raise what its nodes reported (``checks_launches``)."""

    def after_failed_launch(self, n: int) -> None:
        """After a launch that raised, before its exception reaches the caller."""

    #: (graph node index, or -1 for an interrupt, replay) of the last failed launch, or None
    last_failure = None

    def note_failure(self, exc, n: int, until_done: bool = False) -> None:
        """A launch of n replays (``launch_until_done(n)`` when until_done) raised ``exc``:
        attach where it happened, then run the failure hooks (scale-out stops the other
        ranks)."""
        where = self.last_failure
        if where is not None:
            node, replay = where
            call = launch_call(n, until_done)
            if node is None or node < 0:
                add_note(exc, f"eagle: {call} interrupted in replay {replay}")
            else:
                add_note(exc, f"eagle: raised by {self.recording.where(node)} in replay {replay} of {call}")
        hooks.failed(self.recording, exc)

    # ---- the logical size ----

    @property
    def logical_size(self) -> int:
        raise NotImplementedError

    def set_logical_size(self, n: int) -> None:
        """Process samples [0, n) from the next replay on (n is checked by the graph)."""
        raise NotImplementedError

    def restart(self, n: int) -> None:
        """``Graph.restart``: every compaction and reorder node as it was made (its id map
        the identity, its ``every`` count at 0), then logical size ``n``."""
        raise NotImplementedError

    # ---- looking ----

    def control_iterations(self, steps, node) -> int:
        """The passes control node ``node`` ran in its last run (a while loop's iterations):
        ``steps`` its path, ``(graph index, body index)`` per level, the last ``(index, None)``."""
        raise NotImplementedError(f"the {self.name} backend does not count a loop's iterations")

    def plan(self):
        """An ``eagle.record.plan.Plan``: how the stages run."""
        raise NotImplementedError

    def stage_notes(self):
        """One note per stage for the picture (how its work is shared), or None."""
        return None

    def body_stage_notes(self, body):
        """One note per stage of ``body`` (a control node's body ``Recording``) for the
        picture, as ``stage_notes`` for the graph's, or None."""
        return None


def launch_call(n: int, until_done: bool) -> str:
    """How a failure note names the launch: ``launch(n)`` or ``launch_until_done(n)``."""
    return f"launch_until_done({n})" if until_done else f"launch({n})"
