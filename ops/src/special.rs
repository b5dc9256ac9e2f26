//! Functions of `jax.scipy.special` beyond the elementwise methods
//! (`erf`, `erfc`, `erf_inv`, `logistic` are methods of `VarExt` and
//! `LaxExt`): [`gammaln`], [`digamma`], [`betaln`], [`multigammaln`],
//! [`xlogy`], [`xlog1py`], [`entr`], [`logit`], [`expit`], [`ndtr`].
//!
//! Each is a composite over the primitives, so its derivatives (of every
//! order) and batching come from what it is built of: the derivative of
//! `gammaln` is the derivative of its Lanczos sum, equal to `digamma` to
//! about 1e-14. Branches are written with the double-`where` pattern, so
//! the branch not taken puts no NaN into a gradient.
//!
//! ```
//! use anvil::prelude::*;
//! use anvil::special;
//! let x = Tensor::from_vec(vec![0.5, 1.0, 5.0], &[3])?;
//! let (lg, dg) = (|x: &Var| (special::gammaln(x), special::digamma(x))).eval(&x)?;
//! // log Γ(5) = log 24; ψ(1) = -γ.
//! assert!((lg.to_vec::<f64>()?[2] - 24f64.ln()).abs() < 1e-14);
//! assert!((dg.to_vec::<f64>()?[1] + 0.5772156649015329).abs() < 1e-14);
//! # Ok::<(), anvil::Error>(())
//! ```

use crate::api::{floated, where_, VarExt};
use crate::lax::LaxExt;
use anvil_core::trace::as_op;
use anvil_core::Var;
use std::f64::consts::PI;

/// Lanczos' coefficients for g = 7, n = 9 (Numerical Recipes' and
/// Wikipedia's set): |relative error| of Γ below 2e-15 for real arguments.
const LANCZOS_G: f64 = 7.0;
const LANCZOS: [f64; 9] = [
    0.999_999_999_999_809_9,
    676.520_368_121_885_1,
    -1_259.139_216_722_402_8,
    771.323_428_777_653_1,
    -176.615_029_162_140_6,
    12.507_343_278_686_905,
    -0.138_571_095_265_720_12,
    9.984_369_578_019_572e-6,
    1.505_632_735_149_311_6e-7,
];

/// `x` replaced by `safe` where `keep` is false (the double-`where`
/// pattern: a branch not taken then sees a harmless input).
fn guarded(keep: &Var, x: &Var, safe: f64) -> Var {
    where_(keep, x, &x.full_like(safe))
}

/// Whether `x` is a non-positive integer (a pole of Γ).
fn pole(x: &Var) -> Var {
    x.le(&x.zeros_like()).logical_and(&x.equal(&x.floor()))
}

/// `log Γ(y)` for `y >= 0.5` by Lanczos' sum.
fn lanczos_lgamma(y: &Var) -> Var {
    let z = y - 1.0;
    let mut a = z.full_like(LANCZOS[0]);
    for (k, &c) in LANCZOS.iter().enumerate().skip(1) {
        a = a + (&z + k as f64).recip() * c;
    }
    let t = &z + (LANCZOS_G + 0.5);
    (z.full_like(0.5 * (2.0 * PI).ln()) + (&z + 0.5) * t.log()) - &t + a.log()
}

/// `jax.scipy.special.gammaln`: `log |Γ(x)|`, `+inf` at the poles
/// (`0, -1, -2, ...`). Lanczos' sum from 1/2 on, the reflection formula
/// `log(π / |sin πx|) - log Γ(1 - x)` below.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::special::gammaln;
/// let g = grad(|x: &Var| gammaln(x).sum_all()).eval(Tensor::from_vec(vec![1.0, 2.0], &[2])?)?;
/// // ψ(1) = -γ, ψ(2) = 1 - γ.
/// let euler = 0.5772156649015329;
/// g.assert_allclose(&Tensor::from_vec(vec![-euler, 1.0 - euler], &[2])?, 1e-13, 1e-13);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn gammaln(x: &Var) -> Var {
    as_op("gammaln", || {
        let x = floated(x);
        let low = x.lt(&x.full_like(0.5));
        let direct = lanczos_lgamma(&guarded(&low.logical_not(), &x, 1.0));
        let xs = guarded(&low, &x, 0.25);
        let reflected =
            (xs.full_like(PI) / (&xs * PI).sin().abs()).log() - lanczos_lgamma(&(1.0 - &xs));
        let value = where_(&low, &reflected, &direct);
        where_(&pole(&x), &x.full_like(f64::INFINITY), &value)
    })
}

