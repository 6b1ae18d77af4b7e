"""How eagle writes counts and durations in what it prints (headers, plans, profiles), and
the one rule for the names it prints (node and array names)."""


def check_name(name, what):
    """Raise TypeError unless ``name`` is a non-empty one-line string: no line break
    (str.splitlines' \\v, \\f, U+2028 too), control character (NUL, ESC) nor invisible
    format character (zero-width space, soft hyphen, a bidi override). The picture and the
    DOT text lay a name out on one line, a column per character width, and a terminal
    must not receive an escape sequence. ``what``: ``"a node name"``, ``"writes: an array
    name"``..."""
    import unicodedata

    if (not isinstance(name, str) or not name
            or any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in name)):
        raise TypeError(f"{what} must be a non-empty one-line string (no line breaks, control or "
                        f"invisible format characters), got {name!r}")


def plural(n, word):
    """``1 node``, ``3 nodes``, ``2 launches``."""
    if n == 1:
        return f"{n} {word}"
    return f"{n} {word}es" if word.endswith(("s", "x", "z", "ch", "sh")) else f"{n} {word}s"


def plain(rst):
    """A docstring's reStructuredText as a terminal shows it (``--help``): ``code`` and
    :role:`target` lose their markup, the words stay."""
    import re

    text = re.sub(r":[a-z]+(?::[a-z]+)?:`~?([^`<]*?)(?:\s*<[^`>]*>)?`", r"\1", rst)
    return re.sub(r"``(.+?)``", r"\1", text)


def monospace_html(text):
    """``text`` as a monospace block for Jupyter (``_repr_html_``): pictures, plans, profiles."""
    import html

    return ('<pre style="font-family: \'DejaVu Sans Mono\', Menlo, Consolas, monospace; '
            f'line-height: 1.15">{html.escape(text)}</pre>')


def with_article(word):
    """``a float64``, ``an int8``, ``a uint8``, ``an ndarray``, ``an 8-d``, ``an MPI``,
    ``an SVD``, ``a NCCL``, ``an f8``, ``a u1``, ``an _ArrayFunctionDispatcher``: the
    indefinite article English reads before ``word`` (by its sound: ``uint`` is "you-int",
    ``8`` "eight", an acronym read letter by letter starts with its first letter's name)."""
    word = str(word)
    return f"{_article(word)} {word}"


#: letters whose names start with a vowel sound: "ef", "aitch", "el", "em", "en", "ar", "es", "ex"
_AN_LETTERS = "aefhilmnorsx"
#: acronyms read as words although a consonant follows their first letter
_WORD_ACRONYMS = ("NCCL",)   # "nickel"


def _leading_acronym(word):
    """The capitals (and digits) ``word`` starts with when they are an acronym (``MPI``,
    ``SVD``, ``HDF5``, ``DL`` of ``DLPack``, ``IO`` of ``IOError``), else ''."""
    run = len(word) - len(word.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"))
    if run < 2 or not word[0].isalpha() or not (word[1].isupper() or word[1].isdigit()):
        return ""
    if run < len(word) and word[run].islower() and word[run - 1].isalpha():
        run -= 1           # HTTPError: the E starts the next word
    return word[:run] if run >= 2 else ""


def _article(word):
    word = word.lstrip("_<>|=")    # _ArrayFunctionDispatcher; a dtype's byte order, <f8
    w = word.lower()
    if not w:
        return "a"
    if w[0].isdigit():
        digits = w[:len(w) - len(w.lstrip("0123456789"))]
        # eight, eighty, eleven, eighteen; 11,000 and 18,000 too ("eleven thousand")
        an = digits.startswith("8") or (len(digits) % 3 == 2 and digits[:2] in ("11", "18"))
        return "an" if an else "a"
    acronym = _leading_acronym(word)
    if acronym:
        # read as a word when a vowel follows its first letter (NUMA, SIMD, UNIX), else
        # letter by letter (MPI "em-pee-eye", SVD, LLVM, HDF5, NVRTC, URL "you-ar-el")
        as_word = len(acronym) >= 3 and acronym[1] in "AEIOU" or acronym in _WORD_ACRONYMS
        if not as_word:
            return "an" if w[0] in _AN_LETTERS else "a"
    elif len(w) == 1 or (w[0].isalpha() and w[1:].isdigit()):
        # one letter, or a dtype code read letter by letter: f8 "ef-eight", u1 "you-one"
        return "an" if w[0] in _AN_LETTERS else "a"
    if w.startswith(("unin", "unim")):      # uninitialized, unimplemented: "un-"
        return "an"
    if w.startswith(("uint", "uni", "use", "usu", "usa", "ufunc", "ubyte", "ushort", "ulong", "utf",
                     "one", "once", "eu")):   # "you-", "won"
        return "a"
    if w.startswith(("nd", "mpi", "hdf", "honest", "hour")):   # spelt out: "en-dee", "em-pee-eye"
        return "an"
    return "an" if w[0] in "aeiou" else "a"


def duration(ns):
    """A time given in ns, to three significant digits in the largest unit that is at least
    one (``812 ns``, ``1.25 µs``, ``40.1 ms``, ``2.5 s``); ``-`` for None (not measured)."""
    if ns is None:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"
