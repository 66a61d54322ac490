"""A small Qwen2-shaped decoder in plain PyTorch for the parallelism captures (issue #33; parallel_run.py).

Plain modules (no transformers) so that tensor parallel, pipeline stages and expert parallel can cut it the way real
frameworks do, with the module names Hugging Face uses (`q_proj`, `gate_proj`, ...). Random weights from a config,
no download. Shapes: Qwen2.5-0.5B's (hidden 896, FFN 4864, 14 heads / 2 KV heads of 128, biases on q/k/v) with a
32,000-token vocabulary and an untied head; `TINY` for CPU dry runs.

The attention reads its head counts from the projections' output width (`view(..., -1, head_dim)`), so a model whose
q/k/v projections were split by `ColwiseParallel` (7 of 14 heads, 1 of 2 KV heads a rank) runs unchanged.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclasses.dataclass
class Config:
    hidden: int = 896
    ffn: int = 4864
    heads: int = 14
    kv_heads: int = 2
    vocab: int = 32000
    layers: int = 24
    qkv_bias: bool = True
    rope_theta: float = 1e6
    eps: float = 1e-6
    experts: int = 0  # > 0: every layer's MLP is a mixture of experts (top-k routing)
    top_k: int = 2
    expert_ffn: int = 1408
    dim_head: int = 0  # 0: hidden // heads (set when heads are cut, as a tensor-parallel rank's local shapes are)

    @property
    def head_dim(self) -> int:
        return self.dim_head or self.hidden // self.heads


QWEN25_05B_SHAPE = dict(hidden=896, ffn=4864, heads=14, kv_heads=2, vocab=32000)
TINY = dict(hidden=64, ffn=128, heads=4, kv_heads=2, vocab=512, expert_ffn=64)


class RMSNorm(nn.Module):
    def __init__(self, n: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rope_tables(seq: int, head_dim: int, theta: float, device: Any, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    ang = torch.outer(torch.arange(seq, device=device, dtype=torch.float32), inv)
    emb = torch.cat([ang, ang], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rot * sin


class Attention(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.head_dim = c.head_dim
        self.q_proj = nn.Linear(c.hidden, c.heads * c.head_dim, bias=c.qkv_bias)
        self.k_proj = nn.Linear(c.hidden, c.kv_heads * c.head_dim, bias=c.qkv_bias)
        self.v_proj = nn.Linear(c.hidden, c.kv_heads * c.head_dim, bias=c.qkv_bias)
        self.o_proj = nn.Linear(c.heads * c.head_dim, c.hidden, bias=False)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        cos, sin = rope
        q, k = rotate(q, cos[:s], sin[:s]), rotate(k, cos[:s], sin[:s])
        groups = q.shape[1] // k.shape[1]
        if groups > 1:
            k = k.repeat_interleave(groups, dim=1)
            v = v.repeat_interleave(groups, dim=1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(o.transpose(1, 2).reshape(b, s, -1))


class MLP(nn.Module):
    def __init__(self, hidden: int, ffn: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, ffn, bias=False)
        self.up_proj = nn.Linear(hidden, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


Dispatch = Callable[["MoE", torch.Tensor, torch.Tensor], torch.Tensor]


class MoE(nn.Module):
    """Top-k routed experts. `experts` holds this rank's experts only (`first_expert` .. + len); `dispatch` (set by
    the runner) moves the routed token copies to the ranks that own their experts and back."""

    def __init__(self, c: Config, local_experts: int, first_expert: int) -> None:
        super().__init__()
        self.router = nn.Linear(c.hidden, c.experts, bias=False)
        self.experts = nn.ModuleList(MLP(c.hidden, c.expert_ffn) for _ in range(local_experts))
        self.first_expert = first_expert
        self.n_experts = c.experts
        self.top_k = c.top_k
        self.dispatch: Dispatch | None = None

    def run_local(self, x: torch.Tensor, local_ids: torch.Tensor) -> torch.Tensor:
        """Tokens `x` through this rank's experts, `local_ids` the local expert of each row."""
        order = torch.argsort(local_ids, stable=True)
        counts = torch.bincount(local_ids, minlength=len(self.experts)).tolist()
        xs = x[order].split(counts)
        out = torch.cat([e(t) for e, t in zip(self.experts, xs)])
        return torch.empty_like(out).index_copy_(0, order, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        flat = x.reshape(-1, h)
        weights, ids = torch.topk(F.softmax(self.router(flat).float(), dim=-1), self.top_k, dim=-1)
        weights = (weights / weights.sum(-1, keepdim=True)).to(x.dtype)
        rows = flat.repeat_interleave(self.top_k, dim=0)
        assert self.dispatch is not None
        out = self.dispatch(self, rows, ids.reshape(-1))
        out = (out.view(-1, self.top_k, h) * weights.unsqueeze(-1)).sum(1)
        return out.view(b, s, h)


class Layer(nn.Module):
    def __init__(self, c: Config, local_experts: int = 0, first_expert: int = 0) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden, c.eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden, c.eps)
        self.mlp: nn.Module = MoE(c, local_experts, first_expert) if c.experts else MLP(c.hidden, c.ffn)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), rope)
        return x + self.mlp(self.post_attention_layernorm(x))


class Decoder(nn.Module):
    """Embedding, `layers` decoder layers, final norm, untied head. A pipeline stage is a Decoder built with
    `has_embed` / `has_head` off and its share of the layers."""

    def __init__(
        self, c: Config, layers: int | None = None, has_embed: bool = True, has_head: bool = True, **layer_kw: Any
    ) -> None:
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c.vocab, c.hidden) if has_embed else None
        self.layers = nn.ModuleList(Layer(c, **layer_kw) for _ in range(c.layers if layers is None else layers))
        self.norm = RMSNorm(c.hidden, c.eps) if has_head else None
        self.lm_head = nn.Linear(c.hidden, c.vocab, bias=False) if has_head else None
        self._rope: dict[tuple[int, Any, Any], tuple[torch.Tensor, torch.Tensor]] = {}

    def rope(self, seq: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        key = (seq, like.device, like.dtype)
        if key not in self._rope:
            self._rope[key] = rope_tables(seq, self.c.head_dim, self.c.rope_theta, like.device, like.dtype)
        return self._rope[key]

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        """Token ids (with an embedding) or hidden states in; the mean loss (with a head and labels), the logits (a
        head, no labels) or hidden states out."""
        h = self.embed_tokens(x) if self.embed_tokens is not None else x
        rope = self.rope(h.shape[1], h)
        for layer in self.layers:
            h = layer(h, rope)
        if self.lm_head is None:
            return h
        assert self.norm is not None
        logits = self.lm_head(self.norm(h))
        if labels is None:
            return logits
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(), labels[:, 1:].reshape(-1))


def build(c: Config, device: Any, dtype: torch.dtype, seed: int = 0, **kw: Any) -> Decoder:
    torch.manual_seed(seed)
    with torch.device(device):
        model = Decoder(c, **kw)
    for name, p in model.named_parameters():
        if p.dim() == 2:
            nn.init.normal_(p, std=1.0 / math.sqrt(p.shape[1]))
        elif name.endswith("bias"):
            nn.init.zeros_(p)
    return model.to(dtype=dtype)
