#!/usr/bin/env bash
# Runs each fuzz target for SECONDS_EACH seconds (default 600), one after the other.
# Needs cargo-fuzz (`cargo install cargo-fuzz`); RUSTC_BOOTSTRAP lets the stable toolchain
# build with the sanitizer flags cargo fuzz passes.
set -euo pipefail
cd "$(dirname "$0")"
SECONDS_EACH="${SECONDS_EACH:-600}"
for target in "${@:-parse_format read_npy parse_ir}"; do
  for t in $target; do
    mkdir -p "corpus/$t"
    echo "== fuzzing $t for ${SECONDS_EACH}s"
    RUSTC_BOOTSTRAP=1 cargo fuzz run -O "$t" "corpus/$t" "seeds/$t" -- \
      -max_total_time="$SECONDS_EACH" -max_len=4096
  done
done
