//! Matrix functions under JAX's names: [`matrix_power`], [`expm`] and
//! [`multi_dot`] (`jnp.linalg`, `jax.scipy.linalg`), with the spectral
//! counts [`matrix_rank`] and [`cond`].
//!
//! All are composites: their derivatives, batching and transposes are those
//! of what they are built of. The one with data-dependent control flow is
//! `expm`, which follows `jax.scipy.linalg.expm` step for step: the Padé
//! order is picked by the 1-norm through a [`Cond`] of five branches, and
//! the squarings are a fixed chain of 16 `Cond`s, each squaring or passing
//! its matrix through. A single matrix thus runs only the Padé branch and
//! the squarings it needs, and `vmap`, `jvp` and the transpose follow from
//! `Cond`'s rules (a batched index selects between branches, all computed,
//! as in JAX). A stack of matrices is the one-matrix graph vmapped over each
//! batch axis, as `jnp.vectorize` makes JAX's.
//!
//! The squarings could instead be a `while` loop bounded by 16 steps: one
//! loop node running only the steps taken, also under `vmap`, it evaluates
//! up to 7× faster on a 4 × 4 matrix (and 4× on a `vmap`ped batch), but
//! its reverse mode recomputes carries from checkpoints, and the gradient
//! costs 1.3–2.3× more (measured on 4 × 4 and 64 × 64 matrices with 0 and
//! 4 squarings). A gradient is what `expm` is mostly wanted for, so the
//! chain of `cond`s stays.

use super::api::{inv, matrix_norm, solve_with, svdvals, MatrixNorm};
use super::{batch_of, eye_like, full_like_shape, OnFailure};
use crate::api::{fail, floated, VarExt};
use crate::bodies::batch_body;
use crate::cond::Cond;
use anvil_core::replay::inline_graph;
use anvil_core::trace::current_or_detached;
use anvil_core::{trace_with, DType, Error, Graph, Result, Var};

/// The size `n` of `a`'s square matrices `[..., n, n]`, or the recorded
/// error of `op` (a poisoned value) when they are not.
fn square_size(op: &str, a: &Var) -> std::result::Result<usize, Var> {
    match *a.shape() {
        [.., m, n] if m == n => Ok(n),
        _ => {
            let msg =
                format!("argument 0 (a) must be square matrices [..., n, n]; it is {}", a.ty());
            Err(fail(a, Error::shape(op, &[a.shape()], msg)))
        }
    }
}

// ------------------------------------------------------------ matrix_power

/// `jnp.linalg.matrix_power(a, n)`: `a` multiplied by itself `n` times, for
/// square matrices `[..., m, m]`, by binary exponentiation (as JAX's: the
/// products `a·a`, `(a·a)·a` for `n` = 2, 3; repeated squares beyond). `n =
/// 0` gives the identity broadcast to `a`'s shape, `n < 0` the power of
/// [`inv`]`(a)`. Integer matrices stay integer for `n ≥ 0` (products wrap
/// on overflow, as in JAX) and are inverted in `f64` for `n < 0`.
///
/// # Errors
/// Matrices that are not square (an error naming `matrix_power`); at run
/// time, for `n < 0`, an exactly singular matrix (an error naming `inv`).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg;
///
/// let a = Tensor::from_vec(vec![1i64, 1, 1, 0], &[2, 2])?; // Fibonacci
/// let f = jit(|a: &Var| linalg::matrix_power(a, 10)).eval(&a)?;
/// assert_eq!(f.to_vec::<i64>()?, vec![89, 55, 55, 34]);
/// let b = Tensor::from_vec(vec![2.0, 0.0, 0.0, 4.0], &[2, 2])?;
/// let p = jit(|b: &Var| linalg::matrix_power(b, -2)).eval(&b)?;
/// assert_eq!(p.to_vec::<f64>()?, vec![0.25, 0.0, 0.0, 0.0625]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn matrix_power(a: &Var, n: i64) -> Var {
    let size = match square_size("matrix_power", a) {
        Ok(size) => size,
        Err(bad) => return bad,
    };
    if n == 0 {
        let eye = identity(a, size);
        return if a.rank() == 2 { eye } else { eye.broadcast_to(a.shape()) };
    }
    let base = if n < 0 { inv(a) } else { a.clone() };
    power(&base, n.unsigned_abs())
}

