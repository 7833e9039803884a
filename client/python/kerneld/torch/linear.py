"""Float8BlockwiseLinear: nn.Linear with blockwise FP8 forward and backward run by kerneld, and
convert_to_float8_blockwise, which swaps a model's nn.Linear modules for it.

Forward, one Submit: the fused dual pass quantizes X (M,K) with 1x128 blocks along K and Xᵀ with
1x128 blocks along M from one read (Xᵀ's codes are kept for wgrad), W (N,K) is quantized with
128x128 blocks, and the NT GEMM writes Y = X·Wᵀ. Backward, one Submit: the dual pass of dY, the
dgrad GEMM dX = dY·W (1x128 · 128x128, reusing W's codes from the forward) and the TN GEMM
dW = dYᵀ·X (1x128 · 1x128 along the tokens).

The dgrad GEMM runs one of two ways (the `dgrad` option, default DEFAULT_DGRAD):
  "nn"  the forward keeps W's codes and dgrad is GEMM_NN, for which the daemon transposes those
        codes into scratch on every backward (FP8 tensor cores read only K-major operands);
  "nt"  the forward's W quantize is the 128x128 dual pass, which also writes Wᵀ's codes and
        scales from the same read (a tile and its transpose share one scale); the forward keeps
        Wᵀ and dgrad is GEMM_NT on it: one extra write of W's size in the forward instead of a
        read and a write in the backward.
Both give the same dX bits up to the GEMM's fp32 summation order. A token count M that is not a multiple of 128 is
padded with zero rows by the daemon's Pad op inside the same Submit (zero rows add nothing to
dW). The bias is added by PyTorch, outside the FP8 path (one elementwise add; its gradient is
dY summed over tokens, also PyTorch's)."""
from __future__ import annotations

from typing import Callable, Optional

import torch
from torch import nn

from .. import _lib
from ..dtypes import DType, ScaleLayout
from ._runtime import Runtime, default_runtime, kd_dtype, set_ref

# The dgrad form Float8BlockwiseLinear uses when not told (see the module docstring).
DEFAULT_DGRAD = "nn"
_DGRADS = ("nn", "nt")

_ALIGN = 256
_E4M3 = int(DType.E4M3FN)
_F32 = int(DType.F32)
_I32 = int(DType.I32)
_OUT_DTYPES = (torch.bfloat16, torch.float32)


def _round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def _offsets(sizes):
    """Offsets of consecutive regions of `sizes` bytes, each 256-byte aligned, and the total."""
    offsets, total = [], 0
    for size in sizes:
        offsets.append(total)
        total += _round_up(max(size, 1), _ALIGN)
    return offsets, total


def _strides(t: torch.Tensor):
    """t's strides when it is not contiguous row-major, else None (the wire's default)."""
    return None if t.is_contiguous() else tuple(t.stride())


def check_linear_shape(in_features: int, out_features: int, where: str = "") -> None:
    """ValueError unless kerneld's kernels take this Linear: in_features is the forward's
    reduction and the 1x128 block dimension of X, out_features the dgrad's reduction and the
    1x128 block dimension of dY, so both must be multiples of 128."""
    bad = [f"{name}={value}" for name, value in (("in_features", in_features),
                                                  ("out_features", out_features))
           if value % 128 != 0]
    if bad:
        raise ValueError(
            f"{where}{' and '.join(bad)} {'is' if len(bad) == 1 else 'are'} not a multiple of "
            "128: blockwise FP8 (1x128 and 128x128 blocks) needs in_features and out_features "
            "divisible by 128; exclude this layer with filter_fn")


