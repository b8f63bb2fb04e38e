#!/bin/bash
# Warp stall reasons of layoutkit's CUDA convolution kernel on three ResNet-50 3x3 layers (batch 64,
# NHWC f16), one launch each under Nsight Compute. Usage (on a GPU machine, from the repository
# root): LAYOUTKIT=path/to/layoutkit bench/conv_stalls.sh (default device-bin/layoutkit)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64
S=smsp__average_warps_issue_stalled
M="gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum"
for r in long_scoreboard barrier short_scoreboard mio_throttle math_pipe_throttle wait not_selected selected lg_throttle dispatch_stall no_instruction branch_resolving imc_miss membar drain sleeping tex_throttle; do M="$M,${S}_${r}_per_issue_active.ratio"; done
for f in "l1 3x3 64->64 @56" "l2 3x3 128->128 @28" "l4 3x3 512->512 @7"; do
  echo "== $f"
  ncu --clock-control none --csv --print-units base -k regex:^conv -s 1 -c 1 --metrics $M ${LAYOUTKIT:-./device-bin/layoutkit} conv bench --device cuda --filter "$f" --layouts NHWC --types f16 --repeats 1 2>/dev/null | python3 -c "
import csv,sys
rows=[r for r in csv.reader(sys.stdin) if len(r)>10]
h=rows[0]; ni=h.index('Metric Name'); vi=h.index('Metric Value')
for r in rows[1:]:
    n=r[ni].replace('smsp__average_warps_issue_stalled_','stall ').replace('_per_issue_active.ratio','')
    print(f'{n:70s} {r[vi]}')
"
done
