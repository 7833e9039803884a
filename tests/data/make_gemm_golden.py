#!/usr/bin/env python3
"""Golden vectors for kerneld's blockwise FP8 GEMM with e4m3fnuz operands (AMD MI300's format).

Writes tests/data/golden/gemm_fnuz/: manifest.json plus raw little-endian row-major files.
tests/kernels/golden_test.cc runs every case through kd::Validate and the CPU backend and checks
each output element against the float64 reference here within the fp32 budget the GEMM tests
state (tests/kernels/gemm/gemm_test_util.h), from the mass also written here.

The reference is computed in float64 from the decoded codes (Python floats; only the standard
library), not with PyTorch: Debian's PyTorch (1.13) has no float8 types. The e4m3fnuz decoding is
written from the format's definition (bias 8, no infinities, 0x80 the only NaN, 0x7f = 240) and
checked, code by code, against PyTorch 2.11's float8_e4m3fnuz decoding recorded in
tests/data/golden/cast/decode_e4m3fnuz.f32 (make_golden.py, on the GPU machine):
  value = (-1)^s * 2^(e-8) * (1 + m/8)   for e > 0
        = (-1)^s * 2^-7 * (m/8)          for e = 0 (0x80 excepted)
Per output element and 128-wide block of the reduction, the block's exact dot product times
a_scale * b_scale (both fp32, their product exact in float64) is summed over blocks: the GEMM's
contract in proto/kerneld/v1/kerneld.proto (GemmOp), which the CPU backend computes in fp32.

The cases cover every variant (NT, NN, TN, M-grouped NT with an empty group, K-grouped TN with an
empty group), bf16 and f32 output, accumulation, a ragged N inside a 128x128 scale block, the
codes where e4m3fnuz differs from e4m3fn (0x7f and 0xff are +-240, not NaN; 0x80 is NaN, not
-0), subnormals, and a NaN code whose row must come out NaN.

Usage: python3 make_gemm_golden.py [--out tests/data/golden/gemm_fnuz]
"""
import argparse
import json
import math
import os
import random
import struct

NAN_CODE = 0x80


def decode_fnuz(code):
    if code == NAN_CODE:
        return math.nan
    sign = -1.0 if code & 0x80 else 1.0
    exp = (code >> 3) & 0xF
    man = code & 0x7
    if exp == 0:
        return sign * math.ldexp(man / 8.0, -7)
    return sign * math.ldexp(1.0 + man / 8.0, exp - 8)


DECODE = [decode_fnuz(c) for c in range(256)]


def check_decode_against_torch(golden_dir):
    """The decoding above against PyTorch 2.11's float8_e4m3fnuz (tests/data/golden/cast, made by
    make_golden.py on the GPU machine): every code, bit for bit (NaN for NaN)."""
    with open(os.path.join(golden_dir, "cast", "decode_e4m3fnuz.f32"), "rb") as f:
        torch_values = struct.unpack("<256f", f.read())
    for code, (mine, theirs) in enumerate(zip(DECODE, torch_values)):
        same = (math.isnan(mine) and math.isnan(theirs)) or mine == theirs
        if not same:
            raise SystemExit("e4m3fnuz code 0x%02x: decoded %r, torch %r" % (code, mine, theirs))


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def random_codes(rng, count, pool=None):
    """Codes of N(0, 1) * 16 rounded to the nearest e4m3fnuz value (NaN code excluded)."""
    if pool is not None:
        return [rng.choice(pool) for _ in range(count)]
    finite = [c for c in range(256) if c != NAN_CODE]
    by_value = sorted(finite, key=lambda c: DECODE[c])
    values = [DECODE[c] for c in by_value]
    out = []
    for _ in range(count):
        x = max(-240.0, min(240.0, rng.gauss(0.0, 1.0) * 16.0))
        lo, hi = 0, len(values) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if values[mid] < x:
                lo = mid + 1
            else:
                hi = mid
        best = min((i for i in (lo - 1, lo) if 0 <= i < len(values)),
                   key=lambda i: abs(values[i] - x))
        out.append(by_value[best])
    return out


