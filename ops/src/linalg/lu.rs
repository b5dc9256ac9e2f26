//! LU factorisation and what is computed from it: solves, inverses,
//! determinants.
//!
//! - [`Lu`]: `P·A = L·U` with partial pivoting (`jax.lax.linalg.lu`): the
//!   packed factors, the LAPACK-style pivots and the permutation. Never
//!   fails (a singular matrix gives a zero on `U`'s diagonal).
//! - [`LuPivotsToPermutation`]: pivots (row swaps) to the permutation.
//! - [`LuSolve`]: `A⁻¹ B` or `A⁻ᵀ B` from the factors.
//! - [`Solve`], [`Det`], [`Slogdet`]: ops on the matrix itself, whose
//!   derivatives are written in terms of the matrix. After differentiation
//!   a rewrite rule turns each into [`Lu`] and a solve or a product on the
//!   factors, and CSE leaves one factorisation per matrix for the value,
//!   the tangents and the transposes (a transposed solve reads the same
//!   factors, `transpose: true`).
//! - [`Inv`]: `A⁻¹`, whose derivative `−A⁻¹ Ȧ A⁻¹` needs only its value.
//! - [`Adjugate`], [`LuAdjugate`]: the adjugate, the derivative of `det`,
//!   and its computation from the factors (exact at singular matrices
//!   too); the adjugate's own derivative is written through the SVD.
//!
//! Derivatives: `x = A⁻¹ b` gives `dx = A⁻¹ (db − dA x)`; `d det =
//! tr(adj(A) dA)`; `d log|det| = tr(A⁻¹ dA)`; `d A⁻¹ = −A⁻¹ dA A⁻¹`; the
//! factors' tangent is JAX's `lu_jvp_rule`.

use super::{all_front, fold_columns, front_or_shared, matrix, square, unfold_columns};
use super::{diag_embed, same_batch, same_dtype, Diagonal, OnFailure, Triangle, TriangularSolve};
use crate::api::VarExt;
use crate::batching::{at_front, move_axis};
use crate::index::Take;
use anvil_core::{
    op::expect_arity, register_rule, Batched, DType, Error, LinearArg, Op, Result, TensorType, Var,
};

/// Which public function an op's errors name: the rewrite of `solve` into
/// `lu_solve` keeps saying `solve`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Caller {
    /// `lu_solve`.
    #[default]
    LuSolve,
    /// `solve`.
    Solve,
}

impl Caller {
    /// The function's name.
    pub fn name(self) -> &'static str {
        match self {
            Caller::LuSolve => "lu_solve",
            Caller::Solve => "solve",
        }
    }
}

fn nan_param(on_failure: OnFailure) -> Option<String> {
    (on_failure == OnFailure::Nan).then(|| "on_failure=nan".to_string())
}

// ---------------------------------------------------------------------- lu

/// LU factorisation with partial pivoting of `[..., m, n]` matrices, three
/// results: the packed factors `[..., m, n]` (`L` strictly below the
/// diagonal, its unit diagonal implied, `U` on and above), the pivots
/// `[..., min(m, n)]` (`i64`, 0-based row swaps: at step `i` rows `i` and
/// `pivots[i]` were swapped) and the permutation `[..., m]` (`i64`: row `i`
/// of `L·U` is row `perm[i]` of `A`), as `jax.lax.linalg.lu`. Never fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Lu;

impl Op for Lu {
    fn name(&self) -> &'static str {
        "lu"
    }
    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        infer_lu(self, inputs, false)
    }
}

/// [`Lu`] with the packed factor stored transposed: the first result is
/// `[..., n, m]`, `lu_t[..., j, i] = lu[..., i, j]` (the factor in
/// column-major order, as LAPACK and faer write it); the pivots and the
/// permutation are [`Lu`]'s. The rewrite engine turns every [`Lu`] into
/// this op and a transpose of its factor; [`LuSolve`] with
/// `factor_transposed` reads the stored factor directly (a rule folds the
/// transpose into it), as the determinants read its diagonal, so a solve
/// never pays for a transposed copy of the factor, and a user who asked for
/// the factor still gets it row-major.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct LuTransposed;

impl Op for LuTransposed {
    fn name(&self) -> &'static str {
        "lu_transposed"
    }
    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        infer_lu(self, inputs, true)
    }
}

/// The result types of [`Lu`] (`transposed`: of [`LuTransposed`]).
fn infer_lu(op: &dyn Op, inputs: &[TensorType], transposed: bool) -> Result<Vec<TensorType>> {
    expect_arity(op, inputs, 1)?;
    let a = &inputs[0];
    let (m, n) = matrix(op.name(), a, 0)?;
    let batch = super::batch_of(a);
    let with = |dims: &[usize], dtype: DType| {
        let mut s = batch.to_vec();
        s.extend_from_slice(dims);
        TensorType::new(dtype, s)
    };
    let factor = if transposed { with(&[n, m], a.dtype()) } else { a.clone() };
    let k = anvil_core::shape::dim_min(op.name(), m, n)?;
    Ok(vec![factor, with(&[k], DType::I64), with(&[m], DType::I64)])
}

/// The factors of `a`: `(lu, pivots, perm)`.
pub fn lu_factors(a: &Var) -> (Var, Var, Var) {
    factors_of(Box::new(Lu), a)
}

/// The factors of `a` with the packed factor transposed ([`LuTransposed`]):
/// `(lu_t, pivots, perm)`.
pub fn lu_factors_transposed(a: &Var) -> (Var, Var, Var) {
    factors_of(Box::new(LuTransposed), a)
}

fn factors_of(op: Box<dyn Op>, a: &Var) -> (Var, Var, Var) {
    let mut r = Var::apply_op_n(op, &[a], 3).into_iter();
    let mut next = || r.next().unwrap_or_else(|| a.tracer().poisoned());
    (next(), next(), next())
}

/// Batching: one factorisation per matrix, the batch axis first.
fn vmap_lu(op: &dyn Op, args: &[Batched], size: usize) -> Result<Vec<Batched>> {
    let r = Var::apply_op_n(op.boxed(), &[&at_front(&args[0], size)], 3);
    Ok(r.into_iter().map(|v| Batched::new(v, Some(0))).collect())
}

