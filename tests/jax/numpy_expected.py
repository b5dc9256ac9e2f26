#!/usr/bin/env python3
"""JAX's values for the programs of tests/numpy_api.rs.

Each case applies one function of `jax.numpy` (or `jax.lax.dot_general`)
to fixed inputs and records its value and, where it has one, the gradient
of `wsum(out) = sum_k out.ravel()[k] * cos(k)` with respect to each float
input. This script prints them as Rust `const` arrays; the Rust test file
holds the printed block verbatim (between the `// --- recorded by`
markers).

Regenerate (JAX on the CPU, float64):
    python3 -m venv .venv-bench && .venv-bench/bin/pip install jax jaxlib numpy
    .venv-bench/bin/python tests/jax/numpy_expected.py > /tmp/expected.rs
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jax
import jax.numpy as jnp
import numpy as np

from _record import OUT, emit  # noqa: E402 (after the path)


def t(shape, a):
    """sin(a (k + 1)) * 2 in row-major order: distinct values of both signs."""
    n = int(np.prod(shape))
    return jnp.asarray((np.sin(a * (np.arange(n) + 1.0)) * 2.0).reshape(shape))


def wsum(out):
    flat = jnp.ravel(jnp.asarray(out, dtype=jnp.float64))
    return jnp.sum(flat * jnp.cos(jnp.arange(flat.size, dtype=jnp.float64)))


def case(name, f, *args, grad=True):
    """Records f(*args) and, if grad, the gradient of wsum(f) in every float argument."""
    out = f(*args)
    outs = out if isinstance(out, (list, tuple)) else [out]
    emit(name, jnp.concatenate([jnp.ravel(jnp.asarray(o, dtype=jnp.float64)) for o in outs]))
    if grad:
        floats = [i for i, a in enumerate(args) if jnp.issubdtype(jnp.asarray(a).dtype, jnp.floating)]
        g = jax.grad(lambda *xs: wsum(jnp.concatenate([jnp.ravel(o) for o in (
            lambda r: r if isinstance(r, (list, tuple)) else [r])(f(*xs))])), argnums=floats)(*args)
        emit(name + "_grad", jnp.concatenate([jnp.ravel(x) for x in g]))


X34 = t((3, 4), 0.7)
X23 = t((2, 3), 1.3)
X7 = t((7,), 0.9)
X234 = t((2, 3, 4), 0.45)

# --- manipulation --------------------------------------------------------------
case("roll_axis", lambda x: jnp.roll(x, 2, axis=1), X34)
case("roll_flat", lambda x: jnp.roll(x, -5), X34)
case("roll_axes", lambda x: jnp.roll(x, (1, -1, 3), axis=(0, 1, 1)), X34)
case("tile", lambda x: jnp.tile(x, (2, 1, 2)), X23)
case("repeat_axis", lambda x: jnp.repeat(x, 2, axis=1), X23)
case("repeat_flat", lambda x: jnp.repeat(x, 3), X23)
case("repeat_each", lambda x: jnp.repeat(x, jnp.array([1, 0, 2]), axis=1, total_repeat_length=3), X23)
case("split", lambda x: jnp.split(x, 3, axis=1), t((2, 6), 0.3))
case("array_split", lambda x: jnp.array_split(x, 3), X7)
case("split_at", lambda x: jnp.split(x, [2, 5, 6]), X7)
case("diff", lambda x: jnp.diff(x, 2, axis=1), t((3, 5), 0.8))
case("meshgrid_xy", lambda x, y: jnp.meshgrid(x, y), t((3,), 0.5), t((2,), 0.6))
case("meshgrid_ij", lambda x, y, z: jnp.meshgrid(x, y, z, indexing="ij"), t((3,), 0.5), t((2,), 0.6), t((2,), 0.2))
case("moveaxis", lambda x: jnp.moveaxis(x, 0, -1), X234)
case("rot90_1", lambda x: jnp.rot90(x, 1, axes=(0, 2)), X234)
case("rot90_3", lambda x: jnp.rot90(x, 3), X234)
case("rot90_neg", lambda x: jnp.rot90(x, -1, axes=(2, 1)), X234)
case("diag_embed", lambda v: jnp.diag(v, 1), t((3,), 0.4))
case("diag_embed_neg", lambda v: jnp.diag(v, -2), t((3,), 0.4))
case("diag_read", lambda x: jnp.diag(x, 1), X34)
case("stacks", lambda a, b: [jnp.hstack([a, b]), jnp.vstack([a, b]), jnp.column_stack([a, b])], t((3,), 0.4), t((3,), 0.9))

# --- products --------------------------------------------------------------------
A = t((2, 3), 0.3)
B = t((3, 4), 0.5)
S = t((3, 3), 0.7)
case("einsum_matmul", lambda a, b: jnp.einsum("ij,jk->ik", a, b), A, B)
case("einsum_implicit", lambda a, b: jnp.einsum("ij,jk", a, b), A, B)
case("einsum_diag", lambda s: jnp.einsum("ii->i", s), S)
case("einsum_trace", lambda s: jnp.einsum("ii", s), S)
case("einsum_sum", lambda a: jnp.einsum("ij->", a), A)
case("einsum_transpose", lambda a: jnp.einsum("ij->ji", a), A)
case("einsum_batched", lambda a, b: jnp.einsum("bij,bjk->bik", a, b), t((2, 2, 3), 0.3), t((2, 3, 2), 0.6))
case("einsum_outer", lambda x, y: jnp.einsum("i,j->ij", x, y), t((3,), 0.3), t((4,), 0.6))
case("einsum_ellipsis", lambda a, b: jnp.einsum("...ij,...jk->...ik", a, b), t((2, 2, 3), 0.3), t((3, 2), 0.6))
case("einsum_chain", lambda a, b, c: jnp.einsum("ijk,ikl,lm->jm", a, b, c), t((2, 3, 4), 0.3), t((2, 4, 2), 0.6), t((2, 3), 0.2))
case("einsum_rowdot", lambda a, b: jnp.einsum("ij,ij->i", a, b), A, t((2, 3), 0.8))
case("einsum_repeated", lambda x: jnp.einsum("iij->ji", x), t((3, 3, 2), 0.35))
case("einsum_broadcast", lambda a, b: jnp.einsum("ij,kj->ikj", a, b), t((2, 3), 0.3), t((1, 3), 0.6))
case("einsum_sum_ellipsis", lambda a: jnp.einsum("...i->i", a), t((2, 2, 3), 0.3))
case("dot_general", lambda a, b: jax.lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))), t((2, 3, 4), 0.3), t((2, 4), 0.6))
case("dot_general_perm", lambda a, b: jax.lax.dot_general(a, b, (((0, 2), (2, 0)), ((), ()))), t((2, 3, 4), 0.3), t((4, 5, 2), 0.6))
case("tensordot", lambda a, b: jnp.tensordot(a, b, 2), t((2, 3, 4), 0.3), t((3, 4, 5), 0.6))
case("tensordot_axes", lambda a, b: jnp.tensordot(a, b, axes=([0, 2], [2, 0])), t((2, 3, 4), 0.3), t((4, 5, 2), 0.6))
case("outer", lambda a, b: jnp.outer(a, b), A, t((3,), 0.6))
case("inner", lambda a, b: jnp.inner(a, b), A, t((4, 3), 0.6))
case("dot_nd", lambda a, b: jnp.dot(a, b), t((2, 3, 4), 0.3), t((5, 4, 2), 0.6))
case("dot_vec", lambda a, b: jnp.dot(a, b), t((2, 3, 4), 0.3), t((4,), 0.6))
case("vdot", lambda a, b: jnp.vdot(a, b), A, t((3, 2), 0.6))
case("kron", lambda a, b: jnp.kron(a, b), A, t((2, 2), 0.6))
case("kron_ranks", lambda a, b: jnp.kron(a, b), t((3,), 0.3), t((2, 2), 0.6))
case("cross3", lambda a, b: jnp.cross(a, b), t((4, 3), 0.3), t((3,), 0.6))
case("cross2", lambda a, b: jnp.cross(a, b), t((4, 2), 0.3), t((4, 2), 0.6))
case("cross_axis0", lambda a, b: jnp.cross(a, b, axis=0), t((3, 2), 0.3), t((3, 2), 0.6))

# --- elementwise -----------------------------------------------------------------
P = jnp.array([0.0, 0.0, 3.0, -4.0, 1e-200, 1e200, jnp.inf, 2.0, -jnp.inf, 0.5])
Q = jnp.array([0.0, 2.0, 4.0, 3.0, 1e-200, 1e200, 1.0, -jnp.inf, 7.0, 0.5])
case("hypot", jnp.hypot, P[jnp.array([1, 2, 3, 7, 9])], Q[jnp.array([1, 2, 3, 7, 9])])
case("hypot_special", jnp.hypot, P, Q, grad=False)
# (JAX's gradient at (1e-200, 1e-200) is inf and at (1e200, 1e200) 0.98 of the
# true 1/sqrt(2): its division's derivative under- and overflows there.)
L1 = jnp.array([0.0, 1.0, -3.0, 800.0, -800.0, 2.0, 30.0])
L2 = jnp.array([0.0, -2.0, -3.0, 799.0, -801.0, 2.0, -40.0])
case("logaddexp", jnp.logaddexp, L1, L2)
case("logaddexp_inf", jnp.logaddexp, jnp.array([-jnp.inf, jnp.inf, -jnp.inf, 1.0]), jnp.array([-jnp.inf, jnp.inf, 2.0, jnp.inf]), grad=False)
case("logaddexp2", jnp.logaddexp2, L1, L2)
case("nan_to_num", lambda x: jnp.nan_to_num(x, nan=-1.0, posinf=9.0), jnp.array([jnp.nan, jnp.inf, -jnp.inf, 2.5]), grad=False)
case("nan_to_num_default", lambda x: jnp.nan_to_num(x), jnp.array([jnp.nan, jnp.inf, -jnp.inf, 2.5]), grad=False)
case("sinc", jnp.sinc, jnp.array([0.0, 0.5, -1.5, 1e-3, 2.0]))
emit("sinc_second_at_zero", jax.grad(jax.grad(jnp.sinc))(0.0))
case("heaviside", jnp.heaviside, jnp.array([-1.0, 0.0, 2.0]), jnp.array([0.5, 0.5, 0.5]), grad=False)
FD_A = jnp.array([7.0, -7.0, 7.0, -7.0, 6.5, -0.5])
FD_B = jnp.array([2.0, 2.0, -2.0, -2.0, 2.0, 3.0])
case("floor_divide", jnp.floor_divide, FD_A, FD_B, grad=False)
case("floor_divide_int", jnp.floor_divide, FD_A[:4].astype(jnp.int64), FD_B[:4].astype(jnp.int64), grad=False)
case("remainder", jnp.remainder, FD_A, FD_B, grad=False)
case("remainder_int", jnp.remainder, FD_A[:4].astype(jnp.int64), FD_B[:4].astype(jnp.int64), grad=False)
case("fmod", jnp.fmod, FD_A, FD_B, grad=False)
case("isclose", lambda a, b: jnp.isclose(a, b, rtol=1e-5, atol=1e-8),
     jnp.array([1.0, 1.0, jnp.nan, jnp.inf, 0.0]), jnp.array([1.0 + 1e-6, 1.1, jnp.nan, jnp.inf, 1e-9]), grad=False)

# --- statistics ------------------------------------------------------------------
X35 = t((3, 5), 0.8)
case("var_ddof", lambda x: jnp.var(x, axis=1, ddof=1), X35)
case("var_all", lambda x: jnp.var(x, ddof=1), X35)
case("std_ddof", lambda x: jnp.std(x, axis=0, ddof=1, keepdims=True), X35)
for m in ["linear", "lower", "higher", "midpoint", "nearest"]:
    case(f"quantile_{m}", lambda x, m=m: jnp.quantile(x, jnp.array([0.0, 0.3, 0.5, 0.625, 0.75, 1.0]), axis=1, method=m), X35)
case("quantile_keepdims", lambda x: jnp.quantile(x, 0.4, axis=0, keepdims=True), X35)
case("median_all", lambda x: jnp.median(x), X35)
case("median_axis", lambda x: jnp.median(x, axis=1), t((3, 4), 0.8))
case("percentile", lambda x: jnp.percentile(x, 90.0, axis=1), X35)
case("median_nan", lambda x: jnp.median(x, axis=1), jnp.array([[1.0, jnp.nan, 3.0], [1.0, 2.0, 3.0]]), grad=False)
NANS = jnp.array([[1.0, jnp.nan, 3.0], [jnp.nan, 2.0, 5.0]])
case("nansum", lambda x: jnp.nansum(x, axis=1), NANS, grad=False)
case("nanmean", lambda x: jnp.nanmean(x), NANS, grad=False)
case("average", lambda x, w: jnp.average(x, axis=1, weights=w), X35, t((5,), 0.2) + 3.0)
case("average_all", lambda x, w: jnp.average(x, weights=w), X35, t((3, 5), 0.2) + 3.0)
case("cov", lambda m: jnp.cov(m), X35)
case("cov_cols", lambda m: jnp.cov(m, rowvar=False, ddof=0), t((5, 3), 0.8))
case("cov_vec", lambda m: jnp.cov(m), t((6,), 0.8))
case("corrcoef", lambda m: jnp.corrcoef(m), X35)
case("count_nonzero", lambda x: jnp.count_nonzero(x, axis=1), jnp.array([[0.0, 1.0, 2.0], [0.0, 0.0, -1.0]]), grad=False)
case("bincount", lambda x: jnp.bincount(x, length=5), jnp.array([-1, -1, 1, 3, 10, 4]), grad=False)
case("bincount_weights", lambda x, w: jnp.bincount(x, w, length=4), jnp.array([0, 2, 2, 7, 1]), t((5,), 0.6))

# --- searching -------------------------------------------------------------------
SORTED = jnp.array([-1.0, 0.0, 0.0, 2.0, 3.5, 3.5, 3.5, 9.0, jnp.nan])
QUERY = jnp.array([-5.0, -1.0, 0.0, 1.0, 3.5, 9.0, 10.0, jnp.nan])
case("searchsorted_left", lambda a, v: jnp.searchsorted(a, v, side="left"), SORTED, QUERY, grad=False)
case("searchsorted_right", lambda a, v: jnp.searchsorted(a, v, side="right"), SORTED, QUERY, grad=False)
case("searchsorted_2d", lambda a, v: jnp.searchsorted(a, v), jnp.arange(10.0), jnp.array([[2.5, -1.0], [9.0, 100.0]]), grad=False)
XP = jnp.array([0.0, 1.0, 1.5, 3.0, 4.0])
FP = jnp.array([1.0, -1.0, 2.0, 0.5, 0.0])
XI = jnp.array([-1.0, 0.25, 1.0, 1.2, 2.0, 3.9, 5.0])
case("interp", lambda x, xp, fp: jnp.interp(x, xp, fp), XI, XP, FP)
case("interp_lr", lambda x, xp, fp: jnp.interp(x, xp, fp, left=-7.0, right=7.0), XI, XP, FP)

# --- polynomials and signals -----------------------------------------------------
case("polyval", jnp.polyval, jnp.array([2.0, -1.0, 0.5, 3.0]), t((2, 3), 0.5))
SIG = t((7,), 0.5)
KER = t((3,), 0.9)
for mode in ["full", "same", "valid"]:
    case(f"convolve_{mode}", lambda a, v, mode=mode: jnp.convolve(a, v, mode=mode), SIG, KER)
    case(f"convolve_short_{mode}", lambda a, v, mode=mode: jnp.convolve(a, v, mode=mode), t((4,), 0.3), t((6,), 0.7))
    case(f"correlate_{mode}", lambda a, v, mode=mode: jnp.correlate(a, v, mode=mode), SIG, t((4,), 0.9))
case("trapezoid_dx", lambda y: jnp.trapezoid(y, dx=0.5, axis=1), X35)
case("trapezoid_x", lambda y, x: jnp.trapezoid(y, x, axis=1), X35, jnp.cumsum(jnp.abs(t((5,), 0.3))))

# --- selections of static size -------------------------------------------------
NZ = jnp.array([[0.0, 2.0, 0.0], [3.0, 4.0, 0.0]])
case("nonzero", lambda x: jnp.nonzero(x, size=4, fill_value=-1), NZ, grad=False)
case("nonzero_short", lambda x: jnp.nonzero(x, size=2), NZ, grad=False)
case("flatnonzero", lambda x: jnp.flatnonzero(x, size=5, fill_value=9), NZ, grad=False)
case("argwhere", lambda x: jnp.argwhere(x, size=4, fill_value=0), NZ, grad=False)
UQ = jnp.array([3.0, 1.0, jnp.nan, 3.0, 2.0, 1.0, jnp.nan])
case("unique", lambda x: jnp.unique(x, size=6), UQ, grad=False)
case("unique_fill", lambda x: jnp.unique(x, size=3, fill_value=-1.0), jnp.array([[2.0, 2.0], [5.0, 2.0]]), grad=False)
case("unique_grad", lambda x: jnp.unique(x, size=4, fill_value=0.0), jnp.array([0.3, -1.2, 0.3, 2.5]))
case("unique_int", lambda x: jnp.unique(x, size=4), jnp.array([4, -2, 4, 7, 7]), grad=False)
HX = t((40,), 0.37)
case("histogram", lambda x: jnp.histogram(x, bins=5), HX, grad=False)
case("histogram_range", lambda x, w: jnp.histogram(x, bins=4, range=(-1.0, 1.5), weights=w), HX, t((40,), 0.11))
case("histogram_constant", lambda x: jnp.histogram(x, bins=2), jnp.array([1.0, 1.0, 1.0]), grad=False)
BINS = jnp.array([0.0, 1.0, 2.5, 4.0])
DX = jnp.array([-1.0, 0.0, 0.5, 1.0, 2.5, 3.0, 4.0, 5.0])
case("digitize", lambda x, b: jnp.digitize(x, b), DX, BINS, grad=False)
case("digitize_right", lambda x, b: jnp.digitize(x, b, right=True), DX, BINS, grad=False)
case("digitize_decreasing", lambda x, b: jnp.digitize(x, b), DX, BINS[::-1], grad=False)
case("select", lambda x: jnp.select([x < -0.5, x > 0.5], [x * 2.0, jnp.sin(x)], default=7.0), t((3, 4), 0.7))
case("clip", lambda x: jnp.clip(x, -0.5, 1.0), t((3, 4), 0.7))
case("clip_ties", lambda x: jnp.clip(x, -0.5, 1.0), jnp.array([-0.5, 1.0, 0.0]))
case("allclose", lambda a, b: [jnp.allclose(a, b), jnp.allclose(a, a), jnp.array_equal(a, a), jnp.array_equal(a, b)], t((4,), 0.3), t((4,), 0.3) + 1e-9, grad=False)
case("take_along_axis", lambda x, i: jnp.take_along_axis(x, i, axis=1), t((3, 4), 0.7), jnp.array([[0, -1], [2, 1], [3, 3]]))
case("take_along_axis_bcast", lambda x, i: jnp.take_along_axis(x, i, axis=0), t((3, 4), 0.7), jnp.array([[2], [0]]))

print("// --- recorded by tests/jax/numpy_expected.py (JAX " + jax.__version__ + ", x64)")
print("#[rustfmt::skip]")
print("mod recorded {")
print("\n".join(OUT))
print("}")
print("use recorded::*;")
print("// --- end of recorded block")
