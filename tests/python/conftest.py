import os
import subprocess

import pytest


def layoutkit_binary():
    """The `layoutkit` command the Python results are compared with (built by the test command)."""
    path = os.environ.get("LAYOUTKIT_BIN")
    if not path or not os.path.exists(path):
        pytest.skip("LAYOUTKIT_BIN is not set to a built layoutkit binary")
    return path


def run_cli(*args):
    return subprocess.run([layoutkit_binary(), *args], check=True, capture_output=True, text=True).stdout
