#!/usr/bin/env python3
"""Summarises gpu_gemm_bench JSON: each case's TFLOP/s against the same process's cuBLASLt, and
the geometric mean of the ratio over the nine dense NT shapes of issue #5 (the figure
bench/RESULTS.md quotes). For a --power run it also prints the sustained figures (means over the
soak rounds) and their geometric mean.

Usage: gemm_summary.py [--peer NAME=TFLOPS ...] FILE.json...
  --peer replaces cuBLASLt's TFLOP/s for case NAME (an outlier peer; say so where you quote it).
Pure Python (no numpy).
"""
import json
import math
import sys

DENSE_NT = ['nt_4096^3', 'nt_8192^3', 'nt_16384x8192x5120', 'nt_8192x7168x2048',
            'nt_4096x2112x7168', 'nt_4096x24576x1536', 'nt_4096x7168x16384',
            'nt_128x7168x2048', 'nt_64x4096x7168']


def results(path):
    """The result objects of one output file, whole or cut off (one result per line)."""
    text = open(path).read()
    try:
        return json.loads(text)['results']
    except (ValueError, KeyError):
        out = []
        for line in text.splitlines():
            line = line.strip().lstrip(',')
            if line.startswith('{"name"'):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    try:
                        out.append(json.loads(line[:-2]))
                    except ValueError:
                        pass
        return out


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float('nan')


def main(argv):
    peers = {}
    files = []
    i = 0
    while i < len(argv):
        if argv[i] == '--peer':
            name, tflops = argv[i + 1].split('=')
            peers[name] = float(tflops)
            i += 2
        else:
            files.append(argv[i])
            i += 1
    if not files:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for path in files:
        rs = results(path)
        print('==', path)
        ratios, sustained = {}, {}
        for r in rs:
            peer = peers.get(r['name'], r['cublaslt_tflops'])
            ratio = r['ours_tflops'] / peer
            ratios[r['name']] = ratio
            mark = ' (peer replaced)' if r['name'] in peers else ''
            print(f"{r['name']:32} {r['config']:26} {r['ours_tflops']:7.0f} {peer:7.0f} "
                  f"{ratio:.3f}{mark}")
            rounds = (r.get('power') or {}).get('rounds') or []
            if rounds:
                mean = lambda side, key: sum(x[side][key] for x in rounds) / len(rounds)
                sustained[r['name']] = mean('ours', 'tflops') / mean('cublaslt', 'tflops')
                print(f"{'':32} sustained {mean('ours', 'tflops'):7.0f} "
                      f"{mean('cublaslt', 'tflops'):7.0f} {sustained[r['name']]:.3f} "
                      f"W {mean('ours', 'watts'):.0f}/{mean('cublaslt', 'watts'):.0f} "
                      f"GFLOP/J {mean('ours', 'gflop_per_joule'):.0f}/"
                      f"{mean('cublaslt', 'gflop_per_joule'):.0f}")
        nt = [ratios[n] for n in DENSE_NT if n in ratios]
        if nt:
            print(f'geomean over {len(nt)} of the nine dense NT shapes: {geomean(nt):.4f} '
                  f'(lowest {min(nt):.3f})')
        st = [sustained[n] for n in DENSE_NT if n in sustained]
        if st:
            print(f'sustained geomean over {len(st)}: {geomean(st):.4f}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
