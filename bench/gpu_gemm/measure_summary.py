#!/usr/bin/env python3
"""The tables of bench/gpu_gemm/measure_tn_dgrad.sh and the defaults they call for.

    measure_summary.py OUT_DIR

Reads OUT_DIR/tests.log, gemm.json, linear.log (the rows linear_bench.py prints as it goes, so a
pass cut short by its timeout still counts) and prints: the test verdicts; TN GEMM TFLOP/s of
kerneld's kernel (default and retiled), of kerneld's cuBLASLt family (lt0..lt3) and of cuBLASLt's
own orientation (the peer); NN against NT on a ready Wᵀ; the Linear's forward+backward per form
against bf16 and the in-process FP8 path, with the daemon's share; then the value each switch
should take:
  kTnDefaultsToCublasLt (kernels/cuda/gemm/gemm_fp8_heuristic.h): true when kerneld's cuBLASLt
    family (lt0) beats the kernel's default on at least three of the four TN shapes in the GEMM
    loop and the Linear passes agree (the cuBLASLt pass faster on most shapes);
  DEFAULT_DGRAD (client/python/kerneld/torch/linear.py): "nt" when the Linear with dgrad="nt"
    is faster than with "nn" on at least three of the four shapes (same TN, same scale layout).
Only the standard library; runs on any python3."""
import json
import os
import re
import sys


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def tests(out):
    lines = []
    try:
        text = open(os.path.join(out, "tests.log")).read()
    except OSError:
        return ["tests.log missing"]
    for m in re.finditer(r"^=== (.+) rc=(\d+)$", text, re.M):
        lines.append(f"  {m.group(1)}: rc={m.group(2)}")
    failed = re.findall(r"^\[  FAILED  \] (\S+)", text, re.M)
    skipped = re.findall(r"^\[  SKIPPED \] (\S+\.\S+)", text, re.M)
    if failed:
        lines.append("  FAILED: " + ", ".join(sorted(set(failed))[:20]))
    if skipped:
        lines.append(f"  skipped: {len(set(skipped))} (e.g. {sorted(set(skipped))[0]})")
    for m in re.finditer(r"^cublaslt: (.*)$", text, re.M):
        lines.append("  note: " + m.group(1))
    return lines


def gemm(out):
    d = load_json(os.path.join(out, "gemm.json"))
    if not d:
        return ["gemm.json missing or cut short"], {}
    rows, lt_wins = [], {}
    head = f"  {'case':30} {'default':>22} {'TFLOP/s':>8} {'best kernel cand.':>26} " \
           f"{'lt0':>6} {'lt best':>12} {'peer':>6}  winner"
    rows.append(head)
    for r in d.get("results", []):
        if "error" in r:
            rows.append(f"  {r['name']:30} error {r['error']}")
            continue
        cands = {c["config"]: c for c in r.get("candidates", []) if "tflops" in c}
        kernel = [(c["tflops"], n) for n, c in cands.items()
                  if not n.startswith("lt") and n != "nt_on_wt"]
        lts = [(c["tflops"], n) for n, c in cands.items() if n.startswith("lt")]
        best_k = max(kernel) if kernel else None
        best_lt = max(lts) if lts else None
        lt0 = cands.get("lt0", {}).get("tflops")
        peer = r.get("cublaslt_tflops")
        entries = [(r["ours_tflops"], "default")]
        if best_k:
            entries.append(best_k)
        if best_lt:
            entries.append(best_lt)
        if "nt_on_wt" in cands:
            entries.append((cands["nt_on_wt"]["tflops"], "nt_on_wt"))
        winner = max(entries)[1]
        if r["variant"] == "tn" and "wgrad" not in r["name"] and lt0:
            lt_wins[r["name"]] = lt0 > r["ours_tflops"]
        fmt = lambda v: f"{v:6.0f}" if isinstance(v, (int, float)) else f"{'-':>6}"
        rows.append(
            f"  {r['name']:30} {r['config']:>22} {r['ours_tflops']:8.0f} "
            f"{(best_k[1] + ' ' + format(best_k[0], '.0f')) if best_k else '-':>26} {fmt(lt0)} "
            f"{(best_lt[1] + ' ' + format(best_lt[0], '.0f')) if best_lt else '-':>12} "
            f"{fmt(peer)}  {winner}")
        if "nt_on_wt" in cands:
            c = cands["nt_on_wt"]
            rows.append(f"  {'':30} NN {r['ours_ms']:.3f} ms, NT on Wᵀ {c['ms']:.3f} ms "
                        f"({r['ours_ms'] / c['ms']:.3f}x)")
        errors = [f"{c['config']}: {c['error']}" for c in r.get("candidates", []) if "error" in c]
        for e in errors:
            rows.append(f"  {'':30} candidate {e}")
    return rows, lt_wins


