//! Cholesky factorisation and the solve with its factor.
//!
//! - [`Cholesky`]: `A = L·Lᵀ`, `L` lower triangular with a positive
//!   diagonal, of the symmetrised `(A + Aᵀ)/2` (JAX's default) or of the
//!   symmetric matrix `A`'s lower triangle stands for.
//! - [`CholSolve`]: `(L·Lᵀ)⁻¹ B` from the factor (`cho_solve`).
//! - [`CholeskyTangent`] and [`CholeskyCotangent`]: the derivative of
//!   Cholesky and its transpose, as two linear ops with kernels of their
//!   own. With `symmetrize`, the tangent reads `(Ȧ + Ȧᵀ)/2` and the
//!   cotangent writes `(S̄ + S̄ᵀ)/2`: the input symmetrisation of
//!   `cholesky` and its transpose happen inside the kernels' copies instead
//!   of as three passes (a scale, a transpose and a sum) of their own.
//!
//! The jvp is JAX's (Murray 2016): `L̇ = L·Φ(L⁻¹ Ȧ L⁻ᵀ)`, Φ the lower
//! triangle with the diagonal halved. Written with `matmul` and triangular
//! solves, its transpose would cost a GEMM and two `n × n` triangular
//! solves (JAX's cost). As one op whose transpose is another op, each
//! kernel runs Murray's blocked algorithm in place instead (the
//! factorisation's recursion forwards for the tangent, backwards for the
//! cotangent: `n³/3` multiply-adds, twice the factorisation's, nearly all
//! of it in GEMMs; see `anvil_cpu::linalg::cholesky_cotangent`), and no
//! intermediate leaves the kernel. Measured at `n = 1024` on two threads
//! (quiet machine): the cotangent took 1.2–1.5× the factorisation's time
//! (the closed form with faer's triangular solves: 3.3×); at `n = 256`,
//! 1.5× (3.5×). Both are
//! linear in their second operand and adjoint to each other; their own
//! derivatives in `L` (for `hessian`) are written with triangular solves
//! and products.

use super::{all_front, fold_columns, front_or_shared, square, unfold_columns, OnFailure};
use super::{same_batch, same_dtype, symmetrize, Triangle, TriangularSolve};
use crate::api::VarExt;
use anvil_core::{
    op::expect_arity, register_rule, Batched, Error, LinearArg, Op, Result, TensorType, Var,
};

/// Cholesky factor `L` of symmetric positive definite matrices `[..., n, n]`.
///
/// With `symmetrize_input` (the default of [`super::cholesky()`], as
/// `jnp.linalg.cholesky`) the factored matrix is `(A + Aᵀ)/2`; without, it
/// is the symmetric matrix whose lower triangle is `A`'s (the upper
/// triangle is not read, as LAPACK's `potrf`). The strict upper triangle of
/// `L` is zero.
///
/// A matrix that is not positive definite is a run-time error naming the
/// batch element, or gives an all-NaN factor with [`OnFailure::Nan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cholesky {
    /// Factor `(A + Aᵀ)/2` (else the lower triangle of `A`, as symmetric).
    pub symmetrize_input: bool,
    /// What a matrix that is not positive definite gives.
    pub on_failure: OnFailure,
}

impl Default for Cholesky {
    fn default() -> Self {
        Cholesky { symmetrize_input: true, on_failure: OnFailure::Error }
    }
}

impl Op for Cholesky {
    fn name(&self) -> &'static str {
        "cholesky"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        square("cholesky", &inputs[0], 0)?;
        Ok(inputs[0].clone())
    }
    fn params(&self) -> String {
        let mut p = Vec::new();
        if !self.symmetrize_input {
            p.push("symmetrize_input=false".to_string());
        }
        if self.on_failure == OnFailure::Nan {
            p.push("on_failure=nan".to_string());
        }
        p.join(", ")
    }
}

/// Batching: one factorisation per matrix, the batch axis first.
fn vmap_cholesky(op: &dyn Op, args: &[Batched], size: usize) -> Result<Batched> {
    let a = &all_front(args, size)[0];
    Ok(Batched::new(Var::apply_op(op.boxed(), &[a]), Some(0)))
}

/// `L̇ = L·Φ(L⁻¹ Ȧ L⁻ᵀ)`, Ȧ symmetrised as the input is.
fn jvp_cholesky(op: &dyn Op, _: &[Var], t: &[Option<Var>], l: &Var) -> Result<Option<Var>> {
    let c = op.try_downcast::<Cholesky>()?;
    let tangent = CholeskyTangent { symmetrize: c.symmetrize_input };
    Ok(t[0].as_ref().map(|da| l.apply(tangent, &[da])))
}

