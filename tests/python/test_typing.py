"""The type stubs: `stubtest` checks `_native.pyi` against the extension module as built, and
`mypy --strict` accepts typed use of the public API (skipped where mypy is not installed)."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("mypy")
HERE = os.path.dirname(os.path.abspath(__file__))


def run(*args):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=HERE)


def test_stubs_match_the_extension_module():
    r = run("mypy.stubtest", "layoutkit._native")
    assert r.returncode == 0, r.stdout + r.stderr


def test_typed_use_passes_mypy_strict():
    r = run("mypy", "--strict", "--no-incremental", "--cache-dir", os.devnull,
            os.path.join(HERE, "typing", "usage.py"))
    assert r.returncode == 0, r.stdout + r.stderr
