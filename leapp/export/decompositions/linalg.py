"""Linear algebra of small matrices: Cholesky and LU factorizations, triangular solves,
inverses, solves and determinants, unrolled over the static matrix size.

ONNX has no factorization operators. With fixed shapes, the textbook algorithms become
straight-line code: an n x n Cholesky factorization is n column updates, an LU factorization
with partial pivoting (the row of largest magnitude, as LAPACK picks it) n pivot selections and
eliminations. That suits the small matrices of robot control (inertia matrices, Jacobians, a
few dozen rows); the artifact grows with n^2 operations. Matrices eager PyTorch refuses
(singular, not positive definite) give NaN or infinity here instead of an error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["DECOMPOSITIONS"]

aten = torch.ops.aten


def _mask(condition: list[bool], dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor([1.0 if c else 0.0 for c in condition], dtype=dtype)


def _cholesky_lower(a: torch.Tensor) -> torch.Tensor:
    n = a.shape[-1]
    columns: list[torch.Tensor] = []
    for j in range(n):
        column = a[..., :, j]
        for previous in columns:
            column = column - previous * previous[..., j : j + 1]
        pivot = torch.sqrt(column[..., j : j + 1])
        below = _mask([i >= j for i in range(n)], a.dtype)
        columns.append(column / pivot * below)
    return torch.stack(columns, -1)


def _cholesky(a, upper=False):
    # With upper=True, eager reads the upper triangle: the lower factor of a's transpose.
    if upper:
        return _cholesky_lower(a.transpose(-2, -1)).transpose(-2, -1)
    return _cholesky_lower(a)


def _cholesky_ex(a, *, upper=False, check_errors=False):
    del check_errors
    info = torch.zeros(a.shape[:-2], dtype=torch.int32)
    return _cholesky(a, upper), info


def _substitute(a, b, upper, unitriangular):
    """Solve ``a @ x = b`` for triangular ``a`` ([..., n, n]) and ``b`` ([..., n, m])."""
    n = a.shape[-1]
    rows: list[torch.Tensor | None] = [None] * n
    order = range(n - 1, -1, -1) if upper else range(n)
    for i in order:
        row = b[..., i, :]
        for k in range(n):
            if rows[k] is not None:
                row = row - a[..., i, k : k + 1] * rows[k]
        rows[i] = row if unitriangular else row / a[..., i, i : i + 1]
    return torch.stack(rows, -2)


def _solve_triangular(a, b, *, upper, left=True, unitriangular=False):
    if left:
        return _substitute(a, b, upper, unitriangular)
    transposed = _substitute(a.transpose(-2, -1), b.transpose(-2, -1), not upper, unitriangular)
    return transposed.transpose(-2, -1)


def _triangular_solve(b, a, upper=True, transpose=False, unitriangular=False):
    if transpose:
        a, upper = a.transpose(-2, -1), not upper
    solution = _substitute(a, b, upper, unitriangular)
    return solution, (a.transpose(-2, -1) if transpose else a).clone()


def _cholesky_solve(b, factor, upper=False):
    lower = factor.transpose(-2, -1) if upper else factor
    middle = _substitute(lower, b, False, False)
    return _substitute(lower.transpose(-2, -1), middle, True, False)


def _cholesky_inverse(factor, upper=False):
    n = factor.shape[-1]
    identity = torch.eye(n, dtype=factor.dtype).expand(factor.shape)
    return _cholesky_solve(identity, factor, upper)


def _lu(a):
    """Partial-pivoting LU of ``a`` ([..., m, n]): (packed LU, 0-based pivot rows, P) with
    ``P @ a = L @ U``; row swaps move the multipliers already stored, as LAPACK's do."""
    m, n = a.shape[-2], a.shape[-1]
    work = a
    permutation = torch.eye(m, dtype=a.dtype).expand(*a.shape[:-2], m, m)
    rows = torch.arange(m)
    pivots = []
    for j in range(min(m, n)):
        magnitude = torch.abs(work[..., :, j])
        candidates = torch.where(rows < j, torch.full_like(magnitude, -1.0), magnitude)
        pivot = torch.argmax(candidates, -1, keepdim=True)  # the first largest, as LAPACK
        pivots.append(pivot.squeeze(-1))
        swap = _swap_matrix(pivot, j, m, a.dtype)
        work = torch.matmul(swap, work)
        permutation = torch.matmul(swap, permutation)
        factors = work[..., :, j] / work[..., j, j : j + 1]
        factors = factors * _mask([i > j for i in range(m)], a.dtype)
        pivot_row = work[..., j : j + 1, :] * _mask([c >= j for c in range(n)], a.dtype)
        work = work - factors.unsqueeze(-1) * pivot_row
        below = (rows > j).unsqueeze(-1) & (torch.arange(n) == j).unsqueeze(0)
        work = torch.where(below, factors.unsqueeze(-1).expand(work.shape), work)
    return work, torch.stack(pivots, -1), permutation


def _swap_matrix(pivot, j, n, dtype):
    """The permutation matrix that swaps row ``j`` with row ``pivot`` ([..., 1])."""
    rows = torch.arange(n)
    target = torch.where(rows == j, pivot, torch.where(rows == pivot, j, rows))  # [..., n]
    return (target.unsqueeze(-1) == rows).to(dtype)


def _unpack(packed):
    m, n = packed.shape[-2], packed.shape[-1]
    k = min(m, n)
    lower = torch.tril(packed, -1)[..., :, :k] + torch.eye(m, k, dtype=packed.dtype)
    return lower, torch.triu(packed)[..., :k, :]


