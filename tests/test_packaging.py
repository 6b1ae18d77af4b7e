"""The source distribution holds everything the build needs, wheels hold no generated C,
and the license travels with both; all checked without the network (no isolated build,
no install): setuptools runs ``setup.py`` directly on a copy of the checkout.

What the tests do, in a temporary directory:

1. copy the checkout (without build products) and run ``setup.py sdist`` there;
2. compare the archive with the sources on disk: every ``.pyx``/``.pxd`` under
   ``eagle/``, every ``.c``/``.h``/``.hpp`` under ``csrc/``, LICENSE, the build files;
   none of Cython's generated ``.c`` files;
3. unpack it and check that every extension's sources and every header its sources
   include are inside it (this is how ``pip install <sdist>`` failed before: "'eagle/cpu/_executor.pyx'
   doesn't match any files");
4. run ``build_py`` (what a wheel's pure part is made of) and ``dist_info`` from the
   unpacked archive: no ``.c`` among the package files, LICENSE in the dist-info.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

_SKIP_DIRS = {".git", "build", "dist", "__pycache__", ".pytest_cache", ".hypothesis", "_build",
              "jupyter_execute", "env", "results", "html", "gpu_results"}


def _generated_c(path: Path) -> bool:
    """A C file Cython writes from the .pyx beside it."""
    return path.suffix in (".c", ".cpp") and path.with_suffix(".pyx").exists()


def _ignore(directory, names):
    d = Path(directory)
    return [n for n in names
            if n in _SKIP_DIRS or n.endswith((".so", ".pyd", ".o", ".egg-info"))
            or _generated_c(d / n)]


def _setup(cwd: Path, *args) -> None:
    proc = subprocess.run([sys.executable, "setup.py", "-q", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"setup.py {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout + proc.stderr


def _sources_on_disk():
    """Paths (relative to the checkout) the build reads, found by walking the tree, so
    new subpackages and modules are covered without editing this test."""
    found = set()
    # .py and .cu: modules and the CUDA C sources eagle compiles at run time (eagle/cuda/kernels)
    for top, exts in (("eagle", (".py", ".pyx", ".pxd", ".cu")), ("csrc", (".c", ".h", ".hpp", ".cu"))):
        for dirpath, dirnames, filenames in os.walk(ROOT / top):
            dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
            for f in filenames:
                p = Path(dirpath) / f
                if p.suffix in exts and not _generated_c(p):
                    found.add(p.relative_to(ROOT).as_posix())
    return found


_SDIST_LOG = []   # what `setup.py sdist` printed, for the warning test


@pytest.fixture(scope="module")
def sdist(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sdist")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=_ignore)
    _SDIST_LOG[:] = [_setup(src, "sdist", "--dist-dir", str(tmp / "dist"))]
    (archive,) = (tmp / "dist").glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        top = names[0].split("/")[0]
        tar.extractall(tmp / "unpacked", filter="data") if sys.version_info >= (3, 12) \
            else tar.extractall(tmp / "unpacked")
    files = {n.split("/", 1)[1] for n in names if "/" in n}
    return archive, files, tmp / "unpacked" / top


def test_the_sdist_holds_every_source_the_build_reads(sdist):
    _, files, _ = sdist
    needed = _sources_on_disk() | {"LICENSE", "README.md", "pyproject.toml", "setup.py", "MANIFEST.in"}
    assert {"eagle/_core.pyx", "eagle/cpu/_executor.pyx", "eagle/native.pxd", "csrc/cpu/executor.c"} <= needed
    missing = sorted(needed - files)
    assert not missing, f"the sdist leaves out {missing}: add them to MANIFEST.in"


def test_the_sdist_holds_the_tests_and_the_docs_sources(sdist):
    _, files, _ = sdist
    try:  # what the repository tracks there; without git, what is on disk
        proc = subprocess.run(["git", "ls-files", "tests", "docs"], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)
        tracked = proc.stdout.split() if proc.returncode == 0 else None
    except OSError:
        tracked = None
    if not tracked:
        tracked = []
        for top in ("tests", "docs"):
            for dirpath, dirnames, filenames in os.walk(ROOT / top):
                dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(".")]
                tracked += [(Path(dirpath) / f).relative_to(ROOT).as_posix() for f in filenames
                            if not f.endswith((".pyc", ".so", ".o"))]
    missing = [rel for rel in tracked if rel not in files]
    assert not missing, f"the sdist leaves out {sorted(missing)}: add them to MANIFEST.in"


def test_the_manifest_template_warns_of_nothing(sdist):
    # every MANIFEST.in pattern matches a file: the build printed "no files found matching
    # '*.h' under directory 'eagle'" (and five more) on every sdist
    (log,) = _SDIST_LOG
    warnings = [line for line in log.splitlines() if "no files found matching" in line
                or ("warning: no previously-included files" in line)]
    assert not warnings, warnings


def test_the_sdist_holds_no_generated_c_and_no_binaries(sdist):
    _, files, unpacked = sdist
    generated = [f for f in files if f.endswith((".c", ".cpp")) and f.startswith("eagle/")]
    assert not generated, f"Cython's output is in the sdist: {generated}"
    assert not [f for f in files if f.endswith((".so", ".pyd", ".o"))]


def _captured_extensions(unpacked: Path):
    """Run setup.py's module body with setup() replaced, and return the extensions it
    would build (after cythonize: the generated .c plus the csrc sources)."""
    script = (
        "import json, setuptools, sys\n"
        "got = {}\n"
        "setuptools.setup = lambda **kw: got.update(kw)\n"
        "sys.argv = ['setup.py', 'build_ext']\n"
        "exec(compile(open('setup.py').read(), 'setup.py', 'exec'), {'__name__': '__main__', '__file__': 'setup.py'})\n"
        "print(json.dumps([dict(name=e.name, sources=e.sources, include_dirs=e.include_dirs)"
        " for e in got['ext_modules']]))\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=unpacked, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_extension_builds_from_what_the_sdist_holds(sdist):
    _, files, unpacked = sdist
    exts = _captured_extensions(unpacked)
    assert {"eagle._core", "eagle.cpu._executor", "eagle.native", "eagle.kernels"} <= {e["name"] for e in exts}
    include = re.compile(r'^\s*#\s*include\s+"([^"]+)"|^\s*cdef\s+extern\s+from\s+"([^"]+)"', re.M)
    for e in exts:
        dirs = [unpacked / d for d in e["include_dirs"] if not os.path.isabs(d)]
        for s in e["sources"]:
            path = unpacked / s
            assert path.is_file(), f"{e['name']}: source {s} is not in the sdist"
            if path.with_suffix(".pyx").exists():  # generated: check the .pyx and its .pxd files
                texts = [p.read_text() for p in path.parent.glob("*.px[di]")]
            else:
                texts = [path.read_text()]
            for text in texts:
                for m in include.finditer(text):
                    header = m.group(1) or m.group(2)
                    if header.startswith("<") or "." not in header:
                        continue
                    where = [path.parent] + dirs
                    if not any((d / header).is_file() for d in where) and _is_project_header(header):
                        pytest.fail(f"{e['name']}: {s} includes {header!r}, which is not in the sdist")


def _is_project_header(header):
    # system and NumPy/Python headers come from the build machine
    return any((ROOT / "csrc" / d / header).is_file() for d in (".", "cpu", "include")) \
        or (ROOT / "eagle" / header).is_file()


def test_wheel_contents_leave_out_generated_c_and_carry_the_license(sdist, tmp_path):
    _, _, unpacked = sdist
    _setup(unpacked, "build_py", "--build-lib", str(tmp_path / "lib"))
    package_files = [p.relative_to(tmp_path / "lib").as_posix() for p in (tmp_path / "lib").rglob("*")
                     if p.is_file()]
    assert (unpacked / "eagle" / "native.c").is_file()  # cythonize did write it...
    assert not [f for f in package_files if f.endswith((".c", ".cpp"))]  # ...and it stays out
    assert "eagle/native.pxd" in package_files and "eagle/include/eagle/kernel.h" in package_files
    (tmp_path / "meta").mkdir()
    _setup(unpacked, "dist_info", "--output-dir", str(tmp_path / "meta"))
    (info,) = (tmp_path / "meta").glob("*.dist-info")
    assert (info / "licenses" / "LICENSE").read_text() == (ROOT / "LICENSE").read_text()
    metadata = (info / "METADATA").read_text()
    assert "License-Expression: BSD-3-Clause" in metadata


def _bundled_old_setuptools():
    """The setuptools wheel Python's ensurepip carries (65.5 with Python 3.11), if older than 77."""
    import ensurepip

    for whl in sorted((Path(ensurepip.__file__).parent / "_bundled").glob("setuptools-*.whl")):
        major = int(whl.name.split("-")[1].split(".")[0])
        if major < 77:
            return whl
    return None


