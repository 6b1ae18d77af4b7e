"""DLPack exporters that speak the old protocol or lie about themselves."""
from __future__ import annotations

import numpy as np
import pytest

import eagle
from eagle.graph import opaque


class LegacyExporter:
    """An exporter of the unversioned protocol: __dlpack__ takes no max_version."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return (1, 0)


def test_writing_an_unversioned_dlpack_export_is_refused_with_the_real_reason():
    g = eagle.Graph()
    with pytest.raises(TypeError, match="unversioned DLPack protocol") as info:
        g.add_node(opaque(lambda: None, writes={"a": LegacyExporter(np.zeros(3))}), name="w")
    assert "declare it under reads=" in str(info.value)
    assert list(g.nodes) == []
    g.add_node(opaque(lambda: None, reads={"a": LegacyExporter(np.zeros(3))}), name="r")
    g.build().launch(2)


class ConsumedCapsule:
    def __init__(self):
        self.capsule = np.zeros(3).__dlpack__()

    def __dlpack__(self, **kw):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


def test_a_capsule_handed_out_twice_is_refused_cleanly_the_second_time():
    obj = ConsumedCapsule()
    g = eagle.Graph()
    g.add_node(opaque(lambda: None, reads={"a": obj}), name="first")
    with pytest.raises(TypeError, match="NumPy cannot import"):
        g.add_node(opaque(lambda: None, reads={"a": obj}), name="second")
    assert [n for n in g._names] == ["first"]
