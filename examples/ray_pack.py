#!/usr/bin/env python3
"""Packs a sharded safetensors checkpoint with Ray: one task per shard, then one index.

    python examples/ray_pack.py CHECKPOINT.safetensors.index.json OUT_DIR --target PROFILE \
        [--dtype f16] [--rule 'NAME_GLOB=LAYOUT']... [--address auto] [--num-cpus N]

Each task calls ``layoutkit.pack_shard`` on one shard (the files must be visible to every
worker: a shared file system, or one machine); the driver then calls
``layoutkit.write_packed_index``, which checks that every shard was packed for the same profile
and holds the tensors the source index puts in it. Without ``--address`` a local Ray cluster is
started on this machine (``ray.init()``). The result is byte for byte what
``layoutkit pack CHECKPOINT -o OUT_DIR --target PROFILE`` writes.
"""

import argparse
import os
import sys
import time

import ray

import layoutkit


@ray.remote
def pack_one(shard, output, target, dtype, rules, threads):
    """One Ray task: one shard packed into `output` (written atomically). Returns its report."""
    report = layoutkit.pack_shard(shard, output, target, dtype=dtype, rules=rules,
                                  threads=threads)
    return {"shard": os.path.basename(shard), "tensors": len(report["tensors"]),
            "bytes_read": report["bytes_read"], "bytes_written": report["bytes_written"]}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("index", help="the checkpoint's *.safetensors.index.json")
    p.add_argument("out_dir", help="folder for the packed shards and their index")
    p.add_argument("--target", required=True, choices=layoutkit._pack.PROFILES)
    p.add_argument("--dtype", default=None, help="f32, f16, bf16 or i8 (default: the profile's)")
    p.add_argument("--rule", action="append", default=[], metavar="NAME_GLOB=LAYOUT")
    p.add_argument("--address", default=None, help="a Ray cluster's address (default: a local one)")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local cluster")
    p.add_argument("--threads-per-task", type=int, default=1,
                   help="threads each task packs its shard with (default 1)")
    a = p.parse_args(argv)

    shards = layoutkit.checkpoint_shards(a.index)
    os.makedirs(a.out_dir, exist_ok=True)
    if a.address:
        ray.init(address=a.address)
    else:
        ray.init(num_cpus=a.num_cpus, include_dashboard=False)
    start = time.perf_counter()
    tasks = [
        pack_one.options(num_cpus=a.threads_per_task).remote(
            os.path.abspath(s), os.path.abspath(os.path.join(a.out_dir, os.path.basename(s))),
            a.target, a.dtype, a.rule, a.threads_per_task)
        for s in shards
    ]
    pending = list(tasks)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        r = ray.get(done[0])
        print(f"{r['shard']}: {r['tensors']} tensors, {r['bytes_read']} -> "
              f"{r['bytes_written']} bytes ({len(shards) - len(pending)}/{len(shards)})",
              file=sys.stderr)
    index = layoutkit.write_packed_index(a.index, a.out_dir)
    print(f"packed {len(shards)} shards for {a.target} in {time.perf_counter() - start:.2f} s; "
          f"index {index}")
    ray.shutdown()


if __name__ == "__main__":
    main()