/// `lu` is [`Lu`] written as [`LuTransposed`] and a transpose of the
/// factor: the transpose is folded into the factor's readers where they can
/// read it stored transposed ([`LuSolve`]), and the factorisation is shared
/// (CSE) with the ones the `solve`, `det` and `slogdet` rewrites make.
fn rewrite_lu(_: &dyn Op, args: &[Var], outs: &[TensorType]) -> Result<Option<Vec<Var>>> {
    if args[0].rank() < 2 {
        return Ok(None);
    }
    let (lu_t, piv, perm) = lu_factors_transposed(&args[0]);
    let r = vec![lu_t.transpose(), piv, perm];
    let same = r.len() == outs.len() && r.iter().zip(outs).all(|(v, t)| v.ty() == t);
    Ok(same.then_some(r))
}

/// Whether `v` is a transpose of the last two axes (a `swap_axes(-1, -2)`),
/// and then its operand.
fn transposed_source(v: &Var) -> Option<Var> {
    let p = v.producer()?;
    let perm = &p.op_as::<crate::movement::Permute>()?.perm;
    let r = perm.len();
    let swaps = r >= 2
        && perm[..r - 2].iter().enumerate().all(|(i, &a)| i == a)
        && perm[r - 2] == r - 1
        && perm[r - 1] == r - 2;
    swaps.then(|| p.inputs[0].clone())
}

/// `P x` for `x` `[..., m, k]` and the permutation `[..., m]`: rows taken
/// in the permutation's order.
pub(crate) fn permute_rows(x: &Var, perm: &Var) -> Var {
    let r = x.rank();
    x.apply(Take { axis: r - 2, batch_dims: r - 2 }, &[perm])
}

/// JAX's `lu_jvp_rule`: with `x = P ȧ`, `l` and `u` the (padded) factors,
/// `lau = l⁻¹ x u⁻¹`, the factors' tangent is `l·tril(lau, −1) + triu(lau)·u`.
fn jvp_lu(_: &dyn Op, p: &[Var], t: &[Option<Var>], outs: &[Var]) -> Result<Vec<Option<Var>>> {
    let Some(da) = &t[0] else { return Ok(vec![None; 3]) };
    let d = lu_tangent(&p[0], da, &outs[0], &outs[2])?;
    Ok(vec![Some(d), None, None])
}

/// [`jvp_lu`] of the transposed factor: the tangent of `lu` transposed.
fn jvp_lu_transposed(
    _: &dyn Op,
    p: &[Var],
    t: &[Option<Var>],
    outs: &[Var],
) -> Result<Vec<Option<Var>>> {
    let Some(da) = &t[0] else { return Ok(vec![None; 3]) };
    let d = lu_tangent(&p[0], da, &outs[0].transpose(), &outs[2])?;
    Ok(vec![Some(d.transpose()), None, None])
}

/// The tangent of the packed factor `lu` of `a` (permutation `perm`) for
/// `a`'s tangent `da`.
fn lu_tangent(a: &Var, da: &Var, lu: &Var, perm: &Var) -> Result<Var> {
    let [.., m, n] = *a.shape() else {
        return Err(Error::invalid("lu", "jvp", "matrices were expected"));
    };
    // Symbolic sizes: `min` must be decided (a square `n × n`, or ranges
    // that order `m` and `n`).
    let k = anvil_core::shape::dim_min("lu", m, n)?;
    let x = permute_rows(da, perm);
    let l = unit_lower_square(lu, m, k)?;
    let u = upper_square(lu, n, k)?;
    let la = l.apply(solve_opts(true, true, false, true), &[&x]);
    let lau = u.apply(solve_opts(false, false, false, false), &[&la]);
    let l_dot = l.matmul(&lau.apply(Triangle::lower(-1), &[]));
    let u_dot = lau.apply(Triangle::upper(0), &[]).matmul(&u);
    Ok(l_dot + u_dot)
}

fn solve_opts(left_side: bool, lower: bool, transpose_a: bool, unit: bool) -> TriangularSolve {
    TriangularSolve { left_side, lower, transpose_a, unit_diagonal: unit }
}

/// `L` as an `m × m` unit lower triangular matrix: the multipliers of the
/// first `k` columns, padded with zero columns, plus the identity.
fn unit_lower_square(lu: &Var, m: usize, k: usize) -> Result<Var> {
    let cols = lu.slice_axis(-1, Some(0), Some(k as i64), 1).apply(Triangle::lower(-1), &[]);
    let r = cols.rank();
    let mut widths = vec![(0, 0); r];
    let rest = anvil_core::shape::dim_sub(m, k)?;
    widths[r - 1] = (0, rest);
    let l = if rest != 0 { cols.pad(&widths, 0.0) } else { cols };
    Ok(l + super::eye_like(lu, m))
}

/// `U` as an `n × n` upper triangular matrix: its first `k` rows, padded
/// with rows of the identity.
fn upper_square(lu: &Var, n: usize, k: usize) -> Result<Var> {
    let rows = lu.slice_axis(-2, Some(0), Some(k as i64), 1).apply(Triangle::upper(0), &[]);
    if n == k {
        return Ok(rows);
    }
    let rest = anvil_core::shape::dim_sub(n, k)?;
    let r = rows.rank();
    let mut widths = vec![(0, 0); r];
    widths[r - 2] = (0, rest);
    // The identity's last n - k diagonal entries.
    let ones = super::full_like_shape(lu, &[rest], 1.0).pad(&[(k, 0)], 0.0);
    Ok(rows.pad(&widths, 0.0) + diag_embed(&ones, n, n, 0))
}

register_rule!(VmapRule, Lu, many: vmap_lu);
register_rule!(JvpRule, Lu, many: jvp_lu);
register_rule!(RewriteRule, Lu, many: rewrite_lu);
register_rule!(VmapRule, LuTransposed, many: vmap_lu);
register_rule!(JvpRule, LuTransposed, many: jvp_lu_transposed);

