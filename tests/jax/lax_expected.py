#!/usr/bin/env python3
"""JAX's values for the programs of tests/jax_lax.rs.

Each case is a program from (or in the style of) JAX's lax_test.py,
lax_autodiff_test.py and lax_numpy_test.py — one or more per op group of
issue 19: elementwise math, cumulative reductions, sorting, dynamic
indexing / gather / scatter / pad, and the API transformations — written
here with JAX and in tests/jax_lax.rs with anvil, on the same inputs. The
script prints the values JAX computes as Rust `const` arrays into
tests/jax/lax_expected.rs, which the Rust test file includes.

Regenerate (JAX on the CPU, float64):
    python3 -m venv .venv-bench && .venv-bench/bin/pip install jax jaxlib numpy
    .venv-bench/bin/python tests/jax/lax_expected.py > tests/jax/lax_expected.rs
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from _record import OUT, lit  # noqa: E402 (after the path)



def emit(name, value):
    a = np.asarray(value, dtype=np.float64).ravel()
    body = ", ".join(lit(v) for v in a)
    OUT.append(f"const {name.upper()}: [f64; {a.size}] = [{body}];")


def arange(*shape, scale=0.1, shift=0.0):
    n = int(np.prod(shape))
    return jnp.asarray((np.arange(n, dtype=np.float64) * scale + shift).reshape(shape))


# --- elementwise (lax_test.testOp / lax_autodiff_test.testOpGrad) -----------

X = jnp.array([-0.9, -0.35, 0.0, 0.2, 0.55, 0.8])
P = jnp.array([0.3, 0.7, 1.0, 1.6, 2.5, 4.0])
UNARY = [
    ("sinh", lax.sinh, X), ("cosh", lax.cosh, X), ("asin", lax.asin, X),
    ("acos", lax.acos, X), ("atan", lax.atan, X), ("asinh", lax.asinh, X),
    ("acosh", lax.acosh, P + 1.0), ("atanh", lax.atanh, X), ("exp2", jnp.exp2, X),
    ("log2", jnp.log2, P), ("log10", jnp.log10, P), ("erfc", lax.erfc, X),
    ("erf_inv", lax.erf_inv, X), ("cbrt", lax.cbrt, X - 0.05),
]
for name, f, x in UNARY:
    emit(f"{name}_value", f(x))
    emit(f"{name}_grad", jax.grad(lambda x: jnp.sum(f(x)))(x))
    # second derivative, as lax_autodiff_test checks order 2
    emit(f"{name}_grad2", jax.grad(lambda x: jnp.sum(jax.grad(lambda y: jnp.sum(f(y)))(x)))(x))

A = jnp.array([5.5, -5.5, 7.25, -0.75, 3.0])
B = jnp.array([2.0, 2.0, -3.0, 0.5, 1.5])
emit("rem_value", lax.rem(A, B))
ga, gb = jax.grad(lambda a, b: jnp.sum(lax.rem(a, b) * jnp.arange(1.0, 6.0)), argnums=(0, 1))(A, B)
emit("rem_grad_a", ga)
emit("rem_grad_b", gb)
emit("rem_int", lax.rem(jnp.array([7, -7, 7, -7]), jnp.array([3, 3, -3, -3])))
emit("nextafter", lax.nextafter(jnp.array([1.0, 1.0, 0.0, -2.0]), jnp.array([2.0, 0.0, -1.0, -2.0])))
emit("is_finite", lax.is_finite(jnp.array([1.0, jnp.inf, -jnp.inf, jnp.nan, 0.0])))

# clamp at ties and inside (lax_autodiff_test.testClampGrad)
LO = jnp.array([-1.0, -1.0, -1.0, -1.0, -1.0])
CX = jnp.array([-2.0, -1.0, 0.5, 1.0, 2.0])
HI = jnp.array([1.0, 1.0, 1.0, 1.0, 1.0])
emit("clamp_value", lax.clamp(LO, CX, HI))
g = jax.grad(lambda lo, x, hi: jnp.sum(lax.clamp(lo, x, hi)), argnums=(0, 1, 2))(LO, CX, HI)
emit("clamp_grad_lo", g[0])
emit("clamp_grad_x", g[1])
emit("clamp_grad_hi", g[2])

# integer_pow (lax_autodiff_test.testIntegerPowGrad): x**0 and 0-safe derivatives
IP = jnp.array([-1.5, 0.0, 0.5, 2.0])
for y in [0, 1, 2, 3, -2]:
    xs = IP if y >= 0 else IP + 3.0
    emit(f"integer_pow_{y}".replace("-", "m"), lax.integer_pow(xs, y))
    emit(f"integer_pow_{y}_grad".replace("-", "m"), jax.grad(lambda x: jnp.sum(lax.integer_pow(x, y)))(xs))
    emit(f"integer_pow_{y}_hess".replace("-", "m"),
         jax.hessian(lambda x: jnp.sum(lax.integer_pow(x, y)))(xs))

# any / all (lax_numpy_test.testReducer)
BOOLS = jnp.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [2.0, -1.0, 3.0]])
emit("any_rows", jnp.any(BOOLS, axis=1))
emit("all_rows", jnp.all(BOOLS, axis=1))
emit("any_cols", jnp.any(BOOLS, axis=0))

# --- cumulative reductions (lax_autodiff_test.testCumulativeReduceGrad) -----

C = jnp.array([[0.3, -1.2, 0.8, 2.0], [1.5, 0.4, -0.6, 0.9], [-0.2, 1.1, 0.7, -1.4]])
W = arange(3, 4, scale=0.25, shift=-1.0)
CUM = [("cumsum", lax.cumsum), ("cumprod", lax.cumprod), ("cummax", lax.cummax),
       ("cummin", lax.cummin), ("cumlogsumexp", lax.cumlogsumexp)]
for name, f in CUM:
    for axis in [0, 1]:
        for rev in [False, True]:
            tag = f"{name}_{axis}_{'r' if rev else 'f'}"
            emit(tag, f(C, axis=axis, reverse=rev))
            emit(tag + "_grad", jax.grad(lambda c: jnp.sum(W * f(c, axis=axis, reverse=rev)))(C))

# cummax/cummin ties: the derivative splits as JAX's associative scan does
T = jnp.array([1.0, 3.0, 3.0, 2.0, 3.0, 3.0, 0.5])
for name, f in [("cummax", lax.cummax), ("cummin", lax.cummin)]:
    for rev in [False, True]:
        emit(f"{name}_ties_{'r' if rev else 'f'}_jac", jax.jacrev(lambda t: f(t, reverse=rev))(T))
# cumprod through zeros, forward and reverse mode, and its Hessian
Z = jnp.array([2.0, 0.0, 3.0, 0.0, 0.5])
emit("cumprod_zeros_jacfwd", jax.jacfwd(lax.cumprod)(Z))
emit("cumprod_zeros_jacrev", jax.jacrev(lax.cumprod)(Z))
emit("cumprod_zeros_hess", jax.hessian(lambda z: jnp.sum(lax.cumprod(z)))(Z))
# jnp.cumsum of an integer array
emit("cumsum_int", jnp.cumsum(jnp.array([[1, 2, 3], [4, 5, 6]]), axis=1))

# --- sorting (lax_test.testSort / testArgsort / testTopK) -------------------

S = jnp.array([[3.0, 1.0, 2.0, 1.0, 3.0, 0.5], [0.0, -1.0, 4.0, -1.0, 2.0, 2.0]])
for axis in [0, 1]:
    emit(f"sort_{axis}", jnp.sort(S, axis=axis))
    emit(f"argsort_{axis}", jnp.argsort(S, axis=axis, stable=True))
    emit(f"sort_desc_{axis}", jnp.sort(S, axis=axis, descending=True))
    emit(f"argsort_desc_{axis}", jnp.argsort(S, axis=axis, stable=True, descending=True))
SN = jnp.array([2.0, jnp.nan, -1.0, 0.0, -0.0, jnp.inf])
emit("sort_nan", jnp.sort(SN))
emit("argsort_nan", jnp.argsort(SN))
v, i = lax.top_k(S, 3)
emit("top_k_values", v)
emit("top_k_indices", i)
SD = jnp.array([[0.3, -1.2, 0.8, 2.0, 1.1], [1.5, 0.4, -0.6, 0.9, -2.0]])
WS = arange(2, 5, scale=0.5, shift=-1.0)
emit("sort_grad", jax.grad(lambda s: jnp.sum(WS * jnp.sort(s, axis=1)))(SD))
emit("top_k_grad", jax.grad(lambda s: jnp.sum(WS[:, :2] * lax.top_k(s, 2)[0]))(SD))
# a median by sorting (lax_numpy_test.testMedian)
emit("median_grad", jax.grad(lambda s: jnp.sum(jnp.sort(s, axis=1)[:, 2]))(SD))

# --- dynamic indexing, gather, scatter, pad --------------------------------

D = arange(5, 4, scale=1.0)
for (i0, i1) in [(1, 2), (-3, 1), (4, 7)]:
    emit(f"dynamic_slice_{i0}_{i1}".replace("-", "m"), lax.dynamic_slice(D, (i0, i1), (2, 3)))
U = -arange(2, 3, scale=1.0, shift=1.0)
for (i0, i1) in [(1, 0), (9, -2)]:
    emit(f"dynamic_update_slice_{i0}_{i1}".replace("-", "m"), lax.dynamic_update_slice(D, U, (i0, i1)))
gd, gu = jax.grad(lambda d, u: jnp.sum(jnp.sin(lax.dynamic_update_slice(d, u, (3, 2)))), argnums=(0, 1))(D, U)
emit("dus_grad_operand", gd)
emit("dus_grad_update", gu)
emit("ds_grad", jax.grad(lambda d: jnp.sum(lax.dynamic_slice(d, (2, 1), (3, 2)) ** 2))(D))
# vmap over traced start indices (lax_test.testDynamicSliceBatching style)
emit("ds_vmap", jax.vmap(lambda i: lax.dynamic_slice(D, (i, i), (2, 2)))(jnp.array([0, 2, 4, -1])))

# NumPy advanced indexing lowers to gather / scatter (lax_numpy_test.testIndexing)
IDX = jnp.array([3, 0, 3, 1])
emit("take_rows", D[IDX, 1:3])
emit("take_rows_grad", jax.grad(lambda d: jnp.sum(d[IDX, 1:3] ** 2))(D))
UP = arange(4, 2, scale=1.0)
emit("at_add", D.at[IDX, 1:3].add(UP))
emit("at_set", D.at[jnp.array([4, 0, 2]), 0].set(jnp.array([-1.0, -2.0, -3.0])))
g = jax.grad(lambda d, u: jnp.sum(jnp.cos(d.at[IDX, 1:3].add(u))), argnums=(0, 1))(D, UP)
emit("at_add_grad_operand", g[0])
emit("at_add_grad_updates", g[1])
# a raw lax.gather with clamped out-of-range starts
dn = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0, 1))
GI = jnp.array([[0, 0], [4, 3], [-2, 1], [2, 9]])
emit("gather_clip", lax.gather(D, GI, dn, (1, 2), mode="clip"))
emit("gather_fill", lax.gather(D, GI, dn, (1, 2), mode="fill", fill_value=-7.0))
# batching dims: row b of the operand indexed by the indices of batch b
# (what vmap of x[idx] is); a scatter-add with the same dimension numbers
dnb = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(1,), start_index_map=(1,),
                                 operand_batching_dims=(0,), start_indices_batching_dims=(0,))
BI = jnp.array([[[3], [0]], [[1], [1]], [[4], [7]], [[2], [0]], [[0], [3]]])
emit("gather_batching", lax.gather(D, BI, dnb, (1, 1), mode="clip"))
sdnb = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(1,),
                                   scatter_dims_to_operand_dims=(1,), operand_batching_dims=(0,),
                                   scatter_indices_batching_dims=(0,))
emit("scatter_add_batching", lax.scatter_add(D, BI, arange(5, 2, scale=1.0, shift=10.0), sdnb, mode="drop"))

# lax.pad (lax_test.testPad): interior, negative and positive widths
PX = arange(3, 4, scale=1.0, shift=1.0)
for k, cfg in enumerate([[(1, 2, 1), (0, 1, 0)], [(-1, 0, 0), (-2, 0, 1)], [(0, 0, 2), (2, -3, 1)]]):
    emit(f"pad_{k}", lax.pad(PX, -1.0, cfg))
emit("pad_grad", jax.grad(lambda x, v: jnp.sum(lax.pad(x, v, [(1, -1, 1), (-1, 2, 2)]) ** 2), argnums=(0, 1))(PX, 0.5)[0])
emit("pad_grad_value", jax.grad(lambda x, v: jnp.sum(lax.pad(x, v, [(1, -1, 1), (-1, 2, 2)]) ** 2), argnums=(0, 1))(PX, 0.5)[1])

# --- API transformations (api_test.testLinearTranspose, testEvalShape) -----

LT = jnp.array([1.0, -2.0, 0.5, 3.0])
ft = jax.linear_transpose(lambda x: lax.cumsum(2.0 * x[::-1]) + jnp.sum(x), LT)
emit("linear_transpose", ft(jnp.array([0.5, 1.0, -1.0, 2.0]))[0])

print("// --- recorded by tests/jax/lax_expected.py with JAX " + jax.__version__)
print("\n".join(OUT))
print("// --- end of recorded values")
