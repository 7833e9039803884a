"""kerneld.Client against a real daemon (CPU backend): every op and variant checked against a
numpy reference, batches and the submit ring, daemon-allocated buffers, and the mapping of the
daemon's statuses to exceptions."""
import os
import re

import numpy as np
import pytest

import kerneld
from kerneld import errors
from conftest import sqnr
from reference import dequantize, encode_e4m3fn, quantize

RNG = np.random.default_rng(1234)


def bf16_values(shape, scale=1.0):
    """Random float32 values already rounded to bf16, so a reference sees what the daemon
    reads; one row of zeros and a few outliers (adversarial blocks)."""
    x = RNG.standard_normal(shape).astype(np.float32) * scale
    x[1] = 0.0
    x[2, 5] = 3.0e4
    return kerneld.from_bf16(kerneld.to_bf16(x))


def test_library_is_found_and_versioned(monkeypatch, tmp_path):
    assert kerneld.api_version() >> 16 == 2
    assert os.path.exists(kerneld.library_path())
    monkeypatch.setenv("KERNELD_LIB", "/nonexistent/libkerneld_c.so")
    candidates = kerneld.library_candidates()
    assert candidates[0] == "/nonexistent/libkerneld_c.so"
    # Then the package's own directory, then the build tree, then the install prefixes.
    assert os.path.dirname(candidates[1]) == os.path.dirname(kerneld.__file__)
    assert any(c.endswith("build/client/c/libkerneld_c.so") for c in candidates)
    monkeypatch.setenv("KERNELD_LIB", str(tmp_path))
    assert kerneld.library_candidates()[0] == str(tmp_path / "libkerneld_c.so")


def test_ops_and_enums_are_the_librarys_table():
    # One class per op of include/kerneld/op_table.h, its fields in the table's order.
    assert list(kerneld.OPS) == ["quantize", "gemm", "pad", "unpad", "row_amax"]
    assert [f.name for f in kerneld.Gemm.spec.fields] == [
        "variant", "a", "a_scales", "b", "b_scales", "d", "accumulate", "group_ends"]
    assert kerneld.Quantize.spec.kind == 1 and kerneld.Unpad.spec.kind == 4
    # Enums carry the table's labels and sizes; names, labels and numbers all parse.
    g = kerneld.QuantGranularity
    assert g.G1X128.label == "1x128" and g.parse("1x128") is g.G1X128
    assert g.parse("JAGGED_COLWISE") is g.JAGGED_COLWISE and g.parse(3) is g.G128X128
    assert kerneld.DType.BF16.itemsize == 2 and kerneld.DType.parse("e4m3fnuz").itemsize == 1
    assert kerneld.FP8_MAX[kerneld.DType.E4M3FNUZ] == 240.0
    with pytest.raises(ValueError) as info:
        kerneld.GemmVariant.parse("tt")
    assert "nt" in str(info.value)
    with pytest.raises(TypeError):
        kerneld.Quantize(input=None)  # output and scales are required


def test_no_number_stands_for_an_op_or_an_enum_in_the_package():
    # Ops and enums are built by name from the library's table: a literal kind, variant,
    # granularity, layout or mode number in the package would bypass it.
    root = os.path.dirname(kerneld.__file__)
    pattern = re.compile(r"\.(kind|variant|granularity|scale_layout|scale_format|mode|"
                         r"mx_rounding)\s*=\s*\d")
    offenders = []
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path) as f:
                    for number, line in enumerate(f, 1):
                        if pattern.search(line):
                            offenders.append(f"{path}:{number}: {line.strip()}")
    assert offenders == []


def test_row_amax_through_the_derived_op_class(kd):
    # An op of the table reaches Python with no binding code of its own.
    x = kd.asarray(np.array([[1.0, -3.5, 2.0], [0.0, 0.0, 0.0], [7.0, -7.25, 1.0]],
                            np.float32), "bf16")
    out = kd.empty((3,), "f32")
    kd.run(kerneld.RowAmax(input=x, output=out))
    assert out.tolist() == [3.5, 0.0, 7.25]


