"""Discrete Fourier transforms as products with constant cosine and sine matrices.

ONNX Runtime computes no complex numbers, so each transform works on (real, imaginary) pairs:
a 1-d transform of length n along one dimension is two real matrix products, and an n-d
transform is one per dimension. The result is assembled with ``torch.complex``; the ONNX backend
writes complex values as real pairs (:mod:`leapp.export.real_pairs`), which removes it again.
Costs O(n^2) per transformed dimension, which suits the short signals of a control loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["DECOMPOSITIONS"]

aten = torch.ops.aten


def _parts(x):
    if x.is_complex():
        return torch.real(x), torch.imag(x)
    real = x if x.dtype.is_floating_point else x.to(torch.get_default_dtype())
    return real, torch.zeros_like(real)


def _resize(t, dim, n):
    """``t`` cut or zero-padded to ``n`` along ``dim``."""
    size = t.shape[dim]
    if n == size:
        return t
    if n < size:
        return t.narrow(dim, 0, n)
    pad = [0, 0] * (t.dim() - dim - 1) + [0, n - size]
    return torch.nn.functional.pad(t, pad)


def _scale(n: int, norm: str | None, inverse: bool) -> float:
    norm = norm or "backward"
    if norm == "ortho":
        return 1 / math.sqrt(n)
    return 1 / n if (norm == "forward") != inverse else 1.0


def _trig(n_in: int, n_out: int, length: int, dtype):
    """cos and sin of 2 pi k t / length, shaped [n_in (t), n_out (k)]."""
    angles = [
        [2 * math.pi * ((k * t) % length) / length for k in range(n_out)] for t in range(n_in)
    ]
    cos = torch.tensor([[math.cos(a) for a in row] for row in angles], dtype=dtype)
    sin = torch.tensor([[math.sin(a) for a in row] for row in angles], dtype=dtype)
    return cos, sin


def _along(t, dim, matrix):
    return torch.movedim(torch.matmul(torch.movedim(t, dim, -1), matrix), -1, dim)


def _dft(re, im, dim, n, norm, inverse, onesided=False):
    """One complex transform along ``dim`` (input resized to ``n``)."""
    dim = dim % re.dim()
    re, im = _resize(re, dim, n), _resize(im, dim, n)
    cos, sin = _trig(n, n // 2 + 1 if onesided else n, n, re.dtype)
    sign = 1.0 if inverse else -1.0  # exp(sign * i * angle)
    out_re = _along(re, dim, cos) - sign * _along(im, dim, sin)
    out_im = _along(im, dim, cos) + sign * _along(re, dim, sin)
    factor = _scale(n, norm, inverse)
    return out_re * factor, out_im * factor


def _dims_and_sizes(x, s, dim):
    if dim is None:
        dim = list(range(x.dim())) if s is None else list(range(x.dim() - len(s), x.dim()))
    dims = [d % x.dim() for d in ([dim] if isinstance(dim, int) else dim)]
    sizes = list(s) if s is not None else [x.shape[d] for d in dims]
    sizes = [x.shape[d] if n == -1 else n for d, n in zip(dims, sizes, strict=True)]
    return dims, sizes


def _fftn(x, s=None, dim=None, norm=None, *, inverse=False):
    dims, sizes = _dims_and_sizes(x, s, dim)
    re, im = _parts(x)
    for d, n in zip(dims, sizes, strict=True):
        re, im = _dft(re, im, d, n, norm, inverse)
    return torch.complex(re, im)


def _rfftn(x, s=None, dim=None, norm=None):
    dims, sizes = _dims_and_sizes(x, s, dim)
    re, im = _parts(x)
    re, im = _dft(re, im, dims[-1], sizes[-1], norm, False, onesided=True)
    for d, n in zip(dims[:-1], sizes[:-1], strict=True):
        re, im = _dft(re, im, d, n, norm, False)
    return torch.complex(re, im)


def _irfft_last(re, im, dim, n, norm):
    """Real inverse transform of a one-sided spectrum along ``dim`` to length ``n``."""
    dim = dim % re.dim()
    half = n // 2 + 1
    re, im = _resize(re, dim, half), _resize(im, dim, half)
    weights = [1.0 if k == 0 or (n % 2 == 0 and k == n // 2) else 2.0 for k in range(half)]
    cos, sin = _trig(n, half, n, re.dtype)
    weight = torch.tensor(weights, dtype=re.dtype)
    cos_t, sin_t = (cos * weight).transpose(0, 1), (sin * weight).transpose(0, 1)  # [k, t]
    zero_edges = torch.tensor([0.0 if w == 1.0 else 1.0 for w in weights], dtype=re.dtype)
    shape = [1] * re.dim()
    shape[dim] = half
    im = im * zero_edges.reshape(shape)  # the imaginary parts of DC and Nyquist are ignored
    out = _along(re, dim, cos_t) - _along(im, dim, sin_t)
    return out * _scale(n, norm, True)


def _irfftn(x, s=None, dim=None, norm=None):
    dims, sizes = _dims_and_sizes(x, s, dim)
    if s is None:  # the default output length undoes a one-sided transform
        sizes[-1] = 2 * (x.shape[dims[-1]] - 1)
    re, im = _parts(x)
    for d, n in zip(dims[:-1], sizes[:-1], strict=True):
        re, im = _dft(re, im, d, n, norm, True)
    return _irfft_last(re, im, dims[-1], sizes[-1], norm)


_DUAL = {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}


def _hfftn(x, s=None, dim=None, norm=None):
    return _irfftn(torch.conj_physical(x) if x.is_complex() else x, s, dim, _DUAL[norm])


def _ihfftn(x, s=None, dim=None, norm=None):
    spectrum = _rfftn(x, s, dim, _DUAL[norm])
    return torch.complex(torch.real(spectrum), -torch.imag(spectrum))


def _one(function):
    """A 1-d transform (n, dim=-1) from its n-d form."""

    def transform(x, n=None, dim=-1, norm=None):
        return function(x, None if n is None else [n], [dim], norm)

    return transform


def _two(function):
    def transform(x, s=None, dim=(-2, -1), norm=None):
        return function(x, s, list(dim), norm)

    return transform


def _ifftn(x, s=None, dim=None, norm=None):
    return _fftn(x, s, dim, norm, inverse=True)


def _polar(magnitude, angle):
    return torch.complex(magnitude * torch.cos(angle), magnitude * torch.sin(angle))


DECOMPOSITIONS: dict[Any, Callable[..., Any]] = {
    aten.polar: _polar,
    aten.fft_fft: _one(_fftn),
    aten.fft_ifft: _one(_ifftn),
    aten.fft_fft2: _two(_fftn),
    aten.fft_ifft2: _two(_ifftn),
    aten.fft_fftn: _fftn,
    aten.fft_ifftn: _ifftn,
    aten.fft_rfft: _one(_rfftn),
    aten.fft_rfft2: _two(_rfftn),
    aten.fft_rfftn: _rfftn,
    aten.fft_irfft: _one(_irfftn),
    aten.fft_irfft2: _two(_irfftn),
    aten.fft_irfftn: _irfftn,
    aten.fft_hfft: _one(_hfftn),
    aten.fft_hfft2: _two(_hfftn),
    aten.fft_hfftn: _hfftn,
    aten.fft_ihfft: _one(_ihfftn),
    aten.fft_ihfft2: _two(_ihfftn),
    aten.fft_ihfftn: _ihfftn,
}
