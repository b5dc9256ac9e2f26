#!/usr/bin/env python3
"""JAX's values for tests/special.rs: jax.scipy.special functions and their
first and second derivatives (elementwise, through vmap of grad) at fixed
points, printed as Rust `const` arrays; the Rust test file holds the
printed block verbatim (between the `// --- recorded by` markers).

Regenerate (JAX on the CPU, float64):
    python3 -m venv .venv-bench && .venv-bench/bin/pip install jax jaxlib numpy
    .venv-bench/bin/python tests/jax/special_expected.py > /tmp/expected.rs
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy import special as sp

from _record import OUT, emit  # noqa: E402 (after the path)


def elementwise(name, f, x):
    emit(name, f(x))
    d1 = jax.vmap(jax.grad(f))(x)
    emit(name + "_d1", d1)
    emit(name + "_d2", jax.vmap(jax.grad(jax.grad(f)))(x))


X = jnp.array([0.1, 0.5, 0.9, 1.0, 1.5, 2.0, 2.5, 3.7, 9.5, 10.0, 12.25, 33.0, 170.5, 1e6,
               -0.3, -0.5, -1.5, -2.7, -10.2])
elementwise("gammaln", sp.gammaln, X)
# (JAX's second derivative at -10.2 is 2.6e22: its polygamma fails below
# 0; the test checks anvil's there against psi'(11.2) + pi^2 / sin^2(pi x).)
elementwise("digamma", sp.digamma, X)
emit("poles", jnp.stack([sp.gammaln(jnp.array([0.0, -1.0, -4.0])), sp.digamma(jnp.array([0.0, -1.0, -4.0]))]))
# (Not (30, 12): JAX's betaln there is off by 2.5e-8; the test checks it
# against the exact log(29! 11! / 41!).)
A = jnp.array([0.5, 1.0, 2.5, 7.0])
B = jnp.array([0.5, 3.0, 1.5, 0.25])
emit("betaln", sp.betaln(A, B))
emit("betaln_grad", jnp.concatenate(jax.grad(lambda a, b: jnp.sum(sp.betaln(a, b) * jnp.cos(jnp.arange(4.0))), argnums=(0, 1))(A, B)))
emit("multigammaln", jnp.array([sp.multigammaln(a, 3) for a in [1.5, 2.0, 7.25]]))
XL = jnp.array([0.0, 0.0, 2.0, -1.5, 0.5])
YL = jnp.array([0.0, 3.0, 0.5, 4.0, -0.5])
emit("xlogy", sp.xlogy(XL, YL))
emit("xlogy_grad", jnp.concatenate(jax.grad(lambda x, y: jnp.sum(sp.xlogy(x, y) * jnp.cos(jnp.arange(5.0))), argnums=(0, 1))(XL, YL)))
emit("xlog1py", sp.xlog1py(XL, YL))
emit("xlog1py_grad", jnp.concatenate(jax.grad(lambda x, y: jnp.sum(sp.xlog1py(x, y) * jnp.cos(jnp.arange(5.0))), argnums=(0, 1))(XL, YL)))
E = jnp.array([0.0, 0.3, 1.0, 2.5, -1.0])
emit("entr", sp.entr(E))
P = jnp.array([1e-12, 0.1, 0.5, 0.75, 0.999])
elementwise("logit", sp.logit, P)
Z = jnp.array([-40.0, -8.0, -1.0, -0.3, 0.0, 0.5, 2.0, 9.0])
elementwise("ndtr", sp.ndtr, Z)
elementwise("expit", sp.expit, Z)
# Both tails, the three branches of the approximation (and their seams at
# exp(-2) and z = 8, about 1.3e-14) and the two outside points.
Q = jnp.array([1e-300, 1e-20, 1e-14, 1e-10, 0.01, 0.1, 0.2, 0.5, 0.7, 0.9, 0.99,
               1.0 - 1e-10, 0.0, 1.0])
emit("ndtri", sp.ndtri(Q))
elementwise("ndtri_in", sp.ndtri, Q[:12])
# Below -20 the asymptotic series, above 8 -ndtr(-x), log(ndtr(x)) between.
L = jnp.array([-40.0, -25.0, -20.5, -19.5, -10.0, -3.0, -0.5, 0.0, 1.0, 5.0, 7.9, 8.1, 30.0])
elementwise("log_ndtr", sp.log_ndtr, L)
# polygamma of orders 1 to 3: small arguments (the nine direct terms), the
# Euler-Maclaurin tail, large ones, and a negative one (NaN).
G = jnp.array([0.1, 0.5, 1.0, 2.5, 9.5, 33.0, 1e4, -0.5])
for n in (1, 2, 3):
    elementwise("polygamma%d" % n, lambda x, n=n: sp.polygamma(n, x), G)
# Hurwitz zeta of an integer and a fractional order, in q.
H = jnp.array([0.3, 1.0, 2.5, 12.0, 100.0, -0.5])
elementwise("zeta2", lambda q: sp.zeta(2.0, q), H)
elementwise("zeta3_5", lambda q: sp.zeta(3.5, q), H)

print("// --- recorded by tests/jax/special_expected.py (JAX " + jax.__version__ + ", x64)")
print("#[rustfmt::skip]")
print("#[allow(clippy::approx_constant)] // (JAX's values, some of them log 2 or 2/pi)")
print("mod recorded {")
print("\n".join(OUT))
print("}")
print("use recorded::*;")
print("// --- end of recorded block")
