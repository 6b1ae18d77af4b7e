"""Whether this Python has what eagle's build needs: pyproject.toml's [build-system]
requires, one line per requirement, then "build requirements met" or "BUILD
REQUIREMENTS NOT MET". Read by tests/gpu/run_on_gpu.sh's preflight (offline: no build
isolation there, the build takes the setuptools, Cython and NumPy it finds)."""
import re
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


def requirements(pyproject: Path) -> list:
    text = pyproject.read_text()
    try:
        import tomllib
    except ImportError:   # Python 3.10: the list as written (comment lines may precede it)
        found = re.search(r"^\[build-system\]\s*$(?:\s*#.*$)*\s*requires\s*=\s*\[(.*?)\]", text, re.S | re.M)
        return [r.strip().strip("\"'") for r in found.group(1).split(",") if r.strip()]
    return list(tomllib.loads(text)["build-system"]["requires"])


def installed(name):
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def main(pyproject: Path) -> bool:
    try:
        from packaging.requirements import Requirement
    except ImportError:
        Requirement = None
    ok = True
    for r in requirements(pyproject):
        if Requirement is None:   # presence only
            have = installed(re.split(r"[<>=!~ ;\[]", r, 1)[0])
            good = have is not None
        else:
            req = Requirement(r)
            have = installed(req.name)
            good = have is not None and req.specifier.contains(have, prereleases=True)
        ok &= good
        print(f"  build requirement {r:22} have {have or 'nothing'}: {'ok' if good else 'NOT MET'}")
    print("build requirements met" if ok else "BUILD REQUIREMENTS NOT MET: carry wheels in .whl/")
    return ok


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "pyproject.toml"))
