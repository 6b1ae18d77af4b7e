"""The pictures of a graph: ``print(g)`` (``eagle.look.picture``, control
nodes' bodies inside their boxes: ``eagle.look.bodies``) and ``g.to_dot()`` /
Jupyter's SVG (``eagle.look.dot``)."""


def __dir__():
    from eagle._public import public_dir

    return public_dir(globals())