// ------------------------------------------------------ pivots to perm

/// The permutation `[..., permutation_size]` (`i64`) that LAPACK-style
/// pivots `[..., k]` compose to (`jax.lax.linalg.lu_pivots_to_permutation`):
/// the identity with rows `i` and `pivots[i]` swapped for `i = 0..k` in
/// order. A pivot out of range is a run-time error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LuPivotsToPermutation {
    /// The permutation's length (`m`, the matrices' rows).
    pub permutation_size: usize,
}

impl Op for LuPivotsToPermutation {
    fn name(&self) -> &'static str {
        "lu_pivots_to_permutation"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        let p = &inputs[0];
        let ok = p.dtype() == DType::I64
            && p.rank() >= 1
            && p.shape()[p.rank() - 1] <= self.permutation_size;
        if !ok {
            return Err(Error::shape(
                self.name(),
                &[p.shape()],
                format!(
                    "argument 0 must be i64 pivots [..., k] with k <= {} (it is {p})",
                    self.permutation_size
                ),
            ));
        }
        let mut s = p.shape().to_vec();
        *s.last_mut().unwrap_or(&mut 0) = self.permutation_size;
        Ok(p.with_shape(s))
    }
    fn params(&self) -> String {
        format!("permutation_size={}", self.permutation_size)
    }
}

/// Batching: the batch axis anywhere but last.
fn vmap_pivots(op: &dyn Op, args: &[Batched], _: usize) -> Result<Batched> {
    let b = &args[0];
    let k = b.axis.unwrap_or(0);
    let (x, axis) =
        if k + 1 < b.var.rank() { (b.var.clone(), k) } else { (move_axis(&b.var, k, 0), 0) };
    Ok(Batched::new(Var::apply_op(op.boxed(), &[&x]), Some(axis)))
}

register_rule!(VmapRule, LuPivotsToPermutation, vmap_pivots);

// ---------------------------------------------------------------- lu_solve

/// `A⁻¹ B` (or `A⁻ᵀ B` with `transpose`) from `A`'s LU factors: `lu`
/// `[..., n, n]` and the permutation `[..., n]` ([`Lu`]'s first and third
/// results), `B` `[..., n, k]` with the same batch axes
/// (`jax.lax.linalg.lu_solve` with `trans` 0 or 1). An exactly singular
/// factorisation (a zero on `U`'s diagonal) is a run-time error naming the
/// batch element and [`Caller`], or NaN with [`OnFailure::Nan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct LuSolve {
    /// Solve with `Aᵀ`.
    pub transpose: bool,
    /// The factor (argument 0) is stored transposed, as [`LuTransposed`]
    /// returns it. A rule folds a transpose of the factor into this flag.
    pub factor_transposed: bool,
    /// What a singular factorisation gives.
    pub on_failure: OnFailure,
    /// The function named in errors.
    pub caller: Caller,
}

impl Op for LuSolve {
    fn name(&self) -> &'static str {
        "lu_solve"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 3)?;
        let (lu, perm, b) = (&inputs[0], &inputs[1], &inputs[2]);
        let n = square("lu_solve", lu, 0)?;
        let (m, _) = matrix("lu_solve", b, 2)?;
        same_dtype("lu_solve", lu, b, 2)?;
        same_batch("lu_solve", lu, b, 2)?;
        let mut want = super::batch_of(lu).to_vec();
        want.push(n);
        if perm.dtype() != DType::I64 || perm.shape() != want || m != n {
            return Err(Error::shape(
                "lu_solve",
                &[lu.shape(), perm.shape(), b.shape()],
                format!(
                    "argument 1 must be an i64 permutation {want:?} and argument 2 have {n} rows"
                ),
            ));
        }
        Ok(b.clone())
    }
    fn params(&self) -> String {
        let mut p = vec![format!("transpose={}", self.transpose)];
        if self.factor_transposed {
            p.push("factor_transposed=true".to_string());
        }
        p.extend(nan_param(self.on_failure));
        if self.caller != Caller::LuSolve {
            p.push(format!("caller={}", self.caller.name()));
        }
        p.join(", ")
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 2
    }
}

/// Batching: shared factors serve the whole batch through `B`'s columns.
fn vmap_lu_solve(op: &dyn Op, args: &[Batched], size: usize) -> Result<Batched> {
    if args[0].axis.is_none() && args[1].axis.is_none() {
        let (folded, k) = fold_columns(&args[2]);
        let x = Var::apply_op(op.boxed(), &[&args[0].var, &args[1].var, &folded]);
        return Ok(unfold_columns(&x, size, k));
    }
    let v = all_front(args, size);
    Ok(Batched::new(Var::apply_op(op.boxed(), &[&v[0], &v[1], &v[2]]), Some(0)))
}

/// In the right-hand side, `lu_solve` itself. In the factors (`A = Pᵀ L U`,
/// `dL = tril(dlu, −1)`, `dU = triu(dlu)`): `dx = −U⁻¹ (L⁻¹ dL U x + dU x)`,
/// and for the transposed solve `dx = −A⁻ᵀ (dUᵀ Lᵀ P x + Uᵀ dLᵀ P x)`.
fn jvp_lu_solve(op: &dyn Op, p: &[Var], t: &[Option<Var>], x: &Var) -> Result<Option<Var>> {
    let s = *op.try_downcast::<LuSolve>()?;
    let (lu, perm) = (&p[0], &p[1]);
    let from_b = t[2].as_ref().map(|db| Var::apply_op(op.boxed(), &[lu, perm, db]));
    let from_lu = t[0].as_ref().map(|dlu| {
        // The formulas read the factor row-major; `op` itself (the solves
        // below) reads it as stored.
        let (stored, (dlu, lu)) = if s.factor_transposed {
            (lu, (dlu.transpose(), lu.transpose()))
        } else {
            (lu, (dlu.clone(), lu.clone()))
        };
        let dl = dlu.apply(Triangle::lower(-1), &[]);
        let du = dlu.apply(Triangle::upper(0), &[]);
        let u = lu.apply(Triangle::upper(0), &[]);
        if s.transpose {
            let px = permute_rows(x, perm);
            let lt_px = lu.apply(Triangle::lower(-1), &[]).transpose().matmul(&px) + &px;
            let rhs =
                du.transpose().matmul(&lt_px) + u.transpose().matmul(&dl.transpose().matmul(&px));
            -Var::apply_op(op.boxed(), &[stored, perm, &rhs])
        } else {
            let inner = lu.apply(solve_opts(true, true, false, true), &[&dl.matmul(&u.matmul(x))]);
            -lu.apply(solve_opts(true, false, false, false), &[&(inner + du.matmul(x))])
        }
    });
    Ok(crate::ad::add_tangents(from_b, from_lu, x.shape()))
}