/// The `n × n` identity in `a`'s dtype, integers included (the seed op
/// [`eye_like`] makes floats).
fn identity(a: &Var, n: usize) -> Var {
    if a.dtype().is_float() {
        return eye_like(a, n);
    }
    let seed = crate::constant::Basis { shape: vec![n, n], axis: 1, offset: 0, dtype: DType::F64 };
    a.tracer().apply(Box::new(seed), &[]).cast(a.dtype())
}

/// `a^n` for `n ≥ 1`, with JAX's association of the products.
fn power(a: &Var, n: u64) -> Var {
    match n {
        1 => return a.clone(),
        2 => return a.matmul(a),
        3 => return a.matmul(a).matmul(a),
        _ => {}
    }
    // Right to left over the bits of n: z runs through a^(2^k).
    let (mut n, mut z, mut result) = (n, a.clone(), None::<Var>);
    loop {
        if n % 2 == 1 {
            result = Some(result.map_or_else(|| z.clone(), |r| r.matmul(&z)));
        }
        n /= 2;
        if n == 0 {
            return result.unwrap_or(z);
        }
        z = z.matmul(&z);
    }
}

// -------------------------------------------------------------------- expm

/// The number of squarings `expm` undoes at most (`max_squarings` of
/// `jax.scipy.linalg.expm`); a matrix that needs more gives NaN.
pub const EXPM_MAX_SQUARINGS: usize = 16;

/// `expm`'s constants for a dtype (Higham 2005, as JAX's): the 1-norm a
/// scaled matrix stays under, and the norms up to which each Padé order
/// but the last suffices.
struct PadeTable {
    maxnorm: f64,
    bounds: &'static [f64],
    orders: &'static [usize],
}

impl PadeTable {
    fn of(dtype: DType) -> PadeTable {
        if dtype == DType::F32 {
            PadeTable {
                maxnorm: 3.92572478313866,
                bounds: &[4.258730016922831e-1, 1.880152677804762],
                orders: &[3, 5, 7],
            }
        } else {
            PadeTable {
                maxnorm: 5.371920351148152,
                bounds: &[
                    1.495585217958292e-2,
                    2.53939833006323e-1,
                    9.504178996162932e-1,
                    2.097847961257068,
                ],
                orders: &[3, 5, 7, 9, 13],
            }
        }
    }
}

/// `jax.scipy.linalg.expm(a)`: the matrix exponential `e^A` of square
/// matrices `[..., n, n]` (integers in `f64`), by scaling and squaring
/// with the Padé approximant of order 3, 5, 7, 9 or 13 that the 1-norm
/// calls for (3, 5 or 7 in `f32`), JAX's algorithm and thresholds: `A` is
/// scaled by `2^-s`, `s = max(0, ⌊log₂(‖A‖₁ / θ)⌋)`, and the approximant
/// squared `s` times. A matrix that needs more than
/// [`EXPM_MAX_SQUARINGS`] squarings (`‖A‖₁ ≥ 2¹⁷ θ ≈ 7.0·10⁵` in `f64`)
/// gives NaN, as JAX's, and a zero gradient.
///
/// Differentiable to any order and batchable: the order and the number of
/// squarings are piecewise constant in `A` and are chosen by `cond`s
/// (see the module documentation).
///
/// # Errors
/// Matrices that are not square (an error naming `expm`).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg;
///
/// // A rotation generator: e^A is the rotation by 1 radian.
/// let a = Tensor::from_vec(vec![0.0, -1.0, 1.0, 0.0], &[2, 2])?;
/// let r = jit(|a: &Var| linalg::expm(a)).eval(&a)?;
/// let (c, s) = (1f64.cos(), 1f64.sin());
/// r.assert_allclose(&Tensor::from_vec(vec![c, -s, s, c], &[2, 2])?, 1e-15, 1e-15);
/// // d/dt tr(e^(tA)) = tr(A e^(tA)): -2 sin(1) at t = 1.
/// let dt = grad(move |t: &Var| linalg::trace(&linalg::expm(&(t * &a)), 0))
///     .eval(Tensor::scalar(1.0))?;
/// assert!((dt.item()? + 2.0 * s).abs() < 1e-14);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn expm(a: &Var) -> Var {
    let n = match square_size("expm", a) {
        Ok(n) => n,
        Err(bad) => return bad,
    };
    let a = floated(a);
    if a.shape().contains(&0) {
        return a; // no matrix, or 0 × 0 ones
    }
    if a.rank() == 2 {
        return expm_matrix(&a, n);
    }
    per_matrix(&a, |m| expm_matrix(m, n))
}

