#!/usr/bin/env python3
# Tile boundaries in a KD_GEMM_TRACE trace of the one-partial loop: for consumer warpgroups 0/1 of
# CTAs 0/1, the K blocks whose iteration ran an epilogue (mark 4 -> 5 over 300 cycles) against the
# others: median period (mark 0 to the next mark 0) and median epilogue cycles.
import array, statistics, sys
ITERS = 512
for path in sys.argv[1:]:
    a = array.array('I'); a.frombytes(open(path, 'rb').read())
    t = lambda c, s, i, m: a[((c * 4 + s) * ITERS + i) * 8 + m]
    rel = lambda x, y: (y - x) % (1 << 32)
    print('==', path.split('/')[-1])
    for c in range(2):
        for wg in range(2):
            n = sum(1 for i in range(ITERS) if t(c, wg, i, 0))
            if n < 20: continue
            epi, per_b, per_n, nxt = [], [], [], []
            for i in range(2, n - 2):
                e = rel(t(c, wg, i, 4), t(c, wg, i, 5))
                p = rel(t(c, wg, i, 0), t(c, wg, i + 1, 0))
                if e > 300:
                    epi.append(e); per_b.append(p); nxt.append(rel(t(c, wg, i + 1, 0), t(c, wg, i + 2, 0)))
                else:
                    per_n.append(p)
            m = lambda x: int(statistics.median(x)) if x else -1
            print(f' cta{c} wg{wg} blocks={n} boundaries={len(epi)} epilogue med={m(epi)} '
                  f'period at boundary={m(per_b)} next={m(nxt)} other blocks={m(per_n)}')
