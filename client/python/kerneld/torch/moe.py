"""Float8MoEExperts: E experts' Linear layers over tokens grouped by expert, blockwise FP8 on
kerneld, as torchao's MoE training recipe runs them (grouped GEMMs over token groups whose end
offsets live on the device: no host synchronisation, whatever the routing).

Forward, one Submit:
  Pad X (T,K) per group to multiples of 128 rows -> Xp (Tp,K)      (for wgrad's token blocks)
  quantize X 1x128 -> X8; quantize Xpᵀ 1x128 along the tokens -> Xpᵀ8 (kept for wgrad)
  quantize W (E·N,K) 128x128 -> W8 (E,N,K)
  M-grouped NT: Y[group e] = X8[group e] · W8[e]ᵀ                    -> Y (T,N)
Backward, one Submit:
  Pad dY -> dYp; quantize dY 1x128 -> dY8; quantize dYpᵀ 1x128 -> dYpᵀ8
  quantize W[e]ᵀ 128x128 for each expert -> Wt8 (E,K,N)
  M-grouped NT: dX[group e] = dY8[group e] · Wt8[e]ᵀ                 -> dX (T,K)
  K-grouped TN: dW[e] = dYpᵀ8[:, group e] · Xpᵀ8[:, group e]ᵀ        -> dW (E,N,K)
The K-grouped GEMM reduces over each group's tokens in 1x128 blocks, so its groups must start
at multiples of 128: the padded groups (padding rows are zero and add nothing). Its last group
must end at its reduction length Tp, fixed on the host, while the padded groups end where the
device computed: the zero rows after them form one more group, whose (zero) dW slice is
allocated with the others and dropped (the returned gradient is a view of E of E+1 slices)."""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn

from .. import _lib
from ..dtypes import DType
from ._runtime import Runtime, default_runtime, kd_dtype, set_ref
from .linear import _offsets, _round_up, check_linear_shape

_E4M3 = int(DType.E4M3FN)
_F32 = int(DType.F32)
_I32 = int(DType.I32)


