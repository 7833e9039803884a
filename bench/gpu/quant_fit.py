#!/usr/bin/env python3
"""Fits each op of a quant_pad_bench JSON as t = t0 + bytes / R over its shapes.

Usage: quant_fit.py QUANT_PAD.json

Bytes are the bench's count (input read once plus every output written). The copy's line comes
from the bench's cudaMemcpy copies: the copy of each shape's input (copy_same_size_gbps, which
moves 2x the input's bytes) and the 1 GiB copy. For each op it prints t0, R, the measured ratio
to the 1 GiB copy at the smallest and largest shape, and what a copy of exactly the op's bytes
at the smallest shape would measure on the copy's own line (bench/README.md, "Quantize and pad").
"""
import json
import sys


def fit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def main():
    d = json.load(open(sys.argv[1]))
    big = d["copy_1gib_gbps"]
    rs = d["results"]
    # One copy point per input shape (every op of a shape saw the same copy figure).
    pts = {}
    for r in rs:
        b = r["m"] * r["k"] * 2 * 2
        pts[(r["m"], r["k"])] = (b, b / (r["copy_same_size_gbps"] * 1e9) * 1e6)
    pts["1 GiB"] = (2 * 2**30, 2 * 2**30 / (big * 1e9) * 1e6)
    xs = [p[0] for p in pts.values()]
    ys = [p[1] for p in pts.values()]
    a, b = fit(xs, ys)
    resid = max(abs(y - (a + b * x)) for x, y in zip(xs, ys))
    print(f"copy: t0 {a:.2f} us, R {1 / b / 1e3:.0f} GB/s (largest residual {resid:.1f} us); "
          f"1 GiB copy {big:.0f} GB/s")
    print("| op, variant | t0 (µs) | R (GB/s) | smallest shape, ratio to the 1 GiB copy "
          "| a copy of the same bytes, by the fit | largest shape |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    ops = []
    for r in rs:
        if (r["op"], r["variant"]) not in ops:
            ops.append((r["op"], r["variant"]))
    for op, var in ops:
        o = sorted((r for r in rs if r["op"] == op and r["variant"] == var),
                   key=lambda r: r["m"] * r["k"])
        x = [r["gbps"] * 1e9 * r["us"] * 1e-6 for r in o]  # the op's counted bytes
        y = [r["us"] for r in o]
        a2, b2 = fit(x, y)
        copy_same = x[0] / ((a + b * x[0]) * 1e-6) / 1e9 / big
        print(f"| {op} {var} | {a2:.2f} | {1 / b2 / 1e3:.0f} | {o[0]['ratio_to_copy_1gib']:.3f} "
              f"| {copy_same:.3f} | {o[-1]['ratio_to_copy_1gib']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