/// `f` (of one matrix) applied to each matrix of the stack `a`: the graph
/// of `f` vmapped over each batch axis, last first (`jnp.vectorize`).
fn per_matrix(a: &Var, f: impl FnOnce(&Var) -> Var) -> Var {
    let r = a.rank();
    let one = a.ty().with_shape(a.shape()[r - 2..].to_vec());
    let stacked = trace_with(&[one], |v| Ok(vec![f(&v[0])])).and_then(|mut g: Graph| {
        for &size in batch_of(a.ty()).iter().rev() {
            g = batch_body(&g, &[true], size, &[true])?;
        }
        inline_graph(&g, std::slice::from_ref(a))
    });
    match stacked.map(|mut out| out.pop()) {
        Ok(Some(out)) => out,
        Ok(None) => a.tracer().poisoned(),
        Err(e) => fail(a, e),
    }
}

/// `e^A` of one float matrix `[n, n]`.
fn expm_matrix(a: &Var, n: usize) -> Var {
    let table = PadeTable::of(a.dtype());
    // The norm only picks the order and the scaling: piecewise constant.
    let norm = matrix_norm(a, MatrixNorm::One, false).stop_gradient();
    let log2 = (&norm / table.maxnorm).log() / std::f64::consts::LN_2;
    let squarings = log2.floor().maximum(&norm.scalar_like(0.0));
    let scaled = a / &norm.scalar_like(2.0).pow(&squarings);
    // jnp.digitize: the number of bounds at or below the norm.
    let index = table
        .bounds
        .iter()
        .map(|&b| norm.ge(&norm.scalar_like(b)).cast(DType::I64))
        .reduce(|x, y| x + y)
        .unwrap_or_else(|| norm.scalar_like(0.0).cast(DType::I64));
    let (p, q) = pade(&scaled, &index, table.orders, n);
    let r = solve_with(&q, &p, OnFailure::Nan);
    // Too many squarings: NaN, as JAX's; the squarings then run on the
    // identity (finite, so that no NaN reaches a gradient through a select).
    let too_many = squarings.gt(&norm.scalar_like(EXPM_MAX_SQUARINGS as f64));
    let eye = eye_like(a, n);
    let r = squared(&too_many.select(&eye, &r), &squarings);
    too_many.select(&full_like_shape(a, &[n, n], f64::NAN), &r)
}

/// `(P, Q)`, the numerator and denominator of the Padé approximant of
/// order `orders[index]` at `a` `[n, n]` (the branches of a `Cond`).
fn pade(a: &Var, index: &Var, orders: &[usize], n: usize) -> (Var, Var) {
    let ty = a.ty().clone();
    let branches: Result<Vec<Graph>> = orders
        .iter()
        .map(|&m| {
            trace_with(std::slice::from_ref(&ty), |v| {
                let (u, even) = pade_uv(&v[0], m, n);
                Ok(vec![&u + &even, &even - &u])
            })
        })
        .collect();
    let branches = match branches {
        Ok(b) => b,
        Err(e) => {
            let bad = fail(a, e);
            return (bad.clone(), bad);
        }
    };
    let op = Cond { branches: branches.into_iter().map(Into::into).collect() };
    let mut out = Var::apply_op_n(Box::new(op), &[index, a], 2).into_iter();
    let mut next = || out.next().unwrap_or_else(|| a.tracer().poisoned());
    (next(), next())
}

