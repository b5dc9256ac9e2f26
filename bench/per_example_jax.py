#!/usr/bin/env python3
"""JAX (CPU, float64, jit) on the per-example programs of benches/per_example.rs,
with the same closed-form inputs; prints each program's output sum and the
median time of a cached call (9 samples of calls lasting >= 0.05 s each).

    /work/main/.venv-bench/bin/python bench/per_example_jax.py
"""
import time

import numpy as np
import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)
BATCH = 256


def inp(shape, seed, scale):
    n = int(np.prod(shape))
    return jnp.asarray((np.sin(np.arange(n) * 0.37 + seed) * scale).reshape(shape))


def onehot(batch, classes):
    i = np.arange(batch * classes)
    return jnp.asarray((i % classes == (i // classes) % classes).astype(np.float64).reshape(batch, classes))


def linear_loss(w, x, y):
    return jnp.sum((w @ x - y) ** 2)


def ce_mlp_loss(params, x, oh):
    w1, b1, w2, b2 = params
    logits = w2 @ jnp.tanh(w1 @ x + b1) + b2
    return -jnp.sum(oh * jax.nn.log_softmax(logits, axis=-1))


def design_loss(w, a, y):
    return jnp.sum((a @ w - y) ** 2)


def timed(name, fn, args):
    out = jax.block_until_ready(fn(*args))
    total = sum(float(np.sum(l)) for l in jax.tree_util.tree_leaves(out))
    for _ in range(2):
        jax.block_until_ready(fn(*args))
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    inner = max(1, int(0.05 / max(time.perf_counter() - t0, 1e-9)))
    samples = []
    for _ in range(9):
        t0 = time.perf_counter()
        for _ in range(inner):
            jax.block_until_ready(fn(*args))
        samples.append((time.perf_counter() - t0) / inner)
    print(f"{name}\tsum = {total:.12e}\tmedian {np.median(samples) * 1e6:.1f} us\tmin {min(samples) * 1e6:.1f} us")


din, dout, hidden, classes = 64, 10, 256, 10
x = inp((BATCH, din), 0.2, 1.0)
timed("linear/batch=256,in=64,out=10", jax.jit(jax.vmap(jax.grad(linear_loss), (None, 0, 0))),
      [inp((dout, din), 0.1, 0.125), x, inp((BATCH, dout), 0.3, 1.0)])
params = (inp((hidden, din), 0.4, 0.125), inp((hidden,), 0.5, 0.1),
          inp((classes, hidden), 0.6, 0.0625), inp((classes,), 0.7, 0.1))
timed("ce_mlp/batch=256,in=64,hidden=256,classes=10", jax.jit(jax.vmap(jax.grad(ce_mlp_loss), (None, 0, 0))),
      [params, x, onehot(BATCH, classes)])
timed("design/batch=256,m=64,k=64", jax.jit(jax.vmap(jax.grad(design_loss), (None, 0, 0))),
      [inp((64,), 0.8, 0.125), inp((BATCH, 64, 64), 0.9, 1.0), inp((BATCH, 64), 1.0, 1.0)])
