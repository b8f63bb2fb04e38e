#!/usr/bin/env bash
# Runs every test of layoutkit on a fresh machine: installs what the tests need, then the Rust
# test suites (unit, property, CLI), the numpy cross-check of every format name and of the
# reference convolution.
set -euo pipefail
cd "$(dirname "$0")/.."

need_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# System packages: PoCL (an OpenCL CPU device, with the ICD loader) for the OpenCL tests, and
# python3 + pip for the numpy cross-check.
packages=()
[ -e /etc/OpenCL/vendors/pocl.icd ] || packages+=(pocl-opencl-icd ocl-icd-libopencl1)
python3 -m pip --version >/dev/null 2>&1 || packages+=(python3 python3-pip)
if [ ${#packages[@]} -gt 0 ]; then
  need_root apt-get update
  DEBIAN_FRONTEND=noninteractive need_root apt-get install -y --no-install-recommends "${packages[@]}"
fi
# With PoCL installed, the OpenCL tests must run rather than report themselves skipped.
export LAYOUTKIT_REQUIRE_OPENCL=1
if ! python3 -c "import numpy" >/dev/null 2>&1; then
  python3 -m pip install --quiet numpy || python3 -m pip install --quiet --break-system-packages numpy
fi

echo "== cargo test (workspace: unit, property and CLI tests)"
cargo test --workspace --all-targets
cargo test --workspace --doc

echo "== numpy cross-check of every format name"
cargo build --quiet -p layoutkit-cli
python3 tests/numpy_crosscheck.py target/debug/layoutkit

echo "== numpy cross-check of the reference convolution"
python3 tests/numpy_conv_crosscheck.py target/debug/layoutkit

echo "== all tests passed"