/// Linear in `B` for known factors: the transposed solve.
fn transpose_lu_solve(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let s = op.try_downcast::<LuSolve>()?;
    match (args[0].known(), args[1].known(), args[2].is_linear()) {
        (Some(lu), Some(perm), true) => {
            let flipped = LuSolve { transpose: !s.transpose, ..*s };
            Ok(vec![None, None, Some(lu.apply(flipped, &[perm, ct]))])
        }
        _ => Err(Error::invalid("lu_solve", "transpose", "linear in b only, for known factors")),
    }
}

/// A solve from a transposed factor reads the factor as stored: the
/// transpose is dropped and `factor_transposed` flipped (it removes a copy
/// of the factor).
fn rewrite_lu_solve(op: &dyn Op, args: &[Var], out: &TensorType) -> Result<Option<Var>> {
    let s = op.try_downcast::<LuSolve>()?;
    let Some(f) = transposed_source(&args[0]) else { return Ok(None) };
    let flipped = LuSolve { factor_transposed: !s.factor_transposed, ..*s };
    Ok(Some(f.apply(flipped, &[&args[1], &args[2]])).filter(|v| v.ty() == out))
}

register_rule!(VmapRule, LuSolve, vmap_lu_solve);
register_rule!(RewriteRule, LuSolve, rewrite_lu_solve);
register_rule!(JvpRule, LuSolve, jvp_lu_solve);
register_rule!(TransposeRule, LuSolve, transpose_lu_solve);

// ------------------------------------------------------------------- solve

/// `A⁻¹ b` (or `A⁻ᵀ b` with `transpose`) for square `A` `[..., n, n]`, as
/// `jnp.linalg.solve`: `b` is one vector per matrix (`[..., n]`) or columns
/// (`[..., n, k]`), with `A`'s batch axes. Rewritten after
/// differentiation into [`Lu`] and [`LuSolve`] (the factorisation shared
/// with every other solve, determinant or transposed solve of `A`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Solve {
    /// Solve with `Aᵀ`.
    pub transpose: bool,
    /// What a singular matrix gives.
    pub on_failure: OnFailure,
}

impl Solve {
    /// Whether `b` holds one vector per matrix (rather than columns).
    pub fn vector_rhs(a: &TensorType, b: &TensorType) -> bool {
        b.rank() + 1 == a.rank()
    }
}

impl Op for Solve {
    fn name(&self) -> &'static str {
        "solve"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 2)?;
        let (a, b) = (&inputs[0], &inputs[1]);
        let n = square("solve", a, 0)?;
        same_dtype("solve", a, b, 1)?;
        let (sa, sb) = (a.shape(), b.shape());
        let batch = super::batch_of(a);
        let r = a.rank();
        let fits = if Solve::vector_rhs(a, b) {
            sb[..r - 2] == *batch && sb[r - 2] == n
        } else {
            b.rank() == r && sb[..r - 2] == *batch && sb[r - 2] == n
        };
        if !fits {
            return Err(Error::shape(
                "solve",
                &[sa, sb],
                format!("argument 1 must be [..., {n}] or [..., {n}, k] with the batch axes {batch:?} of argument 0"),
            ));
        }
        Ok(b.clone())
    }
    fn params(&self) -> String {
        let mut p = Vec::new();
        if self.transpose {
            p.push("transpose=true".to_string());
        }
        p.extend(nan_param(self.on_failure));
        p.join(", ")
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 1
    }
}

/// Batching. A shared `A` is factored once: a batch of vectors becomes the
/// columns of one right-hand side, a batch of column blocks is folded into
/// the columns. Otherwise both operands go batch-first.
fn vmap_solve(op: &dyn Op, args: &[Batched], size: usize) -> Result<Batched> {
    let (a, b) = (&args[0], &args[1]);
    if front_or_shared(a).is_none() {
        let vector = b.logical_rank() + 1 == a.var.rank();
        if vector {
            let cols = super::batch_at(b, b.var.rank() - 1);
            let x = Var::apply_op(op.boxed(), &[&a.var, &cols]);
            let last = x.rank() - 1;
            return Ok(Batched::new(x, Some(last)));
        }
        let (cols, k) = fold_columns(b);
        let x = Var::apply_op(op.boxed(), &[&a.var, &cols]);
        return Ok(unfold_columns(&x, size, k));
    }
    let (a, b) = (at_front(a, size), at_front(b, size));
    Ok(Batched::new(Var::apply_op(op.boxed(), &[&a, &b]), Some(0)))
}

/// `A x` (or `Aᵀ x`) with `x` a vector or columns, as `solve`'s `b` is.
fn apply_to(a: &Var, x: &Var, vector: bool, transpose: bool) -> Var {
    let a = if transpose { a.transpose() } else { a.clone() };
    if vector {
        a.matmul(&x.unsqueeze(-1)).squeeze(&[-1])
    } else {
        a.matmul(x)
    }
}