def test_connecting_to_no_daemon_raises_unavailable(tmp_path):
    with pytest.raises((kerneld.Unavailable, kerneld.DeadlineExceeded)) as info:
        kerneld.connect(str(tmp_path / "nothing.sock"), connect_timeout=0.3)
    assert "nothing.sock" in info.value.message
    assert isinstance(info.value, kerneld.KerneldError)


def test_session_is_open_on_the_cpu_backend_with_a_ring(kd):
    assert kd.backend == "cpu"
    assert len(kd.session_id) > 0
    assert kd.has_ring
    kd.session_status()
    assert kd.target.startswith("unix:")


def test_bf16_conversion_rounds_to_nearest_even():
    values = np.array([1.0, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -2.5, np.inf], dtype=np.float32)
    bits = kerneld.to_bf16(values)
    assert bits.tolist() == [0x3F80, 0x3F80, 0x3F82, 0xC020, 0x7F80]
    assert np.isnan(kerneld.from_bf16(kerneld.to_bf16(np.float32("nan"))))
    x = RNG.standard_normal(1000).astype(np.float32)
    assert np.array_equal(kerneld.from_bf16(kerneld.to_bf16(kerneld.from_bf16(kerneld.to_bf16(x)))),
                          kerneld.from_bf16(kerneld.to_bf16(x)))


def test_fp8_decode_tables():
    assert kerneld.decode(np.array([0x7E, 0xFE, 0x01, 0x80], np.uint8), "e4m3fn").tolist() == [
        448.0, -448.0, 2.0 ** -9, -0.0]
    assert np.isnan(kerneld.decode(np.array([0x7F], np.uint8), "e4m3fn")[0])
    assert kerneld.decode(np.array([0x7B], np.uint8), "e5m2")[0] == 57344.0
    assert kerneld.decode(np.array([0x7F], np.uint8), "e4m3fnuz")[0] == 240.0
    assert np.isnan(kerneld.decode(np.array([0x80], np.uint8), "e4m3fnuz")[0])
    assert kerneld.decode(np.array([127, 130], np.uint8), "e8m0").tolist() == [1.0, 8.0]


@pytest.mark.parametrize("granularity,block", [("1x128", (1, 128)), ("128x128", (128, 128)),
                                               ("128x1", (128, 1)), ("per_row", (1, 512))])
def test_quantize_matches_the_reference_bit_for_bit(kd, granularity, block):
    x = bf16_values((300, 512))
    xs = kd.asarray(x, "bf16")
    codes, scales = kd.quantize(xs, granularity=granularity)
    ref_codes, ref_scales = quantize(x, *block)
    assert codes.kd_dtype == kerneld.DType.E4M3FN and codes.dtype == np.uint8
    assert np.array_equal(codes, ref_codes)
    assert np.array_equal(scales.view(np.uint32), ref_scales.view(np.uint32))
    assert sqnr(x[3:], dequantize(codes, scales, *block)[3:]) > 25


def test_quantize_per_tensor_and_transposed_output(kd):
    x = bf16_values((256, 384))
    xs = kd.asarray(x, "bf16")
    codes, scales = kd.quantize(xs, granularity="per_tensor")
    ref_codes, ref_scales = quantize(x, 256, 384)
    assert np.array_equal(codes, ref_codes) and scales.shape == (1,)
    assert scales[0] == ref_scales[0, 0]
    codes_t, scales_t = kd.quantize(xs, granularity="1x128", transpose_output=True)
    ref_t, ref_ts = quantize(x.T.copy(), 1, 128)
    assert codes_t.shape == (384, 256)
    assert np.array_equal(codes_t, ref_t) and np.array_equal(scales_t, ref_ts)


