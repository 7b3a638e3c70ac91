"""The MLP's training arithmetic on mostly-zero inputs, for a CPU learner.

An observation row has about 130 nonzero cells of 993 (most of them 1), the
critic's hidden hands about 28 of 260, and a legal mask about 3 legal moves
of 201.  A dense layer multiplies every zero; these kernels touch only what
is there:

- :func:`sparse_linear`: ``x @ W.T + b`` for ``x`` given as :class:`SparseRows`,
  the rows of ``W.T`` at a row's nonzero cells summed with the cells' values as
  weights (an embedding bag); its backward adds each row's gradient into those
  rows of ``W``'s gradient only (``x`` takes no gradient);
- :func:`masked_linear`: the masked logits, each row's dot products at its
  legal moves only and :data:`MASK_LOGIT` elsewhere (the dense path's
  ``where(mask > 0, h @ W.T + b, MASK_LOGIT)``); its backward reads the
  gradient at the legal moves, the only ones that have one.

The parameters are the dense layers' own, so the checkpoint, the export and
the served forward never see the difference; the results agree with the dense
layers' to float rounding (``tests/test_sparse_learner.py``).  Under bfloat16
autocast (``learner.precision: bf16``) the kernels still run in float32 on the
float32 weights: the first layer's output leaves as bfloat16, as a dense
layer's would, and the masked logits as float32; their gradients come back
float32 to the float32 weights.  The loops are
numba kernels on one thread, as the learner runs; a GPU keeps the dense
layers, whose matrix products it runs faster than any gather.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from numba import njit
from torch import nn

from .interface import MASK_LOGIT


@dataclass(frozen=True)
class SparseRows:
    """Rows of a mostly-zero ``[n, width]`` matrix: each row's nonzero columns ``cols`` (int32 ``[n, K]``)
    and their values ``vals`` (float32 ``[n, K]``), in column order, padded with value 0 to the widest row."""

    cols: torch.Tensor
    vals: torch.Tensor
    width: int

    @classmethod
    def from_dense(cls, x: torch.Tensor) -> SparseRows:
        """The nonzero cells of a CPU matrix (any numeric dtype), with its values as float32."""
        xs = x.detach().contiguous().numpy()
        k = int(_row_counts(xs).max()) if len(xs) else 0
        cols, vals = np.zeros((len(xs), k), np.int32), np.zeros((len(xs), k), np.float32)
        _compress(xs, cols, vals)
        return cls(torch.from_numpy(cols), torch.from_numpy(vals), x.shape[1])

    @classmethod
    def from_bits(cls, bits: np.ndarray, keep: np.ndarray, width: int, extra_cols: np.ndarray | None = None,
                  extra_vals: np.ndarray | None = None) -> SparseRows:
        """Rows given packed: ``bits`` (``np.packbits`` of each row, uint8 ``[n, ceil(width / 8)]``) whose
        bits in ``keep`` (packed the same way) are cells worth 1, and the other cells' values ``extra_vals``
        (float32 ``[n, m]``) at columns ``extra_cols``.  The bit cells come first, then the others."""
        if extra_cols is None:
            extra_cols, extra_vals = np.zeros(0, np.int32), np.zeros((len(bits), 0), np.float32)
        counts = _packed_counts(bits, keep, extra_vals)
        k = int(counts.max()) if len(counts) else 0
        cols, vals = np.zeros((len(bits), k), np.int32), np.zeros((len(bits), k), np.float32)
        _packed_fill(bits, keep, extra_cols.astype(np.int32), extra_vals, cols, vals)
        return cls(torch.from_numpy(cols), torch.from_numpy(vals), width)

    def __getitem__(self, rows: torch.Tensor) -> SparseRows:
        return SparseRows(self.cols[rows], self.vals[rows], self.width)

    def __len__(self) -> int:
        return self.cols.shape[0]

    @property
    def shape(self) -> tuple[int, int]:
        return self.cols.shape[0], self.width

    @property
    def device(self) -> torch.device:
        return self.cols.device

    def dense(self) -> torch.Tensor:
        """The float32 matrix these rows stand for."""
        out = torch.zeros(self.shape, dtype=torch.float32)
        return out.scatter_add_(1, self.cols.long(), self.vals)


def sparse_linear(x: SparseRows, weight: torch.Tensor, bias: torch.Tensor | None = None,
                  relu: bool = False) -> torch.Tensor:
    """``F.linear(x.dense(), weight, bias)``, touching only ``x``'s nonzero cells (``weight``:
    ``[out, width]``, a parameter or a slice of one); ``relu``: and its ReLU, in the same pass."""
    if bias is None:
        bias = weight.new_zeros(())
    return _autocast_out(_SparseLinear.apply(x.cols, x.vals, weight.t().contiguous(), bias, relu))


def masked_linear(h: torch.Tensor, mask: torch.Tensor, layer: nn.Linear) -> torch.Tensor:
    """``where(mask > 0, layer(h), MASK_LOGIT)``, computing ``layer`` at the legal entries only (in float32,
    whatever ``h``'s dtype: the logits leave as float32)."""
    return _MaskedLinear.apply(h.float(), mask.to(torch.int8).contiguous(), layer.weight, layer.bias)


def _autocast_out(out: torch.Tensor) -> torch.Tensor:
    """A kernel's float32 output in the dtype a dense layer's would have: bfloat16 under CPU autocast
    (``learner.precision: bf16``), so the layers after it run as on the dense path.  The kernels stay
    float32 on float32 weights; the cast is an autograd op, so the gradient reaches them as float32."""
    if out.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
        return out.to(torch.get_autocast_dtype("cpu"))
    return out


class _SparseLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, cols: torch.Tensor, vals: torch.Tensor, wt: torch.Tensor,  # type: ignore[override]
                bias: torch.Tensor, relu: bool) -> torch.Tensor:
        out = torch.empty(cols.shape[0], wt.shape[1], dtype=wt.dtype)
        b = bias.detach().expand(wt.shape[1]).contiguous()
        _gather_rows(cols.numpy(), vals.numpy(), wt.detach().numpy(), b.numpy(), relu, out.numpy())
        ctx.save_for_backward(cols, vals, out)
        ctx.wt_shape, ctx.bias_shape, ctx.relu = wt.shape, bias.shape, relu
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        cols, vals, out = ctx.saved_tensors
        gwt = torch.zeros(ctx.wt_shape, dtype=grad.dtype)
        gb = torch.zeros(ctx.wt_shape[1], dtype=grad.dtype)
        _scatter_rows(cols.numpy(), vals.numpy(), grad.contiguous().numpy(), out.numpy(), ctx.relu,
                      gwt.numpy(), gb.numpy())
        return None, None, gwt, gb if len(ctx.bias_shape) else None, None