register_rule!(VmapRule, Cholesky, vmap_cholesky);
register_rule!(JvpRule, Cholesky, jvp_cholesky);

// ------------------------------------------------------------ tangent pair

/// `R*(Y) = Φ(Y + Yᵀ)`: the adjoint of [`sym_from_lower`] (a lower
/// triangular result).
fn lower_of_sym(y: &Var) -> Var {
    (y + &y.transpose()).apply(Triangle::phi(), &[])
}

/// The tangent of the Cholesky factor: `T(L, S) = L·Φ(L⁻¹ R(S) L⁻ᵀ)`, for
/// `L` lower triangular `[..., n, n]` (its lower triangle is read) and `S`
/// standing for the symmetric matrix its lower triangle gives (`R(S)`: the
/// strict upper triangle is not read), or with `symmetrize` for
/// `(S + Sᵀ)/2` (`R(sym(S))`: the tangent of `cholesky` with
/// `symmetrize_input`). Linear in `S`; its transpose is
/// [`CholeskyCotangent`] with the same `symmetrize`. The result is lower
/// triangular.
///
/// ```
/// use anvil::linalg::{self, CholeskyTangent};
/// use anvil::prelude::*;
///
/// let a = Tensor::from_vec(vec![4.0, 0.0, 0.0, 9.0_f64], &[2, 2])?;
/// let da = Tensor::from_vec(vec![4.0, 2.0, 0.0, 6.0_f64], &[2, 2])?;
/// let f = |a: &Var, da: &Var| {
///     let tangent = CholeskyTangent { symmetrize: true };
///     linalg::cholesky(a).apply(tangent, &[da])
/// };
/// // L = diag(2, 3), Ṡ = [[4, 1], [1, 6]]: L̇ = [[1, 0], [0.5, 1]].
/// let dl = jit(f).eval((&a, &da))?;
/// assert_eq!(dl.to_vec::<f64>()?, [1.0, 0.0, 0.5, 1.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct CholeskyTangent {
    /// Read `(S + Sᵀ)/2` (both triangles of `S`) instead of the symmetric
    /// matrix `S`'s lower triangle stands for.
    pub symmetrize: bool,
}

/// The transpose of [`CholeskyTangent`] in its second operand:
/// `C(L, L̄) = R*(L⁻ᵀ Φ(Lᵀ L̄) L⁻¹)`, with `R*(Y) = Φ(Y + Yᵀ)` (lower
/// triangular), or with `symmetrize` `(C + Cᵀ)/2` (symmetric; the
/// transpose of the tangent with `symmetrize`). Reads the lower triangles
/// of `L` and `L̄`. Linear in `L̄`; its transpose is [`CholeskyTangent`]
/// with the same `symmetrize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct CholeskyCotangent {
    /// Give `(C + Cᵀ)/2` instead of the lower triangular `C`.
    pub symmetrize: bool,
}

/// The shape rule of both: two square matrices of one shape.
fn infer_pair(op: &dyn Op, inputs: &[TensorType]) -> Result<TensorType> {
    expect_arity(op, inputs, 2)?;
    let (l, s) = (&inputs[0], &inputs[1]);
    square(op.name(), l, 0)?;
    same_dtype(op.name(), l, s, 1)?;
    if l.shape() != s.shape() {
        return Err(Error::shape(
            op.name(),
            &[l.shape(), s.shape()],
            "argument 1 must have the shape of argument 0",
        ));
    }
    Ok(s.clone())
}

impl Op for CholeskyTangent {
    fn name(&self) -> &'static str {
        "cholesky_tangent"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        infer_pair(self, inputs)
    }
    fn params(&self) -> String {
        if self.symmetrize {
            "symmetrize".into()
        } else {
            String::new()
        }
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 1
    }
}

impl Op for CholeskyCotangent {
    fn name(&self) -> &'static str {
        "cholesky_cotangent"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        infer_pair(self, inputs)
    }
    fn params(&self) -> String {
        if self.symmetrize {
            "symmetrize".into()
        } else {
            String::new()
        }
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 1
    }
}