/// `jax.scipy.special.digamma`: `ψ(x) = d/dx log Γ(x)`, NaN at the poles.
/// From 10 on, the asymptotic series to `x^-14`; below, the recurrence
/// `ψ(x) = ψ(x + 1) - 1/x` up to 10; below 1/2, the reflection
/// `ψ(1 - x) - π cot πx`.
pub fn digamma(x: &Var) -> Var {
    as_op("digamma", || {
        let x = floated(x);
        let low = x.lt(&x.full_like(0.5));
        let xs = guarded(&low, &x, 0.25);
        let y = where_(&low, &(1.0 - &xs), &x);
        // Shift y up to at least 10, subtracting 1/(y + k) for each step.
        let mut shift = y.zeros_like();
        let mut yk = y.clone();
        for _ in 0..10 {
            let below = yk.lt(&yk.full_like(10.0));
            shift = where_(&below, &(&shift + guarded(&below, &yk, 1.0).recip()), &shift);
            yk = where_(&below, &(&yk + 1.0), &yk);
        }
        let r = yk.recip();
        let r2 = r.square();
        // ln y - 1/2y - Σ B_2k / (2k y^2k), k = 1..7.
        let coeffs = [
            1.0 / 12.0,
            -1.0 / 120.0,
            1.0 / 252.0,
            -1.0 / 240.0,
            1.0 / 132.0,
            -691.0 / 32760.0,
            1.0 / 12.0,
        ];
        let mut series = r2.full_like(coeffs[6]);
        for &c in coeffs[..6].iter().rev() {
            series = series * &r2 + c;
        }
        let psi = yk.log() - &r * 0.5 - series * &r2 - shift;
        let cot = (&xs * PI).cos() / (&xs * PI).sin();
        let value = where_(&low, &(&psi - cot * PI), &psi);
        where_(&pole(&x), &x.full_like(f64::NAN), &value)
    })
}

/// `jax.scipy.special.betaln`: `log |B(a, b)| = gammaln(a) + gammaln(b) -
/// gammaln(a + b)` (for large and very different `a` and `b` this loses
/// digits to cancellation, where JAX's uses a correction series).
pub fn betaln(a: &Var, b: &Var) -> Var {
    as_op("betaln", || {
        let (a, b) = (floated(a), floated(b));
        gammaln(&a) + gammaln(&b) - gammaln(&(&a + &b))
    })
}

/// `jax.scipy.special.multigammaln(a, d)`: the log of the multivariate
/// gamma function, `d(d-1)/4 log π + Σ_{j<d} gammaln(a - j/2)`.
pub fn multigammaln(a: &Var, d: usize) -> Var {
    as_op("multigammaln", || {
        let a = floated(a);
        let mut s = a.full_like(d as f64 * (d as f64 - 1.0) / 4.0 * PI.ln());
        for j in 0..d {
            s = s + gammaln(&(&a - j as f64 / 2.0));
        }
        s
    })
}

/// `jax.scipy.special.xlogy`: `x log y`, 0 where `x = 0` (whatever `y`).
/// Its derivatives are `log y` and `x / y` wherever `x log y` is smooth
/// (`y > 0`, or `x != 0`); at `x = 0` with `y <= 0` both are 0, where
/// JAX's rule gives `-inf` and NaN.
pub fn xlogy(x: &Var, y: &Var) -> Var {
    as_op("xlogy", || {
        let (x, y) = crate::api::promoted(&floated(x), &floated(y));
        let ok = x.not_equal(&x.zeros_like()).logical_or(&y.gt(&y.zeros_like()));
        let sy = guarded(&ok, &y, 1.0);
        where_(&ok, &(&x * sy.log()), &x.zeros_like())
    })
}

/// `jax.scipy.special.xlog1py`: `x log(1 + y)`, 0 where `x = 0`, with
/// derivatives as [`xlogy`]'s (0 at `x = 0` with `y <= -1`).
pub fn xlog1py(x: &Var, y: &Var) -> Var {
    as_op("xlog1py", || {
        let (x, y) = crate::api::promoted(&floated(x), &floated(y));
        let ok = x.not_equal(&x.zeros_like()).logical_or(&y.gt(&y.full_like(-1.0)));
        let sy = guarded(&ok, &y, 0.0);
        where_(&ok, &(&x * sy.log1p()), &x.zeros_like())
    })
}

/// `jax.scipy.special.entr`: `-x log x` for `x > 0`, 0 at 0, `-inf`
/// below.
pub fn entr(x: &Var) -> Var {
    as_op("entr", || {
        let x = floated(x);
        let pos = x.gt(&x.zeros_like());
        let sx = guarded(&pos, &x, 1.0);
        let inner =
            where_(&x.equal(&x.zeros_like()), &x.zeros_like(), &x.full_like(f64::NEG_INFINITY));
        where_(&pos, &-(&sx * sx.log()), &inner)
    })
}

/// `jax.scipy.special.logit`: `log(x / (1 - x))`.
pub fn logit(x: &Var) -> Var {
    as_op("logit", || {
        let x = floated(x);
        (&x / (1.0 - &x)).log()
    })
}

/// `jax.scipy.special.expit`: the logistic function.
pub fn expit(x: &Var) -> Var {
    x.logistic()
}

/// `jax.scipy.special.ndtr`: the standard normal CDF, JAX's formulation
/// (`erf` near 0, `erfc` in the tails, so neither loses digits).
pub fn ndtr(x: &Var) -> Var {
    as_op("ndtr", || {
        let x = floated(x);
        let half_sqrt_2 = std::f64::consts::FRAC_1_SQRT_2;
        let z = &x * half_sqrt_2;
        let w = z.abs();
        let tail = where_(&z.gt(&z.zeros_like()), &(2.0 - z.erfc()), &w.erfc());
        let y = where_(&w.lt(&w.full_like(half_sqrt_2)), &(1.0 + z.erf()), &tail);
        y * 0.5
    })
}
