"""How eagle writes counts and durations in what it prints (headers, plans, profiles)."""


def plural(n, word):
    """``1 node``, ``3 nodes``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def duration(ns):
    """A time given in ns, to three significant digits in the largest unit that is at least
    one (``812 ns``, ``1.25 µs``, ``40.1 ms``, ``2.5 s``); ``-`` for None (not measured)."""
    if ns is None:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"