class _Fp8BlockwiseLinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, rt: Runtime,
                fuse_wgrad_accumulation: bool, dgrad: str):
        n, k = weight.shape
        if x.shape[-1] != k:
            raise ValueError(f"input.shape[-1]={x.shape[-1]} must equal in_features={k}")
        if x.device != weight.device:
            raise ValueError(f"input is on {x.device} and weight on {weight.device}")
        device = x.device
        lead = x.shape[:-1]
        x2 = rt.place(x.reshape(-1, k))
        w = rt.place(weight)
        m = x2.shape[0]
        out_dtype = x.dtype if x.dtype in _OUT_DTYPES else torch.float32
        pad = m % 128 != 0
        mp = _round_up(m + 127, 128) if pad else m
        kb, nb, mb = k // 128, n // 128, mp // 128
        k_major = rt.a_scale_layout == ScaleLayout.K_BLOCK_MAJOR
        kx, kw = kd_dtype(x2), kd_dtype(w)
        # dgrad as NT needs Wᵀ only when dX will be asked for.
        dgrad_nt = dgrad == "nt" and ctx.needs_input_grad[0]
        ctx.meta = (m, n, k, mp, pad, out_dtype, x.dtype, lead, k_major, dgrad_nt)
        ctx.rt = rt
        ctx.weight_dtype = weight.dtype
        # The wgrad GEMM accumulates into weight.grad in place when the caller asked for it and
        # a gradient exists (see Float8BlockwiseLinear).
        ctx.fuse_target = weight.grad if fuse_wgrad_accumulation else None
        if m == 0:
            ctx.saved_ws = None
            return torch.zeros(*lead, n, dtype=out_dtype, device=device).to(x.dtype)

        # Kept for backward: Xᵀ codes and scales, W's (dgrad NN) or Wᵀ's (dgrad NT) codes and
        # scales.
        so, saved_bytes = _offsets([k * mp, k * mb * 4, n * k, nb * kb * 4])
        saved = rt.empty((saved_bytes,), torch.uint8, device)
        # Forward only: X codes and scales, the padded X, and with dgrad NT W's codes and scales.
        sizes = [mp * k, mp * kb * 4, mp * k * x2.element_size() if pad else 0, 4 if pad else 0]
        if dgrad_nt:
            sizes += [n * k, nb * kb * 4]
        to, tmp_bytes = _offsets(sizes)
        tmp = rt.empty((tmp_bytes,), torch.uint8, device)
        y = rt.empty((m, n), out_dtype, device)

        sid, soff = rt.locate(saved)
        tid, toff = rt.locate(tmp)
        xid, xoff = rt.locate(x2)
        wid, woff = rt.locate(w)
        yid, yoff = rt.locate(y)
        ops = (_lib.Op * (4 if pad else 3))()
        i = 0
        source = (xid, xoff, kx, (m, k), _strides(x2))
        if pad:
            gid, goff = rt.locate(rt.group_ends_of(m, device))
            ops[0].kind = 3
            p = ops[0].u.pad
            set_ref(p.input, source)
            set_ref(p.group_ends, (gid, goff, _I32, (1,), None))
            source = (tid, toff + to[2], kx, (mp, k), None)
            set_ref(p.output, source)
            set_ref(p.padded_group_ends, (tid, toff + to[3], _I32, (1,), None))
            p.alignment = 128
            i = 1
        ops[i].kind = 1
        q = ops[i].u.quantize
        set_ref(q.input, source)
        set_ref(q.output, (tid, toff + to[0], _E4M3, (mp, k), None))
        set_ref(q.scales, (tid, toff + to[1], _F32, (kb, mp) if k_major else (mp, kb), None))
        set_ref(q.output_t, (sid, soff + so[0], _E4M3, (k, mp), None))
        set_ref(q.scales_t, (sid, soff + so[1], _F32, (mb, k) if k_major else (k, mb), None))
        q.granularity = 1
        q.scale_layout = int(rt.a_scale_layout)
        ops[i + 1].kind = 1
        q = ops[i + 1].u.quantize
        set_ref(q.input, (wid, woff, kw, (n, k), _strides(w)))
        if dgrad_nt:
            w_codes = (tid, toff + to[4], _E4M3, (n, k), None)
            w_scales = (tid, toff + to[5], _F32, (nb, kb), None)
            set_ref(q.output_t, (sid, soff + so[2], _E4M3, (k, n), None))
            set_ref(q.scales_t, (sid, soff + so[3], _F32, (kb, nb), None))
        else:
            w_codes = (sid, soff + so[2], _E4M3, (n, k), None)
            w_scales = (sid, soff + so[3], _F32, (nb, kb), None)
        set_ref(q.output, w_codes)
        set_ref(q.scales, w_scales)
        q.granularity = 3
        ops[i + 2].kind = 2
        g = ops[i + 2].u.gemm
        g.variant = 1  # NT
        set_ref(g.a, (tid, toff + to[0], _E4M3, (m, k), None))
        set_ref(g.a_scales, (tid, toff + to[1], _F32, (m, kb), (1, mp) if k_major else None))
        set_ref(g.b, w_codes)
        set_ref(g.b_scales, w_scales)
        set_ref(g.d, (yid, yoff, kd_dtype(y), (m, n), None))
        rt.submit(ops, device)
        ctx.saved_ws = (saved, sid, soff, so)
        return y.view(*lead, n) if out_dtype == x.dtype else y.view(*lead, n).to(x.dtype)

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        m, n, k, mp, pad, out_dtype, x_dtype, lead, k_major, dgrad_nt = ctx.meta
        rt: Runtime = ctx.rt
        need_dx, need_dw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        if ctx.saved_ws is None or not (need_dx or need_dw):
            dx = torch.zeros(*lead, k, dtype=x_dtype, device=dy.device) if need_dx else None
            return dx, None, None, None, None
        saved, sid, soff, so = ctx.saved_ws
        device = dy.device
        if dy.dtype != out_dtype:
            dy = dy.to(out_dtype)
        dy2 = rt.place(dy.reshape(-1, n))
        kdy = kd_dtype(dy2)
        kb, nb, mb = k // 128, n // 128, mp // 128
        # The padded dY is needed only for the transposed (wgrad) codes.
        pad_dy = pad and need_dw
        rows = mp if need_dw else m
        sizes = [rows * n, rows * nb * 4, n * mp, n * mb * 4]
        if pad_dy:
            sizes += [mp * n * dy2.element_size(), 4]
        wo, ws_bytes = _offsets(sizes)
        ws = rt.empty((ws_bytes,), torch.uint8, device)
        wsid, wsoff = rt.locate(ws)
        dyid, dyoff = rt.locate(dy2)
        dx = dw = None
        if need_dx:
            dx = rt.empty((m, k), x_dtype if x_dtype in _OUT_DTYPES else torch.float32, device)
        fused = need_dw and ctx.fuse_target is not None
        if need_dw:
            dw = ctx.fuse_target if fused else rt.empty((n, k), ctx.weight_dtype, device)
        ops = (_lib.Op * (1 + int(pad_dy) + int(need_dx) + int(need_dw)))()
        i = 0
        source = (dyid, dyoff, kdy, (m, n), _strides(dy2))
        if pad_dy:
            gid, goff = rt.locate(rt.group_ends_of(m, device))
            ops[0].kind = 3
            p = ops[0].u.pad
            set_ref(p.input, source)
            set_ref(p.group_ends, (gid, goff, _I32, (1,), None))
            source = (wsid, wsoff + wo[4], kdy, (mp, n), None)
            set_ref(p.output, source)
            set_ref(p.padded_group_ends, (wsid, wsoff + wo[5], _I32, (1,), None))
            p.alignment = 128
            i = 1
        ops[i].kind = 1
        q = ops[i].u.quantize
        q.granularity = 1
        q.scale_layout = int(rt.a_scale_layout)
        dy_rows = (wsid, wsoff + wo[0], _E4M3, (rows, n), None)
        dy_scales = (wsid, wsoff + wo[1], _F32, (nb, rows) if k_major else (rows, nb), None)
        dyt = (wsid, wsoff + wo[2], _E4M3, (n, mp), None)
        dyt_scales = (wsid, wsoff + wo[3], _F32, (mb, n) if k_major else (n, mb), None)
        if need_dx and need_dw:
            set_ref(q.input, source)
            set_ref(q.output, dy_rows)
            set_ref(q.scales, dy_scales)
            set_ref(q.output_t, dyt)
            set_ref(q.scales_t, dyt_scales)
        elif need_dx:
            set_ref(q.input, source)
            set_ref(q.output, dy_rows)
            set_ref(q.scales, dy_scales)
        else:
            q.scale_layout = 0
            set_ref(q.input, source)
            set_ref(q.output, dyt)
            set_ref(q.scales, (wsid, wsoff + wo[3], _F32, (n, mb), None))
            q.transpose_output = 1
            dyt_scales = (wsid, wsoff + wo[3], _F32, (n, mb), None)
        i += 1
        if need_dx:
            ops[i].kind = 2
            g = ops[i].u.gemm
            set_ref(g.a, (wsid, wsoff + wo[0], _E4M3, (m, n), None))
            set_ref(g.a_scales, (wsid, wsoff + wo[1], _F32, (m, nb),
                                 (1, rows) if k_major else None))
            if dgrad_nt:
                g.variant = 1  # NT: dX (M,K) = dY (M,N) · Wᵀ (K,N)ᵀ
                set_ref(g.b, (sid, soff + so[2], _E4M3, (k, n), None))
                set_ref(g.b_scales, (sid, soff + so[3], _F32, (kb, nb), None))
            else:
                g.variant = 2  # NN: dX (M,K) = dY (M,N) · W (N,K)
                set_ref(g.b, (sid, soff + so[2], _E4M3, (n, k), None))
                set_ref(g.b_scales, (sid, soff + so[3], _F32, (nb, kb), None))
            dxid, dxoff = rt.locate(dx)
            set_ref(g.d, (dxid, dxoff, kd_dtype(dx), (m, k), None))
            i += 1
        if need_dw:
            ops[i].kind = 2
            g = ops[i].u.gemm
            g.variant = 3  # TN: dW (N,K) = dYᵀ (N,Mp) · Xᵀ (K,Mp), 1x128 along the tokens
            k_major_t = k_major and need_dx
            set_ref(g.a, dyt)
            set_ref(g.a_scales, (dyt_scales[0], dyt_scales[1], _F32, (n, mb),
                                 (1, n) if k_major_t else None))
            set_ref(g.b, (sid, soff + so[0], _E4M3, (k, mp), None))
            set_ref(g.b_scales, (sid, soff + so[1], _F32, (k, mb), (1, k) if k_major else None))
            dwid, dwoff = rt.locate(dw)
            set_ref(g.d, (dwid, dwoff, kd_dtype(dw), (n, k), None))
            g.accumulate = 1 if fused else 0
        rt.submit(ops, device)
        ctx.saved_ws = None
        ctx.fuse_target = None
        if dx is not None:
            dx = dx.view(*lead, k)
            if dx.dtype != x_dtype:
                dx = dx.to(x_dtype)
        if fused:
            dw = None  # accumulated into weight.grad in place
        return dx, dw, None, None, None


