#!/usr/bin/python3
"""Compares two `framemill export --format jsonl` files job by job: is a device run's
every result the CPU run's?

    compare_results.py CPU.jsonl DEVICE.jsonl [--rtol 1e-4] [--atol 1e-4]

Same jobs (item, stage) on both sides; the same structure (keys, list lengths, strings,
booleans); numbers within atol + rtol * max(|a|, |b|), or one unit of the last decimal they
were rounded to (a value the CPU and the device compute a float's width apart may round
either way: 202.1 against 202.0 px). The device names in strings ("cpu",
"sim:0", "cuda:0") and the artifact paths of the item's jobs (their `artifacts`: lease-token
names under each run's out dir) are not compared. Motion is compared by its cuts and camera label only: on a device its flow is
pyramidal Lucas-Kanade (gpu/flow.cc), on the CPU DIS, by design, so its magnitudes differ.
Prints one line per stage (jobs, worst absolute and relative difference) and every
mismatch; exits 1 on any mismatch.
"""
import argparse
import json
import re
import sys

DEVICE = re.compile(r"\b(cpu|sim:\d+|cuda:\d+)\b")


def last_digit(a, b):
    """One unit of the last decimal digit the results were rounded to (keypoints are written
    to 0.1 px, scores to 0.001): values a float's width apart may round either way."""
    decimals = 0
    for v in (a, b):
        text = repr(float(v))
        if "e" not in text and "." in text:
            decimals = max(decimals, len(text.split(".")[1].rstrip("0")))
    return 10.0 ** -decimals * 1.0001 if decimals < 7 else 0.0


def load(path):
    jobs = {}
    with open(path) as f:
        for line in f:
            j = json.loads(line)
            jobs[(j["item"], j["stage"])] = j
    return jobs


def artifacts_by_item(jobs):
    """Every artifact of each item's jobs: a result may name another stage's (inpaint names
    its segment mask)."""
    out = {}
    for (item, _), j in jobs.items():
        out.setdefault(item, set()).update(j.get("artifacts", []))
    return {k: frozenset(v) for k, v in out.items()}


class Compare:
    def __init__(self, rtol, atol):
        self.rtol, self.atol = rtol, atol
        self.worst = {}  # stage -> (abs, rel, where)
        self.mismatches = []

    def value(self, a, b, where, stage):
        if isinstance(a, dict):
            if not isinstance(b, dict) or set(a) != set(b):
                return self.mismatches.append(f"{stage} {where}: keys {sorted(a)} vs {sorted(b) if isinstance(b, dict) else b!r}")
            for k in a:
                self.value(a[k], b[k], f"{where}.{k}", stage)
        elif isinstance(a, list):
            if not isinstance(b, list) or len(a) != len(b):
                return self.mismatches.append(f"{stage} {where}: {len(a)} entries vs {len(b) if isinstance(b, list) else b!r}")
            for i, (x, y) in enumerate(zip(a, b)):
                self.value(x, y, f"{where}[{i}]", stage)
        elif isinstance(a, bool) or a is None:
            if a != b:
                self.mismatches.append(f"{stage} {where}: {a!r} vs {b!r}")
        elif isinstance(a, (int, float)):
            if not isinstance(b, (int, float)) or isinstance(b, bool):
                return self.mismatches.append(f"{stage} {where}: {a!r} vs {b!r}")
            d = abs(a - b)
            scale = max(abs(a), abs(b))
            if d > max(self.atol + self.rtol * scale, last_digit(a, b)):
                self.mismatches.append(f"{stage} {where}: {a!r} vs {b!r}")
            w = self.worst.get(stage, (0.0, 0.0, ""))
            if d > w[0]:
                self.worst[stage] = (d, d / scale if scale else 0.0, where)
        elif isinstance(a, str):
            if not isinstance(b, str):
                return self.mismatches.append(f"{stage} {where}: {a!r} vs {b!r}")
            if a in self.artifacts[0] and b in self.artifacts[1]:
                return  # the item's artifact: each run names its own
            if DEVICE.sub("<device>", a) != DEVICE.sub("<device>", b):
                self.mismatches.append(f"{stage} {where}: {a!r} vs {b!r}")

    def job(self, a, b, stage, artifacts=(frozenset(), frozenset())):
        self.artifacts = artifacts
        if stage == "motion":
            a = {"cuts": a.get("cuts"), "label": a.get("camera", {}).get("label")}
            b = {"cuts": b.get("cuts"), "label": b.get("camera", {}).get("label")}
        self.value(a, b, "", stage)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("cpu")
    p.add_argument("device")
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--atol", type=float, default=1e-4)
    args = p.parse_args()
    cpu, dev = load(args.cpu), load(args.device)
    c = Compare(args.rtol, args.atol)
    for key in sorted(set(cpu) ^ set(dev)):
        c.mismatches.append(f"job {key} is in only one of the files")
    cpu_art, dev_art = artifacts_by_item(cpu), artifacts_by_item(dev)
    per_stage = {}
    for key in sorted(set(cpu) & set(dev)):
        per_stage[key[1]] = per_stage.get(key[1], 0) + 1
        c.job(cpu[key]["result"], dev[key]["result"], key[1], (cpu_art[key[0]], dev_art[key[0]]))
    for stage in sorted(per_stage):
        d, r, where = c.worst.get(stage, (0.0, 0.0, ""))
        print(f"{stage:14s} {per_stage[stage]:4d} jobs  worst |diff| {d:.3g} (relative {r:.3g}) {where}")
    for m in c.mismatches:
        print("MISMATCH", m)
    print(f"{sum(per_stage.values())} jobs compared, {len(c.mismatches)} mismatch(es)")
    return 1 if c.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