/// `dx = A⁻¹ (db − dA x)`, the same solve (so the same factorisation).
fn jvp_solve(op: &dyn Op, p: &[Var], t: &[Option<Var>], x: &Var) -> Result<Option<Var>> {
    let s = op.try_downcast::<Solve>()?;
    let vector = Solve::vector_rhs(p[0].ty(), p[1].ty());
    let rhs = match (&t[0], &t[1]) {
        (None, None) => return Ok(None),
        (None, Some(db)) => db.clone(),
        (Some(da), None) => -apply_to(da, x, vector, s.transpose),
        (Some(da), Some(db)) => db - &apply_to(da, x, vector, s.transpose),
    };
    Ok(Some(p[0].apply(*s, &[&rhs])))
}

/// Linear in `b` for a known `A`: the cotangent is `A⁻ᵀ ct`, a solve with
/// the same factors.
fn transpose_solve(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let s = op.try_downcast::<Solve>()?;
    match (args[0].known(), args[1].is_linear()) {
        (Some(a), true) => {
            Ok(vec![None, Some(a.apply(Solve { transpose: !s.transpose, ..*s }, &[ct]))])
        }
        _ => Err(Error::invalid("solve", "transpose", "solve is linear in b only, for a known A")),
    }
}

/// `solve(A, b)` is `lu_solve(lu(A), b)`: written so, every solve and
/// determinant of `A` shares one factorisation (CSE), the transposed solves
/// of reverse mode included.
fn rewrite_solve(op: &dyn Op, args: &[Var], out: &TensorType) -> Result<Option<Var>> {
    let s = op.try_downcast::<Solve>()?;
    let (a, b) = (&args[0], &args[1]);
    let vector = Solve::vector_rhs(a.ty(), b.ty());
    let (lu_t, _, perm) = lu_factors_transposed(a);
    let solver = LuSolve {
        transpose: s.transpose,
        factor_transposed: true,
        on_failure: s.on_failure,
        caller: Caller::Solve,
    };
    let rhs = if vector { b.unsqueeze(-1) } else { b.clone() };
    let x = lu_t.apply(solver, &[&perm, &rhs]);
    let x = if vector { x.squeeze(&[-1]) } else { x };
    Ok(Some(x).filter(|v| v.ty() == out))
}

register_rule!(VmapRule, Solve, vmap_solve);
register_rule!(JvpRule, Solve, jvp_solve);
register_rule!(TransposeRule, Solve, transpose_solve);
register_rule!(RewriteRule, Solve, rewrite_solve);

// -------------------------------------------------------------- sparsity

use anvil_core::sparsity::{Builder, Detector, IndexSets, SparsityArg, Union};
use std::sync::Arc;

/// `solve`: `x = A⁻¹ b`, and `A⁻¹` is generically dense, so each column
/// of `x` depends on all of its matrix `A` and on its column of `b`.
fn sparsity_solve(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let (a, b) = (&args[0], &args[1]);
    let r = a.ty.rank();
    let n = a.ty.shape()[r - 1];
    let batch: usize = a.ty.shape()[..r - 2].iter().product();
    let cols = if Solve::vector_rhs(a.ty, b.ty) { 1 } else { b.ty.shape()[r - 1] };
    let mut u = Union::default();
    let mut sets = Builder::new(out.numel(), a.sets.nnz() + b.sets.nnz());
    for k in 0..batch {
        let mut whole = Builder::new(1, 0);
        whole.push_union(&mut u, (0..n * n).map(|e| a.sets.row(k * n * n + e)));
        let whole = whole.finish();
        let mut per_col = Builder::new(cols, 0);
        for c in 0..cols {
            per_col.push_union(&mut u, (0..n).map(|i| b.sets.row((k * n + i) * cols + c)));
        }
        let per_col = per_col.finish();
        for _ in 0..n {
            for c in 0..cols {
                sets.push_merge(whole.row(0), per_col.row(c));
            }
        }
    }
    let sets = sets.finish();
    cx.check_size(op, &sets)?;
    Ok(Arc::new(sets))
}

register_rule!(SparsityRule, Solve, sparsity_solve);

// --------------------------------------------------------------------- inv

/// `A⁻¹` for square `A` `[..., n, n]` (`jnp.linalg.inv`). An exactly
/// singular matrix is a run-time error naming the batch element, or an
/// all-NaN inverse with [`OnFailure::Nan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Inv {
    /// What a singular matrix gives.
    pub on_failure: OnFailure,
}

impl Op for Inv {
    fn name(&self) -> &'static str {
        "inv"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        square("inv", &inputs[0], 0)?;
        Ok(inputs[0].clone())
    }
    fn params(&self) -> String {
        nan_param(self.on_failure).unwrap_or_default()
    }
}

/// Batching: one inverse per matrix, the batch axis first.
fn vmap_one_front(op: &dyn Op, args: &[Batched], size: usize) -> Result<Batched> {
    let a = at_front(&args[0], size);
    Ok(Batched::new(Var::apply_op(op.boxed(), &[&a]), Some(0)))
}

/// `d A⁻¹ = −A⁻¹ dA A⁻¹`: two products with the value, no factorisation.
fn jvp_inv(_: &dyn Op, _: &[Var], t: &[Option<Var>], x: &Var) -> Result<Option<Var>> {
    Ok(t[0].as_ref().map(|da| -x.matmul(&da.matmul(x))))
}

register_rule!(VmapRule, Inv, vmap_one_front);
register_rule!(JvpRule, Inv, jvp_inv);

// ---------------------------------------------------------- determinants

/// The determinants `[...]` of square matrices `[..., n, n]`
/// (`jnp.linalg.det`), through an LU factorisation: exactly 0 for an
/// exactly singular matrix, never an error. Its derivative is
/// `tr(adj(A) dA)`, with the adjugate from the same factorisation
/// ([`LuAdjugate`]), so it is right at singular matrices too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Det;

/// Signs and logarithms of the absolute determinants of square matrices
/// `[..., n, n]`, two results `[...]` (`jnp.linalg.slogdet`): `(0, −∞)` for
/// an exactly singular matrix, never an error. The derivative of the
/// logarithm is `tr(A⁻¹ dA)` (infinite, as NaN, at a singular matrix); the
/// sign's is zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Slogdet;

