"""kerneld's PyTorch custom ops (kerneld.torch.ops) on the CPU backend: torch.library.opcheck of
every op (schema, fake tensors, autograd registration, AOT dispatch with dynamic shapes), each
op's results against the client's own call of the same daemon op, and compiled (fullgraph) equal
to eager bit for bit.

opcheck's schema test compares every tensor an op's implementation touches with torch.allclose,
which PyTorch does not implement for float8 on the CPU; for the ops whose inputs or internals
are float8 that one test is replaced by a bitwise check that the op leaves its inputs as they
were, and the other three run as usual."""
import pytest

from conftest import require_torch

torch = require_torch(2, 6)
import kerneld.torch  # noqa: E402,F401  (registers torch.ops.kerneld)
from kerneld.torch import ops as kt  # noqa: E402

K = torch.ops.kerneld
E4M3 = torch.float8_e4m3fn
NO_SCHEMA = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


def bits(t):
    return t.detach().contiguous().view(torch.uint8).clone() if t.element_size() == 1 else \
        t.detach().clone()


def check(op, args, float8=False):
    if not float8:
        torch.library.opcheck(op, args)
        return
    before = [bits(a) for a in args if isinstance(a, torch.Tensor)]
    torch.library.opcheck(op, args, test_utils=NO_SCHEMA)
    op(*args)
    after = [bits(a) for a in args if isinstance(a, torch.Tensor)]
    assert all(torch.equal(b, a) for b, a in zip(before, after)), f"{op} mutated an input"


@pytest.fixture
def operands(runtime):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(256, 384, generator=g).to(torch.bfloat16)
    w = torch.randn(128, 384, generator=g).to(torch.bfloat16)
    return x, w


def test_quantize_ops_pass_opcheck(operands):
    x, _ = operands
    check(K.quantize.default, (x, "1x128"))
    check(K.quantize.default, (x, "128x128", torch.float8_e5m2, True))
    check(K.quantize.default, (x.float(), "per_row"))
    check(K.quantize.default, (x, "mx1x32"))
    ends = torch.tensor([100, 256], dtype=torch.int32)
    check(K.quantize.default, (x, "jagged_rowwise", E4M3, False, ends))
    check(K.quantize_dual.default, (x, "1x128"))
    check(K.quantize_dual.default, (x, "128x128"))


def test_gemm_ops_pass_opcheck(operands):
    x, w = operands
    a, sa = K.quantize(x, "1x128")
    b, sb = K.quantize(w, "128x128")
    check(K.gemm.default, (a, sa, b, sb, "nt"), float8=True)
    check(K.gemm.default, (a, sa, b, sb, "nt", torch.float32), float8=True)
    dy = torch.randn(256, 128).to(torch.bfloat16)
    d8, ds = K.quantize(dy, "1x128")
    check(K.gemm.default, (d8, ds, b, sb, "nn"), float8=True)
    dyt, dyts = K.quantize(dy, "1x128", E4M3, True)
    xt, xts = K.quantize(x, "1x128", E4M3, True)
    check(K.gemm.default, (dyt, dyts, xt, xts, "tn"), float8=True)
    ends = torch.tensor([0, 100, 256], dtype=torch.int32)
    wg = torch.randn(3, 128, 384).to(torch.bfloat16)
    bg, sbg = K.quantize(wg.view(384, 384), "128x128")
    check(K.grouped_gemm.default, (a, sa, bg.view(3, 128, 384), sbg.view(3, 1, 3), ends,
                                   "m_grouped_nt"), float8=True)


def test_pad_ops_pass_opcheck(operands):
    x, _ = operands
    ends = torch.tensor([100, 100, 256], dtype=torch.int32)
    check(K.pad.default, (x, ends, 128))
    padded, _ = K.pad(x, ends, 32)
    check(K.unpad.default, (padded, ends, 256, 32))
    back = K.unpad(padded, ends, 256, 32)
    assert torch.equal(back, x)


def test_row_amax_passes_opcheck_and_is_exact(operands):
    x, _ = operands
    check(K.row_amax.default, (x,))
    check(K.row_amax.default, (x.float()[:, 5:300],))
    assert torch.equal(K.row_amax(x), x.float().abs().amax(dim=1))


@pytest.mark.parametrize("dgrad", ["nn", "nt"])
@pytest.mark.parametrize("tokens", [256, 200])
def test_linear_ops_pass_opcheck(operands, dgrad, tokens):
    x, w = operands
    xs = x[:tokens].float().requires_grad_()
    ws = w.float().requires_grad_()
    check(K.linear.default, (xs, ws, dgrad, True), float8=True)
    check(K.linear.default, (xs.detach(), ws.detach(), dgrad, False), float8=True)
    y, xt, xts = K.linear(xs.detach(), ws.detach(), dgrad, True)
    assert xt.dtype == torch.uint8 and xt.shape == (384, kt.padded_tokens(tokens))
    dy = torch.randn_like(y)
    for need_dx, need_dw in ((True, True), (True, False), (False, True)):
        check(K.linear_backward.default, (dy, xt, xts, ws.detach(), dgrad, need_dx, need_dw),
              float8=True)


def test_grouped_linear_ops_pass_opcheck(runtime):
    x = torch.randn(300, 256, requires_grad=True)
    w = torch.randn(3, 128, 256, requires_grad=True)
    ends = torch.tensor([100, 100, 300], dtype=torch.int32)
    check(K.grouped_linear.default, (x, w, ends, True), float8=True)
    y, xpt, xpts, kends = K.grouped_linear(x.detach(), w.detach(), ends, True)
    dy = torch.randn_like(y)
    check(K.grouped_linear_backward.default,
          (dy, xpt, xpts, kends, w.detach(), ends, True, True), float8=True)


def test_ops_give_the_clients_results(runtime, operands):
    """The custom op and the client's own call of the same daemon op write the same bits."""
    x, w = operands
    kd = runtime.client
    codes, scales = K.quantize(x, "1x128")
    xs = kd.asarray(x.view(torch.int16).numpy().view("uint16"), "bf16")
    c2, s2 = kd.quantize(xs, granularity="1x128")
    assert torch.equal(codes.view(torch.uint8), torch.from_numpy(c2.view("uint8")))
    assert torch.equal(scales, torch.from_numpy(s2))


def test_compiled_ops_equal_eager_bit_for_bit(operands):
    x, w = operands

    def f(x, w):
        a, sa = K.quantize(x, "1x128")
        b, sb = K.quantize(w, "128x128")
        y = K.gemm(a, sa, b, sb, "nt", torch.float32)
        return torch.relu(y) * 2 + 1

    compiled = torch.compile(f, fullgraph=True)
    assert torch.equal(compiled(x, w), f(x, w))