def test_dual_pass_writes_x_and_x_transposed_from_one_op(kd):
    x = bf16_values((256, 384))
    xs = kd.asarray(x, "bf16")
    codes, scales, codes_t, scales_t = kd.quantize(xs, dual=True)
    ref, ref_s = quantize(x, 1, 128)
    ref_t, ref_ts = quantize(x.T.copy(), 1, 128)
    assert np.array_equal(codes, ref) and np.array_equal(scales, ref_s)
    assert np.array_equal(codes_t, ref_t) and np.array_equal(scales_t, ref_ts)


def test_quantize_to_e5m2_and_mx(kd):
    x = bf16_values((128, 256))
    xs = kd.asarray(x, "bf16")
    codes, scales = kd.quantize(xs, out_dtype="e5m2")
    assert codes.kd_dtype == kerneld.DType.E5M2
    values = kerneld.decode(codes, "e5m2") * np.repeat(scales, 128, axis=1)
    assert sqnr(x[3:], values[3:]) > 18
    codes, e8m0 = kd.quantize(xs, granularity="mx_1x32", mx_rounding="rceil")
    assert e8m0.kd_dtype == kerneld.DType.E8M0 and e8m0.shape == (128, 8)
    values = kerneld.decode(codes, "e4m3fn") * np.repeat(kerneld.decode(e8m0, "e8m0"), 32, axis=1)
    assert sqnr(x[3:], values[3:]) > 25


def test_jagged_quantization_follows_the_group_ends(kd):
    x = bf16_values((300, 256))
    xs = kd.asarray(x, "bf16")
    ends = kd.asarray(np.array([100, 100, 300], np.int32))
    codes, scales = kd.quantize(xs, granularity="jagged_rowwise", group_ends=ends)
    ref, ref_s = quantize(x, 1, 128)
    assert np.array_equal(codes, ref) and np.array_equal(scales, ref_s)
    codes_t, scales_t = kd.quantize(xs, granularity="jagged_colwise", transpose_output=True,
                                    group_ends=ends)
    assert codes_t.shape == (256, 300) and scales_t.shape == (3, 256)
    amax0 = np.abs(x[:100]).max(axis=0)
    expected0 = np.float32(1) / (np.float32(448) / np.maximum(amax0, np.float32(1e-12)))
    assert np.array_equal(scales_t[0], expected0)
    # The empty group's scales are those of an all-zero block.
    assert np.all(scales_t[1] == scales_t[1][0])


def _fp8_operand(kd, rows, cols, block):
    x = RNG.standard_normal((rows, cols)).astype(np.float32)
    codes, scales = quantize(x, *block)
    return (kd.asarray(codes, "e4m3fn"), kd.asarray(scales, "f32"),
            dequantize(codes, scales, *block))


def test_gemm_variants_match_the_dequantized_product(kd):
    m, n, k = 256, 384, 512
    a, sa, a_ref = _fp8_operand(kd, m, k, (1, 128))
    b, sb, b_ref = _fp8_operand(kd, n, k, (128, 128))
    d = kd.gemm("nt", a, sa, b, sb)
    assert d.kd_dtype == kerneld.DType.BF16 and d.shape == (m, n)
    assert sqnr(a_ref @ b_ref.T, kerneld.from_bf16(d)) > 45
    # NN: a (M,R) 1x128, b (R,N) 128x128 with R = n here.
    dy, sdy, dy_ref = _fp8_operand(kd, m, n, (1, 128))
    dx = kd.gemm("nn", dy, sdy, b, sb, out_dtype="f32")
    assert dx.shape == (m, k) and sqnr(dy_ref @ b_ref, dx) > 100
    # TN: both 1x128 along the reduction; accumulate adds into an f32 d.
    at, sat, at_ref = _fp8_operand(kd, n, m, (1, 128))
    bt, sbt, bt_ref = _fp8_operand(kd, k, m, (1, 128))
    dw = kd.gemm("tn", at, sat, bt, sbt, out_dtype="f32")
    kd.gemm("tn", at, sat, bt, sbt, dw, accumulate=True)
    assert sqnr(2 * at_ref @ bt_ref.T, dw) > 100


