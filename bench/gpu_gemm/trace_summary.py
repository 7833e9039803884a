#!/usr/bin/env python3
"""Summarises FP8 GEMM clock traces (gpu_gemm_bench --trace=PREFIX from a KD_GEMM_TRACE build).

Usage: trace_summary.py FILE.bin...   (layout: kernels/cuda/gemm/gemm_fp8_kernel.h, kTraceWords)

Per CTA (0, 1) and consumer warpgroup, medians in SM clock cycles over K blocks 8..n-2:
  one-partial tiles (128x192, 192x128: ConsumerLoopSimple): marks 0 head, 4 block issued,
    3 next block's stage full, 1 own wgmmas done, 2 released and promoted, and in a tile's last
    block 5 epilogue done; only consumer warpgroups 0 and 1 are recorded; a block that ended a
    tile stored by TMA also has, per 64-column slice q, 7 + 3q the buffer read by its last bulk
    store (thread 0's wait), 8 + 3q the warpgroup met, 9 + 3q slice written, fenced and met
    again: printed as "epilogue slices" (wait, meet, write per slice, then the rest to mark 5);
  128-column tiles (ConsumerLoop): 0 head, 6 next stage full, 3 next block issued, 1 oldest
    block done, 2 promoted, released and stored (if its tile ended).
and for the TMA thread (slot 2) and the B-scale warp (slot 3) the wait for a free stage; "tma
issue -> full" is how long before a consumer found a stage full the TMA thread issued it.
Pure Python (no numpy).
"""
import array
import statistics
import sys

ITERS = 512
MARKS = 16  # kTraceMarks


def load(path):
    a = array.array('I')
    with open(path, 'rb') as f:
        a.frombytes(f.read())
    return lambda c, s, i, m: a[((c * 4 + s) * ITERS + i) * MARKS + m]


def rel(x, y):
    return (y - x) % (1 << 32)


def med(x):
    return int(statistics.median(x)) if x else -1


def main():
    for path in sys.argv[1:]:
        t = load(path)
        print('==', path.split('/')[-1])
        wide = any(t(0, 0, i, 5) for i in range(ITERS))
        for cta in range(2):
            n = {}
            for wg in range(2):
                n[wg] = sum(1 for i in range(ITERS) if t(cta, wg, i, 0))
                if n[wg] < 20:
                    continue
                r = range(8, n[wg] - 1)
                d = lambda a, b: med([rel(t(cta, wg, i, a), t(cta, wg, i, b)) for i in r])
                per = [rel(t(cta, wg, i, 0), t(cta, wg, i + 1, 0)) for i in r]
                if wide:
                    # Blocks that end a tile (mark 5) hold the epilogue too: medians of the
                    # per-block steps are taken over the others.
                    inner = [i for i in r if not t(cta, wg, i, 5)]
                    di = lambda a, b: med([rel(t(cta, wg, i, a), t(cta, wg, i, b)) for i in inner])
                    last = [i for i in r if t(cta, wg, i, 5)]
                    epi = med([rel(t(cta, wg, i, 2), t(cta, wg, i, 5)) for i in last])
                    print(f' cta{cta} wg{wg} blocks={n[wg]} period med={med(per)} '
                          f'mean={int(sum(per) / len(per))} | issue={di(0, 4)} full={di(4, 3)} '
                          f'wait={di(3, 1)} promote={di(1, 2)} '
                          f'epilogue={epi} ({len(last)} tile ends)')
                    ends = [i for i in range(2, n[wg] - 1) if t(cta, wg, i, 7)]
                    if ends:
                        q_n = 3 if any(t(cta, wg, i, 13) for i in ends) else 2
                        parts = []
                        prev = 2
                        for q in range(q_n):
                            e = lambda a, b: med([rel(t(cta, wg, i, a), t(cta, wg, i, b))
                                                  for i in ends])
                            parts.append(f'q{q} wait={e(prev, 7 + 3 * q)} '
                                         f'meet={e(7 + 3 * q, 8 + 3 * q)} '
                                         f'write={e(8 + 3 * q, 9 + 3 * q)}')
                            prev = 9 + 3 * q
                        tail = med([rel(t(cta, wg, i, prev), t(cta, wg, i, 5)) for i in ends])
                        total = med([rel(t(cta, wg, i, 2), t(cta, wg, i, 5)) for i in ends])
                        print(f' cta{cta} wg{wg} epilogue slices ({len(ends)} tile ends, total '
                              f'{total}): ' + ' | '.join(parts) + f' | rest={tail}')
                else:
                    print(f' cta{cta} wg{wg} blocks={n[wg]} period med={med(per)} '
                          f'mean={int(sum(per) / len(per))} | full={d(0, 6)} issue={d(6, 3)} '
                          f'wait={d(3, 1)} finish={d(1, 2)}')
            if n.get(0, 0) > 20 and n.get(1, 0) > 20:
                m = min(n[0], n[1])
                gap = [rel(t(cta, 0, i, 1), t(cta, 1, i, 1)) for i in range(8, m - 1)]
                gap = [g - (1 << 32) if g >= (1 << 31) else g for g in gap]
                print(f' cta{cta} wg1 done - wg0 done: median {med(gap)}')
            for slot, name in ((2, 'tma'), (3, 'b-scale warp')):
                k = sum(1 for i in range(ITERS) if t(cta, slot, i, 1))
                if k > 20:
                    w = [rel(t(cta, slot, i, 0), t(cta, slot, i, 1)) for i in range(8, k - 1)]
                    print(f' cta{cta} {name}: wait for a free stage med={med(w)}')
            k = sum(1 for i in range(ITERS) if t(cta, 2, i, 1))
            if k > 20 and n.get(0, 0) > 20:
                full_mark = 3 if wide else 6
                lat = [rel(t(cta, 2, j, 1), t(cta, 0, j - 1, full_mark))
                       for j in range(8, min(k, n[0]))]
                print(f' cta{cta} tma issue -> full (wg0): med={med(lat)}')


if __name__ == '__main__':
    main()
