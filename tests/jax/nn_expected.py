#!/usr/bin/env python3
"""JAX's values for tests/nn.rs: the functions of `jax.nn`.

For each function: its values and the gradient of a sum of it (the
elementwise derivative) on points that include the kinks (0, ±1, 6, the
log 2 of `log1mexp`), large magnitudes (±40, ±800, where naive forms
overflow), infinities and NaN; second derivatives of the smooth ones; the
functions along axes (`glu`, `logmeanexp`, `standardize`, `softmax`...)
with gradients of a weighted sum. Printed as Rust `const` arrays; the Rust
test file holds the printed block verbatim (between the `// --- recorded
by` markers).

Regenerate (JAX on the CPU, float64):
    .venv-bench/bin/python tests/jax/nn_expected.py > /tmp/expected.rs
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jax
import jax.numpy as jnp
import numpy as np

from _record import OUT, lit  # noqa: E402 (after the path)


def emit(name, value):
    """One `const`, laid out as rustfmt lays it out (max_width 100), so the
    printed block is pasted verbatim and stays formatted."""
    a = np.asarray(value, dtype=np.float64).ravel()
    items = [lit(v) for v in a]
    head = f"const {name.upper()}: [f64; {a.size}] ="
    body = ", ".join(items)
    if len(f"{head} [{body}];") <= 100:
        OUT.append(f"{head} [{body}];")
    elif len(f"    [{body}];") <= 100:
        OUT.append(f"{head}\n    [{body}];")
    elif all(len(i) <= 10 and not i.startswith("f64::") for i in items):
        lines, line = [], "   "
        for i in items:
            if len(line) + len(i) + 2 > 99:
                lines.append(line)
                line = "   "
            line += f" {i},"
        OUT.append("\n".join([f"{head} ["] + lines + [line, "];"]))
    else:
        OUT.append("\n".join([f"{head} ["] + [f"    {i}," for i in items] + ["];"]))


def derivative(f):
    """The elementwise derivative of an elementwise `f`."""
    return jax.grad(lambda x: jnp.sum(f(x)))


# The points of the elementwise functions: kinks, large magnitudes, ±inf, NaN.
X = jnp.array([
    -np.inf, -800.0, -40.0, -6.0, -3.0, -1.0, -0.5, -1e-9, 0.0, 1e-9, 0.3, 1.0,
    2.5, 3.0, 6.0, 7.0, 40.0, 800.0, np.inf, np.nan,
])
# log1mexp's domain (and one point below it): 0, tiny, log 2, large.
XPOS = jnp.array([
    -1.0, 0.0, 1e-300, 1e-9, 0.1, 0.6931471805599453, 1.0, 5.0, 40.0, 700.0, 800.0,
    np.inf, np.nan,
])
emit("x", X)
emit("xpos", XPOS)

nn = jax.nn
ELEMENTWISE = {
    "relu": nn.relu,
    "relu6": nn.relu6,
    "sigmoid": nn.sigmoid,
    "softplus": nn.softplus,
    "log_sigmoid": nn.log_sigmoid,
    "soft_sign": nn.soft_sign,
    "silu": nn.silu,
    "mish": nn.mish,
    "elu": lambda x: nn.elu(x, 1.0),
    "elu_half": lambda x: nn.elu(x, 0.5),
    "celu": lambda x: nn.celu(x, 1.0),
    "celu_two": lambda x: nn.celu(x, 2.0),
    "selu": nn.selu,
    "gelu_tanh": lambda x: nn.gelu(x, approximate=True),
    "gelu_erf": lambda x: nn.gelu(x, approximate=False),
    "leaky_relu": lambda x: nn.leaky_relu(x, 0.01),
    "leaky_relu_fifth": lambda x: nn.leaky_relu(x, 0.2),
    "hard_tanh": nn.hard_tanh,
    "hard_sigmoid": nn.hard_sigmoid,
    "hard_silu": nn.hard_silu,
    "squareplus": lambda x: nn.squareplus(x, 4.0),
    "squareplus_half": lambda x: nn.squareplus(x, 0.5),
    "sparse_plus": nn.sparse_plus,
    "sparse_sigmoid": nn.sparse_sigmoid,
}
for name, f in ELEMENTWISE.items():
    emit(f"{name}_value", f(X))
    emit(f"{name}_grad", jax.vmap(derivative(f))(X))

emit("log1mexp_value", nn.log1mexp(XPOS))
emit("log1mexp_grad", jax.vmap(derivative(nn.log1mexp))(XPOS))

# Second derivatives of the smooth functions, on the finite points away
# from the kinks that only the first derivative is defined at.
X2 = jnp.array([-800.0, -40.0, -6.0, -3.0, -0.5, 0.3, 1.0, 2.5, 7.0, 40.0, 800.0])
emit("x2", X2)
SMOOTH = {
    "softplus": nn.softplus,
    "log_sigmoid": nn.log_sigmoid,
    "mish": nn.mish,
    "elu": lambda x: nn.elu(x, 1.0),
    "celu_two": lambda x: nn.celu(x, 2.0),
    "gelu_tanh": lambda x: nn.gelu(x, approximate=True),
    "gelu_erf": lambda x: nn.gelu(x, approximate=False),
}
for name, f in SMOOTH.items():
    emit(f"{name}_second", jax.vmap(jax.grad(jax.grad(f)))(X2))
# log1mexp's from 1e-9 to 40 (JAX's second derivative, of its custom
# `1 / expm1(x)`, overflows to -inf at 1e-300 and is NaN at 800).
emit("log1mexp_second", jax.vmap(jax.grad(jax.grad(nn.log1mexp)))(XPOS[3:9]))

# --- along axes: values and the gradient of a weighted sum --------------------

# A [4, 6] of values in about (-12, 12); the weights of the sums are
# sin(0.7 i + 0.2) over the result's elements in order.
I24 = np.arange(24, dtype=np.float64)
A = jnp.asarray(((I24 * 0.37 - 4.1) * np.cos(I24) * 3.0).reshape(4, 6))
emit("a", A)


def weighted(f):
    y = f(A)
    w = jnp.asarray(np.sin(np.arange(y.size) * 0.7 + 0.2).reshape(y.shape))
    return y, jax.grad(lambda a: jnp.sum(w * f(a)))(A)


AXES = {
    "glu_last": lambda a: nn.glu(a, axis=-1),
    "glu_first": lambda a: nn.glu(a, axis=0),
    "logmeanexp_rows": lambda a: nn.logmeanexp(a, axis=1),
    "logmeanexp_all_keep": lambda a: nn.logmeanexp(a, axis=(0, 1), keepdims=True),
    "standardize_last": lambda a: nn.standardize(a, axis=-1),
    "standardize_both": lambda a: nn.standardize(a, axis=(0, 1), epsilon=0.5),
    "softmax_first": lambda a: nn.softmax(a, axis=0),
    "log_softmax_last": lambda a: nn.log_softmax(a, axis=-1),
    "logsumexp_rows_keep": lambda a: nn.logsumexp(a, axis=1, keepdims=True),
}
for name, f in AXES.items():
    y, g = weighted(f)
    emit(f"{name}_value", y)
    emit(f"{name}_grad", g)

# Rows of a large spread: logsumexp and logmeanexp do not overflow.
BIG = jnp.array([[800.0, 799.0, -800.0], [-800.0, -801.0, -np.inf]])
emit("big", BIG)
emit("logmeanexp_big", nn.logmeanexp(BIG, axis=1))

# one_hot: ids in and out of range (negative too), as float64.
IDS = jnp.array([[0, 3, -1], [4, 2, 1]])
emit("ids", IDS)
emit("one_hot_ids", nn.one_hot(IDS, 4))

print("// --- recorded by tests/jax/nn_expected.py with JAX", jax.__version__)
print("\n".join(OUT))
print("// --- end of the recorded block")