def test_grouped_gemms_follow_the_group_ends(kd):
    t, n, k, e = 384, 256, 256, 3
    ends = kd.asarray(np.array([128, 128, 384], np.int64))
    a, sa, a_ref = _fp8_operand(kd, t, k, (1, 128))
    experts = [quantize(RNG.standard_normal((n, k)).astype(np.float32), 128, 128)
               for _ in range(e)]
    b = kd.asarray(np.stack([c for c, _ in experts]), "e4m3fn")
    sb = kd.asarray(np.stack([s for _, s in experts]), "f32")
    d = kd.gemm("m_grouped_nt", a, sa, b, sb, group_ends=ends, out_dtype="f32")
    w = [dequantize(c, s, 128, 128) for c, s in experts]
    expected = np.concatenate([a_ref[:128] @ w[0].T, a_ref[128:384] @ w[2].T])
    assert sqnr(expected, d) > 100
    # K-grouped wgrad: ends are multiples of 128 (padded groups); the empty group gives zeros.
    at, sat, at_ref = _fp8_operand(kd, n, t, (1, 128))
    bt, sbt, bt_ref = _fp8_operand(kd, k, t, (1, 128))
    dw = kd.gemm("k_grouped_tn", at, sat, bt, sbt, group_ends=ends, out_dtype="f32")
    assert dw.shape == (e, n, k)
    assert sqnr(at_ref[:, :128] @ bt_ref[:, :128].T, dw[0]) > 100
    assert np.all(dw[1] == 0)
    assert sqnr(at_ref[:, 128:] @ bt_ref[:, 128:].T, dw[2]) > 100


def test_pad_and_unpad_round_trip(kd):
    x = kd.asarray(RNG.standard_normal((10, 128)).astype(np.float32))
    ends = kd.asarray(np.array([3, 3, 10], np.int32))
    padded, padded_ends = kd.pad(x, ends, alignment=16)
    assert padded_ends.tolist() == [16, 16, 32]
    assert np.array_equal(padded[:3], x[:3]) and np.all(padded[3:16] == 0)
    assert np.array_equal(padded[16:23], x[3:10]) and np.all(padded[23:] == 0)
    back = kd.unpad(padded, ends, rows=10, alignment=16)
    assert np.array_equal(back, x)


def test_a_batch_is_one_call_through_the_ring(kd):
    x = bf16_values((256, 256))
    xs = kd.asarray(x, "bf16")
    q = kd.empty((256, 256), "e4m3fn")
    s = kd.empty((256, 2), "f32")
    w8 = kd.empty((256, 256), "e4m3fn")
    ws = kd.empty((2, 2), "f32")
    d = kd.empty((256, 256), "bf16")
    calls, fallbacks = kd.ring_counts()
    kd.submit([kerneld.Quantize(input=xs, output=q, scales=s, granularity="1x128"),
               kerneld.Quantize(input=xs, output=w8, scales=ws, granularity="128x128"),
               kerneld.Gemm(variant="nt", a=q, a_scales=s, b=w8, b_scales=ws, d=d)])
    assert kd.ring_counts() == (calls + 1, fallbacks)
    xq = dequantize(*quantize(x, 1, 128), 1, 128)
    wq = dequantize(*quantize(x, 128, 128), 128, 128)
    assert sqnr(xq[3:] @ wq.T, kerneld.from_bf16(d)[3:]) > 45


def test_a_client_without_a_ring_uses_grpc(daemon):
    with kerneld.connect(daemon.socket, ring=False) as plain:
        assert not plain.has_ring
        x = plain.asarray(bf16_values((128, 128)), "bf16")
        codes, _ = plain.quantize(x)
        assert np.array_equal(codes, quantize(kerneld.from_bf16(x), 1, 128)[0])
        assert plain.ring_counts() == (0, 0)


