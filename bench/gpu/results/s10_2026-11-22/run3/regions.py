#!/usr/bin/env python3
"""Groups ncu's per-instruction PC samples (the CSV of `ncu -i REP --page source --print-source
sass --csv` of a SourceCounters report) by how often each instruction ran.

  regions.py SRC.csv[.gz] PER_TILE PER_BLOCK

PER_TILE: instructions run once per tile by each consumer warp run PER_TILE times (consumer warps
x tiles: 8448 at 4096x6336x1024, 22016 at 8192^3 for 128x192 c2); PER_BLOCK: the per-K-block
count (67584, 1409024). Prints the share of samples and the stall reasons per class, then the
contiguous runs of instructions of one class (per tile, per block) holding >= 0.2% of samples,
with their length, executions per consumer warp per tile and commonest opcodes (session 10 run 3,
bench/RESULTS.md)."""
import collections
import csv
import gzip
import sys

path, per_tile, per_block = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
text = (gzip.open(path, "rt") if path.endswith(".gz") else open(path)).read()
rows = list(csv.reader(text.splitlines()[1:]))  # line 0 names the kernel
h = {k: i for i, k in enumerate(rows[0])}
data = rows[1:]


def num(x):
    try:
        return float(x)
    except ValueError:
        return 0.0


S = h["Warp Stall Sampling (All Samples)"]
reasons = [k for k in h if k.startswith("stall_") and "Not Issued" not in k]
tot = sum(num(r[S]) for r in data) or 1.0


def opcode(r):
    w = r[h["Source"]].split()
    return (w[1] if w and w[0].startswith("@") and len(w) > 1 else (w[0] if w else "?"))


def cls(r):
    e = num(r[h["Instructions Executed"]])
    src = r[h["Source"]]
    if "UCGABAR_WAIT" in src or "ERRBAR" in src:
        return "end-of-kernel waits (idle warps)"
    if e == 0:
        return "never executed"
    if e >= per_block * 0.9:
        return "per K block"
    if per_tile * 0.2 <= e <= per_tile * 3.1:
        return "per tile"
    return "other (setup, producer, rare)"


groups = collections.defaultdict(lambda: [0.0, collections.Counter(), 0])
for r in data:
    g = groups[cls(r)]
    g[0] += num(r[S])
    g[2] += 1
    for k in reasons:
        g[1][k[6:]] += num(r[h[k]])
for name, (s, c, n) in sorted(groups.items(), key=lambda x: -x[1][0]):
    print(f"{name:34s} {s / tot * 100:5.1f}% of samples, {n:5d} instructions; " +
          ", ".join(f"{k} {v / s * 100:.0f}%" for k, v in c.most_common(5) if s))

print("\ncontiguous runs (>= 0.2% of samples):")
runs = []
for i, r in enumerate(data):
    c = cls(r)
    if runs and runs[-1][0] == c:
        runs[-1][2] = i
    else:
        runs.append([c, i, i])
for c, a, b in runs:
    if c in ("never executed",):
        continue
    s = sum(num(data[i][S]) for i in range(a, b + 1))
    if s / tot < 0.002:
        continue
    e = sum(num(data[i][h["Instructions Executed"]]) for i in range(a, b + 1)) / per_tile
    top = collections.Counter(opcode(data[i]) for i in range(a, b + 1)).most_common(4)
    print(f"{c[:12]:12s} {a:5d}-{b:5d} ({b - a + 1:4d} instructions) {s / tot * 100:5.2f}% "
          f"executions per consumer warp per tile {e:7.1f} {top}")