fn infer_det(op: &dyn Op, inputs: &[TensorType]) -> Result<TensorType> {
    expect_arity(op, inputs, 1)?;
    square(op.name(), &inputs[0], 0)?;
    Ok(inputs[0].with_shape(super::batch_of(&inputs[0]).to_vec()))
}

impl Op for Det {
    fn name(&self) -> &'static str {
        "det"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        infer_det(self, inputs)
    }
}

impl Op for Slogdet {
    fn name(&self) -> &'static str {
        "slogdet"
    }
    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let t = infer_det(self, inputs)?;
        Ok(vec![t.clone(), t])
    }
}

/// `sum(x ∘ y)` over the two matrix axes.
fn frobenius(x: &Var, y: &Var) -> Var {
    (x * y).sum(&[-2, -1])
}

/// `d det = tr(adj(A) dA) = Σ adj(A)ᵀ ∘ dA`, the adjugate an op of its own
/// ([`Adjugate`]) so that the second derivative is its rule's, exact at
/// singular matrices.
fn jvp_det(_: &dyn Op, p: &[Var], t: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    Ok(t[0].as_ref().map(|da| frobenius(&p[0].apply(Adjugate, &[]).swap_axes(-2, -1), da)))
}

/// `d log|det| = tr(A⁻¹ dA) = Σ A⁻ᵀ ∘ dA`, with `A⁻ᵀ` from the factors
/// (computed once, NaN at a singular matrix); the sign is constant.
fn jvp_slogdet(_: &dyn Op, p: &[Var], t: &[Option<Var>], _: &[Var]) -> Result<Vec<Option<Var>>> {
    let Some(da) = &t[0] else { return Ok(vec![None, None]) };
    let (lu, _, perm) = lu_factors(&p[0]);
    let n = lu.shape().last().copied().unwrap_or(0);
    let eye = super::eye_like(&lu, n).broadcast_to(lu.shape());
    let nan = LuSolve { transpose: true, on_failure: OnFailure::Nan, ..Default::default() };
    let inv_t = lu.apply(nan, &[&perm, &eye]);
    Ok(vec![None, Some(frobenius(&inv_t, da))])
}

/// `(−1)^(number of row swaps)` from pivots `[..., k]`, in `dtype`.
fn pivot_sign(pivots: &Var, dtype: DType) -> Var {
    let k = pivots.shape().last().copied().unwrap_or(0);
    let at = pivots
        .tracer()
        .apply(Box::new(crate::constant::Iota { shape: vec![k], axis: 0, dtype: DType::I64 }), &[]);
    let swaps = pivots.not_equal(&at).cast(dtype).sum(&[-1]);
    let odd = &swaps - &((&swaps * 0.5).floor() * 2.0);
    1.0 - odd * 2.0
}

/// `det(A)` from `lu(A)`: the product of `U`'s diagonal and the pivots' sign
/// (the diagonal read from the factor as stored, [`LuTransposed`]).
fn rewrite_det(_: &dyn Op, args: &[Var], out: &TensorType) -> Result<Option<Var>> {
    let (lu, piv, _) = lu_factors_transposed(&args[0]);
    let d = lu.apply(Diagonal { offset: 0 }, &[]).prod(&[-1], false);
    Ok(Some(d * pivot_sign(&piv, out.dtype())).filter(|v| v.ty() == out))
}

/// `slogdet(A)` from `lu(A)`: signs and logarithms of `U`'s diagonal (read
/// from the factor as stored, [`LuTransposed`]).
fn rewrite_slogdet(_: &dyn Op, args: &[Var], outs: &[TensorType]) -> Result<Option<Vec<Var>>> {
    let (lu, piv, _) = lu_factors_transposed(&args[0]);
    let diag = lu.apply(Diagonal { offset: 0 }, &[]);
    let sign = diag.sign().prod(&[-1], false) * pivot_sign(&piv, diag.dtype());
    let logabs = diag.abs().log().sum(&[-1]);
    let ok = outs.len() == 2 && sign.ty() == &outs[0] && logabs.ty() == &outs[1];
    Ok(ok.then(|| vec![sign, logabs]))
}

register_rule!(VmapRule, Det, vmap_one_front);
register_rule!(JvpRule, Det, jvp_det);
register_rule!(RewriteRule, Det, rewrite_det);
register_rule!(VmapRule, Slogdet, many: vmap_slogdet);
register_rule!(JvpRule, Slogdet, many: jvp_slogdet);
register_rule!(RewriteRule, Slogdet, many: rewrite_slogdet);

fn vmap_slogdet(op: &dyn Op, args: &[Batched], size: usize) -> Result<Vec<Batched>> {
    let a = at_front(&args[0], size);
    let r = Var::apply_op_n(op.boxed(), &[&a], 2);
    Ok(r.into_iter().map(|v| Batched::new(v, Some(0))).collect())
}

// ---------------------------------------------------------------- adjugate

/// The adjugate `adj(A)` of square matrices `[..., n, n]` (`adj(A)·A =
/// det(A)·I`), the derivative of [`Det`]. After differentiation a rewrite
/// computes it from an LU factorisation ([`LuAdjugate`], exact at singular
/// matrices). Its own derivative, the second derivative of `det`, is
/// written through the SVD `A = U S Vᵀ` in products of singular values
/// only, no division: exact at singular matrices too, where `adj(A)`'s
/// derivative by `A⁻¹` is NaN and, near them, cancels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Adjugate;

impl Op for Adjugate {
    fn name(&self) -> &'static str {
        "adjugate"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        square("adjugate", &inputs[0], 0)?;
        Ok(inputs[0].clone())
    }
}

