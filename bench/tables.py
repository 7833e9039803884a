#!/usr/bin/env python3
"""Prints the tables of bench/README.md, as Markdown, from the benchmarks' raw output.

Usage: tables.py KIND PATH...
  quant_pad   QUANT_PAD.json         quant_pad_bench: GB/s and ratio to the 1 GiB copy per shape
  e2e         DIR                    run_e2e.sh's e2e_{inline,queued,ring,ring_spin250}.json
  cuda_calls  CUDA_CALLS.json        cuda_call_bench: host µs per CUDA runtime call
  ipc_order   IPC_ORDER.json         ipc_order_bench: cross-process hand-over µs
  gbench      FILE.json...           Google Benchmark JSON (medians of repetitions when present)
  rpc         FILE.json...           rpc_bench: latency (and throughput) rows
  autotune    AUTOTUNE.json[.gz]     gpu_autotune_bench: default, tuned and fastest per shape

The GEMM table comes from bench/gpu_gemm/gemm_summary.py, the quantize fit from
bench/gpu/quant_fit.py. Pure Python (no numpy).
"""
import gzip
import json
import os
import sys


def load(path):
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rt') as f:
        return json.load(f)


def row(cells):
    return '| ' + ' | '.join(str(c) for c in cells) + ' |'


def header(names, right_from=1):
    print(row(names))
    print(row(['---'] * right_from + ['---:'] * (len(names) - right_from)))


def quant_pad(path):
    d = load(path)
    shapes, ops = [], []
    cells = {}
    for r in d['results']:
        shape, op = (r['m'], r['k']), f"{r['op']} {r['variant']}"
        if shape not in shapes:
            shapes.append(shape)
        if op not in ops:
            ops.append(op)
        cells[(op, shape)] = r
    print(f"{d['device']}; 1 GiB device-to-device copy {d['copy_1gib_gbps']:.0f} GB/s "
          f"(read + written). Cells: GB/s (ratio to that copy).\n")
    header(['op, variant'] + [f'{m}x{k}' for m, k in shapes])
    n = at_copy = at_same = 0
    for op in ops:
        out = [op]
        for s in shapes:
            r = cells.get((op, s))
            if r is None:
                out.append('')
                continue
            out.append(f"{r['gbps']} ({r['ratio_to_copy_1gib']:.3f})")
            n += 1
            at_copy += r['ratio_to_copy_1gib'] >= 0.9
            at_same += r['ratio_to_copy_same_size'] >= 0.9
        print(row(out))
    print(f'\nCells at >= 0.90 of the 1 GiB copy: {at_copy} of {n}; '
          f'of a copy of the same input size: {at_same} of {n}.')


def e2e(folder):
    print(row(['daemon', 'transport, client spin µs', 'shape', 'kernel µs', 'SYNC µs (x kernel)',
               'ASYNC µs (x kernel)', 'pipelined x4 µs/op', 'empty call µs',
               '128x128 SYNC / ASYNC µs', 'ASYNC with wait_event µs']))
    print(row(['---'] * 3 + ['---:'] * 7))
    for daemon in ('inline', 'queued', 'ring', 'ring_spin250'):
        path = os.path.join(folder, f'e2e_{daemon}.json')
        if not os.path.exists(path):
            continue
        name = {'inline': 'default', 'queued': '--noinline_async', 'ring': 'default',
                'ring_spin250': '--ring_spin_us=250'}[daemon]
        for r in load(path):
            print(row([
                name, f"{r['transport']}, {r['client_spin_us']}" if r['transport'] == 'ring'
                else r['transport'], r['op'].split()[-1], r['kernel_us_median'],
                f"{r['sync_us_median']} ({r['sync_ratio']:.2f})",
                f"{r['async_us_median']} ({r['async_ratio']:.2f})",
                r['async_pipelined_4threads_us_per_op'], r['rpc_floor_empty_submit_us_median'],
                f"{r['tiny_sync_us_median']} / {r['tiny_async_us_median']}",
                r.get('async_with_wait_event_us_median', '')]))


def cuda_calls(path):
    d = load(path)
    one, ipc = d['one_process'], d['ipc_event_from_another_process']
    print(f"{d['device']}; median host µs of one call over {d['reps']} calls.\n")
    header(['call', 'idle stream', 'busy stream', 'idle stream, event poller running'])
    for section, calls in (('', one), (' (IPC event of another process)', ipc)):
        for name, v in calls.items():
            if name.startswith('polled_') or (section and not name.endswith('_ipc')):
                continue
            polled = calls.get('polled_' + name, {}).get('idle_us', '')
            print(row([name + section, v['idle_us'], v['busy_us'], polled]))