class _MaskedLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: torch.Tensor, mask: torch.Tensor, weight: torch.Tensor,  # type: ignore[override]
                bias: torch.Tensor) -> torch.Tensor:
        h = h.detach().contiguous()
        w, b = weight.detach().contiguous(), bias.detach().contiguous()
        out = torch.empty(mask.shape, dtype=h.dtype)
        _masked_dots(h.numpy(), mask.numpy(), w.numpy(), b.numpy(), MASK_LOGIT, out.numpy())
        ctx.save_for_backward(h, mask, w)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        h, mask, w = ctx.saved_tensors
        gh, gw = torch.zeros_like(h), torch.zeros_like(w)
        gb = torch.zeros(w.shape[0], dtype=w.dtype)
        _masked_dots_backward(h.numpy(), mask.numpy(), w.numpy(), grad.contiguous().numpy(),
                              gh.numpy(), gw.numpy(), gb.numpy())
        return gh, None, gw, gb


# ---- the kernels: one thread, rows of 256 floats at a time ---------------------------------------
@njit(cache=True)
def _row_counts(x: np.ndarray) -> np.ndarray:
    out = np.zeros(x.shape[0], np.int64)
    for b in range(x.shape[0]):
        for c in range(x.shape[1]):
            if x[b, c] != 0:
                out[b] += 1
    return out


@njit(cache=True)
def _compress(x: np.ndarray, cols: np.ndarray, vals: np.ndarray) -> None:
    for b in range(x.shape[0]):
        k = 0
        for c in range(x.shape[1]):
            if x[b, c] != 0:
                cols[b, k] = c
                vals[b, k] = x[b, c]
                k += 1


@njit(cache=True)
def _packed_counts(bits: np.ndarray, keep: np.ndarray, extra: np.ndarray) -> np.ndarray:
    out = np.zeros(bits.shape[0], np.int64)
    for b in range(bits.shape[0]):
        n = 0
        for j in range(bits.shape[1]):
            x = np.int64(bits[b, j] & keep[j])
            while x:
                n += 1
                x &= x - 1
        for p in range(extra.shape[1]):
            if extra[b, p] != 0:
                n += 1
        out[b] = n
    return out


