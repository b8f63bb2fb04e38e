#!/bin/bash
cd /tmp/sw
taskset -c 0 ./lk-final bench --sweep --threads 1 --repeats 5 --json > final-t1.json 2> final-t1.err
echo "t1 $(date)" >> final.progress
cd /work/main/bench
taskset -c 0 /work/venv-torch/bin/python torch_sweep.py /tmp/sw/final-t1.json --min-mib 8 --out /tmp/sw/final-torch-t1.json > /tmp/sw/final-torch-t1.txt 2>&1
echo "torch $(date)" >> /tmp/sw/final.progress
cd /tmp/sw
LAYOUTKIT_CPU_KERNELS=avx2 taskset -c 0 ./lk-final bench --sweep --threads 1 --repeats 5 --json > final-avx2-t1.json 2>> final-t1.err
echo "avx2 $(date)" >> final.progress
./lk-final bench --sweep --threads 2 --repeats 5 --json > final-t2.json 2>> final-t1.err
echo "done $(date)" >> final.progress