/// `d adj(A)[E]`: with `A = U S Vᵀ`, `adj(A) = det(U) det(V) · V adj(S) Uᵀ`
/// and `A + tE = U (S + tF) Vᵀ` for `F = Uᵀ E V`, so `d adj(A)[E] =
/// det(U) det(V) · V G Uᵀ` with `G = d adj(S)[F]` at the diagonal `S`:
/// `G_ij = −F_ij q_ij` off the diagonal and `G_ii = Σ_{k≠i} F_kk q_ik`,
/// where `q_ik = Π_{j∉{i,k}} s_j` (exclusive products from both ends).
fn jvp_adjugate_svd(_: &dyn Op, p: &[Var], t: &[Option<Var>], _: &Var) -> Result<Option<Var>> {
    let Some(e) = &t[0] else { return Ok(None) };
    let a = &p[0];
    let n = a.shape().last().copied().unwrap_or(0);
    if n < 2 {
        // adj of a 1 × 1 matrix is the constant 1; a 0 × 0 one is empty.
        return Ok(Some(e.zeros_like()));
    }
    let (u, s, vt) = super::api::svd(a, true);
    let (ut, v) = (u.swap_axes(-2, -1), vt.swap_axes(-2, -1));
    let f = ut.matmul(&e.matmul(&v));
    // Row i of `others`: the singular values with s_i replaced by 1.
    let eye = super::eye_like(a, n);
    let rows = s.unsqueeze(-2).broadcast_to(a.shape());
    let others = &rows * &(1.0 - &eye) + &eye;
    let q = crate::reduce::others_product(&others);
    let diag = |m: &Var| m.apply(Diagonal { offset: 0 }, &[]);
    let (fd, qd) = (diag(&f), diag(&q));
    let g_diag = q.matmul(&fd.unsqueeze(-1)).squeeze(&[-1]) - &fd * &qd;
    let g = -(&f * &q) * (1.0 - &eye) + diag_embed(&g_diag, n, n, 0);
    let sign = u.apply(Det, &[]) * vt.apply(Det, &[]);
    Ok(Some(v.matmul(&g.matmul(&ut)) * sign.unsqueeze(-1).unsqueeze(-1)))
}

/// `adj(A)` from `lu(A)` (see [`LuAdjugate`]).
fn rewrite_adjugate(_: &dyn Op, args: &[Var], out: &TensorType) -> Result<Option<Var>> {
    let (lu, _, perm) = lu_factors(&args[0]);
    Ok(Some(lu.apply(LuAdjugate, &[&perm])).filter(|v| v.ty() == out))
}

register_rule!(VmapRule, Adjugate, vmap_one_front);
register_rule!(JvpRule, Adjugate, jvp_adjugate_svd);
register_rule!(RewriteRule, Adjugate, rewrite_adjugate);

/// The adjugate `adj(A)` (`adj(A)·A = det(A)·I`) of square matrices from
/// their LU factors `lu` `[..., n, n]` and permutation `[..., n]`: how a
/// plan computes [`Adjugate`]. Exact at singular matrices: `det(A)·A⁻¹` when `A`
/// is invertible; for a single zero pivot, the rank-one product of the
/// null vectors of `U` scaled by the other pivots; zero when `A` has rank
/// `n − 2` or less.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct LuAdjugate;

impl Op for LuAdjugate {
    fn name(&self) -> &'static str {
        "lu_adjugate"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 2)?;
        let (lu, perm) = (&inputs[0], &inputs[1]);
        let n = square("lu_adjugate", lu, 0)?;
        let mut want = super::batch_of(lu).to_vec();
        want.push(n);
        if perm.dtype() != DType::I64 || perm.shape() != want {
            return Err(Error::shape(
                "lu_adjugate",
                &[lu.shape(), perm.shape()],
                format!("argument 1 must be an i64 permutation {want:?}"),
            ));
        }
        Ok(lu.clone())
    }
}

/// Batching: both operands batch-first.
fn vmap_adjugate(op: &dyn Op, args: &[Batched], size: usize) -> Result<Batched> {
    let v = all_front(args, size);
    Ok(Batched::new(Var::apply_op(op.boxed(), &[&v[0], &v[1]]), Some(0)))
}

/// `d adj = tr(Q)·adj − Q·adj` with `Q = A⁻¹ dA = U⁻¹ (L⁻¹ dL U + dU)`
/// (`A = Pᵀ L U`): exact where `A` is invertible, NaN at a singular
/// matrix. `det`'s derivatives do not come here: they differentiate
/// [`Adjugate`], which is rewritten into this op only after
/// differentiation.
fn jvp_adjugate(_: &dyn Op, p: &[Var], t: &[Option<Var>], adj: &Var) -> Result<Option<Var>> {
    Ok(t[0].as_ref().map(|dlu| {
        let lu = &p[0];
        let dl = dlu.apply(Triangle::lower(-1), &[]);
        let du = dlu.apply(Triangle::upper(0), &[]);
        let u = lu.apply(Triangle::upper(0), &[]);
        let inner = lu.apply(solve_opts(true, true, false, true), &[&dl.matmul(&u)]);
        let q = lu.apply(solve_opts(true, false, false, false), &[&(inner + du)]);
        let tr = q.apply(Diagonal { offset: 0 }, &[]).sum_keepdims(&[-1]).unsqueeze(-1);
        adj * &tr - q.matmul(adj)
    }))
}

register_rule!(VmapRule, LuAdjugate, vmap_adjugate);
register_rule!(JvpRule, LuAdjugate, jvp_adjugate);

// ------------------------------------------- sparsity of the other lu ops

use super::sparsity::{finish, per_matrix, running, union, wholes, Mats};

/// Partial pivoting picks the pivot of step `t` from column `t` of the
/// Schur complement, which depends on columns `0..=t`; after step `t` row
/// `t` of the factors is fixed. So `lu[i, j]` depends on columns
/// `0..=min(i, k−1)` and `j` of `A` (`k = min(m, n)`), all rows (the row
/// order depends on the values). The pivots and the permutation are
/// integers.
fn sparsity_lu(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    outs: &[TensorType],
    cx: &Detector<'_>,
) -> Result<Vec<Arc<IndexSets>>> {
    lu_sets(op, args, outs, cx, false)
}

/// [`sparsity_lu`]'s sets, the factor's transposed.
fn sparsity_lu_transposed(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    outs: &[TensorType],
    cx: &Detector<'_>,
) -> Result<Vec<Arc<IndexSets>>> {
    lu_sets(op, args, outs, cx, true)
}

