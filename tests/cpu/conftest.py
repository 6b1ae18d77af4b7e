"""Fixtures of the cpu tests.

``own_cache``: generated loops (eagle.cpu.codegen) compiled into the test's own cache
folder (EAGLE_CACHE_DIR under tmp_path), with no EAGLE_CODEGEN or EAGLE_CC from the
caller (but tests/sanitize.sh's EAGLE_CC, which compiles them sanitized: EAGLE_SANITIZE
set) and codegen's once-a-process state (the loaded libraries, the warning) fresh.
A test module asks for it with ``pytestmark = pytest.mark.usefixtures("own_cache")``.
"""
import os

import pytest

from eagle.cpu import c_compiler, codegen


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EAGLE_CODEGEN", raising=False)
    if not os.environ.get("EAGLE_SANITIZE"):
        monkeypatch.delenv("EAGLE_CC", raising=False)
    monkeypatch.setattr(c_compiler, "_loaded", {})
    monkeypatch.setattr(codegen, "_warned", False)