class _Fp8GroupedFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, group_ends: torch.Tensor,
                rt: Runtime):
        e, n, k = weight.shape
        t = x.shape[0]
        if x.dim() != 2 or x.shape[1] != k:
            raise ValueError(f"input must be (tokens, {k}), got {tuple(x.shape)}")
        if group_ends.dim() != 1 or group_ends.shape[0] != e:
            raise ValueError(f"group_ends must be ({e},) (one end offset per expert), got "
                             f"{tuple(group_ends.shape)}")
        if group_ends.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"group_ends must be int32 or int64, got {group_ends.dtype}")
        device = x.device
        x = rt.place(x)
        w = rt.place(weight)
        ends = rt.place(group_ends)
        out_dtype = x.dtype if x.dtype in (torch.bfloat16, torch.float32) else torch.float32
        tp = _round_up(t + e * 127, 128)
        kb, nb, tb = k // 128, n // 128, tp // 128
        kx, kw = kd_dtype(x), kd_dtype(w)
        # Kept for backward: Xpᵀ codes and scales, the padded group ends and one more end, Tp:
        # the K-grouped GEMM's last group must end at its reduction length, and the padded
        # groups end where the device says, so the rows after them (zeros) form an extra group.
        so, saved_bytes = _offsets([k * tp, k * tb * 4, (e + 1) * 4])
        saved = rt.empty((saved_bytes,), torch.uint8, device)
        saved[so[2] + e * 4:so[2] + (e + 1) * 4].view(torch.int32).fill_(tp)
        to, tmp_bytes = _offsets([tp * k * x.element_size(), t * k, t * kb * 4, e * n * k,
                                  e * nb * kb * 4])
        tmp = rt.empty((tmp_bytes,), torch.uint8, device)
        y = rt.empty((t, n), out_dtype, device)
        sid, soff = rt.locate(saved)
        tid, toff = rt.locate(tmp)
        xid, xoff = rt.locate(x)
        wid, woff = rt.locate(w)
        gid, goff = rt.locate(ends)
        yid, yoff = rt.locate(y)
        kends = kd_dtype(ends)
        xp = (tid, toff + to[0], kx, (tp, k), None)
        pge = (sid, soff + so[2], _I32, (e,), None)
        ops = (_lib.Op * 5)()
        ops[0].kind = 3
        p = ops[0].u.pad
        set_ref(p.input, (xid, xoff, kx, (t, k), None))
        set_ref(p.group_ends, (gid, goff, kends, (e,), None))
        set_ref(p.output, xp)
        set_ref(p.padded_group_ends, pge)
        p.alignment = 128
        ops[1].kind = 1
        q = ops[1].u.quantize
        q.granularity = 1
        set_ref(q.input, (xid, xoff, kx, (t, k), None))
        set_ref(q.output, (tid, toff + to[1], _E4M3, (t, k), None))
        set_ref(q.scales, (tid, toff + to[2], _F32, (t, kb), None))
        ops[2].kind = 1
        q = ops[2].u.quantize
        q.granularity = 1
        q.transpose_output = 1
        set_ref(q.input, xp)
        set_ref(q.output, (sid, soff + so[0], _E4M3, (k, tp), None))
        set_ref(q.scales, (sid, soff + so[1], _F32, (k, tb), None))
        ops[3].kind = 1
        q = ops[3].u.quantize
        q.granularity = 3
        set_ref(q.input, (wid, woff, kw, (e * n, k), None))
        set_ref(q.output, (tid, toff + to[3], _E4M3, (e * n, k), None))
        set_ref(q.scales, (tid, toff + to[4], _F32, (e * nb, kb), None))
        ops[4].kind = 2
        g = ops[4].u.gemm
        g.variant = 4  # M-grouped NT
        set_ref(g.a, (tid, toff + to[1], _E4M3, (t, k), None))
        set_ref(g.a_scales, (tid, toff + to[2], _F32, (t, kb), None))
        set_ref(g.b, (tid, toff + to[3], _E4M3, (e, n, k), None))
        set_ref(g.b_scales, (tid, toff + to[4], _F32, (e, nb, kb), None))
        set_ref(g.d, (yid, yoff, kd_dtype(y), (t, n), None))
        set_ref(g.group_ends, (gid, goff, kends, (e,), None))
        rt.submit(ops, device)
        ctx.rt = rt
        ctx.meta = (t, e, n, k, tp, x.dtype, weight.dtype)
        ctx.saved_ws = (saved, sid, soff, so)
        # W and the group ends are read again by backward's ops; keep what the daemon sees.
        ctx.w, ctx.ends = w, ends
        return y if out_dtype == x.dtype else y.to(x.dtype)

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        t, e, n, k, tp, x_dtype, w_dtype = ctx.meta
        rt: Runtime = ctx.rt
        saved, sid, soff, so = ctx.saved_ws
        need_dx, need_dw = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        device = dy.device
        if dy.dtype not in (torch.bfloat16, torch.float32):
            dy = dy.to(torch.float32)
        dy = rt.place(dy)
        w, ends = ctx.w, ctx.ends
        kb, nb, tb = k // 128, n // 128, tp // 128
        kdy = kd_dtype(dy)
        wo, ws_bytes = _offsets([tp * n * dy.element_size(), t * n, t * nb * 4, n * tp,
                                 n * tb * 4, e * k * n, e * kb * nb * 4, e * 4])
        ws = rt.empty((ws_bytes,), torch.uint8, device)
        wsid, wsoff = rt.locate(ws)
        dyid, dyoff = rt.locate(dy)
        wid, woff = rt.locate(w)
        gid, goff = rt.locate(ends)
        kends = kd_dtype(ends)
        dx_dtype = x_dtype if x_dtype in (torch.bfloat16, torch.float32) else torch.float32
        dx = rt.empty((t, k), dx_dtype, device) if need_dx else None
        # The extra group (the zero rows after the padded groups) gets the last slice of dW.
        dw = rt.empty((e + 1, n, k), w_dtype, device) if need_dw else None
        count = (e + 2 if need_dx else 0) + (3 if need_dw else 0)
        ops = (_lib.Op * count)()
        i = 0
        if need_dw:
            ops[i].kind = 3
            p = ops[i].u.pad
            set_ref(p.input, (dyid, dyoff, kdy, (t, n), None))
            set_ref(p.group_ends, (gid, goff, kends, (e,), None))
            set_ref(p.output, (wsid, wsoff + wo[0], kdy, (tp, n), None))
            set_ref(p.padded_group_ends, (wsid, wsoff + wo[7], _I32, (e,), None))
            p.alignment = 128
            ops[i + 1].kind = 1
            q = ops[i + 1].u.quantize
            q.granularity = 1
            q.transpose_output = 1
            set_ref(q.input, (wsid, wsoff + wo[0], kdy, (tp, n), None))
            set_ref(q.output, (wsid, wsoff + wo[3], _E4M3, (n, tp), None))
            set_ref(q.scales, (wsid, wsoff + wo[4], _F32, (n, tb), None))
            i += 2
        if need_dx:
            ops[i].kind = 1
            q = ops[i].u.quantize
            q.granularity = 1
            set_ref(q.input, (dyid, dyoff, kdy, (t, n), None))
            set_ref(q.output, (wsid, wsoff + wo[1], _E4M3, (t, n), None))
            set_ref(q.scales, (wsid, wsoff + wo[2], _F32, (t, nb), None))
            i += 1
            kw = kd_dtype(w)
            for x_e in range(e):
                ops[i].kind = 1
                q = ops[i].u.quantize
                q.granularity = 3
                q.transpose_output = 1
                set_ref(q.input, (wid, woff + x_e * n * k * w.element_size(), kw, (n, k), None))
                set_ref(q.output, (wsid, wsoff + wo[5] + x_e * k * n, _E4M3, (k, n), None))
                set_ref(q.scales, (wsid, wsoff + wo[6] + x_e * kb * nb * 4, _F32, (kb, nb),
                                   None))
                i += 1
            ops[i].kind = 2
            g = ops[i].u.gemm
            g.variant = 4  # M-grouped NT over Wᵀ: dX = dY · W per group
            set_ref(g.a, (wsid, wsoff + wo[1], _E4M3, (t, n), None))
            set_ref(g.a_scales, (wsid, wsoff + wo[2], _F32, (t, nb), None))
            set_ref(g.b, (wsid, wsoff + wo[5], _E4M3, (e, k, n), None))
            set_ref(g.b_scales, (wsid, wsoff + wo[6], _F32, (e, kb, nb), None))
            dxid, dxoff = rt.locate(dx)
            set_ref(g.d, (dxid, dxoff, kd_dtype(dx), (t, k), None))
            set_ref(g.group_ends, (gid, goff, kends, (e,), None))
            i += 1
        if need_dw:
            ops[i].kind = 2
            g = ops[i].u.gemm
            g.variant = 5  # K-grouped TN: dW[e] = dYpᵀ · Xp over group e's padded tokens
            set_ref(g.a, (wsid, wsoff + wo[3], _E4M3, (n, tp), None))
            set_ref(g.a_scales, (wsid, wsoff + wo[4], _F32, (n, tb), None))
            set_ref(g.b, (sid, soff + so[0], _E4M3, (k, tp), None))
            set_ref(g.b_scales, (sid, soff + so[1], _F32, (k, tb), None))
            dwid, dwoff = rt.locate(dw)
            set_ref(g.d, (dwid, dwoff, kd_dtype(dw), (e + 1, n, k), None))
            set_ref(g.group_ends, (sid, soff + so[2], _I32, (e + 1,), None))
        rt.submit(ops, device)
        ctx.saved_ws = ctx.w = ctx.ends = None
        if dx is not None and dx.dtype != x_dtype:
            dx = dx.to(x_dtype)
        if dw is not None:
            dw = dw[:e]
        return dx, dw, None, None


