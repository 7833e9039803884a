#!/usr/bin/env python3
"""Per-call cost of the Python path (kerneld package -> libkerneld_c.so -> daemon), through the
submit ring and over gRPC, on whatever backend the daemon runs (the CPU backend here: its ops
are host memory, so this is transport plus Python, not GPU hand-offs). Prints JSON.

    python3 bench/torch/python_overhead.py --socket run/kerneld.sock [--reps 2000]

Rows: an empty Submit (a round trip: Python, the C ABI, the ring or gRPC, the daemon's admit);
a three-op Submit of 128x128 tensors (dual quantize, 128x128 quantize, NT GEMM) built from
Python op values each call, and the same batch pre-built as a ctypes array (the form
kerneld.torch uses); and, with torch, Float8BlockwiseLinear forward+backward at 128x128x128
(two Submits) minus the daemon's kernel seconds."""
import argparse
import json
import statistics
import time

import numpy as np

import kerneld


def timed(fn, reps):
    for _ in range(max(reps // 10, 10)):
        fn()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    samples.sort()
    return {"p50_us": round(1e6 * samples[len(samples) // 2], 2),
            "p90_us": round(1e6 * samples[int(len(samples) * 0.9)], 2),
            "mean_us": round(1e6 * statistics.fmean(samples), 2)}


def batch(kd):
    x = kd.asarray(np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32),
                   "bf16")
    q, s = kd.empty((128, 128), "e4m3fn"), kd.empty((128, 1), "f32")
    qt, st = kd.empty((128, 128), "e4m3fn"), kd.empty((128, 1), "f32")
    w8, ws = kd.empty((128, 128), "e4m3fn"), kd.empty((1, 1), "f32")
    d = kd.empty((128, 128), "bf16")
    ops = [kerneld.Quantize(input=x, output=q, scales=s, granularity="1x128", output_t=qt,
                            scales_t=st),
           kerneld.Quantize(input=x, output=w8, scales=ws, granularity="128x128"),
           kerneld.Gemm(variant="nt", a=q, a_scales=s, b=w8, b_scales=ws, d=d)]
    keep = (x, q, s, qt, st, w8, ws, d)
    return ops, keep


def measure(socket, ring, reps):
    with kerneld.connect(socket, ring=ring, name="python_overhead") as kd:
        ops, keep = batch(kd)
        binding = kerneld._lib.binding()
        prebuilt = binding.op_array(len(ops))
        for i, op in enumerate(ops):
            kd.to_c_op(op, prebuilt[i])
        empty_batch = (binding.Op * 0)()
        row = {
            "transport": "ring" if ring else "grpc",
            "empty_submit": timed(lambda: kd.submit(empty_batch), reps),
            "submit_3_ops_from_python_values": timed(lambda: kd.submit(ops), reps),
            "submit_3_ops_prebuilt": timed(lambda: kd.submit(prebuilt), reps),
        }
        kernel = [kd.submit(prebuilt) for _ in range(50)]
        row["kernel_us_3_ops"] = round(1e6 * statistics.median(kernel), 2)
        if ring:
            row["ring_calls_fallbacks"] = kd.ring_counts()
        try:
            import torch
            from kerneld.torch import Float8BlockwiseLinear, Runtime, set_default_runtime
        except ImportError:
            return row
        rt = Runtime(kd)
        set_default_runtime(rt)
        layer = Float8BlockwiseLinear(128, 128, bias=False)
        x = torch.randn(128, 128, requires_grad=True)
        dy = torch.randn(128, 128)

        def step():
            layer(x).backward(dy)

        before = (rt.kernel_seconds, rt.submits)
        stats = timed(step, max(reps // 4, 50))
        steps = (rt.submits - before[1]) // 2  # two Submits a step
        kernel_us = 1e6 * (rt.kernel_seconds - before[0]) / steps
        row["linear_fwd_bwd_128"] = stats
        row["linear_fwd_bwd_128"]["kernel_us"] = round(kernel_us, 2)
        row["linear_fwd_bwd_128"]["overhead_us_p50"] = round(stats["p50_us"] - kernel_us, 2)
        del keep
        return row


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--socket", default=None)
    p.add_argument("--reps", type=int, default=2000)
    args = p.parse_args()
    with kerneld.connect(args.socket) as kd:
        backend = kd.backend
    out = {"backend": backend, "library": kerneld.library_path(), "reps": args.reps,
           "rows": [measure(args.socket, True, args.reps), measure(args.socket, False, args.reps)]}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