def test_the_metadata_reads_with_a_setuptools_older_than_77(tmp_path):
    """pyproject.toml and setup.py's license metadata under setuptools 61-76 (they refused the
    SPDX string `license = "BSD-3-Clause"`, and the offline GPU machine's may be one): the
    project's metadata files with setup.py's license_metadata(), egg_info, the License field."""
    import ast
    import zipfile

    whl = _bundled_old_setuptools()
    if whl is None:
        pytest.skip("this Python bundles no setuptools older than 77 (ensurepip) to build with offline")
    site = tmp_path / "site"
    zipfile.ZipFile(whl).extractall(site)
    proj = tmp_path / "proj"
    proj.mkdir()
    for f in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / f, proj / f)
    tree = ast.parse((ROOT / "setup.py").read_text())
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "license_metadata"]
    (proj / "setup.py").write_text("from setuptools import setup\n\n" + ast.unparse(fn)
                                   + "\n\nsetup(packages=[], **license_metadata())\n")
    env = dict(os.environ, PYTHONPATH=str(site), SETUPTOOLS_USE_DISTUTILS="local")
    proc = subprocess.run([sys.executable, "-c", "import setuptools, sys; print('setuptools', setuptools.__version__);"
                           "sys.argv = ['setup.py', '-q', 'egg_info']; exec(open('setup.py').read())"],
                          cwd=proj, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert f"setuptools {whl.name.split('-')[1]}" in proc.stdout
    (info,) = proj.glob("*.egg-info")
    pkg_info = (info / "PKG-INFO").read_text()
    assert "License: BSD-3-Clause" in pkg_info and "License-File: LICENSE" in pkg_info


def test_the_license_is_the_bsd_3_clause_text():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License")
    assert "the eagle developers" in text
    assert "Neither the name of the copyright holder nor the names of its" in text


def test_the_distribution_name_is_ours_and_used_where_people_install_from():
    pyproject = (ROOT / "pyproject.toml").read_text()
    name = re.search(r'^name = "([^"]+)"', pyproject, re.M).group(1)
    assert name != "eagle"  # an unrelated project's name on the package index
    archive = name.replace("-", "_") + "-"   # how setuptools names the source archive
    first_cell = (ROOT / "docs" / "_static" / "first_cell.py").read_text()
    # not on the index yet: the Colab/Kaggle cell installs an archive or clone it is given
    assert 'EAGLE_PIP_SOURCE = ""' in first_cell and f"{archive}*.tar.gz" in first_cell
    assert name in (ROOT / "README.md").read_text()
    assert "[tool.cibuildwheel]" in pyproject and "test-command" in pyproject


_PIP_INSTALL = re.compile(r"pip install ([^`&;#)\n]*)")


def _index_names(command):
    """The requirements of a ``pip install`` command line that name eagle on the index."""
    names = []
    for word in command.replace('"', " ").replace("'", " ").split():
        if word.startswith("-"):
            continue
        if re.fullmatch(r"eagle(-replay|_replay)?(\[[\w,-]+\])?([<>=~!].*)?", word):
            names.append(word)
    return names


def test_no_instruction_installs_eagle_from_the_package_index():
    # `pip install eagle-replay` fails (not published yet) and `pip install "eagle[mpi]"`
    # installs an unrelated project: every instruction must install from a clone or archive,
    # except where the text says what will apply once eagle is published
    assert _index_names('pip install "eagle[mpi]"') == ["eagle[mpi]"]
    assert _index_names("pip install eagle-replay jupyterlab") == ["eagle-replay"]
    assert not _index_names('pip install ".[mpi]"') and not _index_names("pip install eagle_replay-0.1.0.tar.gz")
    offenders = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")),
                 *sorted((ROOT / "docs" / "_static").glob("*.py"))]:
        lines = path.read_text().splitlines()
        for no, line in enumerate(lines, 1):
            if "published" in line or (no > 1 and "published" in lines[no - 2]):
                continue
            for command in _PIP_INSTALL.findall(line):
                if _index_names(command):
                    offenders.append(f"{path.relative_to(ROOT)}:{no}: {line.strip()}")
    assert not offenders, "install from the index, which has no eagle:\n" + "\n".join(offenders)


def test_the_extras_name_packages_that_exist_for_each_cuda_major():
    import tomllib
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "nvidia-nccl-cu13" in extras["nccl"] and "nvidia-nccl-cu13" in extras["nccl-cu13"]
    assert "nvidia-nccl-cu12" in extras["nccl-cu12"]
    # each NCCL extra goes with the CuPy of its CUDA major version
    assert any("cupy-cuda13x" in r for r in extras["cuda"]) and any("cupy-cuda12x" in r for r in extras["cuda12"])
    assert not any("cu12" in r for r in extras["nccl"] + extras["cuda"] + extras["cuda13"])


def test_the_metadata_names_the_authors_classifiers_and_no_made_up_url():
    import tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["authors"] == [{"name": "the eagle developers"}] == project["maintainers"]
    assert "Programming Language :: Python :: 3" in project["classifiers"]
    # core metadata 2.4: no "License ::" classifier beside an SPDX expression (setuptools refuses it)
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]
    assert "urls" not in project   # eagle has no public URL yet: none rather than a fake one
