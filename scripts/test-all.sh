#!/usr/bin/env bash
# Runs every test of layoutkit on a fresh machine: installs what the tests need, then the Rust
# test suites (unit, property, CLI), the numpy cross-check of every format name and of the
# reference convolution, and the Python package's tests (its wheel built with maturin).
set -euo pipefail
cd "$(dirname "$0")/.."

need_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# System packages: PoCL (an OpenCL CPU device, with the ICD loader) for the OpenCL tests,
# python3 + pip for the numpy cross-check, and an aarch64 linker and qemu for the CPU engine's
# NEON kernels.
packages=()
[ -e /etc/OpenCL/vendors/pocl.icd ] || packages+=(pocl-opencl-icd ocl-icd-libopencl1)
python3 -m pip --version >/dev/null 2>&1 || packages+=(python3 python3-pip)
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || packages+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null 2>&1 || packages+=(qemu-user)
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

echo "== the CPU engine's property tests again on the AVX2 builds of its kernels"
# On a CPU with AVX-512VL the kernels above ran as compiled for it; the AVX2 builds are what
# other x86-64 CPUs run.
LAYOUTKIT_CPU_KERNELS=avx2 cargo test -p layoutkit-cpu --test planned_vs_reference \
  --test lane_blocks_vs_reference

echo "== the CPU engine's property tests with streaming stores on every destination"
# Destinations smaller than the L2 caches are written with plain stores, so the random (small)
# shapes above ran those; here the streaming kernels run on the same shapes.
LAYOUTKIT_CPU_STREAM=always cargo test -p layoutkit-cpu --test planned_vs_reference \
  --test few_channels_vs_reference --test lane_blocks_vs_reference --test chunked_vs_reference \
  --test half_tiles_vs_reference
# The streamed few-channel kernels' AVX2 builds (per-lane permutes) and the chunks of
# interleaved regions (chunked only where the destination streams) the same way.
LAYOUTKIT_CPU_KERNELS=avx2 LAYOUTKIT_CPU_STREAM=always cargo test -p layoutkit-cpu \
  --test few_channels_vs_reference --test chunked_vs_reference

echo "== the CPU engine on aarch64 (NEON kernels), under qemu"
if rustup target list --installed 2>/dev/null | grep -q aarch64-unknown-linux-gnu \
  || rustup target add aarch64-unknown-linux-gnu; then
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu" \
    cargo test --target aarch64-unknown-linux-gnu -p layoutkit-cpu
else
  echo "SKIPPED: rustup could not install the aarch64 standard library (no network?)"
fi

echo "== numpy cross-check of every format name"
cargo build --quiet -p layoutkit-cli
python3 tests/numpy_crosscheck.py target/debug/layoutkit

echo "== numpy cross-check of the reference convolution"
python3 tests/numpy_conv_crosscheck.py target/debug/layoutkit

echo "== a virtual environment for the Python stages (numpy, pytest, ml_dtypes, maturin, onnx, safetensors, mypy)"
# (GPU tests in tests/python/test_cuda.py report themselves skipped without torch and a GPU.)
venv="${LAYOUTKIT_TEST_VENV:-target/py-test-venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv" \
  || { need_root apt-get update && DEBIAN_FRONTEND=noninteractive need_root apt-get install -y --no-install-recommends python3-venv && python3 -m venv "$venv"; }
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet numpy pytest ml_dtypes maturin onnx safetensors mypy
# Ray runs examples/ray_pack.py's test (a local cluster); where no wheel exists for this Python
# or machine, that one test reports itself skipped.
"$venv/bin/python" -m pip install --quiet ray || echo "ray is not installable here: the Ray example's test is skipped"

# Model packing (layoutkit pack/unpack): ONNX models and safetensors checkpoints made with the `onnx`
# and `safetensors` packages; every packed tensor of every profile checked against numpy, round trips
# and bad inputs.
echo "== model packing cross-check (onnx + safetensors packages)"
"$venv/bin/python" tests/model_crosscheck.py target/debug/layoutkit

echo "== the Python package: build the wheel with maturin, install it, run pytest"
"$venv/bin/python" -m pip install --quiet .
set +e
LAYOUTKIT_BIN="$PWD/target/debug/layoutkit" "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/python
status=$?
set -e
# pytest's 5 means it collected no test: that is a failure of this command, not a pass.
if [ "$status" -ne 0 ]; then
  echo "pytest failed (exit $status)"
  exit "$status"
fi

echo "== all tests passed"
