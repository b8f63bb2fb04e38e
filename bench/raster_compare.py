#!/usr/bin/env python3
"""Compare two tile orders of the CUDA convolution from `layoutkit conv bench --json` files.

Usage: python3 bench/raster_compare.py DIR BATCH

Reads DIR/b{BATCH}-pixels-{1,2}.json (LAYOUTKIT_CONV_RASTER=pixels) and
DIR/b{BATCH}-channels-{1,2}.json (the default order), alternated in one run; takes each
layer's faster of the two passes per order, prints the layers that moved by more than 3%
and the geometric mean of channels / pixels per activation layout.
"""
import json
import math
import sys
import raw_json


def load(path):
    return {(r["layer"], r["layout"]): r for r in raw_json.load(path)["results"]}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    folder, batch = sys.argv[1], sys.argv[2]
    pixels = [load(f"{folder}/b{batch}-pixels-{i}.json") for i in (1, 2)]
    channels = [load(f"{folder}/b{batch}-channels-{i}.json") for i in (1, 2)]
    ratios = {}
    for key in pixels[0]:
        tp = max(p[key]["tflops"] for p in pixels)
        tc = max(c[key]["tflops"] for c in channels)
        ratios[key] = tc / tp
        if abs(tc / tp - 1) > 0.03:
            print(f"{key[0]:34s} {key[1]:13s} pixels {tp:6.1f} channels {tc:6.1f} TFLOP/s"
                  f" x{tc / tp:.3f} {channels[0][key]['kernel']}")
    for layout in sorted({k[1] for k in ratios}):
        v = [r for k, r in ratios.items() if k[1] == layout]
        print(f"{layout} geometric mean channels / pixels {math.exp(sum(map(math.log, v)) / len(v)):.3f}"
              f" over {len(v)} layers")


if __name__ == "__main__":
    main()
