//! Samples of the linear-algebra ops for the conformance kit: square and
//! rectangular matrices, batch axes, every option that changes a rule.
//!
//! Inputs are chosen where the ops are smooth: diagonally dominant
//! matrices ([`InputKind::WellConditioned`]) for factorisations and solves
//! (their symmetric part is positive definite, so they serve Cholesky too,
//! and partial pivoting never swaps, so LU's pivots do not change under
//! the finite differences), matrices with separated eigenvalues for
//! `eigh`, and random matrices (distinct singular values) for `svd` and
//! `qr`. The sign conventions of `eigh`, `qr` and `svd` (largest
//! component of each vector positive, `R`'s diagonal non-negative) are
//! continuous at such inputs, so finite differences of the vectors
//! themselves are meaningful.

use super::{InputKind, OpSample};
use anvil::ops::linalg::{
    Adjugate, CholSolve, Cholesky, CholeskyCotangent, CholeskyTangent, Det, Diagonal, Eigh,
    EighCotangent, EighTangent, Inv, Lu, LuAdjugate, LuPivotsToPermutation, LuSolve, LuTransposed,
    OnFailure, Qr, QrMode, Slogdet, Solve, Svd, Triangle, TriangularSolve,
};
use anvil::{DType, Tensor};

const SYM: InputKind = InputKind::Uniform { lo: -1.0, hi: 1.0 };
const WC: InputKind = InputKind::WellConditioned;
const TOL: f64 = 1e-9;

fn perm(v: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).expect("permutation literal matches its shape")
}

/// Every linear-algebra sample.
pub(super) fn linalg_samples(s: &mut Vec<OpSample>) {
    triangle_samples(s);
    triangular_solve_samples(s);
    cholesky_samples(s);
    lu_samples(s);
    solve_samples(s);
    decomposition_samples(s);
}

/// `tril`, `triu`, `Φ` and `diagonal`, with offsets and batch axes.
fn triangle_samples(s: &mut Vec<OpSample>) {
    for t in [Triangle::lower(0), Triangle::upper(1), Triangle::lower(-1), Triangle::phi()] {
        s.push(OpSample::new(t).input(SYM, &[3, 4]));
        s.push(OpSample::new(t).input(SYM, &[2, 3, 3]));
    }
    for offset in [0, 1, -2] {
        s.push(OpSample::new(Diagonal { offset }).input(SYM, &[3, 4]));
        s.push(OpSample::new(Diagonal { offset }).input(SYM, &[2, 4, 3]));
    }
}

/// `triangular_solve` in all sixteen option combinations (left and right
/// side, lower and upper, transposed or not, unit diagonal or not).
fn triangular_solve_samples(s: &mut Vec<OpSample>) {
    for k in 0..16 {
        let ts = TriangularSolve {
            left_side: k & 1 != 0,
            lower: k & 2 != 0,
            transpose_a: k & 4 != 0,
            unit_diagonal: k & 8 != 0,
        };
        let b: &[usize] = if ts.left_side { &[2, 3, 2] } else { &[2, 2, 3] };
        s.push(OpSample::new(ts).input(WC, &[2, 3, 3]).input(SYM, b).tol(TOL, TOL));
    }
    let ts = TriangularSolve { left_side: true, lower: true, ..Default::default() };
    s.push(OpSample::new(ts).input(WC, &[4, 4]).input(SYM, &[4, 1]).tol(TOL, TOL));
}

