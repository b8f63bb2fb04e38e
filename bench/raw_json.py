"""Reads a raw result file of bench/results/raw/: JSON, or gzipped JSON (`.json.gz`: the files
over 300 KB are stored so, see bench/results/raw/README.md). A path whose file is absent is
read from `PATH.gz`, so the names the result documents give (without `.gz`) work as they are."""
import gzip
import json
import os


def load(path):
    """The JSON document at `path` (or at `path + ".gz"` where `path` does not exist)."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)
