#!/usr/bin/env python3
"""Trains the Llama-3-architecture model of llama.py for bf16 and for kerneld blockwise FP8, eager
and compiled, one after the other in one process, and prints one JSON document: per run the
tokens/s, the step time, the peak memory, the loss curve and where the time goes.

    python3 bench/torch/train_llama.py --config 8B-shape --layers 4 --tokens 8192 \\
        --runs bf16,kerneld --compile both --steps 300 --metrics http://127.0.0.1:19464/metrics

Each run builds the model from the same seed and trains on the same synthetic batches (AdamW,
bf16 parameters), so the loss curves compare. The stack is torchtitan's: convert the Linears
(kerneld.torch.convert_to_float8_blockwise; --filter all converts every one but the output
head, default the measured default filter), optionally checkpoint each block's activations
(--ac), compile each block (--compile), optionally shard with FSDP2 (--fsdp, under torchrun).
MoE: --experts E replaces each MLP with E routed experts (torch._grouped_mm in bf16, replaced by
kerneld.torch.grouped_mm for kerneld).

Where the time goes (--metrics, the daemon's Prometheus endpoint): the daemon's kernel seconds
per step by op, from kerneld_kernel_duration_seconds_sum over the timed steps, and the share of
the step that is neither a kerneld kernel nor the trainer's own GPU work (the trainer's CUDA
kernel time from torch.profiler over --profile_steps steps)."""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
import urllib.request

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama  # noqa: E402


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


