"""Orthogonal factorizations of small matrices, unrolled over the static size: QR by
Householder reflections (LAPACK's convention, so ``Q`` and ``R`` equal eager's), singular
values by one-sided Jacobi rotations, symmetric eigenvalues by two-sided Jacobi rotations, and
what is unique given those (pseudo-inverse, least squares, rank, condition number, nuclear
norm).

Eigenvectors are not produced, and singular vectors only inside other results: their signs
are a free choice LAPACK makes in its own way, so an artifact could not promise eager's values
for them (products that do not depend on the signs are exact).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["DECOMPOSITIONS"]

aten = torch.ops.aten

_SWEEPS = 6  # Jacobi sweeps: convergence is quadratic; 6 reach double precision for n <= 8


def _unit(m: int, j: int, dtype) -> torch.Tensor:
    return torch.tensor([1.0 if i == j else 0.0 for i in range(m)], dtype=dtype)


def _reflectors(a):
    """LAPACK's geqrf: (packed R and reflectors, tau)."""
    m, n = a.shape[-2], a.shape[-1]
    work, taus = a, []
    rows = torch.arange(m)
    columns = torch.arange(n)
    for j in range(min(m, n)):
        below = torch.tensor([1.0 if i > j else 0.0 for i in range(m)], dtype=a.dtype)
        column = work[..., :, j]
        alpha = column[..., j]
        rest = torch.sqrt((column * column * below).sum(-1))
        norm = torch.sqrt(alpha * alpha + rest * rest)
        beta = torch.where(alpha >= 0, -norm, norm)
        trivial = rest == 0
        safe_beta = torch.where(trivial, torch.ones_like(beta), beta)
        tau = torch.where(trivial, torch.zeros_like(beta), (beta - alpha) / safe_beta)
        scale = torch.where(trivial, torch.zeros_like(beta), 1 / (alpha - safe_beta))
        v = _unit(m, j, a.dtype) + column * below * scale.unsqueeze(-1)  # [..., m]
        keep = (columns >= j).to(a.dtype)
        update = tau.unsqueeze(-1) * torch.matmul(v.unsqueeze(-2), work).squeeze(-2) * keep
        work = work - v.unsqueeze(-1) * update.unsqueeze(-2)
        diagonal = torch.where(trivial, alpha, beta)
        at_column = (columns == j).unsqueeze(0)
        work = torch.where((rows > j).unsqueeze(-1) & at_column, v.unsqueeze(-1), work)
        work = torch.where((rows == j).unsqueeze(-1) & at_column, diagonal[..., None, None], work)
        taus.append(tau)
    return work, torch.stack(taus, -1)


def _reflect(packed, tau, j, target):
    """H_j @ target, with H_j = I - tau_j v_j v_j^T and v_j stored in column j of ``packed``."""
    m = packed.shape[-2]
    below = torch.tensor([1.0 if i > j else 0.0 for i in range(m)], dtype=packed.dtype)
    v = _unit(m, j, packed.dtype) + packed[..., :, j] * below
    projection = torch.matmul(v.unsqueeze(-2), target)  # [..., 1, c]
    return target - tau[..., j, None, None] * v.unsqueeze(-1) * projection


def _apply_reflectors(packed, tau, target):
    """H_1 H_2 ... H_k @ target."""
    for j in range(tau.shape[-1] - 1, -1, -1):
        target = _reflect(packed, tau, j, target)
    return target


def _identity(m, columns, like):
    return torch.eye(m, columns, dtype=like.dtype).expand(*like.shape[:-2], m, columns)


def _householder_product(v, tau):
    return _apply_reflectors(v, tau, _identity(v.shape[-2], v.shape[-1], v))