def ipc_order(path):
    d = load(path)
    p = d['producer_done_to_consumer_start_us']
    print(f"{d['device']}; median µs from the producer's last work to the consumer's start, "
          f"{d['reps']} hand-overs.\n")
    header(['consumer', 'IPC event', 'stream value (cuStreamWaitValue32)'])
    for where, v in p.items():
        print(row([where.replace('_', ' '), v['ipc_event_median'], v['stream_value_median']]))


def gbench(paths):
    for path in paths:
        d = load(path)
        ctx = d.get('context', {})
        print(f"{os.path.basename(path)}: {ctx.get('num_cpus', '?')} CPUs at "
              f"{ctx.get('mhz_per_cpu', '?')} MHz, load average "
              f"{', '.join(f'{x:.1f}' for x in ctx.get('load_avg', []))}\n")
        rows = [b for b in d['benchmarks'] if b.get('aggregate_name') in (None, 'median')]
        if any(b.get('aggregate_name') == 'median' for b in rows):
            rows = [b for b in rows if b.get('aggregate_name') == 'median']
        skip = {'name', 'run_name', 'run_type', 'repetitions', 'repetition_index', 'threads',
                'iterations', 'real_time', 'cpu_time', 'time_unit', 'family_index',
                'per_family_instance_index', 'aggregate_name', 'aggregate_unit', 'label'}
        extra = []
        for b in rows:
            for k in b:
                if k not in skip and k not in extra:
                    extra.append(k)
        header(['benchmark', 'real time', 'CPU time'] + extra)
        for b in rows:
            cells = [b.get('run_name', b['name']), f"{b['real_time']:.4g} {b['time_unit']}",
                     f"{b['cpu_time']:.4g} {b['time_unit']}"]
            for k in extra:
                v = b.get(k, '')
                if k == 'bytes_per_second' and v != '':
                    v = f'{v / 1e9:.2f} GB/s'
                elif isinstance(v, float):
                    v = f'{v:.3g}'
                cells.append(v)
            print(row(cells))
        print()


def rpc(paths):
    for path in paths:
        d = load(path)
        print(f"{os.path.basename(path)}: {d['transport']}, {d['host_cpus']} CPUs, "
              f"{d['iterations']} calls per client and case\n")
        header(['case', 'mode', 'clients', 'p50 µs', 'p90 µs', 'p99 µs', 'kernel p50 µs',
                'calls/s'], right_from=2)
        for r in d['latency']:
            print(row([r['case'], r['mode'], r['clients'], r['p50_us'], r['p90_us'], r['p99_us'],
                       r['kernel_p50_us'], r['calls_per_second']]))
        if d.get('throughput'):
            print()
            header(['case', 'kernel p50 ms', 'round trip p50 ms', 'kernel GB/s or GFLOP/s'])
            for r in d['throughput']:
                rate = (f"{r['kernel_gflop_per_s']} GFLOP/s" if 'kernel_gflop_per_s' in r
                        else f"{r['kernel_gb_per_s']} GB/s")
                print(row([r['case'], r['kernel_p50_ms'], r['round_trip_p50_ms'], rate]))
        print()


def autotune(path):
    d = load(path)
    print(f"{d['device']}, driver {d['driver']}, runtime {d['runtime']}; first tuning round.\n")
    header(['shape', 'default (= tuned where equal)', 'tuned', 'default TFLOP/s', 'speedup',
            'candidates', 'fastest candidate, speed over default'], right_from=3)
    for s in d['shapes']:
        r = s['round0']
        print(row([s['shape'], f"`{r['default']}`",
                   '=' if r['tuned'] == r['default'] else f"`{r['tuned']}`",
                   r['default_tflops'], f"{r['speedup']:.3f}", len(r['candidates']),
                   f"`{r['fastest']}` {r['default_us'] / r['fastest_us']:.3f}"]))


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    kind, args = argv[0], argv[1:]
    single = {'quant_pad': quant_pad, 'e2e': e2e, 'cuda_calls': cuda_calls,
              'ipc_order': ipc_order, 'autotune': autotune}
    if kind in single:
        single[kind](args[0])
    elif kind == 'gbench':
        gbench(args)
    elif kind == 'rpc':
        rpc(args)
    else:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