/// The odd and even parts `(U, V)` of the Padé approximant of order `m`
/// (`_pade3` ... `_pade13` of JAX, same products and sums in the same
/// order).
fn pade_uv(a: &Var, m: usize, n: usize) -> (Var, Var) {
    let eye = eye_like(a, n);
    let a2 = a.matmul(a);
    if m == 13 {
        let b: [f64; 14] = [
            64764752532480000.,
            32382376266240000.,
            7771770303897600.,
            1187353796428800.,
            129060195264000.,
            10559470521600.,
            670442572800.,
            33522128640.,
            1323241920.,
            40840800.,
            960960.,
            16380.,
            182.,
            1.,
        ];
        let a4 = a2.matmul(&a2);
        let a6 = a4.matmul(&a2);
        let hi_u = a6.matmul(&(&a6 * b[13] + &a4 * b[11] + &a2 * b[9]));
        let u = a.matmul(&(hi_u + &a6 * b[7] + &a4 * b[5] + &a2 * b[3] + &eye * b[1]));
        let hi_v = a6.matmul(&(&a6 * b[12] + &a4 * b[10] + &a2 * b[8]));
        let v = hi_v + &a6 * b[6] + &a4 * b[4] + &a2 * b[2] + &eye * b[0];
        return (u, v);
    }
    let b: &[f64] = match m {
        3 => &[120., 60., 12., 1.],
        5 => &[30240., 15120., 3360., 420., 30., 1.],
        7 => &[17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.],
        _ => &[
            17643225600.,
            8821612800.,
            2075673600.,
            302702400.,
            30270240.,
            2162160.,
            110880.,
            3960.,
            90.,
            1.,
        ],
    };
    // Even powers A², A⁴, ..., A^(m-1), each from the last and A².
    let mut powers = vec![a2.clone()];
    while powers.len() < m / 2 {
        let next = powers[powers.len() - 1].matmul(&a2);
        powers.push(next);
    }
    // Σ b[2k + offset]·A^(2k), the highest power first, as JAX sums them.
    let top = m / 2;
    let sum = |offset: usize| {
        let mut s = &powers[top - 1] * b[2 * top + offset];
        for k in (1..top).rev() {
            s = s + &powers[k - 1] * b[2 * k + offset];
        }
        s + &eye * b[offset]
    };
    (a.matmul(&sum(1)), sum(0))
}

/// `r` squared `squarings` times (at most [`EXPM_MAX_SQUARINGS`]): a chain
/// of `Cond`s, step `i` squaring when `i < squarings`.
fn squared(r: &Var, squarings: &Var) -> Var {
    let one = std::slice::from_ref(r.ty());
    let keep = trace_with(one, |v| Ok(vec![v[0].clone()]));
    let square = trace_with(one, |v| Ok(vec![v[0].matmul(&v[0])]));
    let (keep, square) = match (keep, square) {
        (Ok(keep), Ok(square)) => (keep, square),
        (Err(e), _) | (_, Err(e)) => return fail(r, e),
    };
    let mut r = r.clone();
    for i in 0..EXPM_MAX_SQUARINGS {
        let index = squarings.gt(&squarings.scalar_like(i as f64)).cast(DType::I64);
        let op = Cond { branches: vec![keep.clone().into(), square.clone().into()] };
        r = Var::apply_op_n(Box::new(op), &[&index, &r], 1)
            .pop()
            .unwrap_or_else(|| r.tracer().poisoned());
    }
    r
}

// --------------------------------------------------------------- multi_dot