def _qr(a, mode="reduced"):
    m, n = a.shape[-2], a.shape[-1]
    k = min(m, n)
    packed, tau = _reflectors(a)
    r_rows = m if mode == "complete" else k
    r = torch.triu(packed[..., :r_rows, :])
    if mode == "r":
        return a.new_zeros((0,)), r
    q = _apply_reflectors(packed, tau, _identity(m, m if mode == "complete" else k, a))
    return q, r


def _old_qr(a, some=True):
    return _qr(a, "reduced" if some else "complete")


def _ormqr(a, tau, other, left=True, transpose=False):
    if left:
        if transpose:  # Q^T @ other = H_k ... H_1 @ other
            for j in range(tau.shape[-1]):
                other = _reflect(a, tau, j, other)
            return other
        return _apply_reflectors(a, tau, other)
    q = _apply_reflectors(a, tau, _identity(a.shape[-2], a.shape[-2], a))
    return torch.matmul(other, q.transpose(-2, -1) if transpose else q)


def _rotate(gram_pq, norm_p, norm_q):
    """The Jacobi rotation (c, s) that makes two columns orthogonal."""
    zeta = (norm_q - norm_p) / (2 * torch.where(gram_pq == 0, torch.ones_like(gram_pq), gram_pq))
    t = torch.sign(zeta) / (torch.abs(zeta) + torch.sqrt(1 + zeta * zeta))
    t = torch.where(zeta == 0, torch.ones_like(t), t)
    t = torch.where(gram_pq == 0, torch.zeros_like(t), t)
    c = 1 / torch.sqrt(1 + t * t)
    return c, c * t


def _singular(a, vectors: bool):
    """Singular values (descending) and, with ``vectors``, (U, S, V) of ``a`` ([..., m, n])."""
    wide = a.to(torch.float64)
    flipped = wide.shape[-2] < wide.shape[-1]
    if flipped:
        wide = wide.transpose(-2, -1)
    n = wide.shape[-1]
    columns = [wide[..., :, j] for j in range(n)]
    basis = [_identity(n, n, wide)[..., :, j] for j in range(n)] if vectors else []
    for _ in range(_SWEEPS):
        for p in range(n):
            for q in range(p + 1, n):
                gram = (columns[p] * columns[q]).sum(-1)
                norm_p = (columns[p] * columns[p]).sum(-1)
                norm_q = (columns[q] * columns[q]).sum(-1)
                c, s = (x.unsqueeze(-1) for x in _rotate(gram, norm_p, norm_q))
                columns[p], columns[q] = _turn(columns[p], columns[q], c, s)
                if vectors:
                    basis[p], basis[q] = _turn(basis[p], basis[q], c, s)
    values = torch.stack([torch.sqrt((col * col).sum(-1)) for col in columns], -1)
    if not vectors:
        return torch.sort(values, dim=-1, descending=True)[0], flipped
    safe = torch.where(values == 0, torch.ones_like(values), values)
    left = torch.stack(columns, -1) / safe.unsqueeze(-2)
    return (left, values, torch.stack(basis, -1)), flipped


def _turn(first, second, c, s):
    return c * first - s * second, s * first + c * second


def _svdvals(a, *, driver=None):
    del driver
    values, _ = _singular(a, False)
    return values.to(a.dtype)


def _cutoff(values, m, n, atol, rtol, dtype):
    top = values.amax(-1, keepdim=True)
    if rtol is None:
        rtol = torch.finfo(dtype).eps * max(m, n) if atol is None or atol == 0 else 0.0
    atol = 0.0 if atol is None else atol
    if isinstance(atol, torch.Tensor):
        return torch.maximum(rtol * top, atol.unsqueeze(-1))
    return torch.clamp(rtol * top, min=atol)