class Float8BlockwiseLinear(nn.Linear):
    """nn.Linear whose matmuls run as blockwise FP8 on kerneld (see the module docstring). A
    drop-in: same parameters, state_dict and isinstance(m, nn.Linear). in_features and
    out_features must be multiples of 128. Master weights may be bf16 or fp32 (an fp32 weight
    gets its gradient in fp32 from the GEMM's f32 output). Inputs of any leading shape, bf16 or
    fp32 (fp16 is computed in fp32 and cast back).

    fuse_wgrad_accumulation=True (CUDA, fp32 weights): once weight.grad exists, the wgrad GEMM
    accumulates into it in place (accumulate=True) and autograd gets no weight gradient; hooks
    on the weight's gradient (DDP's) then do not run, so leave it off under DDP/FSDP.
    dgrad="nn" or "nt" chooses how the backward computes dX (module docstring); None takes
    DEFAULT_DGRAD. `runtime` defaults to kerneld.torch's per-process client."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None, *, runtime: Optional[Runtime] = None,
                 fuse_wgrad_accumulation: bool = False, dgrad: Optional[str] = None):
        check_linear_shape(in_features, out_features)
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self._kd_runtime = runtime
        self.fuse_wgrad_accumulation = fuse_wgrad_accumulation
        self.dgrad = _check_dgrad(dgrad)

    @classmethod
    def from_linear(cls, linear: nn.Linear, *, runtime: Optional[Runtime] = None,
                    fuse_wgrad_accumulation: bool = False,
                    dgrad: Optional[str] = None) -> "Float8BlockwiseLinear":
        """A Float8BlockwiseLinear sharing `linear`'s parameters (no copy)."""
        check_linear_shape(linear.in_features, linear.out_features)
        new = cls.__new__(cls)
        nn.Module.__init__(new)
        new.in_features, new.out_features = linear.in_features, linear.out_features
        new.weight = linear.weight
        new.bias = linear.bias
        new._kd_runtime = runtime
        new.fuse_wgrad_accumulation = fuse_wgrad_accumulation
        new.dgrad = _check_dgrad(dgrad)
        return new

    def runtime(self) -> Runtime:
        return self._kd_runtime if self._kd_runtime is not None else default_runtime()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        fuse = (self.fuse_wgrad_accumulation and w.dtype == torch.float32 and w.is_cuda and
                w.grad is not None and w.grad.is_contiguous() and
                w.grad.dtype == torch.float32)
        y = _apply(x, w, self.runtime(), fuse, self.dgrad)
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        return y

    def extra_repr(self) -> str:
        return (super().extra_repr() +
                f", blockwise_fp8=1x128/128x128 (kerneld), dgrad={self.dgrad}")


