#!/usr/bin/env python3
"""JAX's values for the matrix functions of tests/linalg_matfun.rs.

`jnp.linalg.matrix_power`, `jax.scipy.linalg.expm`, `jnp.linalg.multi_dot`,
`jnp.linalg.matrix_rank` and `jnp.linalg.cond` on fixed inputs (the same
literals as the Rust test), with gradients, a vmap of a gradient and a
Hessian of `expm`. The script prints Rust `const` arrays; the Rust test
file holds the printed block verbatim (between the `// --- recorded by`
markers).

Regenerate (JAX on the CPU, float64):
    python3 -m venv .venv-bench && .venv-bench/bin/pip install jax jaxlib scipy numpy
    .venv-bench/bin/python tests/jax/matfun_expected.py > /tmp/expected.rs
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

from _record import OUT, lit  # noqa: E402 (after the path)


def emit(name, value):
    a = np.asarray(value, dtype=np.float64).ravel()
    body = ", ".join(lit(v) for v in a)
    OUT.append(f"const {name.upper()}: [f64; {a.size}] = [{body}];")


def emit_int(name, value):
    a = np.asarray(value, dtype=np.int64).ravel()
    body = ", ".join(str(int(v)) for v in a)
    OUT.append(f"const {name.upper()}: [i64; {a.size}] = [{body}];")


def arange(*shape, scale=0.1, shift=0.0):
    n = int(np.prod(shape))
    return jnp.asarray((np.arange(n, dtype=np.float64) * scale + shift).reshape(shape))


# A 3 x 3 of 1-norm 1.8 (Padé order 9, no squaring).
A3 = jnp.array([[0.3, -0.7, 1.1], [0.5, 0.2, -0.4], [-0.6, 0.9, 0.1]])
# A 4 x 4 of 1-norm about 20 (order 13, one squaring) and one of about
# 300 (five squarings).
B4 = jnp.array([[1.5, -2.0, 3.25, 0.5],
                [4.0, 0.75, -1.0, 2.5],
                [-3.5, 6.0, 2.0, -1.25],
                [2.0, -1.5, 4.5, 3.0]])
C4 = 15.0 * B4
# Strictly upper triangular: e^N = I + N + N²/2 (1-norm 5: order 13).
NIL = jnp.array([[0.0, 1.0, 2.0], [0.0, 0.0, 3.0], [0.0, 0.0, 0.0]])
W3 = arange(3, 3, scale=0.3, shift=-1.1)
W4 = arange(4, 4, scale=0.15, shift=-0.9)

expm = jsl.expm

# One matrix per Padé order: A3 scaled to 1-norms 0.009, 0.18, 0.72 (3, 5, 7).
for name, s in [("expm_pade3", 0.005), ("expm_pade5", 0.1), ("expm_pade7", 0.4)]:
    emit(name, expm(s * A3))
emit("expm_a3", expm(A3))
emit("expm_b4", expm(B4))
emit("expm_c4", expm(C4))
emit("expm_nil", expm(NIL))
# More than 16 squarings: NaN, and a zero gradient (the NaN is a constant).
emit("expm_nan", expm(1e6 * A3))
emit("expm_nan_grad", jax.grad(lambda a: jnp.sum(expm(a) * W3))(1e6 * A3))
emit("expm_batch", expm(jnp.stack([A3, 0.1 * A3])))

# Gradients of sum(expm(A) * W).
emit("expm_grad_a3", jax.grad(lambda a: jnp.sum(expm(a) * W3))(A3))
emit("expm_grad_b4", jax.grad(lambda a: jnp.sum(expm(a) * W4))(B4))
emit("expm_grad_c4", jax.grad(lambda a: jnp.sum(expm(a) * W4))(C4))
emit("expm_grad_nil", jax.grad(lambda a: jnp.sum(expm(a) * W3))(NIL))
# vmap of grad over a batch whose members take different orders and squarings.
BATCH = jnp.stack([A3, 0.005 * A3, 3.0 * A3])
emit("expm_vmap_grad", jax.vmap(jax.grad(lambda a: jnp.sum(expm(a) * W3)))(BATCH))
# Hessian of sum(expm(A) * W) for the 3 x 3: [3, 3, 3, 3].
emit("expm_hessian_a3", jax.hessian(lambda a: jnp.sum(expm(a) * W3))(A3))
# jvp (the Fréchet derivative) of the one needing squarings.
emit("expm_jvp_b4", jax.jvp(expm, (B4,), (W4,))[1])
# float32: orders 3, 5, 7 and squarings.
A3F = A3.astype(jnp.float32)
emit("expm_f32", jnp.stack([expm(0.2 * A3F), expm(A3F), expm(4.0 * A3F)]))

# matrix_power: an integer matrix, a well-conditioned float one, negative powers.
IM = jnp.array([[1, 2], [3, 4]], dtype=jnp.int64)
for n in [0, 1, 2, 3, 5, 10]:
    emit_int(f"power_int_{n}", jnp.linalg.matrix_power(IM, n))
WC = jnp.array([[2.5, 0.3, -0.4], [0.1, 3.0, 0.6], [-0.5, 0.2, 2.8]])
for n in [-3, -2, -1, 4, 7]:
    emit(f"power_wc_{n}".replace("-", "m"), jnp.linalg.matrix_power(WC, n))
emit("power_batch_m2", jnp.linalg.matrix_power(jnp.stack([WC, A3 + 2 * jnp.eye(3)]), -2))
emit("power_grad_7", jax.grad(lambda a: jnp.sum(jnp.linalg.matrix_power(a, 7) * W3))(WC))
emit("power_grad_m2", jax.grad(lambda a: jnp.sum(jnp.linalg.matrix_power(a, -2) * W3))(WC))

# multi_dot: a vector first, matrices, a vector last; and matrices only.
V4 = jnp.array([0.5, -1.0, 2.0, 0.25])
M42 = arange(4, 2, scale=0.2, shift=-0.5)
M25 = arange(2, 5, scale=0.1, shift=-0.3)
M53 = arange(5, 3, scale=0.07, shift=0.2)
V3 = jnp.array([1.0, -2.0, 0.5])
emit("multi_dot_vv", jnp.linalg.multi_dot([V4, M42, M25, M53, V3]))
emit("multi_dot_mm", jnp.linalg.multi_dot([M42, M25, M53]))
emit("multi_dot_vm", jnp.linalg.multi_dot([V4, M42, M25]))
emit("multi_dot_grad", jax.grad(lambda b: jnp.linalg.multi_dot([V4, M42, b, M53, V3]))(M25))

# matrix_rank: full, deficient (4 x 3 of rank 2, 3 x 3 of rank 1), zero, a batch, tol.
R43 = jnp.array([[1.0, 2.0, 3.0], [2.0, 4.1, 6.0], [0.0, 1.0, 0.0], [1.0, 3.0, 3.0]])
R43 = R43.at[:, 2].set(R43[:, 0] * 3.0)  # third column 3 x the first: rank 2
R33 = jnp.outer(jnp.array([1.0, -2.0, 0.5]), jnp.array([0.3, 1.0, -4.0]))
Z23 = jnp.zeros((2, 3))
emit_int("rank_r43", jnp.linalg.matrix_rank(R43))
emit_int("rank_r33", jnp.linalg.matrix_rank(R33))
emit_int("rank_z23", jnp.linalg.matrix_rank(Z23))
emit_int("rank_batch", jnp.linalg.matrix_rank(jnp.stack([A3, R33, WC, jnp.zeros((3, 3))])))
emit_int("rank_tol", jnp.linalg.matrix_rank(jnp.diag(jnp.array([1.0, 1e-3, 1e-6])), tol=1e-4))

# cond: well-conditioned, rectangular, a batch; a singular matrix with an
# exact zero singular value (inf); the gradient.
emit("cond_wc", jnp.linalg.cond(WC))
emit("cond_m42", jnp.linalg.cond(M42))
emit("cond_batch", jnp.linalg.cond(jnp.stack([A3, WC])))
emit("cond_singular", jnp.linalg.cond(jnp.array([[1.0, 0.0], [0.0, 0.0]])))
emit("cond_r43", jnp.linalg.cond(R43))
emit("cond_grad", jax.grad(jnp.linalg.cond)(WC))

print("// --- recorded by tests/jax/matfun_expected.py with JAX", jax.__version__)
print("\n".join(OUT))
print("// --- end of the recorded block")
