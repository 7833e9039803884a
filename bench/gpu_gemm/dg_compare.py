#!/usr/bin/env python3
"""Ours, cuBLASLt and DeepGEMM at the nine dense NT shapes, from one device run's files.

Usage: dg_compare.py DG.jsonl OURS.json [OURS.json...]

DG.jsonl: one line per DeepGEMM process of the session 14 harness (`dg_bench`, kept outside the
repository; bench/gpu/results/s14_2026-11-23/README.md), tagged SHAPE_{h,a,b}_TILE (h: DeepGEMM's
own heuristic's config). OURS.json: gpu_gemm_bench outputs of the same run; ours and cuBLASLt
are the means over them. Prints the table and the geometric means of bench/RESULTS.md's
"Session 15: DeepGEMM at the nine dense shapes on the same bytes".
"""
import json
import math
import sys

SHAPES = ["4096x4096x4096", "8192x8192x8192", "16384x8192x5120", "8192x7168x2048",
          "4096x2112x7168", "4096x24576x1536", "4096x7168x16384", "128x7168x2048",
          "64x4096x7168"]


def case_name(shape):
    return {"4096x4096x4096": "nt_4096^3", "8192x8192x8192": "nt_8192^3"}.get(shape, "nt_" + shape)


def gmean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


def main():
    dg = {}
    for line in open(sys.argv[1]):
        r = json.loads(line)
        if not r.get("pass"):
            print(f"DeepGEMM {r.get('tag')}: did not pass ({r.get('error', 'check failed')})")
            return 1
        dg[r["tag"]] = r["tflops_median"]
    ours = [json.load(open(p))["results"] for p in sys.argv[2:]]
    cols = {"ours": [], "DeepGEMM heuristic": [], "DeepGEMM best": [], "best of both": []}
    print(f"{'shape':17} {'ours':>6} {'cuBLt':>6} {'ratio':>6} | {'dg_h':>6} {'dg_best':>7} "
          f"{'h/cuB':>6} {'b/cuB':>6} | DeepGEMM configs")
    for s in SHAPES:
        rows = [[r for r in o if r["name"] == case_name(s)][0] for o in ours]
        om = sum(r["ours_tflops"] for r in rows) / len(rows)
        cm = sum(r["cublaslt_tflops"] for r in rows) / len(rows)
        mine = {t[len(s) + 1:]: v for t, v in dg.items() if t.startswith(s + "_")}
        h = [v for t, v in mine.items() if t.startswith("h_")][0]
        best = max(mine.values())
        for k, x in zip(cols, (om / cm, h / cm, best / cm, max(om, best) / cm)):
            cols[k].append(x)
        print(f"{s:17} {om:6.0f} {cm:6.0f} {om / cm:6.3f} | {h:6.0f} {best:7.0f} {h / cm:6.3f} "
              f"{best / cm:6.3f} | " + " ".join(f"{t}={v:.0f}" for t, v in mine.items()))
    for k, v in cols.items():
        print(f"{k + ' / cuBLASLt':28} geomean {gmean(v):.3f}  lowest {min(v):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
