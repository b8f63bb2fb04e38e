#!/usr/bin/env python3
"""Compares the generated kernels of every sweep row between two builds of the print_kernels
example: prints the rows whose kernels differ (FROM->TO TYPE DIMS).

Usage: changed_rows.py OLD_PRINT_KERNELS NEW_PRINT_KERNELS LIST
LIST: `layoutkit bench --sweep --list` (one row a line)."""
import subprocess, sys
old, new, lst = sys.argv[1:4]
for line in open(lst):
    conv, ty, dims = line.split()
    f, t = conv.split('->')
    st, dt = (ty.split('>') + [ty])[:2] if '>' in ty else (ty, ty)
    outs = [subprocess.run([b, f, t, dims, st, dt], capture_output=True, text=True).stdout for b in (old, new)]
    if outs[0] != outs[1]:
        print(line.strip())
