#!/usr/bin/env python3
"""Forward+backward time of one Linear (Llama-3 8B and 70B MLP shapes) and of one MoE expert
layer, for bf16 nn.Linear, the in-process blockwise FP8 path (torch._scaled_mm + compiled
quantizers, kerneld.torch.inprocess) and kerneld (Float8BlockwiseLinear / Float8MoEExperts),
all in one process and one run, timed with CUDA events (median over repeats). For kerneld it
also says where the step goes: the daemon's kernel seconds (a second pass with SYNC
completion, split by op from the daemon's /metrics when --metrics is given) against the step,
the rest being the hand-offs (IPC events, the ring, queueing, the trainer's Python).

    python3 bench/torch/linear_bench.py --socket /tmp/kd/data.sock \
        --metrics http://127.0.0.1:19464/metrics > bench.json

--variants times several forms of the kerneld Linear in the same process, each a path of its
own: dgrad "nn" or "nt" (Float8BlockwiseLinear's dgrad option), e.g. --variants nn,nt; the first
is also reported as "kerneld". --a_scale_layout k_block_major runs every kerneld path with
K-block-major activation scales ($KERNELD_A_SCALE_LAYOUT, read when kerneld.torch is imported). --skip_peers leaves out bf16 and the in-process path (a second pass of the
same run, after the daemon's TN config was changed with kctl, needs only the kerneld paths);
--tag names such a pass in the JSON.

Prints JSON. bench/torch/run_gpu.sh runs it with and without MPS; bench/torch/measure_tn_dgrad.sh
runs the TN/dgrad comparison."""
import argparse
import json
import os
import re
import statistics
import sys
import time
import traceback
import urllib.request

import torch
from torch import nn

import kerneld

# (K in, N out): Llama-3 8B's and 70B's MLP, then 8B's attention projections (GQA: wk/wv 1024).
LINEAR_SHAPES = [(4096, 14336), (14336, 4096), (8192, 28672), (28672, 8192), (4096, 4096),
                 (4096, 1024)]
TOKENS = [8192, 16384]


