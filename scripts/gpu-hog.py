#!/usr/bin/env python3
"""Holds a GPU's memory from another process, so that framemill's OOM ladder meets real
allocation failures (gpu_bench --benchmarks=ladder_real_oom; scripts/gpu-device-run.sh).

  gpu-hog.py LEAVE_MIB READY_FILE     # allocates until LEAVE_MIB are free, writes
                                      # READY_FILE, then holds the memory until killed
Needs PyTorch with CUDA (the lent GPU machines have it).
"""
import sys
import time

import torch

leave = int(sys.argv[1]) << 20
blocks = []
while True:
    free, total = torch.cuda.mem_get_info()
    want = free - leave
    if want < (64 << 20):
        break
    blocks.append(torch.empty(min(want, 8 << 30), dtype=torch.uint8, device="cuda"))
held = sum(b.numel() for b in blocks)
print(f"gpu-hog: holding {held >> 20} MiB; {free >> 20} MiB free of {total >> 20} MiB", flush=True)
with open(sys.argv[2], "w") as f:
    f.write("ready\n")
while True:
    time.sleep(1)
