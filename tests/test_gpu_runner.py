"""tests/gpu/run_on_gpu.sh runs every gpu-marked test: the files tests/gpu/gpu_test_files.sh
lists hold all the tests `pytest -m gpu` selects (the NCCL test runs in a step of its
own), and none of them imports Hypothesis, which the GPU machine lacks."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_gpu_runner_lists_every_gpu_marked_test():
    listed = subprocess.run(["bash", str(ROOT / "tests/gpu/gpu_test_files.sh")], capture_output=True,
                            text=True, check=True).stdout.split()
    assert "tests/gpu/test_gpu_backend.py" in listed and "tests/gpu/test_gpu_nccl.py" not in listed
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "gpu",
                          "-p", "no:cacheprovider", "tests"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    marked = {line.split("::")[0] for line in out.stdout.splitlines() if "::" in line}
    assert marked >= {"tests/gpu/test_gpu_nccl.py", "tests/finished/test_finished_on_every_backend.py"}, marked
    assert marked - {"tests/gpu/test_gpu_nccl.py"} <= set(listed), marked - set(listed)
    for path in listed:
        text = (ROOT / path).read_text()
        assert "import hypothesis" not in text and "from hypothesis" not in text, path


def test_the_preflight_reads_the_build_requirements(monkeypatch):
    # run_on_gpu.sh's preflight: pyproject.toml's [build-system] requires (comment lines
    # before the list once broke its pattern), each checked against what is installed
    sys.path.insert(0, str(ROOT / "tests" / "gpu"))
    try:
        import build_requirements
    finally:
        sys.path.remove(str(ROOT / "tests" / "gpu"))
    import pytest

    tomllib = pytest.importorskip("tomllib")
    want = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    assert build_requirements.requirements(ROOT / "pyproject.toml") == want
    monkeypatch.setitem(sys.modules, "tomllib", None)   # Python 3.10: the pattern
    assert build_requirements.requirements(ROOT / "pyproject.toml") == want
    out = subprocess.run([sys.executable, str(ROOT / "tests/gpu/build_requirements.py"), "pyproject.toml"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("build requirement ") == len(want)
    assert "build requirements met" in out.stdout, out.stdout   # the suite's Python builds eagle