/// `jnp.linalg.multi_dot(arrays)`: the product `A₁·A₂·…·Aₖ` (`k ≥ 2`),
/// associated to cost the fewest multiply-adds given the static shapes (the
/// dynamic programme of `numpy.linalg.multi_dot`; ties go to the earliest
/// split, so three matrices are `A(BC)` unless `(AB)C` is cheaper). The
/// first array may be a vector `[n]` (a row), the last one too (a column);
/// the result then has no such axis. Beyond JAX, matrices may carry
/// leading batch axes, which broadcast as in `matmul` (the order is chosen
/// on the matrix sizes).
///
/// # Errors
/// Fewer than two arrays; an array of rank 0, or a vector other than the
/// first or last; inner sizes that differ (each naming `multi_dot`, the
/// argument and the shapes).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg;
///
/// let x = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// let a = Tensor::from_vec(vec![1.0, 0.0, 1.0, 1.0, 0.0, 1.0], &[2, 3])?;
/// let y = Tensor::from_vec(vec![1.0, 1.0, 1.0], &[3])?;
/// let v = jit(|x: &Var, a: &Var, y: &Var| linalg::multi_dot(&[x, a, y])).eval((&x, &a, &y))?;
/// assert_eq!((v.shape().len(), v.item()?), (0, 6.0));
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn multi_dot(arrays: &[&Var]) -> Var {
    let shapes: Vec<&[usize]> = arrays.iter().map(|a| a.shape()).collect();
    let Some(&first) = arrays.first() else {
        let tracer = current_or_detached();
        tracer.record(Error::invalid("multi_dot", "arrays", "needs at least two arrays; got none"));
        return tracer.poisoned();
    };
    if let Err(e) = check_chain(arrays, &shapes) {
        return fail(first, e);
    }
    let k = arrays.len();
    let (row, column) = (first.rank() == 1, arrays[k - 1].rank() == 1);
    let mut mats: Vec<Var> = arrays.iter().map(|&a| a.clone()).collect();
    if row {
        mats[0] = mats[0].unsqueeze(0);
    }
    if column {
        mats[k - 1] = mats[k - 1].unsqueeze(-1);
    }
    let dims: Vec<usize> = std::iter::once(mats[0].shape()[mats[0].rank() - 2])
        .chain(mats.iter().map(|m| m.shape()[m.rank() - 1]))
        .collect();
    let split = chain_order(&dims);
    let product = associate(&mats, &split, 0, k - 1);
    match (row, column) {
        (true, true) => product.squeeze(&[-2, -1]),
        (true, false) => product.squeeze(&[-2]),
        (false, true) => product.squeeze(&[-1]),
        (false, false) => product,
    }
}

/// `multi_dot`'s arguments: at least two, vectors only at the ends, inner
/// sizes equal.
fn check_chain(arrays: &[&Var], shapes: &[&[usize]]) -> Result<()> {
    let k = arrays.len();
    if k < 2 {
        let msg = format!("needs at least two arrays; got {k}, of shape {:?}", shapes[0]);
        return Err(Error::shape("multi_dot", shapes, msg));
    }
    for (i, a) in arrays.iter().enumerate() {
        let vector_allowed = i == 0 || i == k - 1;
        if a.rank() == 0 || (a.rank() == 1 && !vector_allowed) {
            let what = if vector_allowed { "a vector or matrices" } else { "matrices [..., m, n]" };
            let msg = format!(
                "argument {i} must be {what} (only the first and last may be vectors); it is {}",
                a.ty()
            );
            return Err(Error::shape("multi_dot", shapes, msg));
        }
    }
    for i in 0..k - 1 {
        let (a, b) = (shapes[i], shapes[i + 1]);
        let cols = a[a.len() - 1];
        let rows = if b.len() == 1 { b[0] } else { b[b.len() - 2] };
        if cols != rows {
            let msg = format!(
                "argument {i} has {cols} columns but argument {} has {rows} rows (shapes {a:?} and {b:?})",
                i + 1
            );
            return Err(Error::shape("multi_dot", shapes, msg));
        }
    }
    Ok(())
}