/// `cholesky` (symmetrised or reading the lower triangle), `cho_solve` and
/// the tangent pair.
fn cholesky_samples(s: &mut Vec<OpSample>) {
    let c = Cholesky::default();
    s.push(OpSample::new(c).input(WC, &[3, 3]).tol(TOL, TOL));
    s.push(OpSample::new(c).input(WC, &[2, 4, 4]).tol(TOL, TOL));
    let lower_only = Cholesky { symmetrize_input: false, on_failure: OnFailure::Error };
    s.push(OpSample::new(lower_only).input(WC, &[3, 3]).tol(TOL, TOL));
    s.push(
        OpSample::new(Cholesky { on_failure: OnFailure::Nan, ..c })
            .input_dtype(WC, &[3, 3], DType::F32)
            .tol(1e-4, 1e-4),
    );
    s.push(
        OpSample::new(CholSolve::default()).input(WC, &[3, 3]).input(SYM, &[3, 2]).tol(TOL, TOL),
    );
    s.push(
        OpSample::new(CholSolve::default())
            .input(WC, &[2, 3, 3])
            .input(SYM, &[2, 3, 1])
            .tol(TOL, TOL),
    );
    for symmetrize in [false, true] {
        let (t, c) = (CholeskyTangent { symmetrize }, CholeskyCotangent { symmetrize });
        s.push(OpSample::new(t).input(WC, &[3, 3]).input(SYM, &[3, 3]).tol(TOL, TOL));
        s.push(OpSample::new(t).input(WC, &[2, 4, 4]).input(SYM, &[2, 4, 4]).tol(TOL, TOL));
        s.push(OpSample::new(c).input(WC, &[3, 3]).input(SYM, &[3, 3]).tol(TOL, TOL));
        s.push(OpSample::new(c).input(WC, &[2, 4, 4]).input(SYM, &[2, 4, 4]).tol(TOL, TOL));
    }
}

/// `lu` and `lu_transposed` (square, tall, wide), the pivots'
/// permutation, `lu_solve` (both transposes, the factor stored either way),
/// the adjugate.
fn lu_samples(s: &mut Vec<OpSample>) {
    for shape in [&[3, 3][..], &[4, 3], &[3, 4], &[2, 3, 3]] {
        s.push(OpSample::new(Lu).input(WC, shape).tol(TOL, TOL));
        s.push(OpSample::new(LuTransposed).input(WC, shape).tol(TOL, TOL));
    }
    let fixed = InputKind::Fixed;
    let piv = LuPivotsToPermutation { permutation_size: 4 };
    s.push(OpSample::new(piv).given(perm(&[2, 3, 3], &[3]), fixed.clone()));
    s.push(OpSample::new(piv).given(perm(&[1, 1, 3, 3, 2, 3], &[2, 3]), fixed.clone()));
    for (transpose, factor_transposed) in
        [(false, false), (true, false), (false, true), (true, true)]
    {
        let op = LuSolve { transpose, factor_transposed, ..Default::default() };
        s.push(
            OpSample::new(op)
                .input(WC, &[3, 3])
                .given(perm(&[2, 0, 1], &[3]), fixed.clone())
                .input(SYM, &[3, 2])
                .tol(TOL, TOL),
        );
        s.push(
            OpSample::new(op)
                .input(WC, &[2, 3, 3])
                .given(perm(&[0, 2, 1, 1, 0, 2], &[2, 3]), fixed.clone())
                .input(SYM, &[2, 3, 1])
                .tol(TOL, TOL),
        );
    }
    s.push(
        OpSample::new(LuAdjugate)
            .input(WC, &[3, 3])
            .given(perm(&[1, 2, 0], &[3]), fixed)
            .tol(TOL, TOL),
    );
}

