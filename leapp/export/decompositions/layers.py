"""Layers: pooling, normalization, activations, distances and products of neural networks.

Adaptive average pooling is separable: along each pooled dimension it is a product with a
constant averaging matrix, which covers output sizes that do not divide the input size (the
exporter refuses those). Normalizations are written as means and variances over their
dimensions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from leapp.export.decompositions.reductions import norm_along

__all__ = ["DECOMPOSITIONS"]

aten = torch.ops.aten


def _averaging(size: int, out: int, dtype: torch.dtype) -> torch.Tensor:
    """``[size, out]``: column ``i`` averages adaptive pooling's window ``i``."""
    rows = [[0.0] * out for _ in range(size)]
    for index in range(out):
        start = (index * size) // out
        end = -((-(index + 1) * size) // out)
        for row in range(start, end):
            rows[row][index] = 1.0 / (end - start)
    return torch.tensor(rows, dtype=dtype)  # built from lists: a constant of the graph


def _adaptive_avg_pool(x, output_size):
    pooled = len(output_size)
    for axis, out in enumerate(output_size):
        dim = x.dim() - pooled + axis
        out = x.shape[dim] if out is None else out
        averaging = _averaging(x.shape[dim], out, x.dtype)
        x = torch.movedim(torch.matmul(torch.movedim(x, dim, -1), averaging), -1, dim)
    return x


def _softplus(x, beta=1, threshold=20):
    scaled = x * beta
    return torch.where(scaled > threshold, x, torch.log1p(torch.exp(scaled)) / beta)


def _threshold(x, threshold, value):
    return torch.where(x > threshold, x, torch.full_like(x, value))


def _normalized(x, dims, eps):
    mean = x.mean(dims, keepdim=True)
    variance = ((x - mean) ** 2).mean(dims, keepdim=True)
    return (x - mean) / torch.sqrt(variance + eps)


def _channel_shape(x):
    return [1, -1] + [1] * (x.dim() - 2)


def _instance_norm(
    x,
    weight=None,
    bias=None,
    running_mean=None,
    running_var=None,
    use_input_stats=True,
    momentum=0.1,
    eps=1e-5,
    cudnn_enabled=False,
):
    del momentum, cudnn_enabled
    if use_input_stats or running_mean is None:
        out = _normalized(x, list(range(2, x.dim())), eps)
    else:
        shape = _channel_shape(x)
        out = (x - running_mean.reshape(shape)) / torch.sqrt(running_var.reshape(shape) + eps)
    if weight is not None:
        out = out * weight.reshape(_channel_shape(x))
    if bias is not None:
        out = out + bias.reshape(_channel_shape(x))
    return out


def _rms_norm(x, normalized_shape, weight=None, eps=None):
    dims = list(range(x.dim() - len(normalized_shape), x.dim()))
    eps = torch.finfo(x.dtype).eps if eps is None else eps
    out = x * torch.rsqrt((x * x).mean(dims, keepdim=True) + eps)
    return out * weight if weight is not None else out


def _bilinear(x1, x2, weight, bias=None):
    out = torch.einsum("...i,oij,...j->...o", x1, weight, x2)
    return out + bias if bias is not None else out


def _addbmm(x, batch1, batch2, *, beta=1, alpha=1):
    product = torch.matmul(batch1, batch2).sum(0)
    if beta == 0:
        return alpha * product
    return beta * x + alpha * product


def _cdist(x1, x2, p=2.0, compute_mode=None):
    del compute_mode
    difference = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    return norm_along(difference, float(p), -1)


def _pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    out = norm_along(x1 - x2 + eps, float(p), -1)
    return out.unsqueeze(-1) if keepdim else out


def _pdist(x, p=2.0):
    pairs = [(i, j) for i in range(x.shape[0]) for j in range(i + 1, x.shape[0])]
    if not pairs:
        return x.new_zeros((0,))
    first = torch.tensor([i for i, _ in pairs], dtype=torch.int64)
    second = torch.tensor([j for _, j in pairs], dtype=torch.int64)
    return norm_along(x[first] - x[second], float(p), -1)


def _avg_pool(
    x,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    """Average pooling of the last ``len(kernel_size)`` dimensions as sums of a depthwise
    convolution with a ones kernel, divided by PyTorch's divisor for each window."""
    spatial = len(kernel_size) if isinstance(kernel_size, (list, tuple)) else x.dim() - 2
    kernel = _expand(kernel_size, spatial)
    stride = _expand(stride or kernel, spatial)
    padding = _expand(padding, spatial)
    batched = x.dim() == spatial + 2
    x = x if batched else x.unsqueeze(0)
    sizes = x.shape[2:]
    extra = []
    for size, k, s, p in zip(sizes, kernel, stride, padding, strict=True):
        span = size + 2 * p - k
        count = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (count - 1) * s >= size + p:
            count -= 1  # PyTorch drops a last window that starts in the right padding
        extra.append(max((count - 1) * s + k - (size + 2 * p), 0))
    channels = x.shape[1]
    ones = torch.ones([channels, 1, *kernel], dtype=x.dtype)
    conv = {
        1: torch.nn.functional.conv1d,
        2: torch.nn.functional.conv2d,
        3: torch.nn.functional.conv3d,
    }[spatial]

    def window_sums(values):
        pads = []
        for p, e in reversed(list(zip(padding, extra, strict=True))):
            pads += [p, p + e]
        return conv(torch.nn.functional.pad(values, pads), ones, stride=stride, groups=channels)

    sums = window_sums(x)
    if divisor_override:
        out = sums / divisor_override
    else:
        if count_include_pad:
            inner = torch.nn.functional.pad(
                torch.ones_like(x[:1]), [q for p in reversed(padding) for q in (p, p)]
            )
            pads = []
            for e in reversed(extra):
                pads += [0, e]
            counts = conv(
                torch.nn.functional.pad(inner, pads), ones, stride=stride, groups=channels
            )
        else:
            counts = window_sums(torch.ones_like(x[:1]))
        out = sums / counts
    return out if batched else out.squeeze(0)


def _expand(value, count):
    if isinstance(value, (list, tuple)):
        return list(value) * count if len(value) == 1 else list(value)
    return [value] * count


def _reduced(loss, reduction):
    """``reduction`` as ATen passes it: 0 none, 1 mean, 2 sum."""
    if reduction == 1:
        return loss.mean()
    return loss.sum() if reduction == 2 else loss


def _cosine_embedding_loss(x1, x2, target, margin=0.0, reduction=1):
    eps = 1e-12
    dot = (x1 * x2).sum(-1)
    norms = torch.sqrt(((x1 * x1).sum(-1) + eps) * ((x2 * x2).sum(-1) + eps))
    cosine = dot / norms
    zeros = torch.zeros_like(cosine)
    loss = torch.where(target == 1, 1 - cosine, zeros) + torch.where(
        target == -1, torch.clamp(cosine - margin, min=0), zeros
    )
    return _reduced(loss, reduction)


def _hinge_embedding_loss(x, target, margin=1.0, reduction=1):
    zeros = torch.zeros_like(x)
    beyond = torch.where(target != 1, torch.clamp(margin - x, min=0), zeros)
    return _reduced(beyond + torch.where(target != -1, x, zeros), reduction)


def _poisson_nll_loss(x, target, log_input=True, full=False, eps=1e-8, reduction=1):
    loss = torch.exp(x) - target * x if log_input else x - target * torch.log(x + eps)
    if full:
        stirling = target * torch.log(target) - target + 0.5 * torch.log(2 * math.pi * target)
        loss = loss + torch.where(target > 1, stirling, torch.zeros_like(stirling))
    return _reduced(loss, reduction)


def _windows(size: int, out: int) -> list[tuple[int, int]]:
    return [((i * size) // out, -((-(i + 1) * size) // out)) for i in range(out)]


def _adaptive_max_pool(x, output_size):
    """Values and flat indices (over the pooled dimensions) of adaptive max pooling: the first
    largest value of each window, or its first NaN, as eager picks them."""
    pooled = len(output_size)
    spatial = list(x.shape[x.dim() - pooled :])
    sizes = [s if o is None else o for s, o in zip(spatial, output_size, strict=True)]
    cells = [[]]
    for size, out in zip(spatial, sizes, strict=True):
        cells = [[*cell, window] for cell in cells for window in _windows(size, out)]
    values, indices = [], []
    lead = x.shape[: x.dim() - pooled]
    for cell in cells:
        window = x[(Ellipsis, *[slice(start, end) for start, end in cell])]
        flat = window.reshape(*lead, -1)
        nan_first = torch.where(torch.isnan(flat), torch.full_like(flat, math.inf), flat)
        position = torch.argmax(nan_first, -1)
        values.append(flat.gather(-1, position.unsqueeze(-1)).squeeze(-1))
        # the window position -> the flat index over the pooled dimensions
        index = torch.zeros_like(position)
        remaining = position
        widths = [end - start for start, end in cell]
        strides = [1] * pooled
        for axis in range(pooled - 2, -1, -1):
            strides[axis] = strides[axis + 1] * spatial[axis + 1]
        for axis in range(pooled - 1, -1, -1):
            offset = torch.remainder(remaining, widths[axis]) + cell[axis][0]
            remaining = torch.div(remaining, widths[axis], rounding_mode="floor")
            index = index + offset * strides[axis]
        indices.append(index)
    shape = [*lead, *sizes]
    return torch.stack(values, -1).reshape(shape), torch.stack(indices, -1).reshape(shape)


def _replication_pad(x, padding):
    """Edge padding as a gather of clamped positions (negative padding crops)."""
    for axis in range(len(padding) // 2):
        dim = x.dim() - 1 - axis
        before, after = padding[2 * axis], padding[2 * axis + 1]
        size = x.shape[dim]
        positions = [min(max(p, 0), size - 1) for p in range(-before, size + after)]
        index = torch.tensor(positions, dtype=torch.int64)
        x = x[(slice(None),) * dim + (index,)]
    return x


DECOMPOSITIONS: dict[Any, Callable[..., Any]] = {
    aten.adaptive_max_pool1d: _adaptive_max_pool,
    aten.adaptive_max_pool2d: _adaptive_max_pool,
    aten.adaptive_max_pool3d: _adaptive_max_pool,
    aten.replication_pad1d: _replication_pad,
    aten.replication_pad2d: _replication_pad,
    aten.replication_pad3d: _replication_pad,
    aten.cosine_embedding_loss: _cosine_embedding_loss,
    aten.hinge_embedding_loss: _hinge_embedding_loss,
    aten.poisson_nll_loss: _poisson_nll_loss,
    aten.pdist: _pdist,
    aten._pdist_forward: _pdist,
    aten.avg_pool1d: _avg_pool,
    aten.avg_pool2d: _avg_pool,
    aten.avg_pool3d: _avg_pool,
    aten.adaptive_avg_pool1d: _adaptive_avg_pool,
    aten.adaptive_avg_pool2d: _adaptive_avg_pool,
    aten.adaptive_avg_pool3d: _adaptive_avg_pool,
    aten._adaptive_avg_pool2d: _adaptive_avg_pool,
    aten._adaptive_avg_pool3d: _adaptive_avg_pool,
    aten.softplus: _softplus,
    aten.threshold: _threshold,
    aten.instance_norm: _instance_norm,
    aten.rms_norm: _rms_norm,
    aten.bilinear: _bilinear,
    aten.addbmm: _addbmm,
    aten.cdist: _cdist,
    aten._cdist_forward: lambda x1, x2, p, compute_mode: _cdist(x1, x2, p),
    aten.pairwise_distance: _pairwise_distance,
}