def random_scales(rng, count, magnitude):
    return [f32(math.ldexp(rng.uniform(0.5, 2.0), magnitude)) for _ in range(count)]


def block_dot(arow, brow, kb):
    """Exact-as-float64 dot product and mass of one 128-wide block (a NaN propagates)."""
    s = 0.0
    mass = 0.0
    for r in range(kb * 128, kb * 128 + 128):
        p = DECODE[arow[r]] * DECODE[brow[r]]
        s += p
        mass += abs(p)
    return s, mass


def nt_core(a_rows, b_rows, kb_range, a_scale, b_scale):
    """value[i][j], mass[i][j] over rows of A and rows of B (both along the reduction)."""
    value = [[0.0] * len(b_rows) for _ in a_rows]
    mass = [[0.0] * len(b_rows) for _ in a_rows]
    for i, arow in enumerate(a_rows):
        for j, brow in enumerate(b_rows):
            v = 0.0
            m = 0.0
            for kb in kb_range:
                s, ms = block_dot(arow, brow, kb)
                scale = a_scale(i, kb) * b_scale(j, kb)
                v += s * scale
                m += ms * abs(scale)
            value[i][j] = v
            mass[i][j] = m
    return value, mass


def rows_of(codes, rows, cols):
    return [codes[r * cols:(r + 1) * cols] for r in range(rows)]