def cuda_time(step, warmup, reps, on_start=None):
    """Median and all samples (ms) of step() between two CUDA events on the current stream.
    on_start, if given, is called once the warm-up has finished on the device."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    if on_start is not None:
        on_start()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(reps)]
    for start, end in events:
        start.record()
        step()
        end.record()
    torch.cuda.synchronize()
    samples = [s.elapsed_time(e) for s, e in events]
    return statistics.median(samples), samples


def metrics_by_op(url):
    """{"op:variant": kernel seconds so far} from kerneld_kernel_duration_seconds_sum."""
    if not url:
        return None
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    totals = {}
    for line in text.splitlines():
        m = re.match(r'kerneld_kernel_duration_seconds_sum\{([^}]*)\}\s+(\S+)', line)
        if m:
            op = re.search(r'op="([^"]+)"', m.group(1))
            variant = re.search(r'variant="([^"]+)"', m.group(1))
            key = (op.group(1) if op else "?") + (":" + variant.group(1) if variant else "")
            totals[key] = totals.get(key, 0.0) + float(m.group(2))
    return totals


def linear_step(layer, x, dy):
    def step():
        layer.weight.grad = None
        x.grad = None
        layer(x).backward(dy)
    return step


def breakdown(make_step, sync_rt, metrics_url, reps):
    """Kernel seconds per step from SYNC passes (the process's runtime switched to `sync_rt`
    for them), total and split by op."""
    from kerneld.torch import default_runtime, set_default_runtime
    async_rt = default_runtime()
    set_default_runtime(sync_rt)
    try:
        return _breakdown(make_step(), sync_rt, metrics_url, reps)
    finally:
        set_default_runtime(async_rt)


def _breakdown(step, sync_rt, metrics_url, reps):
    step()
    torch.cuda.synchronize()
    before_ks, before_ops = sync_rt.kernel_seconds, metrics_by_op(metrics_url)
    for _ in range(reps):
        step()
    torch.cuda.synchronize()
    kernel_ms = 1e3 * (sync_rt.kernel_seconds - before_ks) / reps
    result = {"kernel_ms": round(kernel_ms, 4)}
    after_ops = metrics_by_op(metrics_url)
    if before_ops is not None:
        result["kernel_ms_by_op"] = {
            op: round(1e3 * (after_ops.get(op, 0.0) - before_ops.get(op, 0.0)) / reps, 4)
            for op in sorted(after_ops)}
    return result


def kernel_seconds(url):
    totals = metrics_by_op(url)
    return None if totals is None else sum(totals.values())


def run_path(name, make, rows, warmup, reps, flops, metrics_url=None):
    """Times a path. With metrics_url (a kerneld path), also the daemon's kernel time over the
    same timed steps: "same_run_kernel_ms" per step and "same_run_daemon_share", the part of the
    mean step that is not a kerneld kernel (hand-offs, queueing and the trainer's own work)."""
    try:
        step = make()
        before = []
        median, samples = cuda_time(step, warmup, reps,
                                    lambda: before.append(kernel_seconds(metrics_url)))
        rows[name] = {"ms": round(median, 4), "tflops": round(flops / median / 1e9, 1),
                      "min_ms": round(min(samples), 4), "max_ms": round(max(samples), 4)}
        if metrics_url and before and before[0] is not None:
            time.sleep(0.2)  # the daemon reads the last kernels' timing events asynchronously
            kernel_ms = 1e3 * (kernel_seconds(metrics_url) - before[0]) / reps
            mean_ms = statistics.fmean(samples)
            rows[name]["same_run_kernel_ms"] = round(kernel_ms, 4)
            rows[name]["same_run_daemon_share"] = round(1 - kernel_ms / mean_ms, 4)
    except Exception as e:  # one failing path must not lose the others' figures
        rows[name] = {"error": f"{type(e).__name__}: {e}"}
        traceback.print_exc(file=sys.stderr)
    torch.cuda.synchronize()


def bench_linear(k, n, m, variants, args):
    torch.manual_seed(0)
    base = nn.Linear(k, n, bias=False, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    flops = 6.0 * m * n * k
    row = {"k": k, "n": n, "tokens": m, "paths": {}}
    paths = row["paths"]
    if not args.skip_peers:
        run_path("bf16", lambda: linear_step(base, x, dy), paths, args.warmup, args.reps, flops)
        run_path("inprocess_fp8",
                 lambda: linear_step(InProcessFloat8BlockwiseLinear.from_linear(base), x, dy),
                 paths, args.warmup, args.reps, flops)
    for i, (name, dgrad) in enumerate(variants):
        def make(dgrad=dgrad):
            return linear_step(Float8BlockwiseLinear.from_linear(base, dgrad=dgrad), x, dy)
        run_path(name, make, paths, args.warmup, args.reps, flops, args.metrics)
        if "ms" in paths.get(name, {}):
            try:
                b = breakdown(make, args.sync_rt, args.metrics, args.sync_reps)
                b["daemon_share"] = round(1 - b["kernel_ms"] / paths[name]["ms"], 4)
            except Exception as e:
                b = {"error": f"{type(e).__name__}: {e}"}
            row.setdefault("breakdowns", {})[name] = b
            if i == 0:
                row["kerneld_breakdown"] = b
        if i == 0:
            paths["kerneld"] = paths[name]
    _ratios(row)
    return row


def _ratios(row):
    p = row["paths"]
    for path, result in p.items():
        if not path.startswith("kerneld") or "ms" not in result:
            continue
        for peer in ("bf16", "inprocess_fp8"):
            if "ms" in p.get(peer, {}):
                key = f"{path}_speedup_vs_{peer}"
                row[key] = round(p[peer]["ms"] / result["ms"], 3)


def bench_moe(experts_n, per_expert, k, n, args):
    torch.manual_seed(0)
    t = experts_n * per_expert
    sizes = [per_expert] * experts_n
    ends = torch.tensor(sizes, device="cuda").cumsum(0).to(torch.int32)
    weight = (torch.randn(experts_n, n, k, device="cuda") / k ** 0.5).to(torch.bfloat16)
    x = torch.randn(t, k, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(t, n, device="cuda", dtype=torch.bfloat16)
    flops = 6.0 * t * n * k
    row = {"experts": experts_n, "tokens_per_expert": per_expert, "k": k, "n": n, "paths": {}}
    bf16_w = nn.Parameter(weight.clone())
    grouped = hasattr(torch, "_grouped_mm")
    row["bf16_kind"] = "torch._grouped_mm" if grouped else "per-expert loop"

    def bf16_step():
        bf16_w.grad = None
        x.grad = None
        if grouped:
            y = torch._grouped_mm(x, bf16_w.transpose(-2, -1), offs=ends)
        else:
            y = torch.cat([xe @ bf16_w[i].t() for i, xe in enumerate(x.split(sizes))])
        y.backward(dy)

    ip_layers = []
    for i in range(experts_n):
        layer = nn.Linear(k, n, bias=False, device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            layer.weight.copy_(weight[i])
        ip_layers.append(InProcessFloat8BlockwiseLinear.from_linear(layer))

    def inprocess_step():
        x.grad = None
        for layer in ip_layers:
            layer.weight.grad = None
        # Group sizes known on the host: the in-process path has no device-side grouping.
        torch.cat([ip_layers[i](xe) for i, xe in enumerate(x.split(sizes))]).backward(dy)

    def kerneld_step():
        mod = Float8MoEExperts(experts_n, k, n, device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            mod.weight.copy_(weight)

        def step():
            mod.weight.grad = None
            x.grad = None
            mod(x, ends).backward(dy)
        return step

    p = row["paths"]
    run_path("bf16", lambda: bf16_step, p, args.warmup, args.reps, flops)
    run_path("inprocess_fp8", lambda: inprocess_step, p, args.warmup, args.reps, flops)
    run_path("kerneld", kerneld_step, p, args.warmup, args.reps, flops, args.metrics)
    if "ms" in p.get("kerneld", {}):
        try:
            b = breakdown(kerneld_step, args.sync_rt, args.metrics, args.sync_reps)
            b["daemon_share"] = round(1 - b["kernel_ms"] / p["kerneld"]["ms"], 4)
            row["kerneld_breakdown"] = b
        except Exception as e:
            row["kerneld_breakdown"] = {"error": f"{type(e).__name__}: {e}"}
    _ratios(row)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--socket", default=os.environ.get("KD_SOCKET"))
    ap.add_argument("--metrics", default=None, help="the daemon's /metrics URL")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--sync_reps", type=int, default=3)
    ap.add_argument("--only", choices=["linear", "moe"], default=None)
    ap.add_argument("--tokens", type=int, nargs="*", default=TOKENS)
    ap.add_argument("--a_scale_layout", default="row_major",
                    choices=["row_major", "k_block_major"])
    ap.add_argument("--variants", default=None,
                    help="kerneld dgrad forms, nn and/or nt (default: the module's default)")
    ap.add_argument("--skip_peers", action="store_true", help="kerneld paths only")
    ap.add_argument("--tag", default="", help="a name for this pass, copied into the JSON")
    args = ap.parse_args()
    os.environ["KERNELD_A_SCALE_LAYOUT"] = args.a_scale_layout
    # kerneld.torch reads the layout when it is imported, so it is imported here.
    global Float8BlockwiseLinear, Float8MoEExperts, InProcessFloat8BlockwiseLinear
    from kerneld.torch import (DEFAULT_DGRAD, Float8BlockwiseLinear, Float8MoEExperts,
                               Runtime, set_default_client)
    from kerneld.torch.inprocess import InProcessFloat8BlockwiseLinear
    kd = kerneld.connect(args.socket, name="linear_bench")
    set_default_client(kd)
    args.sync_rt = Runtime(kd, sync=True)
    variants = []
    for dgrad in (args.variants.split(",") if args.variants else [None]):
        if dgrad is None:
            variants.append(("kerneld", DEFAULT_DGRAD))
        elif dgrad in ("nn", "nt"):
            variants.append((f"kerneld_{dgrad}", dgrad))
        else:
            ap.error(f"--variants: {dgrad!r} is not nn or nt")
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "mps": os.environ.get("KD_MPS", "unknown"), "commit": os.environ.get("KD_COMMIT", ""),
           "tag": args.tag, "a_scale_layout": args.a_scale_layout,
           "variants": [v[0] for v in variants], "reps": args.reps, "date":
           time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "linear": [], "moe": []}
    if args.only in (None, "linear"):
        for m in args.tokens:
            for k, n in LINEAR_SHAPES:
                out["linear"].append(bench_linear(k, n, m, variants, args))
                print(json.dumps(out["linear"][-1]), file=sys.stderr, flush=True)
    if args.only in (None, "moe"):
        out["moe"].append(bench_moe(8, 4096, 4096, 14336, args))
        print(json.dumps(out["moe"][-1]), file=sys.stderr, flush=True)
    from kerneld.torch import default_runtime
    rt = default_runtime()
    out["kerneld_client"] = {"submits": rt.submits + args.sync_rt.submits,
                             "event_pairs": rt.events.created,
                             "registrations": kd.cuda_registry().registrations,
                             "registration_releases": kd.cuda_registry().releases,
                             "ring_calls_fallbacks": kd.ring_counts()}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
