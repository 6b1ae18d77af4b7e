"""The pictures of a graph: ``print(g)`` (``eagle.look.picture``, control
nodes' bodies inside their boxes: ``eagle.look.bodies``) and ``g.to_dot()`` /
Jupyter's SVG (``eagle.look.dot``)."""