@njit(cache=True)
def _packed_fill(bits: np.ndarray, keep: np.ndarray, extra_cols: np.ndarray, extra: np.ndarray,
                 cols: np.ndarray, vals: np.ndarray) -> None:
    for b in range(bits.shape[0]):
        k = 0
        for j in range(bits.shape[1]):
            x = np.int64(bits[b, j] & keep[j])
            if x:
                for t in range(8):  # most significant bit first, as np.packbits
                    if x & (128 >> t):
                        cols[b, k] = 8 * j + t
                        vals[b, k] = 1.0
                        k += 1
        for p in range(extra.shape[1]):
            if extra[b, p] != 0:
                cols[b, k] = extra_cols[p]
                vals[b, k] = extra[b, p]
                k += 1


@njit(cache=True, fastmath=True, boundscheck=False)
def _gather_rows(cols: np.ndarray, vals: np.ndarray, wt: np.ndarray, bias: np.ndarray, relu: bool,
                 out: np.ndarray) -> None:
    """``out[b] = bias + sum_k vals[b, k] * wt[cols[b, k]]`` (then ``max(0, .)`` if ``relu``), four rows of
    ``wt`` at a time while they last (the padding, value 0, is at the end of a row)."""
    n = cols.shape[1]
    for b in range(cols.shape[0]):
        o = out[b]
        o[:] = bias
        k = 0
        while k + 4 <= n and vals[b, k + 3] != 0.0:
            v0, v1, v2, v3 = vals[b, k], vals[b, k + 1], vals[b, k + 2], vals[b, k + 3]
            w0, w1, w2, w3 = wt[cols[b, k]], wt[cols[b, k + 1]], wt[cols[b, k + 2]], wt[cols[b, k + 3]]
            for j in range(o.shape[0]):
                o[j] += v0 * w0[j] + v1 * w1[j] + v2 * w2[j] + v3 * w3[j]
            k += 4
        for k in range(k, n):
            v = vals[b, k]
            if v != 0.0:
                w = wt[cols[b, k]]
                for j in range(o.shape[0]):
                    o[j] += v * w[j]
        if relu:
            for j in range(o.shape[0]):
                o[j] = max(o[j], 0.0)


@njit(cache=True, fastmath=True, boundscheck=False)
def _scatter_rows(cols: np.ndarray, vals: np.ndarray, g: np.ndarray, out: np.ndarray, relu: bool,
                  gwt: np.ndarray, gbias: np.ndarray) -> None:
    """The transpose of :func:`_gather_rows`: ``gwt[cols[b, k]] += vals[b, k] * g[b]`` and ``gbias += g[b]``,
    ``g[b]`` taken where ``out[b] > 0`` only if ``relu``."""
    gb = np.empty(g.shape[1], g.dtype)
    for b in range(cols.shape[0]):
        for j in range(gb.shape[0]):
            gb[j] = g[b, j] if not relu or out[b, j] > 0.0 else 0.0
            gbias[j] += gb[j]
        for k in range(cols.shape[1]):
            v = vals[b, k]
            if v != 0.0:
                o = gwt[cols[b, k]]
                for j in range(gb.shape[0]):
                    o[j] += v * gb[j]


@njit(cache=True, fastmath=True, boundscheck=False)
def _masked_dots(h: np.ndarray, mask: np.ndarray, w: np.ndarray, bias: np.ndarray, fill: float,
                 out: np.ndarray) -> None:
    for b in range(h.shape[0]):
        hb = h[b]
        for a in range(mask.shape[1]):
            if mask[b, a] > 0:
                wa = w[a]
                s = np.float32(0.0)
                for j in range(hb.shape[0]):
                    s += hb[j] * wa[j]
                out[b, a] = s + bias[a]
            else:
                out[b, a] = fill


@njit(cache=True, fastmath=True, boundscheck=False)
def _masked_dots_backward(h: np.ndarray, mask: np.ndarray, w: np.ndarray, g: np.ndarray,
                          gh: np.ndarray, gw: np.ndarray, gb: np.ndarray) -> None:
    for b in range(h.shape[0]):
        hb, ghb = h[b], gh[b]
        for a in range(mask.shape[1]):
            if mask[b, a] > 0:
                d = g[b, a]
                wa, gwa = w[a], gw[a]
                for j in range(hb.shape[0]):
                    ghb[j] += d * wa[j]
                    gwa[j] += d * hb[j]
                gb[a] += d