/// `L⁻¹ X` (`transpose`: `L⁻ᵀ X`), `L` lower triangular.
fn solve_left(l: &Var, x: &Var, transpose: bool) -> Var {
    let ts = TriangularSolve {
        left_side: true,
        lower: true,
        transpose_a: transpose,
        ..Default::default()
    };
    l.apply(ts, &[x])
}

/// `X L⁻¹` (`transpose`: `X L⁻ᵀ`), `L` lower triangular.
fn solve_right(l: &Var, x: &Var, transpose: bool) -> Var {
    let ts = TriangularSolve {
        left_side: false,
        lower: true,
        transpose_a: transpose,
        ..Default::default()
    };
    l.apply(ts, &[x])
}

fn tril(x: &Var) -> Var {
    x.apply(Triangle::lower(0), &[])
}

/// Batching of the pair: both operands batch-first.
fn vmap_pair(op: &dyn Op, args: &[Batched], size: usize) -> Result<Batched> {
    let v = all_front(args, size);
    Ok(Batched::new(Var::apply_op(op.boxed(), &[&v[0], &v[1]]), Some(0)))
}

/// `T = L P` with `P = Φ(G)`, `G = L⁻¹ R(S) L⁻ᵀ`:
/// `dT = T(L, dS) + dL·P + L·Φ(−(E G + G Eᵀ))`, `E = L⁻¹ dL` (`S` enters
/// through `T(L, dS)` and `P = L⁻¹ T` alone, so `symmetrize` changes only
/// the first term).
fn jvp_cholesky_tangent(
    op: &dyn Op,
    p: &[Var],
    t: &[Option<Var>],
    out: &Var,
) -> Result<Option<Var>> {
    let tangent = *op.try_downcast::<CholeskyTangent>()?;
    let l = &tril(&p[0]);
    let linear = t[1].as_ref().map(|ds| l.apply(tangent, &[ds]));
    let from_l = t[0].as_ref().map(|dl| {
        let dl = tril(dl);
        let phi_g = solve_left(l, out, false);
        let g = &phi_g + &phi_g.transpose();
        let m = solve_left(l, &dl, false).matmul(&g);
        let inner = (-(&m + &m.transpose())).apply(Triangle::phi(), &[]);
        dl.matmul(&phi_g) + l.matmul(&inner)
    });
    Ok(crate::ad::add_tangents(linear, from_l, out.shape()))
}

/// `C = R*(Z)` with `Z = L⁻ᵀ Φ(Lᵀ L̄) L⁻¹`:
/// `dC = C(L, dL̄) + R*(−Hᵀ Z − Z H + L⁻ᵀ Φ(dLᵀ L̄) L⁻¹)`, `H = dL L⁻¹`;
/// with `symmetrize`, both terms symmetrised as `C` is.
fn jvp_cholesky_cotangent(
    op: &dyn Op,
    p: &[Var],
    t: &[Option<Var>],
    out: &Var,
) -> Result<Option<Var>> {
    let cotangent = *op.try_downcast::<CholeskyCotangent>()?;
    let (l, lbar) = (&tril(&p[0]), &tril(&p[1]));
    let linear = t[1].as_ref().map(|d| l.apply(cotangent, &[d]));
    let from_l = t[0].as_ref().map(|dl| {
        let dl = tril(dl);
        let sandwich = |n: &Var| solve_right(l, &solve_left(l, n, true), false);
        let z = sandwich(&l.transpose().matmul(lbar).apply(Triangle::phi(), &[]));
        let h = solve_right(l, &dl, false);
        let hz = h.transpose().matmul(&z);
        let zh = z.matmul(&h);
        let third = sandwich(&dl.transpose().matmul(lbar).apply(Triangle::phi(), &[]));
        let lower = lower_of_sym(&(third - hz - zh));
        if cotangent.symmetrize {
            symmetrize(&lower)
        } else {
            lower
        }
    });
    Ok(crate::ad::add_tangents(linear, from_l, out.shape()))
}

/// The adjoint pair: `T(L, ·)ᵀ = C(L, ·)` and `C(L, ·)ᵀ = T(L, ·)`, with
/// the same `symmetrize` (the symmetrisation is self-adjoint).
fn transpose_pair(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    let other: Box<dyn Op> = if let Some(t) = op.downcast_ref::<CholeskyTangent>() {
        Box::new(CholeskyCotangent { symmetrize: t.symmetrize })
    } else {
        let c = op.try_downcast::<CholeskyCotangent>()?;
        Box::new(CholeskyTangent { symmetrize: c.symmetrize })
    };
    match (args[0].known(), args[1].is_linear()) {
        (Some(l), true) => Ok(vec![None, Some(Var::apply_op(other, &[l, ct]))]),
        _ => Err(Error::invalid(
            op.name(),
            "transpose",
            "linear in its second operand only, for a known factor",
        )),
    }
}