def _pinv(a, atol=None, rtol=None, hermitian=False):
    if hermitian:  # eager reads the lower triangle
        a = torch.tril(a) + torch.tril(a, -1).transpose(-2, -1)
    m, n = a.shape[-2], a.shape[-1]
    (left, values, right), flipped = _singular(a, True)
    keep = values > _cutoff(values, m, n, atol, rtol, a.dtype)
    safe = torch.where(keep, values, torch.ones_like(values))
    inverse = torch.where(keep, 1 / safe, torch.zeros_like(values))
    pseudo = torch.matmul(right * inverse.unsqueeze(-2), left.transpose(-2, -1))
    return (pseudo.transpose(-2, -1) if flipped else pseudo).to(a.dtype)


def _pinverse(a, rcond=1e-15):
    return _pinv(a, rtol=rcond)


def _lstsq(a, b, rcond=None, *, driver=None):
    """Solution and the extras eager returns for ``driver`` (gelsy on the CPU by default):
    residuals for tall full-rank systems, the rank, the singular values."""
    driver = driver or "gelsy"
    vector = b.dim() == a.dim() - 1
    rhs = b.unsqueeze(-1) if vector else b
    solution = torch.matmul(_pinv(a, rtol=rcond), rhs)
    empty = a.new_zeros((0,))
    m, n = a.shape[-2], a.shape[-1]
    residuals = empty
    if m > n and driver != "gelsy":
        residuals = ((torch.matmul(a, solution) - rhs) ** 2).sum(-2)
        residuals = residuals.squeeze(-1) if vector else residuals
    rank = _matrix_rank(a, rtol=rcond) if driver != "gels" else torch.zeros(0, dtype=torch.int64)
    values = _svdvals(a) if driver in ("gelsd", "gelss") else empty
    return (solution.squeeze(-1) if vector else solution), residuals, rank, values


def _matrix_rank(a, *, atol=None, rtol=None, hermitian=False):
    values = torch.abs(_eigenvalues(a)) if hermitian else _singular(a, False)[0]
    m, n = a.shape[-2], a.shape[-1]
    return (values > _cutoff(values, m, n, atol, rtol, a.dtype)).sum(-1)


def _cond(a, p=None):
    if p not in (None, 2, -2):
        raise NotImplementedError(f"cond with p={p!r}")
    values = _singular(a, False)[0]
    ratio = values[..., 0] / values[..., -1] if p != -2 else values[..., -1] / values[..., 0]
    return ratio.to(a.dtype)


def _eigenvalues(a):
    """Eigenvalues (ascending) of the symmetric matrix in ``a``'s lower triangle."""
    wide = a.to(torch.float64)
    n = wide.shape[-1]
    wide = torch.tril(wide) + torch.tril(wide, -1).transpose(-2, -1)
    for _ in range(_SWEEPS):
        for p in range(n):
            for q in range(p + 1, n):
                apq = wide[..., p, q]
                theta = (wide[..., q, q] - wide[..., p, p]) / (
                    2 * torch.where(apq == 0, torch.ones_like(apq), apq)
                )
                t = torch.sign(theta) / (torch.abs(theta) + torch.sqrt(1 + theta * theta))
                t = torch.where(theta == 0, torch.ones_like(t), t)
                t = torch.where(apq == 0, torch.zeros_like(t), t)
                c = 1 / torch.sqrt(1 + t * t)
                s = c * t
                diagonal, skew = _rotation_pattern(n, p, q)
                rotation = (
                    torch.eye(n, dtype=torch.float64)
                    + (c - 1)[..., None, None] * diagonal
                    + s[..., None, None] * skew
                )
                wide = torch.matmul(torch.matmul(rotation.transpose(-2, -1), wide), rotation)
    # (the exporter writes diagonal() of doubles as an If with a float branch)
    diagonal = (wide * torch.eye(n, dtype=torch.float64)).sum(-1)
    return torch.sort(diagonal, dim=-1)[0]


