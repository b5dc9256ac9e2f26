#!/usr/bin/env python3
"""JAX's values for the programs of tests/jax_api.rs.

Each case is a program from (or in the style of) JAX's api_test.py,
batching_test.py and custom_api_test.py, written here with JAX and in
tests/jax_api.rs with anvil, on the same inputs. This script prints the
values JAX computes, as Rust `const` arrays; the Rust test file holds the
printed block verbatim (between the `// --- recorded by` markers).

Regenerate (JAX on the CPU, float64):
    python3 -m venv .venv-bench && .venv-bench/bin/pip install jax jaxlib numpy
    .venv-bench/bin/python tests/jax/api_expected.py > /tmp/expected.rs
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jax
import jax.numpy as jnp
import numpy as np

from _record import OUT, lit  # noqa: E402 (after the path)


def emit(name, value):
    a = np.asarray(value, dtype=np.float64).ravel()
    body = ", ".join(lit(v) for v in a)
    OUT.append(f"const {name.upper()}: [f64; {a.size}] = [{body}];")


def arange(*shape, scale=0.1, shift=0.0):
    n = int(np.prod(shape))
    return jnp.asarray((np.arange(n, dtype=np.float64) * scale + shift).reshape(shape))


X3 = jnp.array([0.3, -0.7, 1.1])
X4 = jnp.array([0.3, -0.7, 1.1, 2.0])
W3 = jnp.array([0.5, -0.2, 0.9])

# --- closures: each nesting order -------------------------------------------

# vmap inside value_and_grad, closing over the differentiated z
# (api_test: a function transformed inside another uses its tracer).
Y43 = arange(4, 3)
v, g = jax.value_and_grad(lambda z: jnp.sum(jax.vmap(lambda y: jnp.sum(jnp.sin(y * z)))(Y43)))(0.7)
emit("vmap_in_grad_value", v)
emit("vmap_in_grad_grad", g)

# grad inside vmap, the inner function closing over the batched x.
emit("grad_in_vmap", jax.vmap(lambda x: jax.grad(lambda y: jnp.sin(x * y) * y)(x))(X4))

# jacfwd inside jacrev.
def jac_inner(x):
    return jax.jacfwd(lambda y: jnp.tanh(x * y))(W3).sum(axis=0)
emit("jacfwd_in_jacrev", jax.jacrev(jac_inner)(X3))

# vmap inside vmap, the inner closing over the outer's element.
emit("vmap_in_vmap", jax.vmap(lambda x: jax.vmap(lambda y: jnp.sin(x * y))(W3))(X4))

# grad of grad through the closure (api_test.test_grad_of_grad style).
emit("grad_of_grad", jax.grad(lambda x: jax.grad(lambda y: x * y ** 3)(x))(1.3))

# A concrete array captured by the traced function.
T3 = jnp.array([2.0, -1.0, 0.5])
emit("captured_array", jax.grad(lambda x: jnp.sum(jnp.sin(x * T3)))(X3))

# custom_jvp closing over a vmapped value (custom_api_test.test_closed_over_vmap_tracer).
def closed_custom_jvp(x):
    @jax.custom_jvp
    def f(y):
        return jnp.sin(x * y)

    @f.defjvp
    def f_jvp(primals, tangents):
        (y,), (t,) = primals, tangents
        return f(y), x * jnp.cos(x * y) * t

    return f


emit("custom_jvp_closed_over_vmap", jax.vmap(lambda x, y: closed_custom_jvp(x)(y), (0, None))(X4, 0.5))
emit("custom_jvp_closed_grad", jax.grad(lambda y, x: closed_custom_jvp(x)(y))(0.5, 1.7))

# --- pytrees ----------------------------------------------------------------

# A struct of parameters, value_and_grad with has_aux (api_test.test_grad_and_aux).
PW = arange(2, 3, scale=0.2, shift=-0.5)
PB = jnp.array([0.1, -0.3])
XIN = jnp.array([1.0, -2.0, 0.5])
YOUT = jnp.array([0.2, -0.4])


def mlp_loss(params, x, y):
    pred = jnp.tanh(params["w"] @ x + params["b"])
    return jnp.mean((pred - y) ** 2), pred


(loss, pred), grads = jax.value_and_grad(mlp_loss, has_aux=True)({"w": PW, "b": PB}, XIN, YOUT)
emit("aux_loss", loss)
emit("aux_pred", pred)
emit("aux_grad_w", grads["w"])
emit("aux_grad_b", grads["b"])

# Per-example gradients of the struct (batching_test.testPerExampleGradients style).
XS = arange(5, 3, scale=0.3, shift=-1.0)
YS = arange(5, 2, scale=-0.2, shift=0.5)
pe = jax.vmap(jax.grad(lambda p, x, y: mlp_loss(p, x, y)[0]), in_axes=(None, 0, 0))({"w": PW, "b": PB}, XS, YS)
emit("per_example_w", pe["w"])
emit("per_example_b", pe["b"])

# jacrev of a dict to a dict: outputs outside, arguments inside.
def dict_fn(d):
    return {"s": jnp.sin(d["a"]) * d["b"][0], "t": jnp.sum(d["a"] ** 2) * d["b"]}


J = jax.jacrev(dict_fn)({"a": X3, "b": jnp.array([1.5, -0.5])})
emit("dict_jac_s_a", J["s"]["a"])
emit("dict_jac_s_b", J["s"]["b"])
emit("dict_jac_t_a", J["t"]["a"])
emit("dict_jac_t_b", J["t"]["b"])

# vmap with a dict in_axes (batching_test: in_axes as a pytree prefix).
D = {"a": arange(4, 3), "b": W3}
emit("dict_in_axes", jax.vmap(lambda d: jnp.sum(d["a"] * d["b"]), in_axes=({"a": 0, "b": None},))(D))

# out_axes=None for a result that does not depend on the batch.
ob, on = jax.vmap(lambda x, w: (x * w, jnp.sum(w ** 2)), in_axes=(0, None), out_axes=(0, None))(arange(4, 3), W3)
emit("out_axes_batched", ob)
emit("out_axes_none", on)

# --- hessian over argnums -----------------------------------------------------

# The program: d2f/du2 = diag(6u), not the mixed partial.
XH = jnp.array([0.4, -1.2])
UH = jnp.array([0.7, 1.5])
emit("hessian_u", jax.hessian(lambda x, u: jnp.sum(u * u * u) + jnp.sum(x * u), argnums=1)(XH, UH))

# Several argnums of different shapes: the blocks H[i][j].
X2 = jnp.array([0.4, -1.2])
U3 = jnp.array([0.7, 1.5, -0.3])


def two_arg(x, u):
    return jnp.sum(u ** 3) + jnp.sum(jnp.outer(x, u) ** 2) + jnp.sum(jnp.sin(x))


H = jax.hessian(two_arg, argnums=(0, 1))(X2, U3)
emit("hessian_xx", H[0][0])
emit("hessian_xu", H[0][1])
emit("hessian_ux", H[1][0])
emit("hessian_uu", H[1][1])

# --- vjp and jvp ----------------------------------------------------------------

# A pullback called twice (api_test.test_vjp style), two outputs.
def two_out(x, w):
    return jnp.sin(x) * w, jnp.sum(x * w)


(o1, o2), pullback = jax.vjp(two_out, X3, W3)
c1 = pullback((jnp.array([1.0, 0.0, 2.0]), 0.5))
c2 = pullback((jnp.array([0.0, -1.0, 0.0]), 2.0))
emit("pullback_out", o1)
emit("pullback_1_x", c1[0])
emit("pullback_1_w", c1[1])
emit("pullback_2_x", c2[0])
emit("pullback_2_w", c2[1])

# jvp with no tangent for w (JAX: a zero tangent).
p, t = jax.jvp(lambda x, w: jnp.sin(x * w), (X3, W3), (jnp.array([1.0, 2.0, -1.0]), jnp.zeros(3)))
emit("jvp_partial_primal", p)
emit("jvp_partial_tangent", t)

# jvp of a tuple function on a tuple argument (api_test.test_jvp_pytrees style).
(pa, pb), (ta, tb) = jax.jvp(lambda ab: (ab[0] * ab[1], jnp.sin(ab[0])), ((X3, W3),), ((W3, X3),))
emit("jvp_tree_ta", ta)
emit("jvp_tree_tb", tb)

print("// --- recorded by tests/jax/api_expected.py with JAX", jax.__version__)
print("\n".join(OUT))
print("// --- end of the recorded block")
