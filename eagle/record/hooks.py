"""Hooks other parts of eagle register into the graph's build and failed launches.

Scale-out (``eagle.mpi``) registers here when it is imported: before a build
it checks that every rank recorded the same graph, and when a build or a
launch fails it stops the other ranks. ``eagle.graph`` calls the hooks and
never imports their owners. Each hook receives the graph's ``Recording``.
Capture (``eagle.stepcapture``) listens to the node constructors: a node made while
a step is captured joins the captured graph.
"""
from __future__ import annotations

import functools
import threading

_before_build = []
_on_failure = []
_node_made = []


__all__ = ["register", "announced"]


def register(*, before_build=None, on_failure=None, node_made=None) -> None:
    """``before_build(recording, failure)`` runs at every ``build()`` before a backend is made
    (it may raise: the build then fails, nothing changed); ``failure`` is None, or the exception
    build()'s own argument checks raised (the build then fails with it whatever the hook does:
    scale-out tells the other ranks). ``on_failure(recording, exc)`` runs when
    a build or a launch raised, after eagle's note is attached, before the exception
    reaches the caller. ``node_made(node)`` runs when a public constructor of
    ``eagle.graph`` returns a node. Registering one function twice registers it once."""
    if before_build is not None and before_build not in _before_build:
        _before_build.append(before_build)
    if on_failure is not None and on_failure not in _on_failure:
        _on_failure.append(on_failure)
    if node_made is not None and node_made not in _node_made:
        _node_made.append(node_made)


def before_build(recording, failure=None) -> None:
    for hook in _before_build:
        hook(recording, failure)


def failed(recording, exc) -> None:
    for hook in _on_failure:
        hook(recording, exc)


def made(node) -> None:
    for hook in _node_made:
        hook(node)


_depth = threading.local()


def announced(make):
    """``make``, a public node constructor, telling ``node_made`` hooks of the node it returns
    (a captured step records the nodes its function makes: ``eagle.stepcapture``); a
    constructor called by another one is not announced twice."""
    @functools.wraps(make)
    def constructor(*args, **kwargs):
        _depth.n = getattr(_depth, "n", 0) + 1
        try:
            node = make(*args, **kwargs)
        finally:
            _depth.n -= 1
        if _depth.n == 0:
            made(node)
        return node

    return constructor