class Float8MoEExperts(nn.Module):
    """E experts, each a Linear in_features -> out_features without bias, weight (E, N, K).
    forward(x, group_ends): x (T, in_features) holds the tokens sorted by expert, group_ends
    (E,) int32/int64 on x's device the end offset of each expert's group (non-decreasing, the
    last == T; empty groups allowed); returns (T, out_features). Both feature sizes must be
    multiples of 128. The group ends are read on the device (CUDA) with no host sync; the CUDA
    backend clamps bad ends instead of reporting them (kerneld.proto, GemmOp)."""

    def __init__(self, num_experts: int, in_features: int, out_features: int, device=None,
                 dtype=None, *, runtime: Optional[Runtime] = None):
        super().__init__()
        check_linear_shape(in_features, out_features)
        self.num_experts, self.in_features, self.out_features = (num_experts, in_features,
                                                                 out_features)
        self.weight = nn.Parameter(torch.empty(num_experts, out_features, in_features,
                                               device=device, dtype=dtype))
        self._kd_runtime = runtime
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.in_features)  # nn.Linear's default, per expert
        nn.init.uniform_(self.weight, -bound, bound)

    def runtime(self) -> Runtime:
        return self._kd_runtime if self._kd_runtime is not None else default_runtime()

    def forward(self, x: torch.Tensor, group_ends: torch.Tensor) -> torch.Tensor:
        return _Fp8GroupedFn.apply(x, self.weight, group_ends, self.runtime())

    def extra_repr(self) -> str:
        return (f"num_experts={self.num_experts}, in_features={self.in_features}, "
                f"out_features={self.out_features}, blockwise_fp8 (kerneld)")
