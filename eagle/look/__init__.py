"""The pictures of a graph: ``print(g)`` (``eagle.look.picture``) and ``g.to_dot()`` /
Jupyter's SVG (``eagle.look.dot``)."""