def linear_rows(out):
    """{tag: [row, ...]} from linear.log (rows are JSON objects printed per shape)."""
    passes, tag = {}, None
    try:
        lines = open(os.path.join(out, "linear.log")).read().splitlines()
    except OSError:
        return passes
    for line in lines:
        m = re.match(r"=== pass (\S+) \(", line)
        if m:
            tag = m.group(1)
            passes.setdefault(tag, [])
            continue
        if line.startswith("{") and tag:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if "paths" in row and "tokens" in row:
                passes[tag].append(row)
    return passes


def linear(out):
    passes = linear_rows(out)
    if not passes:
        return ["linear.log has no rows"], {}, {}
    by_shape = {}
    for tag, rows in passes.items():
        for r in rows:
            key = (r["k"], r["n"], r["tokens"])
            entry = by_shape.setdefault(key, {"paths": {}, "shares": {}})
            for name, p in r["paths"].items():
                if name == "kerneld" or "ms" not in p:
                    continue
                label = name if name in ("bf16", "inprocess_fp8") else f"{tag}:{name[8:]}"
                entry["paths"][label] = p["ms"]
                share = r.get("breakdowns", {}).get(name, {}).get("daemon_share")
                if share is not None:
                    entry["shares"][label] = share
    lines = []
    dgrad_wins, lt_wins = {}, {}
    for (k, n, m), e in sorted(by_shape.items()):
        p = e["paths"]
        bf16, ip = p.get("bf16"), p.get("inprocess_fp8")
        lines.append(f"  {k}->{n} x{m}: bf16 {bf16 or '-'} ms, in-process FP8 {ip or '-'} ms")
        forms = sorted(x for x in p if ":" in x)
        for f in forms:
            ms = p[f]
            vs_bf16 = f"{bf16 / ms:.3f}x bf16" if bf16 else ""
            vs_ip = f"{ip / ms:.3f}x in-process" if ip else ""
            share = e["shares"].get(f)
            lines.append(f"    {f:28} {ms:8.3f} ms  {vs_bf16:>12}  {vs_ip:>17}  daemon share "
                         f"{share if share is not None else '-'}")
        best = min(forms, key=lambda f: p[f]) if forms else None
        if best:
            lines.append(f"    fastest: {best}" + (f" ({bf16 / p[best]:.3f}x bf16)" if bf16 else ""))
        for tag in ("tn_kernel", "tn_cublaslt"):
            for layout in ("rm", "kbm"):
                nn_, nt_ = p.get(f"{tag}:nn_{layout}"), p.get(f"{tag}:nt_{layout}")
                if nn_ and nt_:
                    dgrad_wins.setdefault((k, n, m), []).append(nt_ < nn_)
        for form in ("nn_rm", "nt_rm", "nn_kbm", "nt_kbm"):
            a, b = p.get(f"tn_kernel:{form}"), p.get(f"tn_cublaslt:{form}")
            if a and b:
                lt_wins.setdefault((k, n, m), []).append(b < a)
    return lines, dgrad_wins, lt_wins


def majority(votes):
    return sum(votes) > len(votes) / 2


def main():
    out = sys.argv[1]
    print("\nGPU tests")
    print("\n".join(tests(out)))
    print("\nGEMM (TFLOP/s; same process, rotated inputs, median of 7)")
    rows, gemm_lt = gemm(out)
    print("\n".join(rows))
    print("\nLinear forward+backward (ms; tn_kernel / tn_cublaslt = the daemon's TN; nn/nt = "
          "dgrad; rm/kbm = activation scale layout)")
    lines, dgrad_wins, linear_lt = linear(out)
    print("\n".join(lines))

    print("\nDefaults the numbers call for")
    gemm_votes = list(gemm_lt.values())
    linear_votes = [majority(v) for v in linear_lt.values()]
    lt_gemm = len(gemm_votes) >= 4 and sum(gemm_votes) >= 3
    lt_linear = bool(linear_votes) and majority(linear_votes)
    print(f"  kTnDefaultsToCublasLt = {'true' if lt_gemm and lt_linear else 'false'}   "
          f"(GEMM: lt0 beats the kernel's default on {sum(gemm_votes)}/{len(gemm_votes)} TN "
          f"shapes; Linear: the cuBLASLt pass faster on {sum(linear_votes)}/{len(linear_votes)})")
    dgrad_votes = [majority(v) for v in dgrad_wins.values()]
    nt = len(dgrad_votes) >= 4 and sum(dgrad_votes) >= 3
    print(f"  DEFAULT_DGRAD = \"{'nt' if nt else 'nn'}\"   (dgrad=\"nt\" faster on "
          f"{sum(dgrad_votes)}/{len(dgrad_votes)} shapes)")


if __name__ == "__main__":
    main()
