#!/usr/bin/env python3
"""Golden vectors for kerneld's quantization recipes, computed with PyTorch.

Runs on the GPU machine (PyTorch 2.11, CUDA) and writes everything into ONE tar file,
<out>/golden.tar, which unpacks into tests/data/golden/: manifest.json plus small raw binary
files (little-endian, row-major). tests/kernels/golden_test.cc checks every case bit-exactly
against the CPU backend, without Python.

Each recipe is a plain torch implementation of the definition in the QuantizeOp comment of
proto/kerneld/v1/kerneld.proto (torchao-style: amax reductions, fp32 division for the scale,
clamp to +-FP8_MAX, torch's float8 casts; MX scales by the bit manipulations of torchao's to_mx).
Two things are made canonical before writing, as the contract says: NaN codes (torch keeps the
sign of a NaN in e4m3fn/e5m2 casts; kerneld writes the positive NaN code) and NaN scales
(written as 0x7fc00000).

The script also records facts worth knowing next to the vectors: whether torch's CPU and CUDA
computations agree, what torch's eager cast does with a value beyond FP8_MAX, and how often
torchao's `FP8_MAX / amax` (a Python scalar over a tensor, which torch computes as
reciprocal(amax) * FP8_MAX) differs from the correctly rounded division kerneld specifies.

Usage: python3 make_golden.py --out DIR [--device cuda|cpu]
"""
import argparse
import datetime
import io
import json
import os
import platform
import sys
import tarfile
import time

import torch

FP8 = {
    "e4m3fn": torch.float8_e4m3fn,
    "e4m3fnuz": torch.float8_e4m3fnuz,
    "e5m2": torch.float8_e5m2,
}
NAN_CODE = {"e4m3fn": 0x7F, "e4m3fnuz": 0x80, "e5m2": 0x7F}
MX_EMAX = {"e4m3fn": 8, "e5m2": 15}
IN_DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
CANONICAL_NAN_BITS = 0x7FC00000
MANTISSA_CLEAR_MASK = -8388608  # 0xff800000 as an int32


def fp8_max(fmt):
    return float(torch.finfo(FP8[fmt]).max)


def bits_of(t):
    return t.contiguous().view(torch.int32)


def float_of(bits):
    return bits.contiguous().view(torch.float32)


def canonical_nan(t):
    nan = float_of(torch.full(t.shape, CANONICAL_NAN_BITS, dtype=torch.int32, device=t.device))
    return torch.where(torch.isnan(t), nan, t)


def encode(prod, fmt):
    """Saturating RNE cast: clamp to +-FP8_MAX (torch's eager cast does not saturate), then
    torch's float8 cast; NaN to the positive NaN code."""
    m = fp8_max(fmt)
    codes = prod.clamp(-m, m).to(FP8[fmt]).view(torch.uint8)
    return torch.where(torch.isnan(prod), torch.full_like(codes, NAN_CODE[fmt]), codes)


def quant_scale(amax, fmt, eps, pow2):
    """FP8_MAX / max(amax, eps) as one fp32 tensor/tensor division; pow2 clears the mantissa."""
    num = torch.full_like(amax, fp8_max(fmt))
    den = torch.maximum(amax, torch.full_like(amax, eps))
    scale = num / den
    if pow2:
        rounded = float_of(bits_of(scale) & MANTISSA_CLEAR_MASK)
        scale = torch.where(torch.isfinite(scale) & (scale > 0), rounded, scale)
    return scale


def stored_scale(scale):
    return canonical_nan(torch.ones_like(scale) / scale)


