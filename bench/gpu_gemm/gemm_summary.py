#!/usr/bin/env python3
"""Summarises gpu_gemm_bench JSON: each case's TFLOP/s against the same process's cuBLASLt, and
the geometric mean of the ratio over the nine dense NT shapes of issue #5 (the figure
bench/README.md quotes). For a --power run it also prints the sustained figures (means over the
soak rounds) and their geometric mean.

A --candidates run's candidates are listed under their case with their TFLOP/s and their speed
over the default timed in the same loop ("vs_default").

Usage: gemm_summary.py [--peer NAME=TFLOPS ...] FILE.json...
       gemm_summary.py --markdown GEMM.json [POWER.json]
       gemm_summary.py --ab OLD NEW FILE.json...
  --peer replaces cuBLASLt's TFLOP/s for case NAME (an outlier peer; say so where you quote it).
  --markdown prints bench/README.md's table: each case of GEMM.json, and with a --power run's
       POWER.json that process's ratio and the sustained one beside it.
  --ab compares builds timed in alternating processes: per case, our TFLOP/s in each file whose
       name (less .json) ends with OLD, then in each whose name ends with NEW, and the ratio of
       NEW's sum to OLD's (e.g. --ab _main _new run/all_*.json).
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


def compare(old, new, files):
    """Our TFLOP/s per case in the OLD files and the NEW files, and sum(NEW) / sum(OLD)."""
    import os
    # A file is on a side when its name, less the extension, ends with the tag (not contains
    # it: a tag that starts another, _v3 and _v3s, would take both sides' files).
    def side(tag):
        return [f for f in files if os.path.splitext(os.path.basename(f))[0].endswith(tag)]

    sides = {old: side(old), new: side(new)}
    tflops = {}  # case -> side -> [TFLOP/s per file]
    order = []
    for side, paths in sides.items():
        for path in paths:
            for r in results(path):
                if r['name'] not in tflops:
                    tflops[r['name']] = {old: [], new: []}
                    order.append(r['name'])
                tflops[r['name']][side].append(r['ours_tflops'])
    print(f"{'case':32} {old} ({len(sides[old])} files) | {new} ({len(sides[new])}) | "
          f"{new} / {old}")
    for name in order:
        a, b = tflops[name][old], tflops[name][new]
        ratio = f'{sum(b) / sum(a) * len(a) / len(b):.3f}' if a and b else '-'
        print(f"{name:32} {' '.join(f'{x:.0f}' for x in a)} | {' '.join(f'{x:.0f}' for x in b)}"
              f" | {ratio}")
    return 0


def markdown(files):
    """bench/README.md's GEMM table from a plain run and, optionally, a --power run."""
    main_rs = results(files[0])
    power = {r['name']: r for r in results(files[1])} if len(files) > 1 else {}
    cols = ['case', 'config', 'ours TFLOP/s', 'cuBLASLt TFLOP/s', 'ratio']
    if power:
        cols += ['ratio, --power process', 'sustained ratio', 'sustained W (ours / peer)']
    print('| ' + ' | '.join(cols) + ' |')
    print('| --- | --- | ' + ' | '.join(['---:'] * (len(cols) - 2)) + ' |')
    ratios, second, sustained = {}, {}, {}
    for r in main_rs:
        name = r['name']
        ratios[name] = r['ours_tflops'] / r['cublaslt_tflops']
        config = r['config'].replace('.r8.p0', '')
        cells = [name, config, f"{r['ours_tflops']:.0f}", f"{r['cublaslt_tflops']:.0f}",
                 f'{ratios[name]:.3f}']
        if power:
            p = power.get(name)
            rounds = ((p or {}).get('power') or {}).get('rounds') or []
            if p:
                second[name] = p['ours_tflops'] / p['cublaslt_tflops']
            if rounds:
                mean = lambda side, key: sum(x[side][key] for x in rounds) / len(rounds)
                sustained[name] = mean('ours', 'tflops') / mean('cublaslt', 'tflops')
                watts = f"{mean('ours', 'watts'):.0f} / {mean('cublaslt', 'watts'):.0f}"
            cells += [f'{second[name]:.3f}' if name in second else '',
                      f'{sustained[name]:.3f}' if name in sustained else '',
                      watts if rounds else '']
        print('| ' + ' | '.join(cells) + ' |')
    for label, values in (('', ratios), (', --power process', second),
                          (', sustained', sustained)):
        nt = [values[n] for n in DENSE_NT if n in values]
        if nt:
            print(f'\nGeometric mean over the nine dense NT shapes{label}: {geomean(nt):.3f}x '
                  f'(lowest {min(nt):.3f}).')
    return 0


def main(argv):
    peers = {}
    files = []
    ab = None
    md = False
    i = 0
    while i < len(argv):
        if argv[i] == '--markdown':
            md = True
            i += 1
        elif argv[i] == '--peer':
            name, tflops = argv[i + 1].split('=')
            peers[name] = float(tflops)
            i += 2
        elif argv[i] == '--ab':
            ab = (argv[i + 1], argv[i + 2])
            i += 3
        else:
            files.append(argv[i])
            i += 1
    if not files:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if ab:
        return compare(ab[0], ab[1], files)
    if md:
        return markdown(files)
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
            for c in r.get('candidates') or []:
                print(f"{'':32} candidate {c['config']:26} {c['tflops']:7.0f} "
                      f"vs default {c['vs_default']:.3f}")
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
