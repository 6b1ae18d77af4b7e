"""A node's exception reaches the caller as it was raised, with eagle's note added
where it can be: whatever ``__notes__`` holds, the note never replaces the exception."""
import numpy as np
import pytest

import eagle
from eagle.graph import opaque


class Odd(Exception):
    pass


class ReadOnlyNotes(Exception):
    @property
    def __notes__(self):
        return ("kept",)


class RefusesAttributes(Exception):
    def __setattr__(self, name, value):
        raise AttributeError("no attributes here")


def raiser(make):
    def fail():
        raise make()
    return fail


def with_notes(notes):
    def make():
        e = Odd("boom")
        e.__notes__ = notes
        return e
    return make


@pytest.mark.parametrize("notes, expected_first", [
    (("a", "b"), ["a", "b"]),
    ("a string", ["a string"]),
    (42, ["42"]),
    ((1, "b"), ["1", "b"]),
    ([], []),
    (["x"], ["x"]),
])
def test_odd_notes_keep_the_exception_and_gain_the_note(notes, expected_first):
    g = eagle.Graph()
    g.add_node(opaque(raiser(with_notes(notes)), writes={"x": np.zeros(2)}), name="bad")
    g.build()
    with pytest.raises(Odd, match="boom") as info:
        g.launch(1)
    got = list(info.value.__notes__)
    assert got[:-1] == expected_first
    assert "raised by node 'bad' (stage 0) in replay 0 of launch(1)" in got[-1]


@pytest.mark.parametrize("exc_type", [ReadOnlyNotes, RefusesAttributes])
def test_an_exception_that_takes_no_note_still_reaches_the_caller(exc_type):
    g = eagle.Graph()
    g.add_node(opaque(raiser(lambda: exc_type("deep")), writes={"x": np.zeros(2)}), name="bad")
    g.build()
    for _ in range(2):   # the graph stays usable
        with pytest.raises(exc_type, match="deep"):
            g.launch(1)