def blockwise(y, fmt, eps, pow2, bh, bw):
    """Blocks of bh rows x bw columns of Y (R, C); the last row block may be partial (padded
    with zeros, which leave amax unchanged). Returns codes (R, C) and stored scales
    (ceil(R/bh), C/bw)."""
    r, c = y.shape
    rb = (r + bh - 1) // bh
    padded = torch.zeros(rb * bh, c, dtype=torch.float32, device=y.device)
    padded[:r] = y
    amax = padded.abs().reshape(rb, bh, c // bw, bw).amax(dim=(1, 3))
    scale = quant_scale(amax, fmt, eps, pow2)
    full = scale.repeat_interleave(bh, dim=0)[:r].repeat_interleave(bw, dim=1)
    return encode(y * full, fmt), stored_scale(scale)


def mx_scale_codes(amax, fmt, rceil):
    if not rceil:
        e = (bits_of(amax) >> 23) & 0xFF
        s = torch.clamp(e - MX_EMAX[fmt], min=0)
    else:
        # torchao's descale: a multiply by the Python float 1/FP8_MAX (fp32 in the kernel).
        d = amax * (1.0 / fp8_max(fmt))
        db = bits_of(d)
        e = (db >> 23) & 0xFF
        man = db & 0x7FFFFF
        up = torch.where(e == 0, man > 0x400000, man != 0).to(torch.int32)
        s = e + up
    return torch.where(torch.isfinite(amax), s, torch.full_like(s, 255))


def mx(y, fmt, rceil):
    r, c = y.shape
    amax = y.abs().reshape(r, c // 32, 32).amax(dim=2)
    s = mx_scale_codes(amax, fmt, rceil)
    e = 254 - s  # biased exponent of 2^(127 - s)
    mult_bits = torch.where(e == 0, torch.full_like(e, 0x00400000), e.clamp(min=0) * (1 << 23))
    mult = float_of(mult_bits.to(torch.int32))
    mult = torch.where(s == 255, torch.full_like(mult, float("nan")), mult)
    codes = encode(y * mult.repeat_interleave(32, dim=1), fmt)
    return codes, s.to(torch.uint8)


def jagged_colwise(x, fmt, eps, pow2, ends):
    """Y = Xᵀ (K, M); one scale per (group, column of X) over the group's rows."""
    y = x.t().contiguous()
    k, m = y.shape
    codes = torch.empty(k, m, dtype=torch.uint8, device=x.device)
    scales = []
    begin = 0
    for end in ends:
        seg = y[:, begin:end]
        amax = seg.abs().amax(dim=1) if end > begin else torch.zeros(k, device=x.device)
        scale = quant_scale(amax, fmt, eps, pow2)
        if end > begin:
            codes[:, begin:end] = encode(seg * scale[:, None], fmt)
        scales.append(stored_scale(scale))
        begin = end
    return codes, torch.stack(scales)


def run_case(case, x):
    """x: the (M, K) input as fp32 on the device. Returns {name: tensor} of outputs."""
    g, fmt, eps, pow2 = case["granularity"], case["out_dtype"], case["eps"], case["pow2"]
    y = x.t().contiguous() if case["transpose"] else x
    r, c = y.shape
    if g in ("1x128", "jagged_rowwise"):
        codes, scales = blockwise(y, fmt, eps, pow2, 1, 128)
    elif g == "128x1":
        codes, scales = blockwise(y, fmt, eps, pow2, 128, 1)
    elif g == "128x128":
        codes, scales = blockwise(y, fmt, eps, pow2, 128, 128)
    elif g == "per_row":
        codes, scales = blockwise(y, fmt, eps, pow2, 1, c)
    elif g == "per_tensor":
        codes, scales = blockwise(y, fmt, eps, pow2, r, c)
        scales = scales.reshape(1)
    elif g == "mx1x32":
        codes, scales = mx(y, fmt, case["mx_rounding"] == "rceil")
    elif g == "jagged_colwise":
        codes, scales = jagged_colwise(x, fmt, eps, pow2, case["group_ends"])
    else:
        raise ValueError(g)
    kbm = case["scale_layout"] == "k_block_major"
    out = {"output": codes, "scales": scales.t().contiguous() if kbm else scales}
    if case.get("dual"):
        codes_t, scales_t = blockwise(x.t().contiguous(), fmt, eps, pow2, 1, 128)
        out["output_t"] = codes_t
        out["scales_t"] = scales_t.t().contiguous() if kbm else scales_t
    return out


# ----------------------------------------------------------------------------------------------
# Inputs


def product_overshoot_value(dtype, fmt):
    """A value a of the input dtype in [1, 2) with fp32 a * (FP8_MAX / a) > FP8_MAX, if any:
    the block whose amax it is has a product that must saturate rather than round up."""
    m = torch.tensor(fp8_max(fmt), dtype=torch.float32)
    cand = torch.arange(1.0, 2.0, 2.0 ** -7 if dtype != "f32" else 2.0 ** -16)
    cand = cand.to(IN_DTYPES[dtype]).float().unique()
    over = cand[(cand * (m / cand)) > m]
    return float(over[0]) if over.numel() else None


def subnormal_values(dtype, n):
    if dtype == "bf16":
        return torch.arange(1, n + 1, dtype=torch.int16).view(torch.bfloat16)
    if dtype == "f16":
        return torch.arange(1, n + 1, dtype=torch.int16).view(torch.float16)
    return (torch.arange(1, n + 1, dtype=torch.int32) * 12345).view(torch.float32)


def make_input(dtype, m, k, seed, edges, zero_tile=False):
    """Random values whose magnitude varies by 32-row band (2^-20 .. 2^16; f16: 2^-14 .. 2^12)
    and by 32-column block (a further 2^0 .. 2^-6), then the edge cases."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=gen, dtype=torch.float32)
    bands = [-20, -8, -3, 0, 3, 8, 12, 16] if dtype != "f16" else [-14, -8, -3, 0, 3, 6, 9, 12]
    row_exp = torch.tensor([bands[(i // 32) % len(bands)] for i in range(m)], dtype=torch.float32)
    col_exp = -torch.randint(0, 7, ((k + 31) // 32,), generator=gen).float()
    col_exp = col_exp.repeat_interleave(32)[:k]
    x = x * torch.exp2(row_exp[:, None] + col_exp[None, :])
    t = x.to(IN_DTYPES[dtype])
    if not edges:
        return t
    if zero_tile:
        t[:128, :128] = 0
    t[0:8, 0:128] = 0
    t[1:8:2, 0:128] = -0.0
    t[m - 1, k - 1] = float("nan")
    t[m // 2, 5] = float("inf")
    t[m // 2 + 1, k // 2 + 3] = float("-inf")
    # Values at FP8_MAX of each format, alone at the top of their block, and twice that.
    for row, fmt in ((9, "e4m3fn"), (10, "e4m3fnuz"), (11, "e5m2")):
        t[row, :] = 0.5
        t[row, 0] = fp8_max(fmt)
        t[row, 1] = -fp8_max(fmt)
        if dtype != "f16" or 2 * fp8_max(fmt) < 65504:
            t[row, 130] = 2 * fp8_max(fmt)
    # An amax whose product overshoots FP8_MAX by rounding.
    for row, fmt in ((12, "e4m3fn"), (13, "e4m3fnuz"), (14, "e5m2")):
        a = product_overshoot_value(dtype, fmt)
        if a is not None:
            t[row, :] = 0.25
            t[row, 0] = a
            t[row, 200 % k] = -a
    # Subnormals of the input dtype: a row segment of them, and one among normals.
    t[16, :64] = subnormal_values(dtype, 64)
    t[17, 7] = subnormal_values(dtype, 1)[0]
    return t


def tobytes(t):
    flat = t.detach().cpu().contiguous().reshape(-1)
    if flat.dtype != torch.uint8:
        flat = flat.view(torch.uint8)
    try:
        import numpy  # noqa: F401

        return flat.numpy().tobytes()
    except ImportError:
        return bytes(flat.tolist())


DTYPE_NAME = {torch.uint8: "u8", torch.float32: "f32", torch.bfloat16: "bf16",
              torch.float16: "f16", torch.int32: "i32", torch.int64: "i64"}


def build_cases():
    inputs = {
        # name: (dtype, M, K, seed, edges, zero_tile)
        "a_bf16": ("bf16", 256, 256, 1, True, False),
        "a_f16": ("f16", 256, 256, 2, True, False),
        "a_f32": ("f32", 256, 256, 3, True, False),
        "b_bf16": ("bf16", 200, 256, 4, True, True),
        "c_f32": ("f32", 96, 160, 5, True, False),
        "d_bf16": ("bf16", 72, 96, 6, False, False),
        "d_f16": ("f16", 72, 96, 7, False, False),
    }
    base = dict(transpose=False, pow2=False, scale_layout="row_major", mx_rounding="floor",
                eps=1e-12, group_ends=None, dual=False)

    def case(name, inp, granularity, out_dtype, **kw):
        c = dict(base)
        c.update(name=name, input=inp, granularity=granularity, out_dtype=out_dtype)
        c.update(kw)
        return c

    cases = [
        case("1x128_bf16_e4m3fn", "a_bf16", "1x128", "e4m3fn"),
        case("1x128_f16_e4m3fnuz_pow2_kbm", "a_f16", "1x128", "e4m3fnuz", pow2=True,
             scale_layout="k_block_major"),
        case("1x128_f32_e5m2", "a_f32", "1x128", "e5m2"),
        case("1x128_bf16_e4m3fn_eps1e-4", "a_bf16", "1x128", "e4m3fn", eps=1e-4),
        case("1x128_t_bf16_e4m3fn", "a_bf16", "1x128", "e4m3fn", transpose=True),
        case("1x128_t_f32_e4m3fnuz_kbm", "a_f32", "1x128", "e4m3fnuz", transpose=True,
             scale_layout="k_block_major"),
        case("128x1_b_bf16_e4m3fn", "b_bf16", "128x1", "e4m3fn"),
        case("128x1_t_f16_e5m2_pow2", "a_f16", "128x1", "e5m2", transpose=True, pow2=True),
        case("128x128_b_bf16_e4m3fn", "b_bf16", "128x128", "e4m3fn"),
        case("128x128_t_f32_e4m3fnuz", "a_f32", "128x128", "e4m3fnuz", transpose=True),
        case("128x128_f16_e4m3fn_pow2", "a_f16", "128x128", "e4m3fn", pow2=True),
        case("per_row_bf16_e5m2", "a_bf16", "per_row", "e5m2"),
        case("per_row_t_f16_e4m3fn_pow2", "a_f16", "per_row", "e4m3fn", transpose=True,
             pow2=True),
        case("per_tensor_d_bf16_e4m3fn", "d_bf16", "per_tensor", "e4m3fn"),
        case("per_tensor_t_d_f16_e5m2_pow2", "d_f16", "per_tensor", "e5m2", transpose=True,
             pow2=True),
        case("per_tensor_b_bf16_e4m3fnuz_nan", "b_bf16", "per_tensor", "e4m3fnuz"),
        case("mx_bf16_e4m3fn_floor", "a_bf16", "mx1x32", "e4m3fn"),
        case("mx_bf16_e4m3fn_rceil", "a_bf16", "mx1x32", "e4m3fn", mx_rounding="rceil"),
        case("mx_f32_e5m2_rceil", "a_f32", "mx1x32", "e5m2", mx_rounding="rceil"),
        case("mx_f16_e5m2_floor", "a_f16", "mx1x32", "e5m2"),
        case("mx_t_c_f32_e4m3fn_floor", "c_f32", "mx1x32", "e4m3fn", transpose=True),
        case("mx_c_f32_e4m3fn_rceil", "c_f32", "mx1x32", "e4m3fn", mx_rounding="rceil"),
        case("jagged_rowwise_b_bf16_kbm", "b_bf16", "jagged_rowwise", "e4m3fn",
             scale_layout="k_block_major", group_ends=[50, 50, 200]),
        case("jagged_colwise_b_bf16", "b_bf16", "jagged_colwise", "e4m3fn", transpose=True,
             group_ends=[0, 37, 37, 150, 200]),
        case("jagged_colwise_f32_e5m2_pow2", "a_f32", "jagged_colwise", "e5m2", transpose=True,
             pow2=True, group_ends=[128, 129, 256]),
        case("dual_bf16_e4m3fn", "a_bf16", "1x128", "e4m3fn", dual=True),
        case("dual_f16_e4m3fnuz_pow2_kbm", "a_f16", "1x128", "e4m3fnuz", dual=True, pow2=True,
             scale_layout="k_block_major"),
    ]
    return inputs, cases


def fp8_cast_table(device):
    """torch's cast of a spread of fp32 values (every exponent, both signs, Inf/NaN) to each
    format, after the clamp every recipe applies, and of every code back to fp32."""
    i = torch.arange(32768, dtype=torch.int64)
    bits = ((i << 17) | ((i * 2654435761) & 0x1FFFF)) & 0xFFFFFFFF
    bits = torch.where(bits >= 2 ** 31, bits - 2 ** 32, bits).to(torch.int32)
    values = float_of(bits).to(device)
    out = {"cast_inputs.f32": values}
    for fmt in FP8:
        out[f"cast_{fmt}.u8"] = encode(values, fmt)
        codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).to(device)
        out[f"decode_{fmt}.f32"] = canonical_nan(codes.view(FP8[fmt]).float())
    return out


def facts(device):
    f = {}
    for fmt in FP8:
        v = torch.tensor([500.0, 1e6, float("inf"), -0.0], device=device)
        f[f"eager_cast_{fmt}_of_500_1e6_inf_neg0"] = v.to(FP8[fmt]).view(torch.uint8).tolist()
    # How often does torchao's scalar-over-tensor scale differ from the fp32 division?
    gen = torch.Generator().manual_seed(11)
    amax = (torch.rand(1 << 20, generator=gen) * 4 + 0.5).to(device)
    for fmt in FP8:
        m = fp8_max(fmt)
        exact = torch.full_like(amax, m) / amax
        scalar = m / amax
        f[f"scalar_over_tensor_scale_differs_{fmt}_of_2^20"] = int((exact != scalar).sum())
    return f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    t0 = time.time()
    device = torch.device(args.device)
    inputs, cases = build_cases()
    files = {}
    manifest = {
        "generator": "tests/data/make_golden.py",
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0) if device.type == "cuda" else platform.processor(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "note": "NaN codes and NaN scales are canonicalised (positive NaN code, 0x7fc00000)",
        "inputs": {},
        "cases": [],
    }
    host_inputs = {}
    for name, (dtype, m, k, seed, edges, zero_tile) in inputs.items():
        t = make_input(dtype, m, k, seed, edges, zero_tile)
        host_inputs[name] = t
        path = f"inputs/{name}.{dtype}"
        files[path] = tobytes(t)
        manifest["inputs"][name] = {"file": path, "dtype": dtype, "shape": [m, k]}

    for case in cases:
        x_host = host_inputs[case["input"]]
        results = {}
        agree = {}
        for dev in ([device, torch.device("cpu")] if device.type != "cpu" else [device]):
            x = x_host.to(dev).float()
            results[dev.type] = {n: v.cpu() for n, v in run_case(case, x).items()}
        main_out = results[device.type]
        if "cpu" in results and device.type != "cpu":
            for n in main_out:
                agree[n] = bool(torch.equal(tobytes_t(main_out[n]), tobytes_t(results["cpu"][n])))
        entry = {k: v for k, v in case.items() if v is not None}
        entry["m"], entry["k"] = list(x_host.shape)
        entry["outputs"] = {}
        for n, v in main_out.items():
            path = f"{case['name']}/{n}.{DTYPE_NAME[v.dtype]}"
            files[path] = tobytes(v)
            entry["outputs"][n] = {"file": path, "dtype": DTYPE_NAME[v.dtype],
                                   "shape": list(v.shape)}
        if agree:
            entry["torch_cpu_agrees"] = agree
        manifest["cases"].append(entry)
        print(f"{case['name']}: done {sorted(agree.items())}", flush=True)

    table = fp8_cast_table(device)
    manifest["cast_table"] = {}
    for n, v in table.items():
        files[f"cast/{n}"] = tobytes(v)
        manifest["cast_table"][n] = {"file": f"cast/{n}", "count": v.numel()}
    manifest["facts"] = facts(device)
    manifest["seconds"] = round(time.time() - t0, 2)

    files["manifest.json"] = json.dumps(manifest, indent=1).encode()
    total = sum(len(b) for b in files.values())
    print(f"{len(files)} files, {total} bytes", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with tarfile.open(os.path.join(args.out, "golden.tar"), "w") as tar:
        for path, data in sorted(files.items()):
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    with open(os.path.join(args.out, "manifest.json"), "wb") as f:
        f.write(files["manifest.json"])
    print(json.dumps(manifest["facts"], indent=1), flush=True)


def tobytes_t(t):
    return t.contiguous().view(torch.uint8) if t.dtype != torch.uint8 else t.contiguous()


if __name__ == "__main__":
    sys.exit(main())