def _rotation_pattern(n: int, p: int, q: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Constant matrices: ones at (p, p) and (q, q); +1 at (p, q), -1 at (q, p)."""
    diagonal = [[1.0 if i == j and i in (p, q) else 0.0 for j in range(n)] for i in range(n)]
    skew = [[0.0] * n for _ in range(n)]
    skew[p][q], skew[q][p] = 1.0, -1.0
    return torch.tensor(diagonal, dtype=torch.float64), torch.tensor(skew, dtype=torch.float64)


def _eigvalsh(a, uplo="L"):
    if uplo == "U":
        a = a.transpose(-2, -1)
    return _eigenvalues(a).to(a.dtype)


def _nuclear_norm(a, keepdim=False):
    total = _singular(a, False)[0].sum(-1).to(a.dtype)
    return total[..., None, None] if keepdim else total


def _matrix_norm(a, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    if dtype is not None:
        a = a.to(dtype)
    rows, cols = (d % a.dim() for d in dim)
    moved = torch.movedim(a, (rows, cols), (a.dim() - 2, a.dim() - 1))
    magnitude = torch.abs(moved)
    if ord == "fro":
        out = torch.sqrt((magnitude * magnitude).sum((-2, -1)))
    elif ord == "nuc":
        out = _singular(moved, False)[0].sum(-1).to(a.dtype)
    elif ord in (2, -2):
        values = _singular(moved, False)[0].to(a.dtype)
        out = values[..., 0] if ord == 2 else values[..., -1]
    elif ord in (math.inf, -math.inf):
        sums = magnitude.sum(-1)
        out = sums.amax(-1) if ord > 0 else sums.amin(-1)
    elif ord in (1, -1):
        sums = magnitude.sum(-2)
        out = sums.amax(-1) if ord > 0 else sums.amin(-1)
    else:
        raise NotImplementedError(f"matrix_norm with ord={ord!r}")
    if keepdim:
        out = out.unsqueeze(min(rows, cols)).unsqueeze(max(rows, cols))
    return out


def _svd(a, full_matrices=True, compute_uv=True, *, driver=None):
    """(U, S, Vh) by Jacobi rotations. The vectors' signs need not be LAPACK's: products that
    do not depend on them (U S Vh, a pseudo-inverse, a nuclear norm) are exact, and an output
    that shows them fails validation instead of passing silently."""
    del driver
    m, n = a.shape[-2], a.shape[-1]
    if not compute_uv:
        empty = a.new_zeros((0,))
        return empty, _svdvals(a), empty
    if full_matrices and m != n:
        raise NotImplementedError("full singular bases of a non-square matrix")
    (left, values, right), flipped = _singular(a, True)
    values, order = torch.sort(values, dim=-1, descending=True)
    left = left.gather(-1, order.unsqueeze(-2).expand(left.shape))
    right = right.gather(-1, order.unsqueeze(-2).expand(right.shape))
    if flipped:
        left, right = right, left
    return left.to(a.dtype), values.to(a.dtype), right.transpose(-2, -1).to(a.dtype)


def _eigh_values_only(a, uplo="L", compute_v=True):
    if compute_v:
        raise NotImplementedError("eigenvectors (their signs are LAPACK's choice)")
    return _eigvalsh(a, uplo), a.new_zeros((0,))


DECOMPOSITIONS: dict[Any, Callable[..., Any]] = {
    aten._linalg_svd: _svd,
    aten._linalg_eigh: _eigh_values_only,
    aten.geqrf: _reflectors,
    aten.linalg_householder_product: _householder_product,
    aten.linalg_qr: _qr,
    aten.qr: _old_qr,
    aten.ormqr: _ormqr,
    aten.linalg_svdvals: _svdvals,
    aten.linalg_pinv: _pinv,
    aten.pinverse: _pinverse,
    aten.linalg_lstsq: _lstsq,
    aten.linalg_matrix_rank: _matrix_rank,
    aten.linalg_cond: _cond,
    aten.linalg_eigvalsh: _eigvalsh,
    aten.nuclear_norm: _nuclear_norm,
    aten.linalg_matrix_norm: _matrix_norm,
}