def build(args, kerneld_fp8: bool, compiled: bool):
    cfg = llama.config(args.config, n_layers=args.layers, max_seq_len=args.seq_len,
                       n_experts=args.experts, top_k=args.top_k,
                       moe_ffn_dim=args.moe_ffn_dim or 0)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    with torch.device(device):
        model = llama.Llama(cfg).to(torch.bfloat16)
    converted = experts = 0
    if kerneld_fp8:
        from kerneld.torch import convert_all, convert_to_float8_blockwise, default_filter
        from kerneld.torch import Float8BlockwiseLinear
        base = convert_all if args.filter == "all" else default_filter
        from kerneld.torch import Float8BlockwiseLinearConfig
        convert_to_float8_blockwise(
            model, Float8BlockwiseLinearConfig(dgrad=args.dgrad),
            module_filter_fn=lambda m, fqn: fqn != "output" and base(m, fqn))
        converted = sum(isinstance(m, Float8BlockwiseLinear) for m in model.modules())
        experts = llama.use_kerneld_experts(model)
    if args.ac:
        llama.apply_activation_checkpointing(model)
    if compiled:
        llama.compile_blocks(model, fullgraph=True)
    if args.fsdp:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for block in model.layers:
            fully_shard(block, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
    return cfg, model, converted, experts


def train(args, kerneld_fp8: bool, compiled: bool) -> dict:
    """One run: its metrics as a dict."""
    import torch._dynamo
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    cuda = args.device.startswith("cuda")
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    cfg, model, converted, experts = build(args, kerneld_fp8, compiled)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0, fused=cuda)
    batch = args.tokens // args.seq_len
    gen = torch.Generator().manual_seed(args.seed + 1)
    batches = [llama.synthetic_batch(cfg, batch, args.seq_len, gen, args.device)
               for _ in range(min(args.steps, args.distinct_batches))]
    losses, step_ms = [], []

    def step(i):
        tokens, targets = batches[i % len(batches)]
        loss = llama.loss_fn(model(tokens), targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    sync = torch.cuda.synchronize if cuda else (lambda: None)
    kernel_before = None
    detached = []
    timed_start = None
    for i in range(args.steps):
        if i == args.warmup:
            sync()
            kernel_before = metrics_by_op(args.metrics)
            timed_start = time.perf_counter()
        t0 = time.perf_counter()
        detached.append(step(i))
        if args.sync_every_step or i < args.warmup:
            sync()
            step_ms.append(1e3 * (time.perf_counter() - t0))
    sync()
    elapsed = time.perf_counter() - timed_start if timed_start is not None else None
    losses = [float(v) for v in detached]
    timed = args.steps - args.warmup
    result = {
        "path": ("kerneld" if kerneld_fp8 else "bf16") + ("_compiled" if compiled else "_eager"),
        "config": args.config, "layers": cfg.n_layers, "experts": cfg.n_experts,
        "tokens_per_step": batch * args.seq_len, "seq_len": args.seq_len,
        "converted_linears": converted, "kerneld_expert_layers": experts,
        "loss": [round(v, 5) for v in losses],
        "graph_breaks": sum(torch._dynamo.utils.counters["graph_break"].values()),
    }
    if elapsed is not None and timed > 0:
        result["step_ms"] = round(1e3 * elapsed / timed, 3)
        result["tokens_per_s"] = round(batch * args.seq_len * timed / elapsed, 1)
    if cuda:
        result["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2 ** 30, 3)
    if kernel_before is not None and timed > 0:
        time.sleep(0.2)  # the daemon reads the last kernels' timing events asynchronously
        after = metrics_by_op(args.metrics)
        by_op = {op: round(1e3 * (after.get(op, 0.0) - kernel_before.get(op, 0.0)) / timed, 4)
                 for op in sorted(after)}
        by_op = {op: ms for op, ms in by_op.items() if ms > 0}
        result["kerneld_kernel_ms_per_step"] = by_op
        result["kerneld_kernel_ms"] = round(sum(by_op.values()), 4)
    if cuda and args.profile_steps and timed > 0:
        result["trainer_gpu_ms"] = trainer_gpu_ms(step, args)
        if "step_ms" in result:
            busy = result["trainer_gpu_ms"] + result.get("kerneld_kernel_ms", 0.0)
            result["other_share"] = round(max(0.0, 1 - busy / result["step_ms"]), 4)
    return result


def trainer_gpu_ms(step, args) -> float:
    """The trainer process's own CUDA kernel time per step (torch.profiler), which excludes the
    daemon's kernels (another process)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(args.profile_steps):
            step(i)
        torch.cuda.synchronize()
    total_us = sum(e.device_time_total for e in prof.key_averages()
                   if e.device_type.name == "CUDA")
    return round(total_us / 1e3 / args.profile_steps, 4)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="8B-shape", choices=sorted(llama.CONFIGS))
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--experts", type=int, default=0, help="MoE: routed experts per block")
    p.add_argument("--top_k", type=int, default=1)
    p.add_argument("--moe_ffn_dim", type=int, default=0)
    p.add_argument("--tokens", type=int, default=8192, help="tokens per step")
    p.add_argument("--seq_len", type=int, default=2048)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--distinct_batches", type=int, default=1 << 30,
                   help="cycle through this many pre-built batches")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--runs", default="bf16,kerneld", help="bf16 and/or kerneld")
    p.add_argument("--compile", default="both", choices=("eager", "compiled", "both"))
    p.add_argument("--filter", default="default", choices=("default", "all"),
                   help="which Linears kerneld takes: the default filter's, or all but the head")
    p.add_argument("--dgrad", default="nn", choices=("nn", "nt"),
                   help="Float8BlockwiseLinear's dX form")
    p.add_argument("--ac", action="store_true", help="per-block activation checkpointing")
    p.add_argument("--fsdp", action="store_true", help="FSDP2 per block (under torchrun)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--socket", default=None, help="kerneld's data socket ($KERNELD_SOCKET)")
    p.add_argument("--metrics", default=None, help="kerneld's /metrics URL")
    p.add_argument("--profile_steps", type=int, default=3)
    p.add_argument("--sync_every_step", action="store_true")
    return p.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.socket:
        os.environ["KERNELD_SOCKET"] = args.socket
    if args.fsdp:
        import torch.distributed as dist
        dist.init_process_group("nccl" if args.device.startswith("cuda") else "gloo")
        if args.device.startswith("cuda"):
            local = int(os.environ.get("LOCAL_RANK", "0"))
            torch.cuda.set_device(local)
            args.device = f"cuda:{local}"
    compiled = {"eager": [False], "compiled": [True], "both": [False, True]}[args.compile]
    runs = []
    for name in args.runs.split(","):
        for c in compiled:
            runs.append(train(args, name == "kerneld", c))
    doc = {"device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
           "torch": torch.__version__, "argv": sys.argv[1:] if argv is None else argv,
           "runs": runs}
    by = {r["path"]: r for r in runs}
    for kind in ("eager", "compiled"):
        b, k = by.get(f"bf16_{kind}"), by.get(f"kerneld_{kind}")
        if b and k and b.get("tokens_per_s") and k.get("tokens_per_s"):
            doc[f"speedup_{kind}"] = round(k["tokens_per_s"] / b["tokens_per_s"], 4)
        if b and k:
            doc[f"loss_gap_{kind}"] = loss_gap(k["loss"], b["loss"])
    return doc


def loss_gap(loss, reference, window=20):
    """How far a loss curve is from a reference one: the largest relative difference of their
    means over consecutive windows of `window` steps (the per-step loss of a small batch is
    noisy), and of their last windows."""
    def means(v):
        return [sum(v[i:i + window]) / window for i in range(0, len(v) - window + 1, window)]
    a, b = means(loss), means(reference)
    if not a:
        return None
    gaps = [abs(x - y) / max(abs(y), 1e-6) for x, y in zip(a, b)]
    return {"window": window, "max": round(max(gaps), 5), "last": round(gaps[-1], 5)}


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