register_rule!(VmapRule, CholeskyTangent, vmap_pair);
register_rule!(VmapRule, CholeskyCotangent, vmap_pair);
register_rule!(JvpRule, CholeskyTangent, jvp_cholesky_tangent);
register_rule!(JvpRule, CholeskyCotangent, jvp_cholesky_cotangent);
register_rule!(TransposeRule, CholeskyTangent, transpose_pair);
register_rule!(TransposeRule, CholeskyCotangent, transpose_pair);

// ---------------------------------------------------------------- cho_solve

/// `(L·Lᵀ)⁻¹ B` from lower-triangular factors `L` `[..., n, n]` (their
/// lower triangle is read) and right-hand sides `B` `[..., n, k]` with the
/// same batch axes: `jax.scipy.linalg.cho_solve((L, True), B)` (the vector
/// form is [`super::cho_solve`]). A zero on `L`'s diagonal (a singular
/// matrix) is a run-time error naming the batch element, or NaN with
/// [`OnFailure::Nan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct CholSolve {
    /// What a singular factor gives.
    pub on_failure: OnFailure,
}

impl Op for CholSolve {
    fn name(&self) -> &'static str {
        "cho_solve"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 2)?;
        let (l, b) = (&inputs[0], &inputs[1]);
        let n = square("cho_solve", l, 0)?;
        let (m, _) = super::matrix("cho_solve", b, 1)?;
        same_dtype("cho_solve", l, b, 1)?;
        same_batch("cho_solve", l, b, 1)?;
        if m != n {
            return Err(Error::shape(
                "cho_solve",
                &[l.shape(), b.shape()],
                format!("argument 1 must have {n} rows (the size of argument 0)"),
            ));
        }
        Ok(b.clone())
    }
    fn params(&self) -> String {
        if self.on_failure == OnFailure::Nan {
            "on_failure=nan".into()
        } else {
            String::new()
        }
    }
    fn linear_in(&self, k: usize) -> bool {
        k == 1
    }
}

/// Batching: a shared factor serves the whole batch through `B`'s columns.
fn vmap_cho_solve(op: &dyn Op, args: &[Batched], size: usize) -> Result<Batched> {
    match front_or_shared(&args[0]) {
        None => {
            let (cols, k) = fold_columns(&args[1]);
            let x = Var::apply_op(op.boxed(), &[&args[0].var, &cols]);
            Ok(unfold_columns(&x, size, k))
        }
        Some(_) => {
            let v = all_front(args, size);
            Ok(Batched::new(Var::apply_op(op.boxed(), &[&v[0], &v[1]]), Some(0)))
        }
    }
}

/// `x = A⁻¹ b`, `A = L Lᵀ`: `dx = A⁻¹ (db − (dL Lᵀ + L dLᵀ) x)`.
fn jvp_cho_solve(op: &dyn Op, p: &[Var], t: &[Option<Var>], x: &Var) -> Result<Option<Var>> {
    let l = &tril(&p[0]);
    let from_l = t[0].as_ref().map(|dl| {
        let dl = tril(dl);
        dl.matmul(&l.transpose().matmul(x)) + l.matmul(&dl.transpose().matmul(x))
    });
    let rhs = match (&t[1], from_l) {
        (None, None) => return Ok(None),
        (Some(db), None) => db.clone(),
        (None, Some(f)) => -f,
        (Some(db), Some(f)) => db - &f,
    };
    Ok(Some(Var::apply_op(op.boxed(), &[&p[0], &rhs])))
}

/// `(L Lᵀ)⁻¹` is symmetric: the cotangent of `B` is the same solve.
fn transpose_cho_solve(op: &dyn Op, ct: &Var, args: &[LinearArg]) -> Result<Vec<Option<Var>>> {
    match (args[0].known(), args[1].is_linear()) {
        (Some(l), true) => Ok(vec![None, Some(Var::apply_op(op.boxed(), &[l, ct]))]),
        _ => Err(Error::invalid("cho_solve", "transpose", "linear in b only, for a known factor")),
    }
}