def _lu_factor_ex(a, *, pivot=True, check_errors=False):
    del pivot, check_errors
    packed, pivots, _ = _lu(a)
    return packed, (pivots + 1).to(torch.int32), torch.zeros(a.shape[:-2], dtype=torch.int32)


def _lu_factor(a, *, pivot=True):
    packed, pivots, _ = _lu_factor_ex(a, pivot=pivot)
    return packed, pivots


def _linalg_lu(a, *, pivot=True):
    del pivot
    packed, _, permutation = _lu(a)
    lower, upper = _unpack(packed)
    return permutation.transpose(-2, -1), lower, upper


def _permutation_from_pivots(pivots, m, dtype):
    """P with ``a = P @ L @ U`` from LAPACK's 1-based sequential row swaps."""
    permutation = torch.eye(m, dtype=dtype).expand(*pivots.shape[:-1], m, m)
    for j in range(pivots.shape[-1]):
        swap = _swap_matrix(pivots[..., j : j + 1].to(torch.int64) - 1, j, m, dtype)
        permutation = torch.matmul(swap, permutation)
    return permutation.transpose(-2, -1)


def _lu_unpack(packed, pivots, unpack_data=True, unpack_pivots=True):
    del unpack_data, unpack_pivots
    lower, upper = _unpack(packed)
    return _permutation_from_pivots(pivots, packed.shape[-2], packed.dtype), lower, upper


def _lu_solve_packed(packed, pivots, b, *, left=True, adjoint=False):
    """Solve with ``a = P @ L @ U``: ``a @ x = b`` (``left``) or ``x @ a = b``; ``adjoint``
    solves with ``a``'s transpose (real matrices)."""
    permutation, lower, upper = _lu_unpack(packed, pivots)

    def solve(rhs):  # a @ x = rhs
        moved = torch.matmul(permutation.transpose(-2, -1), rhs)
        return _substitute(upper, _substitute(lower, moved, False, True), True, False)

    def solve_transposed(rhs):  # a^T @ x = rhs
        inner = _substitute(upper.transpose(-2, -1), rhs, False, False)
        return torch.matmul(permutation, _substitute(lower.transpose(-2, -1), inner, True, True))

    if left:
        return solve_transposed(b) if adjoint else solve(b)
    flipped = b.transpose(-2, -1)
    return (solve(flipped) if adjoint else solve_transposed(flipped)).transpose(-2, -1)


def _lu_solve(b, packed, pivots):
    return _lu_solve_packed(packed, pivots, b)


def _solve(a, b, *, left=True):
    if not left:
        return _solve(a.transpose(-2, -1), b.transpose(-2, -1)).transpose(-2, -1)
    vector = b.dim() == a.dim() - 1
    rhs = b.unsqueeze(-1) if vector else b
    packed, _, permutation = _lu(a)
    lower, upper = _unpack(packed)
    x = _substitute(
        upper, _substitute(lower, torch.matmul(permutation, rhs), False, True), True, False
    )
    return x.squeeze(-1) if vector else x


def _solve_ex(a, b, *, left=True, check_errors=False):
    del check_errors
    return _solve(a, b, left=left), torch.zeros(a.shape[:-2], dtype=torch.int32)


def _inv(a):
    identity = torch.eye(a.shape[-1], dtype=a.dtype).expand(a.shape)
    return _solve(a, identity)


def _inv_ex(a, *, check_errors=False):
    del check_errors
    return _inv(a), torch.zeros(a.shape[:-2], dtype=torch.int32)


def _slogdet(a):
    packed, pivots, _ = _lu(a)
    diagonal = torch.diagonal(packed, 0, -2, -1)
    swaps = (pivots != torch.arange(a.shape[-1])).to(torch.int64).sum(-1)
    parity = (1 - 2 * (swaps % 2)).to(a.dtype)
    sign = parity * torch.sign(diagonal).prod(-1)
    return sign, torch.log(torch.abs(diagonal)).sum(-1)


def _tensorinv(a, ind=2):
    rows = 1
    for size in a.shape[:ind]:
        rows *= size
    inverse = _inv(a.reshape(rows, -1))
    return inverse.reshape(*a.shape[ind:], *a.shape[:ind])


def _matrix_power(a, n):
    if n < 0:
        a, n = _inv(a), -n
    result = torch.eye(a.shape[-1], dtype=a.dtype).expand(a.shape)
    square = a
    while n:
        if n & 1:
            result = torch.matmul(result, square)
        n >>= 1
        if n:
            square = torch.matmul(square, square)
    return result.clone()


DECOMPOSITIONS: dict[Any, Callable[..., Any]] = {
    aten.cholesky: _cholesky,
    aten.linalg_cholesky: _cholesky,
    aten.linalg_cholesky_ex: _cholesky_ex,
    aten.linalg_solve_triangular: _solve_triangular,
    aten.triangular_solve: _triangular_solve,
    aten.cholesky_solve: _cholesky_solve,
    aten.cholesky_inverse: _cholesky_inverse,
    aten.linalg_lu_factor_ex: _lu_factor_ex,
    aten.linalg_lu_factor: _lu_factor,
    aten.linalg_lu: _linalg_lu,
    aten.lu_unpack: _lu_unpack,
    aten.linalg_lu_solve: _lu_solve_packed,
    aten.lu_solve: _lu_solve,
    aten.linalg_solve: _solve,
    aten.linalg_solve_ex: _solve_ex,
    aten.linalg_inv: _inv,
    aten.linalg_inv_ex: _inv_ex,
    aten.linalg_slogdet: _slogdet,
    aten.linalg_tensorinv: _tensorinv,
    aten.linalg_matrix_power: _matrix_power,
}
