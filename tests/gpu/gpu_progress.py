"""pytest plugin of tests/gpu/run_on_gpu.sh (``-p gpu_progress``): one line per test
phase outcome appended to the file named by EAGLE_GPU_PROGRESS as soon as it is known,
flushed and fsynced, so a pytest killed at its budget (a hang, the machine's lease
ending) leaves the results of every test that ran. No effect without the variable.

With EAGLE_GPU_SKIP_STARTED set too (run_on_gpu.sh's second pytest after one that died),
the tests that have a START line in that file already are deselected, by exact node id."""
import os
import time

_PATH = os.environ.get("EAGLE_GPU_PROGRESS")


def _write(line):
    if not _PATH:
        return
    with open(_PATH, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def pytest_collection_modifyitems(session, config, items):
    if not (_PATH and os.environ.get("EAGLE_GPU_SKIP_STARTED") and os.path.exists(_PATH)):
        return
    with open(_PATH, encoding="utf-8") as f:
        started = {line.split(" ", 1)[1].strip() for line in f if line.startswith("START ")}
    keep = [item for item in items if item.nodeid not in started]
    gone = [item for item in items if item.nodeid in started]
    if gone:
        config.hook.pytest_deselected(items=gone)
        items[:] = keep


def pytest_sessionstart(session):
    _write(f"# pytest session {time.strftime('%H:%M:%S')} pid {os.getpid()}")


def pytest_runtest_logstart(nodeid, location):
    _write(f"START {nodeid}")


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        why = ""
        if report.skipped and isinstance(report.longrepr, tuple):
            why = f"  ({report.longrepr[2]})"
        elif report.failed:
            why = "  (" + str(report.longrepr).strip().splitlines()[-1][:300] + ")"
        _write(f"{report.outcome.upper():7} {report.when:8} {report.duration:7.2f}s {report.nodeid}{why}")


def pytest_sessionfinish(session, exitstatus):
    _write(f"# pytest finished, status {int(exitstatus)}")