def make_case(rng, name, variant, m, n, k, out, accumulate=False, ends=None, pool=None,
              nan_at=None):
    kb_count = k // 128
    case = {"name": name, "variant": variant, "out": out, "accumulate": accumulate}
    files = {}
    if variant == "m_grouped_nt":
        groups = len(ends)
        a = random_codes(rng, m * k, pool)
        b = random_codes(rng, groups * n * k, pool)
        a_scales = random_scales(rng, m * kb_count, -4)
        nb = (n + 127) // 128
        b_scales = random_scales(rng, groups * nb * kb_count, 0)
        value = []
        mass = []
        begin = 0
        for g, end in enumerate(ends):
            a_rows = rows_of(a[begin * k:end * k], end - begin, k)
            b_rows = rows_of(b[g * n * k:(g + 1) * n * k], n, k)
            v, ms = nt_core(a_rows, b_rows, range(kb_count),
                            lambda i, kb, b0=begin: a_scales[(b0 + i) * kb_count + kb],
                            lambda j, kb, g0=g: b_scales[(g0 * nb + j // 128) * kb_count + kb])
            value += v
            mass += ms
            begin = end
        shapes = {"a": [m, k], "a_scales": [m, kb_count], "b": [groups, n, k],
                  "b_scales": [groups, nb, kb_count], "d": [m, n]}
    elif variant == "k_grouped_tn":
        groups = len(ends)
        a = random_codes(rng, m * k, pool)
        b = random_codes(rng, n * k, pool)
        a_scales = random_scales(rng, m * kb_count, -4)
        b_scales = random_scales(rng, n * kb_count, 0)
        a_rows, b_rows = rows_of(a, m, k), rows_of(b, n, k)
        value = []
        mass = []
        begin = 0
        for end in ends:
            v, ms = nt_core(a_rows, b_rows, range(begin // 128, end // 128),
                            lambda i, kb: a_scales[i * kb_count + kb],
                            lambda j, kb: b_scales[j * kb_count + kb])
            value += v
            mass += ms
            begin = end
        shapes = {"a": [m, k], "a_scales": [m, kb_count], "b": [n, k],
                  "b_scales": [n, kb_count], "d": [groups, m, n]}
    else:
        nb = (n + 127) // 128
        a = random_codes(rng, m * k, pool)
        if nan_at is not None:
            a[nan_at[0] * k + nan_at[1]] = NAN_CODE
        a_scales = random_scales(rng, m * kb_count, -4)
        if variant == "nn":
            b = random_codes(rng, k * n, pool)  # (k, n), contiguous along n
            b_scales = random_scales(rng, kb_count * nb, 0)
            b_rows = [[b[r * n + j] for r in range(k)] for j in range(n)]
            b_scale = lambda j, kb: b_scales[kb * nb + j // 128]
            shapes = {"b": [k, n], "b_scales": [kb_count, nb]}
        else:
            b = random_codes(rng, n * k, pool)
            b_rows = rows_of(b, n, k)
            if variant == "nt":
                b_scales = random_scales(rng, nb * kb_count, 0)
                b_scale = lambda j, kb: b_scales[(j // 128) * kb_count + kb]
                shapes = {"b": [n, k], "b_scales": [nb, kb_count]}
            else:
                b_scales = random_scales(rng, n * kb_count, 0)
                b_scale = lambda j, kb: b_scales[j * kb_count + kb]
                shapes = {"b": [n, k], "b_scales": [n, kb_count]}
        value, mass = nt_core(rows_of(a, m, k), b_rows, range(kb_count),
                              lambda i, kb: a_scales[i * kb_count + kb], b_scale)
        shapes.update({"a": [m, k], "a_scales": [m, kb_count], "d": [m, n]})
    flat_value = [x for row in value for x in row]
    flat_mass = [x for row in mass for x in row]
    files["a"] = ("u8", bytes(a))
    files["b"] = ("u8", bytes(b))
    files["a_scales"] = ("f32", struct.pack("<%df" % len(a_scales), *a_scales))
    files["b_scales"] = ("f32", struct.pack("<%df" % len(b_scales), *b_scales))
    if ends is not None:
        files["group_ends"] = ("i64", struct.pack("<%dq" % len(ends), *ends))
        shapes["group_ends"] = [len(ends)]
    if accumulate:
        prior = [f32(rng.gauss(0.0, 1.0)) for _ in flat_value]
        files["d_prior"] = ("f32", struct.pack("<%df" % len(prior), *prior))
        shapes["d_prior"] = shapes["d"]
    files["expected"] = ("f64", struct.pack("<%dd" % len(flat_value), *flat_value))
    files["mass"] = ("f64", struct.pack("<%dd" % len(flat_mass), *flat_mass))
    shapes["expected"] = shapes["d"]
    shapes["mass"] = shapes["d"]
    case["tensors"] = {}
    for key, (dtype, data) in files.items():
        case["tensors"][key] = {"file": "%s_%s.bin" % (name, key), "dtype": dtype,
                                "shape": shapes[key]}
    return case, files


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "golden",
                                                      "gemm_fnuz"))
    args = parser.parse_args()
    check_decode_against_torch(os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden"))
    rng = random.Random(20261127)
    # +-240 (0x7f, 0xff: NaN codes in e4m3fn), the smallest subnormals, the smallest normal, zero.
    extremes = [0x7F, 0xFF, 0x01, 0x81, 0x07, 0x08, 0x88, 0x00, 0x40, 0xC0]
    specs = [
        dict(name="nt_bf16", variant="nt", m=48, n=136, k=256, out="bf16"),
        dict(name="nn_f32_accumulate", variant="nn", m=33, n=72, k=384, out="f32",
             accumulate=True),
        dict(name="tn_f32", variant="tn", m=40, n=24, k=256, out="f32"),
        dict(name="m_grouped_bf16", variant="m_grouped_nt", m=70, n=40, k=128, out="bf16",
             ends=[20, 20, 70]),
        dict(name="k_grouped_f32", variant="k_grouped_tn", m=24, n=16, k=384, out="f32",
             ends=[128, 128, 384]),
        dict(name="nt_extremes_f32", variant="nt", m=8, n=8, k=128, out="f32", pool=extremes),
        dict(name="nt_nan_code_f32", variant="nt", m=4, n=8, k=128, out="f32", nan_at=(1, 5)),
    ]
    os.makedirs(args.out, exist_ok=True)
    cases = []
    for spec in specs:
        case, files = make_case(rng, **spec)
        for key, (_, data) in files.items():
            with open(os.path.join(args.out, case["tensors"][key]["file"]), "wb") as f:
                f.write(data)
        cases.append(case)
    manifest = {
        "generator": "tests/data/make_gemm_golden.py",
        "operand_dtype": "e4m3fnuz",
        "reference": "float64 from decoded codes (Python standard library)",
        "seed": 20261127,
        "cases": cases,
    }
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
