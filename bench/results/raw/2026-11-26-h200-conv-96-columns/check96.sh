#!/bin/bash
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH LAYOUTKIT_CACHE_DIR=/tmp/kc
python3 device-bin/check_96.py device-bin/layoutkit
for b in 8 32 64; do device-bin/layoutkit conv bench --device cuda --net mobilenetv2 --filter "32->192" --layouts NHWC --batch $b --repeats 10 2>/dev/null | grep "32->192"; done