def test_strided_and_explicit_references(kd):
    x = bf16_values((256, 256))
    xs = kd.asarray(x, "bf16")
    every_other = xs[::2]
    assert kd.tensor_ref(every_other).strides == [512, 1]
    codes, scales = kd.quantize(every_other)
    assert np.array_equal(codes, quantize(x[::2], 1, 128)[0])
    ref = kd.tensor_ref(xs)
    codes2, _ = kd.quantize(kerneld.TensorRef(ref.buffer_id, "bf16", [128, 256],
                                              byte_offset=ref.byte_offset + 128 * 512),
                            output=kd.empty((128, 256), "e4m3fn"))
    assert np.array_equal(codes2, quantize(x[128:], 1, 128)[0])


def test_daemon_allocated_host_buffers(kd):
    buffer = kd.allocate(1 << 16)
    assert buffer.buffer_id != 0 and buffer.array.nbytes >= 1 << 16
    x = buffer.array[:128 * 128 * 4].view(np.float32).reshape(128, 128)
    x[...] = 1.0
    ends = kd.asarray(np.array([128], np.int32))
    padded, _ = kd.pad(x, ends, alignment=128)
    assert np.all(padded[:128] == 1.0)
    kd.release(buffer)
    with pytest.raises(kerneld.NotFound):
        kd.release(buffer.buffer_id)


def test_statuses_become_typed_exceptions_naming_the_field(kd):
    bad = kd.empty((128, 200), "bf16")
    with pytest.raises(kerneld.InvalidArgument) as info:
        kd.quantize(bad)
    assert "input.shape[1]=200" in info.value.message
    assert info.value.code == 3 and isinstance(info.value, ValueError)
    x = kd.empty((128, 128), "bf16")
    with pytest.raises(kerneld.InvalidArgument) as info:
        kd.submit([kerneld.Quantize(input=x, output=kd.empty((128, 128), "e4m3fn"),
                                    scales=kd.empty((128, 1)), granularity="1x128"),
                   kerneld.Quantize(input=x, output=kd.empty((128, 128), "e4m3fn"),
                                    scales=kd.empty((128, 3)), granularity="1x128")])
    assert info.value.message.startswith("ops[1].quantize.scales")
    missing = kerneld.TensorRef(987654321, "bf16", [128, 128])
    with pytest.raises(kerneld.NotFound):
        kd.quantize(missing, output=kd.empty((128, 128), "e4m3fn"), scales=kd.empty((128, 1)))
    with pytest.raises(kerneld.FailedPrecondition) as info:
        kd.register_ipc(bytes(64), 1 << 20)
    assert "cuda" in info.value.message
    with pytest.raises(kerneld.InvalidArgument) as info:
        kd.quantize(x, completion=kerneld.Completion("async"))
    assert "signal_event" in info.value.message
    with pytest.raises(kerneld.FailedPrecondition):
        kd.quantize(x, completion=kerneld.Completion("async", signal_event=bytes(64)))
    with pytest.raises(kerneld.InvalidArgument) as info:
        kd.quantize(np.zeros((128, 128), np.float32))
    assert "not in a buffer registered" in info.value.message
    kd.session_status()  # the session survives every error


def test_every_code_has_its_exception_class():
    for code in range(1, 17):
        e = errors.from_code(code, "m")
        assert e.code == code and type(e) is errors.BY_CODE[code] and e.message == "m"
    odd = errors.from_code(99, "m")
    assert isinstance(odd, kerneld.Unknown) and odd.code == 99
    assert str(errors.from_code(5, "gone")) == "NOT_FOUND: gone"


def test_pool_blocks_are_reused(kd):
    before = kd.host.stats()["blocks"]
    for _ in range(20):
        a = kd.empty((1000, 100), "f32")
        a[0, 0] = 1
        del a
    assert kd.host.stats()["blocks"] <= before + 1