register_rule!(VmapRule, CholSolve, vmap_cho_solve);
register_rule!(JvpRule, CholSolve, jvp_cho_solve);
register_rule!(TransposeRule, CholSolve, transpose_cho_solve);

// -------------------------------------------------------------- sparsity

use super::sparsity::{cholesky_pattern, finish, running, solve_columns, union, wholes, Mats};
use anvil_core::sparsity::{Builder, Detector, IndexSets, SparsityArg};
use std::sync::Arc;

/// `L[i, j]` depends on the leading lower triangle up to `j` and on row `i`
/// up to column `j` of the factored matrix (see [`cholesky_pattern`]):
/// `A[p, q]` and `A[q, p]` for `(A + Aᵀ)/2`, else `A[p, q]` (`q ≤ p`).
fn sparsity_cholesky(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let c = op.try_downcast::<Cholesky>()?;
    let a = Mats::of(op, &args[0])?;
    let entry = |b, p, q| {
        if c.symmetrize_input {
            union([a.at(b, p, q), a.at(b, q, p)])
        } else {
            a.at(b, p, q).to_vec()
        }
    };
    cholesky_pattern(op, a.batch, a.n, entry, out, cx)
}

/// The tangent's recursion reads `L` and `S` where Cholesky's reads `A`
/// (both lower triangles; with `symmetrize`, `S[p, q]` and `S[q, p]`).
fn sparsity_cholesky_tangent(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let sym = op.try_downcast::<CholeskyTangent>()?.symmetrize;
    let (l, s) = (Mats::of(op, &args[0])?, Mats::of(op, &args[1])?);
    let entry = |b, p, q| {
        let mirror = if sym { s.at(b, q, p) } else { &[] };
        union([l.at(b, p, q), s.at(b, p, q), mirror])
    };
    cholesky_pattern(op, l.batch, l.n, entry, out, cx)
}

/// The adjoint of the tangent in `L̄`: `C[p, q]` (`q ≤ p`) depends on the
/// `L̄[i, j]` whose tangent entry `T[i, j]` depends on `S[p, q]` — `j ≥ p`,
/// or `i = p` and `q ≤ j` — and on the whole lower triangle of `L` (every
/// coefficient of the map does). With `symmetrize`, `C[q, p]` depends on
/// what `C[p, q]` does.
fn sparsity_cholesky_cotangent(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let sym = op.try_downcast::<CholeskyCotangent>()?.symmetrize;
    let (l, y) = (Mats::of(op, &args[0])?, Mats::of(op, &args[1])?);
    let n = l.n;
    let lower = wholes(&l, |i, j| j <= i);
    let mut sets = Builder::new(out.numel(), 0);
    for (b, whole) in lower.iter().enumerate() {
        let cols: Vec<_> = (0..n).map(|j| union((j..n).map(|i| y.at(b, i, j)))).collect();
        let trailing = running(&cols, true);
        // rows[p][q]: the set of C[p, q], q ≤ p.
        let rows: Vec<Vec<_>> = trailing
            .iter()
            .enumerate()
            .map(|(p, below)| {
                let row: Vec<_> = (0..=p).map(|j| y.at(b, p, j).to_vec()).collect();
                let from_row = running(&row, true);
                from_row.iter().map(|r| union([&whole[..], below, r])).collect()
            })
            .collect();
        for (p, row) in rows.iter().enumerate() {
            for set in row {
                sets.push(set);
            }
            for below in &rows[p + 1..] {
                sets.push(if sym { &below[p] } else { &[] });
            }
        }
    }
    finish(op, sets, out, cx)
}

/// `(L Lᵀ)⁻¹ B`: column `c` depends on all of `L`'s lower triangle and on
/// column `c` of `B` (exact: the inverse is generically full).
fn sparsity_cho_solve(
    op: &dyn Op,
    args: &[SparsityArg<'_>],
    out: &TensorType,
    cx: &Detector<'_>,
) -> Result<Arc<IndexSets>> {
    let (l, b) = (Mats::of(op, &args[0])?, Mats::of(op, &args[1])?);
    solve_columns(op, &wholes(&l, |i, j| j <= i), &b, out, cx)
}

register_rule!(SparsityRule, Cholesky, sparsity_cholesky);
register_rule!(SparsityRule, CholeskyTangent, sparsity_cholesky_tangent);
register_rule!(SparsityRule, CholeskyCotangent, sparsity_cholesky_cotangent);
register_rule!(SparsityRule, CholSolve, sparsity_cho_solve);
