"""A Llama-3-architecture decoder in plain PyTorch, for kerneld's training benchmark
(train_llama.py) and its CPU tests: RMSNorm, rotary position embeddings, grouped-query
attention through scaled_dot_product_attention, a SwiGLU MLP (or routed experts, torchtitan
style), and a tied or untied output head. Its Linear layers are nn.Linear, so
kerneld.torch.convert_to_float8_blockwise converts them; the experts' GEMMs call
torch._grouped_mm, which kerneld.torch.grouped_mm replaces.

Configs (CONFIGS): "8B-shape" and "70B-shape" have the layer shapes of Llama 3 8B and 70B with as
many layers as asked; "debug" is small enough for a CPU test. An MoE variant of each replaces the
MLP with `n_experts` routed experts of `moe_ffn_dim`, top-`top_k` routing."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class LlamaConfig:
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    vocab_size: int
    max_seq_len: int = 8192
    norm_eps: float = 1e-5
    rope_theta: float = 500000.0
    tie_embeddings: bool = False
    # MoE: n_experts > 0 replaces each block's MLP with routed experts.
    n_experts: int = 0
    top_k: int = 1
    moe_ffn_dim: int = 0

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads


CONFIGS = {
    "8B-shape": LlamaConfig(dim=4096, n_layers=4, n_heads=32, n_kv_heads=8, ffn_dim=14336,
                            vocab_size=128256),
    "70B-shape": LlamaConfig(dim=8192, n_layers=2, n_heads=64, n_kv_heads=8, ffn_dim=28672,
                             vocab_size=128256),
    "debug": LlamaConfig(dim=256, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=768,
                         vocab_size=512, max_seq_len=512),
}


def config(name: str, **overrides) -> LlamaConfig:
    """A named config with fields replaced (n_layers=..., n_experts=...)."""
    return dataclasses.replace(CONFIGS[name], **overrides)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (xf * self.weight.float()).to(x.dtype)


def rope_tables(head_dim: int, seq_len: int, theta: float, device=None):
    """cos and sin (seq_len, head_dim // 2) of the rotary embedding."""
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    angles = torch.outer(torch.arange(seq_len, device=device).float(), freqs)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, S, H, D) rotated pairwise: (x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos)."""
    s = x.shape[1]
    xf = x.float().unflatten(-1, (-1, 2))
    c, sn = cos[:s].view(1, s, 1, -1), sin[:s].view(1, s, 1, -1)
    x0, x1 = xf[..., 0], xf[..., 1]
    out = torch.stack((x0 * c - x1 * sn, x0 * sn + x1 * c), dim=-1)
    return out.flatten(-2).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.wq = nn.Linear(cfg.dim, cfg.n_heads * cfg.head_dim, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.n_heads, self.head_dim)
        k = self.wk(x).view(b, s, self.n_kv_heads, self.head_dim)
        v = self.wv(x).view(b, s, self.n_kv_heads, self.head_dim)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                             enable_gqa=self.n_kv_heads != self.n_heads)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


def grouped_mm_bf16(x: torch.Tensor, w_t: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    return torch._grouped_mm(x, w_t, offs=offs)


class GroupedExperts(nn.Module):
    """E SwiGLU experts over tokens sorted by expert, torchtitan's layout: w1, w3 (E, hidden,
    dim), w2 (E, dim, hidden); each GEMM is grouped_mm(x, w.transpose(-2, -1), offs)."""

    def __init__(self, dim: int, hidden: int, n_experts: int):
        super().__init__()
        self.w1 = nn.Parameter(torch.empty(n_experts, hidden, dim))
        self.w2 = nn.Parameter(torch.empty(n_experts, dim, hidden))
        self.w3 = nn.Parameter(torch.empty(n_experts, hidden, dim))
        self.grouped_mm: Callable = grouped_mm_bf16
        for w in (self.w1, self.w2, self.w3):
            nn.init.normal_(w, std=1.0 / math.sqrt(w.shape[-1]))

    def forward(self, x: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        mm = self.grouped_mm
        h = F.silu(mm(x, self.w1.transpose(-2, -1), offs)) * mm(x, self.w3.transpose(-2, -1), offs)
        return mm(h, self.w2.transpose(-2, -1), offs)


class MoE(nn.Module):
    """Top-k routing over GroupedExperts: tokens sorted by expert without a host sync (the
    group ends are a cumulative sum on the device)."""

    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.top_k = cfg.top_k
        self.router = nn.Linear(cfg.dim, cfg.n_experts, bias=False)
        self.experts = GroupedExperts(cfg.dim, cfg.moe_ffn_dim, cfg.n_experts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        scores = self.router(x).float().softmax(-1)
        weights, experts = scores.topk(self.top_k, dim=-1)
        flat = experts.reshape(-1)
        order = flat.argsort(stable=True)
        counts = torch.zeros(self.router.out_features, dtype=torch.int32, device=x.device)
        counts.scatter_add_(0, flat, torch.ones_like(flat, dtype=torch.int32))
        offs = counts.cumsum(0, dtype=torch.int32)
        tokens = x.repeat_interleave(self.top_k, dim=0)[order]
        out = self.experts(tokens, offs)
        combined = torch.empty_like(out)
        combined[order] = out
        combined = combined.view(-1, self.top_k, shape[-1])
        return (combined * weights.unsqueeze(-1).to(combined.dtype)).sum(1).view(shape)


class TransformerBlock(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.attention_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attention = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.feed_forward = MoE(cfg) if cfg.n_experts else FeedForward(cfg.dim, cfg.ffn_dim)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), cos, sin)
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(TransformerBlock(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.output = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.output.weight = self.tok_embeddings.weight
        cos, sin = rope_tables(cfg.head_dim, cfg.max_seq_len, cfg.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.tok_embeddings.weight, std=0.02)
        for layer in self.layers:
            for m in layer.modules():
                if isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, std=0.02)
        if not self.cfg.tie_embeddings:
            nn.init.normal_(self.output.weight, std=self.cfg.dim ** -0.5)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, self.rope_cos, self.rope_sin)
        return self.output(self.norm(h))


def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(0, 1))


def synthetic_batch(cfg: LlamaConfig, batch: int, seq_len: int, generator: torch.Generator,
                    device=None):
    """Tokens with learnable structure: each sequence counts up from a random start modulo the
    vocabulary, so the loss falls quickly for any working model; targets are the next token."""
    start = torch.randint(0, cfg.vocab_size, (batch, 1), generator=generator)
    seq = (start + torch.arange(seq_len + 1)) % cfg.vocab_size
    seq = seq.to(device)
    return seq[:, :-1], seq[:, 1:]


def use_kerneld_experts(model: nn.Module) -> int:
    """Points every GroupedExperts at kerneld.torch.grouped_mm; returns how many."""
    from kerneld.torch import grouped_mm
    count = 0
    for m in model.modules():
        if isinstance(m, GroupedExperts):
            m.grouped_mm = grouped_mm
            count += 1
    return count


def apply_activation_checkpointing(model: Llama) -> None:
    """torchtitan's per-block activation checkpointing (non-reentrant), block by block."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
        CheckpointImpl, checkpoint_wrapper)
    for i, block in enumerate(model.layers):
        model.layers[i] = checkpoint_wrapper(block, checkpoint_impl=CheckpointImpl.NO_REENTRANT,
                                             preserve_rng_state=False)


def compile_blocks(model: Llama, fullgraph: bool = True, dynamic: Optional[bool] = None) -> None:
    """torchtitan's per-block torch.compile."""
    for i, block in enumerate(model.layers):
        model.layers[i] = torch.compile(block, fullgraph=fullgraph, dynamic=dynamic)