/// NumPy's matrix-chain order: `split[i][j]` is where the cheapest product
/// of matrices `i..=j` (sizes `dims[i] × dims[i + 1]`, ...) splits, the
/// earliest of equal costs.
fn chain_order(dims: &[usize]) -> Vec<Vec<usize>> {
    let k = dims.len() - 1;
    let mut cost = vec![vec![0f64; k]; k];
    let mut split = vec![vec![0usize; k]; k];
    for len in 1..k {
        for i in 0..k - len {
            let j = i + len;
            cost[i][j] = f64::INFINITY;
            for s in i..j {
                let q = cost[i][s]
                    + cost[s + 1][j]
                    + dims[i] as f64 * dims[s + 1] as f64 * dims[j + 1] as f64;
                if q < cost[i][j] {
                    cost[i][j] = q;
                    split[i][j] = s;
                }
            }
        }
    }
    split
}

/// The product of `mats[i..=j]` associated by `split`.
fn associate(mats: &[Var], split: &[Vec<usize>], i: usize, j: usize) -> Var {
    if i == j {
        return mats[i].clone();
    }
    let s = split[i][j];
    associate(mats, split, i, s).matmul(&associate(mats, split, s + 1, j))
}

// ---------------------------------------------------- matrix_rank and cond

/// `jnp.linalg.matrix_rank(a, tol)`: the number of singular values of each
/// matrix `[..., m, n]` above `tol` (by default `s_max · max(m, n) · ε`,
/// JAX's), as `i64` `[...]`. As JAX's, a scalar or a vector has rank 1
/// unless it is all zeros.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg;
///
/// let a = Tensor::from_vec(vec![1.0, 2.0, 2.0, 4.0, 0.0, 1.0], &[3, 2])?;
/// let r = jit(|a: &Var| linalg::matrix_rank(&a.slice_axis(0, Some(0), Some(2), 1), None)).eval(&a)?;
/// assert_eq!(r.to_vec::<i64>()?, vec![1]);
/// let full = jit(|a: &Var| linalg::matrix_rank(a, Some(1e-3))).eval(&a)?;
/// assert_eq!(full.to_vec::<i64>()?, vec![2]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn matrix_rank(a: &Var, tol: Option<f64>) -> Var {
    let a = floated(a);
    let [.., m, n] = *a.shape() else {
        let nonzero = a.not_equal(&a.scalar_like(0.0)).cast(DType::I64).sum_all();
        return nonzero.gt(&nonzero.scalar_like(0.0)).cast(DType::I64);
    };
    let s = svdvals(&a);
    let cut = match tol {
        Some(t) => s.scalar_like(t),
        None => {
            let eps = if s.dtype() == DType::F32 { f64::from(f32::EPSILON) } else { f64::EPSILON };
            s.max(&[-1], true) * (m.max(n) as f64 * eps)
        }
    };
    s.gt(&cut).cast(DType::I64).sum(&[-1])
}

/// `jnp.linalg.cond(a)` (`p = None`): the 2-norm condition number
/// `s_max / s_min` of each matrix `[..., m, n]`, `[...]`: infinite where
/// the smallest singular value is exactly zero, NaN for a zero matrix (as
/// JAX's).
///
/// # Errors
/// Rank below 2 or an empty matrix (errors naming `cond`).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::linalg;
///
/// let a = Tensor::from_vec(vec![3.0, 0.0, 0.0, 0.5], &[2, 2])?;
/// assert_eq!(jit(|a: &Var| linalg::cond(a)).eval(&a)?.item()?, 6.0);
/// let singular = Tensor::from_vec(vec![1.0, 0.0, 0.0, 0.0], &[2, 2])?;
/// assert_eq!(jit(|a: &Var| linalg::cond(a)).eval(&singular)?.item()?, f64::INFINITY);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn cond(a: &Var) -> Var {
    let bad = match *a.shape() {
        [.., m, n] if m > 0 && n > 0 => None,
        [.., _, _] => Some("argument 0 (a) must not be empty"),
        _ => Some("argument 0 (a) must be matrices [..., m, n] (rank at least 2)"),
    };
    if let Some(msg) = bad {
        return fail(a, Error::shape("cond", &[a.shape()], format!("{msg}; it is {}", a.ty())));
    }
    let s = svdvals(&floated(a));
    s.index_axis(-1, 0) / s.index_axis(-1, -1)
}
