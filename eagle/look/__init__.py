"""The pictures of a graph: ``print(g)`` (``eagle.look.picture``, control
nodes' bodies inside their boxes: ``eagle.look.bodies``) and ``g.to_dot()`` /
Jupyter's SVG (``eagle.look.dot``)."""


#: the public submodules (the extension API: docs/api.md, "Extending eagle"); the others are
#: the implementation, reached by their full names only
__all__ = []


def __dir__():
    from eagle._public import public_dir

    return public_dir(globals(), submodules=False)