fn lu_sets(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    outs: &[TensorType],
    cx: &Detector<'_>,
    transposed: bool,
) -> Result<Vec<Arc<IndexSets>>> {
    let a = Mats::of(op, &args[0])?;
    let (m, n) = (a.m, a.n);
    let k = m.min(n);
    let mut sets = Builder::new(outs[0].numel(), 0);
    for b in 0..a.batch {
        let cols: Vec<_> = (0..n).map(|j| a.column(b, j)).collect();
        let leading = running(&cols, false);
        let row = |i: usize| &leading[i.min(k.saturating_sub(1))];
        if transposed {
            for col in &cols {
                for i in 0..m {
                    sets.push_merge(row(i), col);
                }
            }
        } else {
            for i in 0..m {
                for col in &cols {
                    sets.push_merge(row(i), col);
                }
            }
        }
    }
    let lu = finish(op, sets, &outs[0], cx)?;
    let mut results = vec![lu];
    results.extend(outs[1..].iter().map(|t| Arc::new(IndexSets::empty(t.numel()))));
    Ok(results)
}

/// `X = U⁻¹ L⁻¹ P B`: row `i` of `X` depends on all of `L` (below `lu`'s
/// diagonal) and on `U`'s rows `i..` (back substitution from the last
/// row); transposed, `X = Pᵀ L⁻ᵀ U⁻ᵀ B`, row `perm[i]` depends on all of
/// `U` and on `L`'s columns `i..`, and when the permutation is not known
/// at trace time on the union over `i`. Column `c` depends on column `c`
/// of `B` (all rows: `P` mixes them). Exact with a known permutation. A
/// factor stored transposed is read with its indices swapped.
fn sparsity_lu_solve(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let s = op.try_downcast::<LuSolve>()?;
    let (lu, b) = (Mats::of(op, &args[0])?, Mats::of(op, &args[2])?);
    let n = lu.n;
    let tf = s.factor_transposed;
    // The factor's sets at row `p`, column `q` of `lu` (row-major).
    let at = |k: usize, p: usize, q: usize| if tf { lu.at(k, q, p) } else { lu.at(k, p, q) };
    let union_where = |k: usize, keep: fn(usize, usize) -> bool| {
        lu.union_where(k, |p, q| if tf { keep(q, p) } else { keep(p, q) })
    };
    let perm = args[1].value.and_then(|t| t.as_slice::<i64>().ok());
    let mut sets = Builder::new(out.numel(), 0);
    for k in 0..lu.batch {
        let rows = if s.transpose {
            let u = union_where(k, |p, q| q >= p);
            let l_cols: Vec<_> = (0..n).map(|q| union((q + 1..n).map(|p| at(k, p, q)))).collect();
            let w: Vec<_> = running(&l_cols, true).iter().map(|c| union([&u[..], c])).collect();
            let order = perm.and_then(|p| p.get(k * n..(k + 1) * n)).and_then(permutation);
            match order {
                Some(order) => {
                    let mut rows = vec![Vec::new(); n];
                    for (i, wi) in order.into_iter().zip(w) {
                        rows[i] = wi;
                    }
                    rows
                }
                None => vec![union(w.iter().map(|v| &v[..])); n],
            }
        } else {
            let l = union_where(k, |p, q| q < p);
            let u_rows: Vec<_> = (0..n).map(|p| union((p..n).map(|q| at(k, p, q)))).collect();
            running(&u_rows, true).iter().map(|r| union([&l[..], r])).collect()
        };
        let cols: Vec<_> = (0..b.n).map(|c| b.column(k, c)).collect();
        for row in &rows {
            for col in &cols {
                sets.push_merge(row, col);
            }
        }
    }
    finish(op, sets, out, cx)
}

/// `perm` as row numbers, when it is a permutation.
fn permutation(perm: &[i64]) -> Option<Vec<usize>> {
    let mut seen = vec![false; perm.len()];
    perm.iter()
        .map(|&p| {
            let p = usize::try_from(p).ok().filter(|&p| p < seen.len() && !seen[p])?;
            seen[p] = true;
            Some(p)
        })
        .collect()
}

/// Every entry of `A⁻¹`, `det A` and `adj(A)` depends on all of `A` (or of
/// its factors): dense within each matrix, exact.
fn sparsity_whole_matrix(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    per_matrix(op, &wholes(&Mats::of(op, &args[0])?, |_, _| true), out, cx)
}

/// The sign is piecewise constant (no derivative), `log|det A|` depends on
/// all of `A`.
fn sparsity_slogdet(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    outs: &[TensorType],
    cx: &Detector<'_>,
) -> Result<Vec<Arc<IndexSets>>> {
    let sign = Arc::new(IndexSets::empty(outs[0].numel()));
    Ok(vec![sign, sparsity_whole_matrix(op, args, &outs[1], cx)?])
}

register_rule!(SparsityRule, Lu, many: sparsity_lu);
register_rule!(SparsityRule, LuTransposed, many: sparsity_lu_transposed);
register_rule!(SparsityRule, LuSolve, sparsity_lu_solve);
register_rule!(SparsityRule, Inv, sparsity_whole_matrix);
register_rule!(SparsityRule, Det, sparsity_whole_matrix);
register_rule!(SparsityRule, Slogdet, many: sparsity_slogdet);
register_rule!(SparsityRule, LuAdjugate, sparsity_whole_matrix);
register_rule!(SparsityRule, Adjugate, sparsity_adjugate);

/// `adj(A)[i, j]` is the cofactor of `A[j, i]`: it depends on every entry
/// outside row `j` and column `i` (exact; nothing for a 1 × 1 matrix).
fn sparsity_adjugate(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let a = Mats::of(op, &args[0])?;
    let n = a.n;
    cx.check_entries(op, (a.batch * n * n).saturating_mul(n.saturating_sub(1).pow(2)))?;
    let mut sets = Builder::new(out.numel(), 0);
    for b in 0..a.batch {
        for i in 0..n {
            for j in 0..n {
                sets.push(&a.union_where(b, |r, c| r != j && c != i));
            }
        }
    }
    finish(op, sets, out, cx)
}
