"""What the compaction and reorder nodes of both backends share (``eagle.graph.compact``,
``eagle.graph.reorder``): the node's place in the contract and the checks of its arguments.
The cpu nodes are in ``eagle.cpu.finished``, the cuda nodes in ``eagle.cuda.finished``."""
from __future__ import annotations

import numpy as np

from eagle.record.arrays import named_arrays
from eagle.record.node import Node

class FinishedSamplesNode(Node):
    """Base of the compaction (``mode == "compact"``) and reorder nodes: sized, it moves
    samples between positions, and a compaction sets the next replay's logical size."""

    box = ("[", "]")
    sized = True
    permutes_samples = True
    mode = "compact"
    #: the name of the live count (``count=``): a one-element array, not per-sample
    count_name = "count"
    #: the names of the key (``alive`` or ``by``), of the id map, and of the state arrays
    key_name = "alive"
    ids_name = "ids"
    state_names: tuple = ()

    @property
    def key(self):
        """The key array: a compaction's ``alive``, a reorder's ``by``."""
        return self.writes[self.key_name]

    @property
    def alive(self):
        """A compaction's alive flags (the array given as ``alive``)."""
        if self.mode != "compact":
            raise AttributeError(f"a {self.mode} node has no alive flags; its sort key is .by "
                                 f"({self.key_name!r})")
        return self.key

    @property
    def by(self):
        """A reorder's sort key (the array given as ``by``)."""
        if self.mode != "reorder":
            raise AttributeError(f"a {self.mode} node has no sort key; its alive flags are .alive "
                                 f"({self.key_name!r})")
        return self.key

    @property
    def state(self) -> dict:
        """The state arrays it moves with the key, by name (as given)."""
        return {name: self.writes[name] for name in self.state_names}

    @property
    def resizes(self) -> bool:
        """Whether the node sets the next replay's logical size (compaction)."""
        return self.mode == "compact"

    @property
    def compaction(self):
        """The node itself when it is a compaction (it sets the next replay's logical size)."""
        return self if self.mode == "compact" else None

    @property
    def reorders(self) -> bool:
        return self.mode == "reorder"

    def sample_arrays(self):
        return [a for name, a, _ in self.arrays() if name != self.count_name]

    def default_name(self) -> str:
        return self.mode


#: what each mode's constructor calls its key argument
KEY_ARGUMENT = {"compact": "alive", "reorder": "the sort key by"}


def key_label(mode, key_name) -> str:
    """How a message names the key array: by its argument and its name (``by 'key'``)."""
    return f"{KEY_ARGUMENT[mode]} {key_name!r}"


def check_names(mode, key_name, ids_name, count_name) -> None:
    """The key, ids and count (compact's argument; reorder's own live count) need three
    names; the message names the constructor's own arguments."""
    own = [(KEY_ARGUMENT[mode], key_name), ("ids", ids_name),
           ("count" if mode == "compact" else "the node's own count", count_name)]
    for i, (arg, name) in enumerate(own):
        for other, other_name in own[i + 1:]:
            if name == other_name:
                raise ValueError(f"{mode}(): {arg} and {other} are both named {name!r}; give one "
                                 "another name with a one-entry dict {name: array}")


def check_state(mode, own_names, state) -> dict:
    """``state`` is a dict of per-sample arrays that does not take the names of the node's
    other arrays (the key or ``alive``, ``ids``, ``count``); returns it as the arrays
    parser reads it (``eagle.record.arrays``: names, views, written so writable)."""
    if not isinstance(state, dict):
        raise TypeError(f"{mode}(): state must be a dict of name -> per-sample array, "
                        f"got {type(state).__name__}")
    for name in own_names:
        if name in state:
            raise ValueError(f"{mode}(): {name!r} names another of the node's own arrays; call the "
                             "state array otherwise")
    return named_arrays(state, f"{mode}(): state", "state", write=True)


def check_policy(mode, every, min_dead_fraction) -> None:
    """``every`` an integer >= 1, ``min_dead_fraction`` a number in [0, 1]."""
    if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
        raise ValueError(f"{mode}(): every must be an integer >= 1, got {every!r}")
    if isinstance(min_dead_fraction, bool) or not isinstance(min_dead_fraction, (int, float, np.floating)) \
            or not 0.0 <= float(min_dead_fraction) <= 1.0:
        raise ValueError(f"{mode}(): min_dead_fraction must be in [0, 1], got {min_dead_fraction!r}")