def _check_dgrad(dgrad: Optional[str]) -> str:
    dgrad = DEFAULT_DGRAD if dgrad is None else dgrad
    if dgrad not in _DGRADS:
        raise ValueError(f'dgrad="{dgrad}" must be one of {", ".join(_DGRADS)}')
    return dgrad


def _apply(x: torch.Tensor, weight: torch.Tensor, rt: Runtime, fuse: bool,
           dgrad: str) -> torch.Tensor:
    return _Fp8BlockwiseLinearFn.apply(x, weight, rt, fuse, dgrad)


def convert_to_float8_blockwise(model: nn.Module,
                                filter_fn: Optional[Callable[[nn.Module, str], bool]] = None, *,
                                runtime: Optional[Runtime] = None,
                                fuse_wgrad_accumulation: bool = False,
                                dgrad: Optional[str] = None) -> nn.Module:
    """Swaps, in place, every nn.Linear of `model` for which filter_fn(module, fqn) is true (all
    of them without filter_fn) for a Float8BlockwiseLinear sharing its parameters, and returns
    the model. A selected layer the kernels cannot take (in_features or out_features not a
    multiple of 128) raises ValueError naming it: exclude it with filter_fn. `dgrad`: see
    Float8BlockwiseLinear."""
    dgrad = _check_dgrad(dgrad)
    if isinstance(model, nn.Linear) and not isinstance(model, Float8BlockwiseLinear):
        if filter_fn is None or filter_fn(model, ""):
            return Float8BlockwiseLinear.from_linear(
                model, runtime=runtime, fuse_wgrad_accumulation=fuse_wgrad_accumulation,
                dgrad=dgrad)
        return model
    swaps = []
    for fqn, module in model.named_modules():
        for name, child in module.named_children():
            if not isinstance(child, nn.Linear) or isinstance(child, Float8BlockwiseLinear):
                continue
            child_fqn = f"{fqn}.{name}" if fqn else name
            if filter_fn is not None and not filter_fn(child, child_fqn):
                continue
            check_linear_shape(child.in_features, child.out_features, f"{child_fqn}: ")
            swaps.append((module, name, child))
    for parent, name, child in swaps:
        setattr(parent, name, Float8BlockwiseLinear.from_linear(
            child, runtime=runtime, fuse_wgrad_accumulation=fuse_wgrad_accumulation,
            dgrad=dgrad))
    return model
