"""Shared by the tests/jax/*_expected.py scripts: JAX in float64 on the
CPU, and the printers of Rust `const` arrays (each script appends its
lines to `OUT` and prints them at the end)."""
import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platform_name", "cpu")

OUT = []


def lit(v):
    """One float as a Rust `f64` literal (NaN and infinities by name)."""
    if np.isnan(v):
        return "f64::NAN"
    if np.isinf(v):
        return "f64::INFINITY" if v > 0 else "f64::NEG_INFINITY"
    return repr(float(v))


def emit(name, value):
    """`value`, raveled, as one `pub const NAME: [f64; n]` line."""
    a = np.asarray(value, dtype=np.float64).ravel()
    OUT.append(f"    pub const {name.upper()}: [f64; {a.size}] = [{', '.join(lit(v) for v in a)}];")
