#!/usr/bin/env python3
"""Summarises ncu's per-instruction PC-sampling table of one kernel.

Input: the CSV of `ncu -i REPORT.ncu-rep --page source --print-source sass --csv` for a report
taken with `--section SourceCounters` (one kernel). Prints the share of warp-stall samples by
stall reason and by opcode, then the instructions holding the most samples with their top
reasons; `--range LO HI` (hex, low 20 bits of the address) lists every instruction in between.

  pc_samples.py SRC.csv [--top N] [--range LO HI]
"""
import argparse
import collections
import csv


def load(path):
    lines = open(path).read().splitlines()
    rows = list(csv.reader(lines[1:]))  # line 0 names the kernel
    header, data = rows[0], rows[1:]
    return {h: i for i, h in enumerate(header)}, data


def num(text):
    try:
        return float(text)
    except ValueError:
        return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--range", nargs=2, metavar=("LO", "HI"))
    args = ap.parse_args()
    idx, data = load(args.csv)
    samples_col = idx["Warp Stall Sampling (All Samples)"]
    reasons = [h for h in idx if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(num(r[samples_col]) for r in data) or 1.0

    def source(r):
        return r[idx["Source"]].strip()

    def address(r):
        return int(r[idx["Address"]], 16) & 0xFFFFF

    if args.range:
        lo, hi = (int(x, 16) for x in args.range)
        for r in data:
            if lo <= address(r) <= hi:
                print(f"{address(r):05x} {num(r[samples_col]) / total * 100:5.2f}% "
                      f"exec={r[idx['Instructions Executed']]:>9s} {source(r)[:90]}")
        return
    by_reason = collections.Counter()
    by_opcode = collections.Counter()
    for r in data:
        for k in reasons:
            by_reason[k[6:]] += num(r[idx[k]])
        words = source(r).split()
        op = words[1] if words and words[0].startswith("@") and len(words) > 1 else (
            words[0] if words else "?")
        by_opcode[op.split(".")[0]] += num(r[samples_col])
    print(f"samples {total:.0f}, instructions {len(data)}")
    print("by reason: " + ", ".join(f"{k} {v / total * 100:.1f}%"
                                    for k, v in by_reason.most_common(12)))
    print("by opcode: " + ", ".join(f"{k} {v / total * 100:.1f}%"
                                    for k, v in by_opcode.most_common(15)))
    for r in sorted(data, key=lambda r: -num(r[samples_col]))[:args.top]:
        s = num(r[samples_col])
        top = sorted(((num(r[idx[k]]), k[6:]) for k in reasons), reverse=True)[:3]
        print(f"{s / total * 100:5.2f}% {address(r):05x} exec={r[idx['Instructions Executed']]:>9s} "
              f"{source(r)[:60]:60s} " + " ".join(f"{k}:{v / s * 100:.0f}%" for v, k in top if v > 0))


if __name__ == "__main__":
    main()