/// `solve` (both transposes, vector and matrix right-hand sides, batch
/// axes), `inv`, `det`, `slogdet`.
fn solve_samples(s: &mut Vec<OpSample>) {
    for transpose in [false, true] {
        let op = Solve { transpose, ..Default::default() };
        s.push(OpSample::new(op).input(WC, &[3, 3]).input(SYM, &[3]).tol(TOL, TOL));
        s.push(OpSample::new(op).input(WC, &[3, 3]).input(SYM, &[3, 2]).tol(TOL, TOL));
        s.push(OpSample::new(op).input(WC, &[2, 3, 3]).input(SYM, &[2, 3]).tol(TOL, TOL));
        s.push(OpSample::new(op).input(WC, &[2, 3, 3]).input(SYM, &[2, 3, 2]).tol(TOL, TOL));
    }
    s.push(OpSample::new(Inv::default()).input(WC, &[3, 3]).tol(TOL, TOL));
    s.push(OpSample::new(Inv::default()).input(WC, &[2, 4, 4]).tol(TOL, TOL));
    s.push(OpSample::new(Det).input(WC, &[3, 3]).tol(TOL, TOL));
    s.push(OpSample::new(Det).input(SYM, &[2, 3, 3]).tol(TOL, TOL));
    s.push(OpSample::new(Adjugate).input(WC, &[3, 3]).tol(TOL, TOL));
    s.push(OpSample::new(Adjugate).input(SYM, &[2, 4, 4]).tol(TOL, TOL));
    s.push(OpSample::new(Adjugate).input(WC, &[2, 2]).tol(TOL, TOL));
    s.push(OpSample::new(Slogdet).input(WC, &[3, 3]).tol(TOL, TOL));
    s.push(OpSample::new(Slogdet).input(WC, &[2, 4, 4]).tol(TOL, TOL));
}

/// `qr` (reduced: square, tall, wide; complete: wide and square), `eigh`
/// (symmetrised and lower), `svd` (reduced: square, tall, wide; full:
/// square; singular values only).
fn decomposition_samples(s: &mut Vec<OpSample>) {
    for shape in [&[3, 3][..], &[4, 2], &[2, 4], &[2, 3, 2]] {
        s.push(OpSample::new(Qr { mode: QrMode::Reduced }).input(SYM, shape).tol(TOL, TOL));
    }
    for shape in [&[3, 3][..], &[2, 4]] {
        s.push(OpSample::new(Qr { mode: QrMode::Complete }).input(SYM, shape).tol(TOL, TOL));
    }
    let sep = InputKind::SeparatedEigenvalues;
    for shape in [&[3, 3][..], &[2, 4, 4]] {
        s.push(OpSample::new(Eigh::default()).input(sep.clone(), shape).tol(TOL, TOL));
    }
    let lower = Eigh { symmetrize_input: false };
    s.push(OpSample::new(lower).input(sep.clone(), &[3, 3]).tol(TOL, TOL));
    // The tangent pair of eigh: distinct eigenvalues (gaps of at least
    // 0.1), any eigenvectors and tangents.
    let w = InputKind::Distinct { offset: 0.0 };
    for symmetrize_input in [true, false] {
        let t = EighTangent { symmetrize_input };
        s.push(
            OpSample::new(t)
                .input(w.clone(), &[3])
                .input(SYM, &[3, 3])
                .input(SYM, &[3, 3])
                .tol(TOL, TOL),
        );
        let c = EighCotangent { symmetrize_input };
        s.push(
            OpSample::new(c)
                .input(w.clone(), &[2, 4])
                .input(SYM, &[2, 4, 4])
                .input(SYM, &[2, 4])
                .input(SYM, &[2, 4, 4])
                .tol(TOL, TOL),
        );
    }
    s.push(
        OpSample::new(EighTangent::default())
            .input(w.clone(), &[2, 4])
            .input(SYM, &[2, 4, 4])
            .input(SYM, &[2, 4, 4])
            .tol(TOL, TOL),
    );
    let reduced = Svd { full_matrices: false, compute_uv: true };
    for shape in [&[3, 3][..], &[4, 2], &[2, 4], &[2, 3, 2]] {
        s.push(OpSample::new(reduced).input(SYM, shape).tol(TOL, TOL));
    }
    let full = Svd { full_matrices: true, compute_uv: true };
    s.push(OpSample::new(full).input(SYM, &[3, 3]).tol(TOL, TOL));
    let values = Svd { full_matrices: false, compute_uv: false };
    s.push(OpSample::new(values).input(SYM, &[3, 2]).tol(TOL, TOL));
    s.push(OpSample::new(values).input(SYM, &[2, 2, 3]).tol(TOL, TOL));
}
