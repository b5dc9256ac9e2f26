//! Tests of the linear-algebra module: reconstructions, conventions, edge
//! cases, errors, agreement with faer, and determinism across batching and
//! thread counts.

use super::*;
use faer::{Mat, Par};

/// Sizes straddling the small-matrix threshold.
const SIZES: [usize; 9] = [1, 2, 3, 8, 15, 16, 17, 33, 64];

/// A deterministic generator of numbers in [-1, 1).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }

    fn vec<T: Real>(&mut self, len: usize) -> Vec<T> {
        (0..len).map(|_| T::from_f64_(self.next())).collect()
    }

    /// `batch` symmetric positive definite `n × n` matrices (B·Bᵀ/n + I).
    fn spd<T: Real>(&mut self, batch: usize, n: usize) -> Vec<T> {
        let mut out = Vec::with_capacity(batch * n * n);
        for _ in 0..batch {
            let b: Vec<f64> = self.vec(n * n);
            let mut a = matmul(&b, &transpose(&b, n, n), n, n, n);
            for (i, x) in a.iter_mut().enumerate() {
                *x /= n as f64;
                if i % (n + 1) == 0 {
                    *x += 1.0;
                }
            }
            out.extend(a.iter().map(|&x| T::from_f64_(x)));
        }
        out
    }

    /// `batch` symmetric `n × n` matrices.
    fn sym<T: Real>(&mut self, batch: usize, n: usize) -> Vec<T> {
        let mut out = vec![T::ZERO; batch * n * n];
        for m in out.chunks_exact_mut(n * n) {
            for i in 0..n {
                for j in 0..=i {
                    let x = T::from_f64_(self.next());
                    m[i * n + j] = x;
                    m[j * n + i] = x;
                }
            }
        }
        out
    }
}

fn f64s<T: Real>(x: &[T]) -> Vec<f64> {
    x.iter().map(|v| v.to_f64_()).collect()
}

/// Row-major `m × k` times `k × n`, in f64.
fn matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            for j in 0..n {
                c[i * n + j] += a[i * k + p] * b[p * n + j];
            }
        }
    }
    c
}

fn transpose(a: &[f64], m: usize, n: usize) -> Vec<f64> {
    let mut t = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            t[j * m + i] = a[i * n + j];
        }
    }
    t
}

fn max_abs(a: &[f64]) -> f64 {
    a.iter().fold(0.0, |m, x| m.max(x.abs()))
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0.0, |m, (x, y)| m.max((x - y).abs()))
}

fn identity(n: usize) -> Vec<f64> {
    (0..n * n).map(|i| if i % (n + 1) == 0 { 1.0 } else { 0.0 }).collect()
}

/// A tolerance of `c` ulps × dimension, relative to `scale`.
fn tol<T: Real>(n: usize, scale: f64) -> f64 {
    50.0 * (n.max(1) as f64) * T::EPS.to_f64_() * scale.max(1.0)
}

fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    let d = max_diff(got, want);
    assert!(d <= tol, "{what}: max difference {d:e} > {tol:e}");
}

// ---------------------------------------------------------------- Cholesky

fn check_cholesky<T: Real>(n: usize, batch: usize) {
    let mut rng = Rng(n as u64 + 1);
    let a: Vec<T> = rng.spd(batch, n);
    let mut l = vec![T::NAN; a.len()];
    cholesky(&a, &mut l, batch, n, FailMode::Error, Par::Seq).unwrap();
    for (am, lm) in a.chunks_exact(n * n).zip(l.chunks_exact(n * n)) {
        let (am, lm) = (f64s(am), f64s(lm));
        for i in 0..n {
            assert!(lm[i * n + i] > 0.0);
            for j in i + 1..n {
                assert_eq!(lm[i * n + j], 0.0, "upper triangle zeroed");
            }
        }
        let llt = matmul(&lm, &transpose(&lm, n, n), n, n, n);
        assert_close(&format!("L·Lᵀ = A, n = {n}"), &llt, &am, tol::<T>(n, max_abs(&am)));
    }
}

#[test]
fn cholesky_reconstructs() {
    for n in SIZES {
        check_cholesky::<f64>(n, 3);
        check_cholesky::<f32>(n, 2);
    }
}

#[test]
fn cholesky_blocked_path_large_single_matrix() {
    // A single matrix of n ≥ 512 takes the blocked right-looking path:
    // it reconstructs, matches faer, reads the lower triangle only, and
    // reports the failing pivot of a matrix that is not positive definite.
    let n = 600;
    check_cholesky::<f64>(n, 1);
    let a: Vec<f64> = Rng(11).spd(1, n);
    let mut garbage = a.clone();
    for i in 0..n {
        garbage[i * n + i + 1..(i + 1) * n].fill(f64::NAN);
    }
    let (mut l, mut l2) = (vec![0.0; n * n], vec![0.0; n * n]);
    cholesky(&a, &mut l, 1, n, FailMode::Error, Par::Seq).unwrap();
    cholesky(&garbage, &mut l2, 1, n, FailMode::Error, Par::rayon(2)).unwrap();
    assert_close("one thread vs two", &l, &l2, tol::<f64>(n, 1.0));
    let m = Mat::from_fn(n, n, |i, j| a[i * n + j]);
    let fl = m.llt(faer::Side::Lower).unwrap().L().to_owned();
    let fl: Vec<f64> = (0..n * n).map(|k| fl[(k / n, k % n)]).collect();
    assert_close("blocked cholesky vs faer", &l, &fl, tol::<f64>(n, 1.0));
    let mut bad = a.clone();
    for j in 0..n {
        bad[450 * n + j] = 0.0;
        bad[j * n + 450] = 0.0;
    }
    bad[450 * n + 450] = -1.0;
    let err = cholesky(&bad, &mut l, 1, n, FailMode::Error, Par::Seq).unwrap_err();
    assert_eq!(err, LinalgError::NotPositiveDefinite { batch_index: 0, pivot: 450 });
    cholesky(&bad, &mut l, 1, n, FailMode::Nan, Par::Seq).unwrap();
    assert!(l.iter().all(|x| x.is_nan()));
}

#[test]
fn cholesky_matches_faer() {
    for n in [8, 17, 64] {
        let a: Vec<f64> = Rng(7).spd(1, n);
        let mut l = vec![0.0; n * n];
        cholesky(&a, &mut l, 1, n, FailMode::Error, Par::Seq).unwrap();
        let m = Mat::from_fn(n, n, |i, j| a[i * n + j]);
        let fl = m.llt(faer::Side::Lower).unwrap().L().to_owned();
        let fl: Vec<f64> = (0..n * n).map(|k| fl[(k / n, k % n)]).collect();
        assert_close("cholesky vs faer", &l, &fl, tol::<f64>(n, 1.0));
    }
}

#[test]
fn cholesky_reads_only_the_lower_triangle() {
    for n in [3, 8, 33] {
        let a: Vec<f64> = Rng(3).spd(1, n);
        let mut garbage = a.clone();
        for i in 0..n {
            for j in i + 1..n {
                garbage[i * n + j] = f64::NAN;
            }
        }
        let (mut l1, mut l2) = (vec![0.0; n * n], vec![0.0; n * n]);
        cholesky(&a, &mut l1, 1, n, FailMode::Error, Par::Seq).unwrap();
        cholesky(&garbage, &mut l2, 1, n, FailMode::Error, Par::Seq).unwrap();
        assert_eq!(l1, l2);
    }
}

#[test]
fn cholesky_not_positive_definite() {
    for n in [3, 20] {
        let batch = 4;
        let mut a: Vec<f64> = Rng(5).spd(batch, n);
        // Element 1: a negative diagonal entry at 2 with a zero row/column
        // fails at pivot 2; element 3 at pivot 0.
        for j in 0..n {
            a[n * n + 2 * n + j] = 0.0;
            a[n * n + j * n + 2] = 0.0;
        }
        a[n * n + 2 * n + 2] = -1.0;
        a[3 * n * n] = 0.0;
        let mut l = vec![0.0; a.len()];
        let err = cholesky(&a, &mut l, batch, n, FailMode::Error, Par::Seq).unwrap_err();
        assert_eq!(err, LinalgError::NotPositiveDefinite { batch_index: 1, pivot: 2 });
        let err = cholesky(&a, &mut l, batch, n, FailMode::Error, Par::rayon(2)).unwrap_err();
        assert_eq!(err, LinalgError::NotPositiveDefinite { batch_index: 1, pivot: 2 });
        assert!(err.to_string().contains("matrix 1"));
        cholesky(&a, &mut l, batch, n, FailMode::Nan, Par::Seq).unwrap();
        let per = n * n;
        assert!(l[per..2 * per].iter().all(|x| x.is_nan()));
        assert!(l[3 * per..].iter().all(|x| x.is_nan()));
        let mut l0 = vec![0.0; per];
        cholesky(&a[..per], &mut l0, 1, n, FailMode::Error, Par::Seq).unwrap();
        assert_eq!(l[..per], l0[..]);
        assert!(l[2 * per..3 * per].iter().all(|x| x.is_finite()));
    }
}

#[test]
fn cholesky_nan_input_is_an_error_not_a_panic() {
    for n in [4, 20] {
        let mut a: Vec<f64> = Rng(1).spd(1, n);
        a[n + 1] = f64::NAN;
        let mut l = vec![0.0; n * n];
        let err = cholesky(&a, &mut l, 1, n, FailMode::Error, Par::Seq).unwrap_err();
        assert!(matches!(err, LinalgError::NotPositiveDefinite { batch_index: 0, .. }));
    }
}

// ------------------------------------------------------- triangular solves

fn all_options() -> Vec<TriangularSolve> {
    let mut v = Vec::new();
    for bits in 0..16u8 {
        v.push(TriangularSolve {
            left_side: bits & 1 != 0,
            lower: bits & 2 != 0,
            transpose_a: bits & 4 != 0,
            unit_diagonal: bits & 8 != 0,
        });
    }
    v
}

/// The dense `op(A)` a solve uses, from `a` with the unread parts ignored.
fn effective(a: &[f64], s: usize, o: TriangularSolve) -> Vec<f64> {
    let mut t = vec![0.0; s * s];
    for i in 0..s {
        for j in 0..s {
            let keep = if o.lower { j <= i } else { j >= i };
            if keep {
                t[i * s + j] = if i == j && o.unit_diagonal { 1.0 } else { a[i * s + j] };
            }
        }
    }
    if o.transpose_a {
        transpose(&t, s, s)
    } else {
        t
    }
}

/// A well-conditioned triangular matrix with NaN in the parts a solve must
/// not read.
fn tri_matrix<T: Real>(rng: &mut Rng, s: usize, o: TriangularSolve) -> Vec<T> {
    let mut a: Vec<f64> = rng.vec(s * s);
    for i in 0..s {
        for j in 0..s {
            let read = if o.lower { j <= i } else { j >= i };
            if !read || (i == j && o.unit_diagonal) {
                a[i * s + j] = f64::NAN;
            } else if i == j {
                a[i * s + j] = 2.0 + a[i * s + j].abs();
            } else {
                a[i * s + j] /= s as f64;
            }
        }
    }
    a.iter().map(|&x| T::from_f64_(x)).collect()
}

fn check_triangular<T: Real>(s: usize, other: usize, batch: usize) {
    let mut rng = Rng(s as u64 * 31 + other as u64);
    for o in all_options() {
        let (m, k) = if o.left_side { (s, other) } else { (other, s) };
        let a: Vec<T> = (0..batch).flat_map(|_| tri_matrix::<T>(&mut rng, s, o)).collect();
        let b: Vec<T> = rng.vec(batch * m * k);
        let mut x = vec![T::ZERO; b.len()];
        triangular_solve(&a, &b, &mut x, batch, m, k, ABatch::PerMatrix, o, Par::Seq).unwrap();
        for i in 0..batch {
            let op = effective(&f64s(&a[i * s * s..(i + 1) * s * s]), s, o);
            let xi = f64s(&x[i * m * k..(i + 1) * m * k]);
            let prod =
                if o.left_side { matmul(&op, &xi, m, m, k) } else { matmul(&xi, &op, m, k, k) };
            let bi = f64s(&b[i * m * k..(i + 1) * m * k]);
            assert_close(&format!("{o:?} s = {s}"), &prod, &bi, tol::<T>(s, 1.0));
        }
    }
}

#[test]
fn triangular_solve_all_options() {
    for s in [1, 3, 16, 17, 40] {
        check_triangular::<f64>(s, 3, 2);
        check_triangular::<f32>(s, 2, 2);
    }
    check_triangular::<f64>(20, 1, 1);
    check_triangular::<f64>(5, 0, 2);
    // One vector, past the small loops: blocked substitution (f64).
    for s in [17, 33, 200, 203] {
        check_triangular::<f64>(s, 1, 2);
        check_triangular::<f32>(s, 1, 1);
    }
}

#[test]
fn triangular_solve_shared_matches_per_matrix() {
    let mut rng = Rng(11);
    for s in [4, 20] {
        for o in all_options() {
            for other in [1, 3] {
                let batch = 5;
                let (m, k) = if o.left_side { (s, other) } else { (other, s) };
                let a: Vec<f64> = tri_matrix(&mut rng, s, o);
                let repeated: Vec<f64> = (0..batch).flat_map(|_| a.iter().copied()).collect();
                let b: Vec<f64> = rng.vec(batch * m * k);
                let (mut x1, mut x2) = (vec![0.0; b.len()], vec![0.0; b.len()]);
                triangular_solve(&a, &b, &mut x1, batch, m, k, ABatch::Shared, o, Par::rayon(2))
                    .unwrap();
                triangular_solve(
                    &repeated,
                    &b,
                    &mut x2,
                    batch,
                    m,
                    k,
                    ABatch::PerMatrix,
                    o,
                    Par::Seq,
                )
                .unwrap();
                assert_close(&format!("shared {o:?}"), &x1, &x2, tol::<f64>(s, 1.0));
            }
        }
    }
}

// ---------------------------------------------------------------------- LU

/// Checks `A[perm] = L·U`, `|L| ≤ 1`, and that the swaps compose to `perm`.
fn check_lu_one(a: &[f64], f: &[f64], piv: &[i64], perm: &[i64], m: usize, n: usize, t: f64) {
    let k = m.min(n);
    let mut p = vec![0.0; m * m];
    let mut l = vec![0.0; m * k];
    let mut u = vec![0.0; k * n];
    lu_unpack(f, perm, &mut p, &mut l, &mut u, 1, m, n).unwrap();
    assert!(l.iter().all(|x| x.abs() <= 1.0), "partial pivoting bounds L");
    let lu_prod = matmul(&l, &u, m, k, n);
    let permuted: Vec<f64> =
        perm.iter().flat_map(|&r| a[r as usize * n..(r as usize + 1) * n].to_vec()).collect();
    assert_close("A[perm] = L·U", &lu_prod, &permuted, t);
    assert_close("A = P·L·U", &matmul(&p, &lu_prod, m, m, n), a, t);
    let mut from_swaps: Vec<i64> = (0..m as i64).collect();
    for (i, &s) in piv.iter().enumerate() {
        assert!(s as usize >= i && (s as usize) < m);
        from_swaps.swap(i, s as usize);
    }
    assert_eq!(from_swaps, perm, "pivots compose to perm");
}

fn check_lu<T: Real>(m: usize, n: usize, a: &[T], batch: usize) {
    let k = m.min(n);
    let mut f = vec![T::ZERO; a.len()];
    let (mut piv, mut perm) = (vec![0; batch * k], vec![0; batch * m]);
    lu(a, &mut f, &mut piv, &mut perm, batch, m, n, Par::Seq).unwrap();
    for i in 0..batch {
        let ai = f64s(&a[i * m * n..(i + 1) * m * n]);
        check_lu_one(
            &ai,
            &f64s(&f[i * m * n..(i + 1) * m * n]),
            &piv[i * k..(i + 1) * k],
            &perm[i * m..(i + 1) * m],
            m,
            n,
            tol::<T>(m.max(n), max_abs(&ai)),
        );
    }
}

const SHAPES: [(usize, usize); 8] =
    [(3, 5), (5, 3), (1, 4), (4, 1), (20, 33), (33, 20), (16, 17), (17, 16)];

#[test]
fn lu_reconstructs() {
    let mut rng = Rng(2);
    for n in SIZES {
        check_lu::<f64>(n, n, &rng.vec(2 * n * n), 2);
        check_lu::<f32>(n, n, &rng.vec(n * n), 1);
    }
    for (m, n) in SHAPES {
        check_lu::<f64>(m, n, &rng.vec(2 * m * n), 2);
    }
}

#[test]
fn lu_never_fails_on_singular_matrices() {
    for n in [3, 8, 40] {
        let mut rng = Rng(9);
        let zero = vec![0.0; n * n];
        check_lu::<f64>(n, n, &zero, 1);
        // A zero first column, and a duplicated row (rank n − 2).
        let mut a: Vec<f64> = rng.vec(n * n);
        for i in 0..n {
            a[i * n] = 0.0;
        }
        let row: Vec<f64> = a[n..2 * n].to_vec();
        a[(n - 1) * n..].copy_from_slice(&row);
        check_lu::<f64>(n, n, &a, 1);
        let mut f = vec![0.0; n * n];
        let (mut piv, mut perm) = (vec![0; n], vec![0; n]);
        lu(&a, &mut f, &mut piv, &mut perm, 1, n, n, Par::Seq).unwrap();
        assert!(f.iter().all(|x| x.is_finite()));
        let (mut d, mut s, mut l) = ([1.0], [1.0], [1.0]);
        det(&a, &mut d, 1, n, Par::Seq).unwrap();
        slogdet(&a, &mut s, &mut l, 1, n, Par::Seq).unwrap();
        assert_eq!((d[0], s[0], l[0]), (0.0, 0.0, f64::NEG_INFINITY));
        let mut x = vec![0.0; n * n];
        let err = inv(&a, &mut x, 1, n, FailMode::Error, Par::Seq).unwrap_err();
        assert_eq!(err, LinalgError::Singular { batch_index: 0, pivot: 0 });
    }
    for (m, n) in SHAPES {
        check_lu::<f64>(m, n, &vec![0.0; m * n], 1);
    }
    // A zero column makes an exact zero pivot at its step: in the middle,
    // first and last column (of a square, tall and wide matrix), where faer's
    // factor goes NaN and the unblocked loop must take over (found from
    // `U`'s diagonal).
    for (m, n, zero_col) in [(40, 40, 20), (40, 40, 0), (50, 40, 39), (40, 40, 39), (30, 45, 29)] {
        let mut a: Vec<f64> = Rng(11).vec(m * n);
        for i in 0..m {
            a[i * n + zero_col] = 0.0;
        }
        check_lu::<f64>(m, n, &a, 1);
        let k = m.min(n);
        let (mut f, mut piv, mut perm) = (vec![0.0; m * n], vec![0; k], vec![0; m]);
        lu(&a, &mut f, &mut piv, &mut perm, 1, m, n, Par::Seq).unwrap();
        assert!(f.iter().all(|x| x.is_finite()), "{m}x{n}, zero column {zero_col}");
        assert_eq!(f[zero_col * n + zero_col], 0.0, "{m}x{n}, zero column {zero_col}");
    }
}

#[test]
fn lu_small_path_matches_faer_path() {
    // The same matrix through the unblocked loop (16) and faer (embedded in
    // 17 with an identity border, which does not change the pivots).
    let n = 16;
    let a: Vec<f64> = Rng(4).vec(n * n);
    let mut big = identity(n + 1);
    for i in 0..n {
        big[i * (n + 1)..i * (n + 1) + n].copy_from_slice(&a[i * n..(i + 1) * n]);
    }
    let (mut f1, mut p1, mut q1) = (vec![0.0; n * n], vec![0; n], vec![0; n]);
    let (mut f2, mut p2, mut q2) = (vec![0.0; (n + 1) * (n + 1)], vec![0; n + 1], vec![0; n + 1]);
    lu(&a, &mut f1, &mut p1, &mut q1, 1, n, n, Par::Seq).unwrap();
    lu(&big, &mut f2, &mut p2, &mut q2, 1, n + 1, n + 1, Par::Seq).unwrap();
    assert_eq!(p1[..], p2[..n]);
    assert_eq!(q1[..], q2[..n]);
    let inner: Vec<f64> = (0..n * n).map(|k| f2[(k / n) * (n + 1) + k % n]).collect();
    assert_close("small vs faer LU", &f1, &inner, tol::<f64>(n, 1.0));
}

#[test]
fn lu_solve_both_transposes_and_shared() {
    let mut rng = Rng(21);
    for n in [1, 5, 16, 17, 30] {
        let batch = 3;
        let k = 2;
        let a: Vec<f64> = rng.vec(batch * n * n);
        let b: Vec<f64> = rng.vec(batch * n * k);
        let mut f = vec![0.0; a.len()];
        let (mut piv, mut perm) = (vec![0; batch * n], vec![0; batch * n]);
        lu(&a, &mut f, &mut piv, &mut perm, batch, n, n, Par::Seq).unwrap();
        for transpose_a in [false, true] {
            let mut x = vec![0.0; b.len()];
            lu_solve(&f, &perm, &b, &mut x, batch, n, k, ABatch::PerMatrix, transpose_a, Par::Seq)
                .unwrap();
            for i in 0..batch {
                let ai = &a[i * n * n..(i + 1) * n * n];
                let op = if transpose_a { transpose(ai, n, n) } else { ai.to_vec() };
                let prod = matmul(&op, &x[i * n * k..(i + 1) * n * k], n, n, k);
                assert_close("A·X = B", &prod, &b[i * n * k..(i + 1) * n * k], 1e-9);
            }
            let mut xs = vec![0.0; b.len()];
            let (f0, p0) = (&f[..n * n], &perm[..n]);
            lu_solve(f0, p0, &b, &mut xs, batch, n, k, ABatch::Shared, transpose_a, Par::rayon(2))
                .unwrap();
            for i in 0..batch {
                let op =
                    if transpose_a { transpose(&a[..n * n], n, n) } else { a[..n * n].to_vec() };
                let prod = matmul(&op, &xs[i * n * k..(i + 1) * n * k], n, n, k);
                assert_close("shared A·X = B", &prod, &b[i * n * k..(i + 1) * n * k], 1e-9);
            }
        }
    }
}

/// The column-major factor is the row-major one transposed, bit for bit,
/// with the same pivots, on both paths (small loop, faer), tall and wide,
/// and where faer meets a zero pivot (the fallback loop); solves from it
/// agree with solves from the row-major factor.
#[test]
fn column_major_factor_is_the_transpose_and_solves_alike() {
    let mut rng = Rng(23);
    let mut singular: Vec<f64> = rng.vec(20 * 20);
    for i in 0..20 {
        singular[i * 20 + 3] = 0.0; // a zero column: faer divides by 0
    }
    let shapes = [(3, 3), (5, 4), (4, 5), (20, 20), (40, 25), (25, 40), (64, 64)];
    let mut cases: Vec<_> =
        shapes.iter().map(|&(m, n)| (m, n, rng.vec::<f64>(2 * m * n), m == n)).collect();
    cases.push((20, 20, [&singular[..], &singular[..]].concat(), false));
    for (m, n, a, solvable) in cases {
        let (batch, k) = (2, m.min(n));
        let (mut f, mut piv, mut perm) =
            (vec![0.0; a.len()], vec![0; batch * k], vec![0; batch * m]);
        let (mut ft, mut pivt, mut permt) =
            (vec![0.0; a.len()], vec![0; batch * k], vec![0; batch * m]);
        lu(&a, &mut f, &mut piv, &mut perm, batch, m, n, Par::Seq).unwrap();
        let col = FactorLayout::ColumnMajor;
        lu_with_layout(&a, &mut ft, &mut pivt, &mut permt, batch, m, n, Par::rayon(2), col)
            .unwrap();
        assert_eq!((&piv, &perm), (&pivt, &permt), "{m}x{n}");
        for i in 0..batch {
            let want = transpose(&f[i * m * n..(i + 1) * m * n], m, n);
            let got = &ft[i * m * n..(i + 1) * m * n];
            assert!(want.iter().zip(got).all(|(x, y)| x.to_bits() == y.to_bits()), "{m}x{n}");
        }
        if !solvable {
            continue;
        }
        let b: Vec<f64> = rng.vec(batch * n * 3);
        for transpose_a in [false, true] {
            let (mut x, mut xt) = (vec![0.0; b.len()], vec![0.0; b.len()]);
            let each = ABatch::PerMatrix;
            lu_solve(&f, &perm, &b, &mut x, batch, n, 3, each, transpose_a, Par::Seq).unwrap();
            let col = FactorLayout::ColumnMajor;
            lu_solve_with_layout(
                &ft,
                &perm,
                &b,
                &mut xt,
                batch,
                n,
                3,
                each,
                transpose_a,
                col,
                Par::Seq,
            )
            .unwrap();
            assert_close("column-major solve", &xt, &x, tol::<f64>(n, 1.0));
        }
    }
}

#[test]
fn lu_solve_rejects_bad_permutations() {
    let f = [1.0, 0.0, 0.0, 1.0];
    let mut x = [0.0; 2];
    let err =
        lu_solve(&f, &[0, 2], &[1.0, 1.0], &mut x, 1, 2, 1, ABatch::PerMatrix, false, Par::Seq)
            .unwrap_err();
    assert_eq!(err, LinalgError::InvalidPermutation { batch_index: 0, value: 2 });
}

#[test]
fn det_and_slogdet() {
    let mut rng = Rng(13);
    for n in SIZES {
        let a: Vec<f64> = rng.vec(n * n);
        let (mut d, mut s, mut l) = ([0.0], [0.0], [0.0]);
        det(&a, &mut d, 1, n, Par::Seq).unwrap();
        slogdet(&a, &mut s, &mut l, 1, n, Par::Seq).unwrap();
        let want = Mat::from_fn(n, n, |i, j| a[i * n + j]).determinant();
        assert!((d[0] - want).abs() <= 1e-12 * want.abs().max(1e-300), "det n = {n}");
        assert!((s[0] * l[0].exp() - want).abs() <= 1e-12 * want.abs(), "slogdet n = {n}");
        assert!(s[0] == 1.0 || s[0] == -1.0);
        // From a factorisation too.
        let mut f = vec![0.0; n * n];
        let (mut piv, mut perm) = (vec![0; n], vec![0; n]);
        lu(&a, &mut f, &mut piv, &mut perm, 1, n, n, Par::Seq).unwrap();
        let (mut d2, mut s2, mut l2) = ([0.0], [0.0], [0.0]);
        det_from_lu(&f, &piv, &mut d2, 1, n).unwrap();
        slogdet_from_lu(&f, &piv, &mut s2, &mut l2, 1, n).unwrap();
        assert_eq!((d, s, l), (d2, s2, l2));
    }
    // A permutation matrix: det −1, log 0.
    let p = [0.0, 1.0, 1.0, 0.0];
    let (mut d, mut s, mut l) = ([0.0], [0.0], [0.0]);
    det(&p, &mut d, 1, 2, Par::Seq).unwrap();
    slogdet(&p, &mut s, &mut l, 1, 2, Par::Seq).unwrap();
    assert_eq!((d[0], s[0], l[0]), (-1.0, -1.0, 0.0));
    // NaN propagates.
    slogdet(&[f64::NAN], &mut s, &mut l, 1, 1, Par::Seq).unwrap();
    assert!(s[0].is_nan() && l[0].is_nan());
    // f32.
    let a32 = [2.0f32, 1.0, 1.0, 3.0];
    let mut d32 = [0.0f32];
    det(&a32, &mut d32, 1, 2, Par::Seq).unwrap();
    assert!((d32[0] - 5.0).abs() < 1e-5);
}

#[test]
fn inverse() {
    let mut rng = Rng(17);
    for n in SIZES {
        let a: Vec<f64> = rng.vec(2 * n * n);
        let mut x = vec![0.0; a.len()];
        inv(&a, &mut x, 2, n, FailMode::Error, Par::Seq).unwrap();
        for i in 0..2 {
            let r = i * n * n..(i + 1) * n * n;
            let prod = matmul(&a[r.clone()], &x[r], n, n, n);
            let cond = max_abs(&x) * n as f64;
            assert_close("A·A⁻¹ = I", &prod, &identity(n), 1e-13 * cond * n as f64);
        }
        let a32: Vec<f32> = a[..n * n].iter().map(|&v| v as f32).collect();
        let mut x32 = vec![0.0f32; n * n];
        inv(&a32, &mut x32, 1, n, FailMode::Error, Par::Seq).unwrap();
    }
    // Singular element 1 of 3: error names it, NaN mode fills it.
    let a = [1.0, 0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 2.0, 0.0, 0.0, 2.0_f64];
    let mut x = [0.0; 12];
    let err = inv(&a, &mut x, 3, 2, FailMode::Error, Par::Seq).unwrap_err();
    assert_eq!(err, LinalgError::Singular { batch_index: 1, pivot: 1 });
    inv(&a, &mut x, 3, 2, FailMode::Nan, Par::Seq).unwrap();
    assert_eq!(x[..4], [1.0, 0.0, 0.0, 1.0]);
    assert!(x[4..8].iter().all(|v| v.is_nan()));
    assert_eq!(x[8..], [0.5, 0.0, 0.0, 0.5]);
}

// ---------------------------------------------------------------------- QR

fn check_qr<T: Real>(m: usize, n: usize, a: &[T]) {
    let k = m.min(n);
    let scale = max_abs(&f64s(a));
    for mode in [QrMode::Reduced, QrMode::Complete] {
        let (qc, rr) = if mode == QrMode::Reduced { (k, k) } else { (m, m) };
        let (mut q, mut r) = (vec![T::NAN; m * qc], vec![T::NAN; rr * n]);
        qr(a, &mut q, &mut r, 1, m, n, mode, Par::Seq).unwrap();
        let (q, r) = (f64s(&q), f64s(&r));
        let what = format!("{m}×{n} {mode:?}");
        assert_close(
            &format!("Q·R = A {what}"),
            &matmul(&q, &r, m, qc, n),
            &f64s(a),
            tol::<T>(m.max(n), scale),
        );
        let qtq = matmul(&transpose(&q, m, qc), &q, qc, m, qc);
        assert_close(&format!("QᵀQ = I {what}"), &qtq, &identity(qc), tol::<T>(m, 1.0));
        for i in 0..rr {
            for j in 0..n.min(i) {
                assert_eq!(r[i * n + j], 0.0, "R upper triangular {what}");
            }
            if i < k {
                assert!(r[i * n + i] >= 0.0, "R's diagonal non-negative {what}");
            }
        }
    }
}

#[test]
fn qr_reconstructs() {
    let mut rng = Rng(23);
    for n in SIZES {
        check_qr::<f64>(n, n, &rng.vec(n * n));
        check_qr::<f32>(n, n, &rng.vec(n * n));
    }
    for (m, n) in SHAPES {
        check_qr::<f64>(m, n, &rng.vec(m * n));
    }
}

#[test]
fn qr_rank_deficient() {
    let mut rng = Rng(29);
    for (m, n) in [(4, 4), (6, 3), (3, 6), (40, 30)] {
        check_qr::<f64>(m, n, &vec![0.0; m * n]);
        // Rank 1.
        let u: Vec<f64> = rng.vec(m);
        let v: Vec<f64> = rng.vec(n);
        check_qr::<f64>(m, n, &matmul(&u, &v, m, 1, n));
        // A zero column first.
        let mut a: Vec<f64> = rng.vec(m * n);
        for i in 0..m {
            a[i * n] = 0.0;
        }
        check_qr::<f64>(m, n, &a);
    }
}

#[test]
fn qr_positive_diagonal_is_unique() {
    // For full column rank, R with a positive diagonal is the Cholesky
    // factor of AᵀA transposed.
    let (m, n) = (7, 4);
    let a: Vec<f64> = Rng(31).vec(m * n);
    let (mut q, mut r) = (vec![0.0; m * n], vec![0.0; n * n]);
    qr(&a, &mut q, &mut r, 1, m, n, QrMode::Reduced, Par::Seq).unwrap();
    let ata = matmul(&transpose(&a, m, n), &a, n, m, n);
    let mut l = vec![0.0; n * n];
    cholesky(&ata, &mut l, 1, n, FailMode::Error, Par::Seq).unwrap();
    assert_close("R = Lᵀ", &r, &transpose(&l, n, n), 1e-12);
}

// -------------------------------------------------------------------- eigh

fn check_eigh<T: Real>(n: usize, a: &[T]) -> (Vec<f64>, Vec<f64>) {
    let (mut w, mut v) = (vec![T::NAN; n], vec![T::NAN; n * n]);
    eigh(a, &mut w, &mut v, 1, n, Par::Seq).unwrap();
    let (w, v) = (f64s(&w), f64s(&v));
    let scale = max_abs(&f64s(a));
    assert!(w.windows(2).all(|p| p[0] <= p[1]), "ascending");
    let vw: Vec<f64> = (0..n * n).map(|k| v[k] * w[k % n]).collect();
    let rec = matmul(&vw, &transpose(&v, n, n), n, n, n);
    assert_close(&format!("V·diag(w)·Vᵀ = A n = {n}"), &rec, &f64s(a), tol::<T>(n, scale));
    let vtv = matmul(&transpose(&v, n, n), &v, n, n, n);
    assert_close(&format!("VᵀV = I n = {n}"), &vtv, &identity(n), tol::<T>(n, 1.0));
    check_signs(&transpose(&v, n, n), n);
    let mut w2 = vec![T::NAN; n];
    eigvalsh(a, &mut w2, 1, n, Par::Seq).unwrap();
    assert_close("eigvalsh = eigh's w", &f64s(&w2), &w, tol::<T>(n, scale));
    (w, v)
}

/// Each row of `vt` (a vector) has a positive component of largest
/// magnitude, the first on ties.
fn check_signs(vt: &[f64], len: usize) {
    for vec in vt.chunks_exact(len.max(1)) {
        let best = vec.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        if let Some(first) = vec.iter().find(|x| x.abs() == best) {
            assert!(*first >= 0.0, "sign convention: {vec:?}");
        }
    }
}

#[test]
fn eigh_reconstructs() {
    let mut rng = Rng(37);
    for n in SIZES {
        check_eigh::<f64>(n, &rng.sym(1, n));
        check_eigh::<f32>(n, &rng.sym(1, n));
    }
}

#[test]
fn eigh_matches_faer() {
    for n in [5, 8, 16, 33] {
        let a: Vec<f64> = Rng(41).sym(1, n);
        let (w, _) = check_eigh::<f64>(n, &a);
        let fw = Mat::from_fn(n, n, |i, j| a[i * n + j])
            .self_adjoint_eigenvalues(faer::Side::Lower)
            .unwrap();
        assert_close("eigenvalues vs faer", &w, &fw, tol::<f64>(n, 1.0));
    }
}

#[test]
fn eigh_repeated_eigenvalues_and_lower_triangle() {
    for n in [1, 5, 8, 16, 17, 33] {
        check_eigh::<f64>(n, &identity(n));
        check_eigh::<f64>(n, &vec![0.0; n * n]);
        // Q·diag(1, 1, 2, 2, 2, …)·Qᵀ with Q from a QR.
        let q0: Vec<f64> = Rng(43).vec(n * n);
        let (mut q, mut r) = (vec![0.0; n * n], vec![0.0; n * n]);
        qr(&q0, &mut q, &mut r, 1, n, n, QrMode::Reduced, Par::Seq).unwrap();
        let d: Vec<f64> = (0..n).map(|i| if i < 2 { 1.0 } else { 2.0 }).collect();
        let qd: Vec<f64> = (0..n * n).map(|k| q[k] * d[k % n]).collect();
        let mut a = matmul(&qd, &transpose(&q, n, n), n, n, n);
        for i in 0..n {
            for j in 0..i {
                a[j * n + i] = a[i * n + j]; // exactly symmetric
            }
        }
        let (w, _) = check_eigh::<f64>(n, &a);
        assert_close("repeated eigenvalues", &w, &d, 1e-13 * n as f64);
        // Only the lower triangle is read.
        let mut garbage = a.clone();
        for i in 0..n {
            for j in i + 1..n {
                garbage[i * n + j] = 1e30;
            }
        }
        let (mut w1, mut v1, mut w2, mut v2) =
            (vec![0.0; n], vec![0.0; n * n], vec![0.0; n], vec![0.0; n * n]);
        eigh(&a, &mut w1, &mut v1, 1, n, Par::Seq).unwrap();
        eigh(&garbage, &mut w2, &mut v2, 1, n, Par::Seq).unwrap();
        assert_eq!((w1, v1), (w2, v2));
    }
}

/// A batch mixing, within each group of 8 lanes of the small path,
/// matrices that converge at different speeds: diagonal ones (no rotation
/// at all, so their lanes are masked throughout), a repeated eigenvalue,
/// a zero matrix, random ones and a badly scaled one.
fn mixed_batch(n: usize, batch: usize) -> Vec<f64> {
    let mut rng = Rng(71);
    let mut out = Vec::with_capacity(batch * n * n);
    for b in 0..batch {
        let m: Vec<f64> = match b % 6 {
            0 => (0..n * n)
                .map(|k| if k % (n + 1) == 0 { (k / n) as f64 - 1.5 } else { 0.0 })
                .collect(),
            1 => identity(n).iter().map(|x| 2.0 * x).collect(),
            2 => vec![0.0; n * n],
            3 => rng.sym::<f64>(1, n).iter().map(|x| x * 1e-7).collect(),
            _ => rng.sym(1, n),
        };
        out.extend(m);
    }
    out
}

#[test]
fn eigh_small_batch_matches_each_matrix_alone_and_faer() {
    for n in [2, 3, 5, 8, 13, 16] {
        let batch = 21; // two full groups of 8 and a short one
        let a = mixed_batch(n, batch);
        let (mut w, mut v) = (vec![0.0; batch * n], vec![0.0; batch * n * n]);
        eigh(&a, &mut w, &mut v, batch, n, Par::Seq).unwrap();
        for b in 0..batch {
            let ab = &a[b * n * n..(b + 1) * n * n];
            let (w1, v1) = check_eigh::<f64>(n, ab);
            // Alone or in a group: the same values (== also equates the
            // signs of zeros the masked lanes' identity rotation may flip).
            assert_eq!(w1, w[b * n..(b + 1) * n], "w, n = {n}, matrix {b}");
            assert_eq!(v1, v[b * n * n..(b + 1) * n * n], "V, n = {n}, matrix {b}");
            let fw = Mat::from_fn(n, n, |i, j| ab[i * n + j])
                .self_adjoint_eigenvalues(faer::Side::Lower)
                .unwrap();
            let scale = max_abs(ab).max(f64::MIN_POSITIVE);
            assert_close("w vs faer (relative)", &w1, &fw, 1e-14 * n as f64 * scale);
        }
        let a32: Vec<f32> = a.iter().map(|&x| x as f32).collect();
        let (mut w32, mut v32) = (vec![0.0f32; batch * n], vec![0.0f32; batch * n * n]);
        eigh(&a32, &mut w32, &mut v32, batch, n, Par::Seq).unwrap();
        for b in 0..batch {
            let (w1, v1) = check_eigh::<f32>(n, &a32[b * n * n..(b + 1) * n * n]);
            assert_eq!(w1, f64s(&w32[b * n..(b + 1) * n]), "f32 w, n = {n}, matrix {b}");
            assert_eq!(v1, f64s(&v32[b * n * n..(b + 1) * n * n]), "f32 V, n = {n}, matrix {b}");
        }
    }
}

#[test]
fn eigh_sign_convention_on_a_known_matrix() {
    // [[2, −1], [−1, 2]]: eigenvalues 1, 3; vectors (1, 1)/√2 and
    // (1, −1)/√2, whose first component is the (tied) largest: positive.
    let a = [2.0, -1.0, -1.0, 2.0];
    let (mut w, mut v) = ([0.0; 2], [0.0; 4]);
    eigh(&a, &mut w, &mut v, 1, 2, Par::Seq).unwrap();
    let h = 0.5f64.sqrt();
    assert_close("w", &w, &[1.0, 3.0], 1e-15);
    assert_close("v", &v, &[h, h, h, -h], 1e-15);
}

#[test]
fn non_finite_input_gives_nan_not_a_panic() {
    for n in [3, 20] {
        for bad in [f64::NAN, f64::INFINITY] {
            let mut a = identity(n);
            a[n] = bad;
            let (mut w, mut v) = (vec![0.0; n], vec![0.0; n * n]);
            eigh(&a, &mut w, &mut v, 1, n, Par::Seq).unwrap();
            assert!(w.iter().chain(&v).all(|x| x.is_nan()));
            eigvalsh(&a, &mut w, 1, n, Par::Seq).unwrap();
            assert!(w.iter().all(|x| x.is_nan()));
            let (mut s, mut u, mut vt) = (vec![0.0; n], vec![0.0; n * n], vec![0.0; n * n]);
            svd(&a, &mut s, &mut u, &mut vt, 1, n, n, SvdMode::Full, Par::Seq).unwrap();
            assert!(s.iter().chain(&u).chain(&vt).all(|x| x.is_nan()));
            let (mut q, mut r) = (vec![0.0; n * n], vec![0.0; n * n]);
            qr(&a, &mut q, &mut r, 1, n, n, QrMode::Reduced, Par::Seq).unwrap();
            let (mut f, mut piv, mut perm) = (vec![0.0; n * n], vec![0; n], vec![0; n]);
            lu(&a, &mut f, &mut piv, &mut perm, 1, n, n, Par::Seq).unwrap();
            let mut x = vec![0.0; n * n];
            inv(&a, &mut x, 1, n, FailMode::Nan, Par::Seq).unwrap();
            let opts = TriangularSolve { left_side: true, lower: true, ..Default::default() };
            triangular_solve(&a, &a, &mut x, 1, n, n, ABatch::PerMatrix, opts, Par::Seq).unwrap();
        }
    }
}

// --------------------------------------------------------------------- SVD

fn check_svd<T: Real>(m: usize, n: usize, a: &[T]) {
    let k = m.min(n);
    let scale = max_abs(&f64s(a));
    let mut s_only = vec![T::NAN; k];
    svd(a, &mut s_only, &mut [], &mut [], 1, m, n, SvdMode::ValuesOnly, Par::Seq).unwrap();
    for mode in [SvdMode::Reduced, SvdMode::Full] {
        let (uc, vr) = if mode == SvdMode::Reduced { (k, k) } else { (m, n) };
        let (mut s, mut u, mut vt) = (vec![T::NAN; k], vec![T::NAN; m * uc], vec![T::NAN; vr * n]);
        svd(a, &mut s, &mut u, &mut vt, 1, m, n, mode, Par::Seq).unwrap();
        let (s, u, vt) = (f64s(&s), f64s(&u), f64s(&vt));
        let what = format!("{m}×{n} {mode:?}");
        assert!(s.windows(2).all(|p| p[0] >= p[1]) && s.iter().all(|&x| x >= 0.0), "{what}");
        let us: Vec<f64> = (0..m * k).map(|i| u[(i / k) * uc + i % k] * s[i % k]).collect();
        let rec = matmul(&us, &vt[..k * n], m, k, n);
        assert_close(
            &format!("U·diag(s)·Vᵀ = A {what}"),
            &rec,
            &f64s(a),
            tol::<T>(m.max(n), scale),
        );
        let utu = matmul(&transpose(&u, m, uc), &u, uc, m, uc);
        assert_close(&format!("UᵀU = I {what}"), &utu, &identity(uc), tol::<T>(m, 1.0));
        let vvt = matmul(&vt, &transpose(&vt, vr, n), vr, n, vr);
        assert_close(&format!("VᵀV = I {what}"), &vvt, &identity(vr), tol::<T>(n, 1.0));
        check_signs(&transpose(&u, m, uc), m);
        assert_close("values only", &f64s(&s_only), &s, tol::<T>(m.max(n), scale));
    }
}

#[test]
fn svd_reconstructs() {
    let mut rng = Rng(47);
    for n in SIZES {
        check_svd::<f64>(n, n, &rng.vec(n * n));
        check_svd::<f32>(n, n, &rng.vec(n * n));
    }
    for (m, n) in SHAPES {
        check_svd::<f64>(m, n, &rng.vec(m * n));
    }
}

#[test]
fn svd_rank_deficient_and_matches_faer() {
    let mut rng = Rng(53);
    for (m, n) in [(4, 4), (6, 3), (3, 6), (30, 20)] {
        check_svd::<f64>(m, n, &vec![0.0; m * n]);
        let u: Vec<f64> = rng.vec(m);
        let v: Vec<f64> = rng.vec(n);
        check_svd::<f64>(m, n, &matmul(&u, &v, m, 1, n));
        let a: Vec<f64> = rng.vec(m * n);
        let mut s = vec![0.0; m.min(n)];
        svd(&a, &mut s, &mut [], &mut [], 1, m, n, SvdMode::ValuesOnly, Par::Seq).unwrap();
        let fs = Mat::from_fn(m, n, |i, j| a[i * n + j]).singular_values().unwrap();
        assert_close("singular values vs faer", &s, &fs, 1e-13);
    }
}

// ------------------------------------------------------ empty and lengths

#[test]
fn empty_inputs() {
    let e: [f64; 0] = [];
    for (batch, n) in [(0, 3), (3, 0), (0, 0)] {
        let len = batch * n * n;
        let a = vec![1.0; len];
        let mut o = vec![0.0; len];
        cholesky(&a, &mut o, batch, n, FailMode::Error, Par::Seq).unwrap();
        inv(&a, &mut o, batch, n, FailMode::Error, Par::rayon(2)).unwrap();
        let mut w = vec![0.0; batch * n];
        eigh(&a, &mut w, &mut o, batch, n, Par::Seq).unwrap();
        eigvalsh(&a, &mut w, batch, n, Par::Seq).unwrap();
        let (mut d, mut s) = (vec![0.0; batch], vec![0.0; batch]);
        det(&a, &mut d, batch, n, Par::Seq).unwrap();
        assert!(d.iter().all(|&x| x == 1.0), "det of 0×0 is 1");
        slogdet(&a, &mut s, &mut d, batch, n, Par::Seq).unwrap();
        let (mut piv, mut perm) = (vec![0; batch * n], vec![0; batch * n]);
        lu(&a, &mut o, &mut piv, &mut perm, batch, n, n, Par::Seq).unwrap();
        let opts = TriangularSolve { left_side: true, ..Default::default() };
        triangular_solve(&a, &e, &mut [], batch, n, 0, ABatch::PerMatrix, opts, Par::Seq).unwrap();
        let right = TriangularSolve::default();
        let b = vec![1.0; batch * 2 * n];
        let mut x = b.clone();
        triangular_solve(&a, &b, &mut x, batch, 2, n, ABatch::PerMatrix, right, Par::Seq).unwrap();
        let mut p = vec![0.0; batch * n * n];
        let (mut l, mut u) = (vec![0.0; 0], vec![0.0; 0]);
        lu_unpack(&e, &perm, &mut p, &mut l, &mut u, batch, n, 0).unwrap();
        let (mut q, mut r) = (vec![0.0; len], vec![0.0; len]);
        qr(&a, &mut q, &mut r, batch, n, n, QrMode::Complete, Par::Seq).unwrap();
        let mut u = vec![0.0; len];
        svd(&a, &mut w, &mut u, &mut o, batch, n, n, SvdMode::Full, Par::Seq).unwrap();
    }
    // m × 0 and 0 × n: complete Q and full U, Vᵀ are identities.
    let (mut q, mut r) = (vec![0.0; 9], vec![0.0; 0]);
    qr(&e, &mut q, &mut r, 1, 3, 0, QrMode::Complete, Par::Seq).unwrap();
    assert_eq!(q, identity(3));
    let (mut u, mut vt) = (vec![0.0; 0], vec![0.0; 4]);
    svd(&e, &mut [], &mut u, &mut vt, 1, 0, 2, SvdMode::Full, Par::Seq).unwrap();
    assert_eq!(vt, identity(2));
}

#[test]
fn wrong_lengths_are_errors() {
    let a = [1.0; 8];
    let mut o = [0.0; 7];
    let err = cholesky(&a, &mut o, 2, 2, FailMode::Error, Par::Seq).unwrap_err();
    assert_eq!(err, LinalgError::BufferLength { buffer: "out", expected: 8, actual: 7 });
    assert!(err.to_string().contains("`out` has 7 elements"));
    let err = eigh(&a, &mut [0.0; 4], &mut [0.0; 8], 3, 2, Par::Seq).unwrap_err();
    assert_eq!(err, LinalgError::BufferLength { buffer: "a", expected: 12, actual: 8 });
    let err = eigh(&a, &mut [0.0; 4], &mut [0.0; 8], usize::MAX, 2, Par::Seq).unwrap_err();
    assert_eq!(err, LinalgError::SizeOverflow { buffer: "a" });
    let opts = TriangularSolve::default();
    let err = triangular_solve(&a, &a, &mut [0.0; 8], 2, 2, 2, ABatch::Shared, opts, Par::Seq)
        .unwrap_err();
    assert_eq!(err, LinalgError::BufferLength { buffer: "a", expected: 4, actual: 8 });
    let err =
        svd(&a, &mut [0.0; 4], &mut [0.0; 1], &mut [], 2, 2, 2, SvdMode::ValuesOnly, Par::Seq)
            .unwrap_err();
    assert_eq!(err, LinalgError::BufferLength { buffer: "u", expected: 0, actual: 1 });
    let err = lu(&a, &mut [0.0; 8], &mut [0; 3], &mut [0; 4], 2, 2, 2, Par::Seq).unwrap_err();
    assert_eq!(err, LinalgError::BufferLength { buffer: "pivots", expected: 4, actual: 3 });
    let err = qr(&a, &mut [0.0; 8], &mut [0.0; 6], 2, 2, 2, QrMode::Reduced, Par::Seq).unwrap_err();
    assert_eq!(err, LinalgError::BufferLength { buffer: "r_out", expected: 8, actual: 6 });
    let err = det(&a, &mut [0.0; 3], 2, 2, Par::Seq).unwrap_err();
    assert_eq!(err, LinalgError::BufferLength { buffer: "out", expected: 2, actual: 3 });
}

// ------------------------------------------------------------- determinism

/// Runs `f(batch_of_inputs, par)` on the whole batch with several thread
/// counts and on each matrix alone; all results must be bit-identical.
fn same_bits(
    per_in: usize,
    batch: usize,
    input: &[f64],
    f: impl Fn(&[f64], usize, Par) -> Vec<f64>,
) {
    let whole = f(input, batch, Par::Seq);
    for par in [Par::rayon(2), Par::rayon(3)] {
        assert_eq!(whole, f(input, batch, par), "thread count changes bits");
    }
    let per_out = whole.len() / batch;
    for i in 0..batch {
        let one = f(&input[i * per_in..(i + 1) * per_in], 1, Par::Seq);
        assert_eq!(whole[i * per_out..(i + 1) * per_out], one[..], "batching changes bits");
    }
}

#[test]
fn batches_are_bit_identical_to_single_calls_and_across_threads() {
    let mut rng = Rng(59);
    let batch = 24;
    for n in [8, 20] {
        let a: Vec<f64> = rng.sym(batch, n);
        let spd: Vec<f64> = rng.spd(batch, n);
        let per = n * n;
        same_bits(per, batch, &a, |x, b, p| {
            let (mut w, mut v) = (vec![0.0; b * n], vec![0.0; b * per]);
            eigh(x, &mut w, &mut v, b, n, p).unwrap();
            (0..b)
                .flat_map(|i| [&w[i * n..(i + 1) * n], &v[i * per..(i + 1) * per]].concat())
                .collect()
        });
        same_bits(per, batch, &spd, |x, b, p| {
            let mut l = vec![0.0; b * per];
            cholesky(x, &mut l, b, n, FailMode::Error, p).unwrap();
            l
        });
        same_bits(per, batch, &a, |x, b, p| {
            let (mut f, mut piv, mut perm) = (vec![0.0; b * per], vec![0; b * n], vec![0; b * n]);
            lu(x, &mut f, &mut piv, &mut perm, b, n, n, p).unwrap();
            f
        });
        same_bits(per, batch, &a, |x, b, p| {
            let mut o = vec![0.0; b * per];
            inv(x, &mut o, b, n, FailMode::Error, p).unwrap();
            o
        });
        same_bits(per, batch, &a, |x, b, p| {
            let (mut q, mut r) = (vec![0.0; b * per], vec![0.0; b * per]);
            qr(x, &mut q, &mut r, b, n, n, QrMode::Reduced, p).unwrap();
            q
        });
        same_bits(per, batch, &a, |x, b, p| {
            let (mut s, mut u, mut vt) = (vec![0.0; b * n], vec![0.0; b * per], vec![0.0; b * per]);
            svd(x, &mut s, &mut u, &mut vt, b, n, n, SvdMode::Full, p).unwrap();
            vt
        });
        same_bits(per, batch, &spd, |x, b, p| {
            let opts = TriangularSolve { left_side: true, lower: true, ..Default::default() };
            let mut o = vec![0.0; b * per];
            triangular_solve(x, x, &mut o, b, n, n, ABatch::PerMatrix, opts, p).unwrap();
            o
        });
    }
}

// ----------------------------------------------------------------- helpers

#[test]
fn transposes() {
    let a: Vec<f64> = (0..35).map(|i| i as f64).collect();
    let mut t = vec![0.0; 35];
    super::transpose::transpose(&a, 5, 7, &mut t);
    assert_eq!(t, transpose(&a, 5, 7));
    let n = 40;
    let a: Vec<f64> = (0..n * n).map(|i| i as f64).collect();
    let mut up = vec![-1.0; n * n];
    super::transpose::lower_to_upper_transposed(&a, n, &mut up);
    let mut want_lower = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            assert_eq!(up[j * n + i], a[i * n + j]);
            want_lower[i * n + j] = a[i * n + j];
        }
    }
    super::transpose::upper_to_lower_in_place(&mut up, n);
    assert_eq!(up, want_lower);
}

#[test]
fn simd_dispatch_matches_the_baseline_path_bitwise() {
    // `eigh` runs the small path compiled for AVX2 where the
    // CPU has it (the `unsafe` calls in eigh.rs); calling the generic instance directly
    // runs the baseline (SSE2) code. Without FMA both round identically.
    for n in [1, 3, 8, 16] {
        let batch = 8;
        let a: Vec<f64> = Rng(61).sym(batch, n);
        let (mut w1, mut v1) = (vec![0.0; batch * n], vec![0.0; batch * n * n]);
        eigh(&a, &mut w1, &mut v1, batch, n, Par::Seq).unwrap();
        let (mut w2, mut v2) = (vec![0.0; batch * n], vec![0.0; batch * n * n]);
        super::eigh::small_sizes::<f64, true>(&a, n, batch, &mut w2, &mut v2);
        assert_eq!((w1, v1), (w2, v2));
        let a32: Vec<f32> = Rng(67).sym(batch, n);
        let (mut w1, mut w2) = (vec![0.0f32; batch * n], vec![0.0f32; batch * n]);
        eigvalsh(&a32, &mut w1, batch, n, Par::Seq).unwrap();
        super::eigh::small_sizes::<f32, false>(&a32, n, batch, &mut w2, &mut []);
        assert_eq!(w1, w2);
    }
}

// ------------------------------------------------ Cholesky's derivatives

/// Sizes of the derivative tests: the unblocked loops (≤ 32), one level of
/// 32-column blocks with a short last block, and 128-column blocks whose
/// diagonal blocks are blocked again (> 256).
const AD_SIZES: [usize; 8] = [1, 2, 5, 16, 32, 33, 70, 261];

/// `L⁻¹ X` for lower triangular `L` and `n × k` `X`, by substitution.
fn lower_solve(l: &[f64], x: &[f64], n: usize, k: usize) -> Vec<f64> {
    let mut y = x.to_vec();
    for i in 0..n {
        for p in 0..i {
            for c in 0..k {
                y[i * k + c] -= l[i * n + p] * y[p * k + c];
            }
        }
        for c in 0..k {
            y[i * k + c] /= l[i * n + i];
        }
    }
    y
}

/// The lower triangle of `x` with the diagonal halved.
fn phi(x: &[f64], n: usize) -> Vec<f64> {
    let mut p = x.to_vec();
    for i in 0..n {
        p[i * n + i] *= 0.5;
        p[i * n + i + 1..(i + 1) * n].fill(0.0);
    }
    p
}

/// A factor, a symmetric tangent and a cotangent, in f64, with junk above
/// the diagonals of `S` and `L̄` (the kernels must not read it).
fn ad_case(n: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut rng = Rng(3 * n as u64 + 7);
    let a: Vec<f64> = rng.spd(1, n);
    let mut l = vec![0.0; n * n];
    cholesky(&a, &mut l, 1, n, FailMode::Error, Par::Seq).unwrap();
    let mut s: Vec<f64> = rng.vec(n * n);
    let mut lbar: Vec<f64> = rng.vec(n * n);
    for i in 0..n {
        for j in i + 1..n {
            s[i * n + j] = 1e3;
            lbar[i * n + j] = -1e3;
        }
    }
    (l, s, lbar)
}

/// `L·Φ(L⁻¹ R(S) L⁻ᵀ)`, `R(S)` the symmetric matrix of `S`'s lower triangle.
fn tangent_reference(l: &[f64], s: &[f64], n: usize) -> Vec<f64> {
    let mut r = s.to_vec();
    for i in 0..n {
        for j in i + 1..n {
            r[i * n + j] = r[j * n + i];
        }
    }
    let x = lower_solve(l, &r, n, n); // L⁻¹ R; (L⁻¹ R)ᵀ = R L⁻ᵀ
    let g = lower_solve(l, &transpose(&x, n, n), n, n);
    matmul(l, &phi(&g, n), n, n, n)
}

#[test]
fn cholesky_tangent_matches_the_closed_form() {
    for n in AD_SIZES {
        let (l, s, _) = ad_case(n);
        let mut out = vec![f64::NAN; n * n];
        cholesky_tangent(&l, &s, &mut out, 1, n, false, Par::Seq).unwrap();
        let want = tangent_reference(&l, &s, n);
        assert_close(&format!("L̇, n = {n}"), &out, &want, 1e-11 * max_abs(&want).max(1.0));
        for i in 0..n {
            assert!(out[i * n + i + 1..(i + 1) * n].iter().all(|&x| x == 0.0), "upper zeroed");
        }
    }
}

#[test]
fn cholesky_cotangent_is_the_adjoint_of_the_tangent() {
    // ⟨L̄, T(S)⟩ = ⟨C(L̄), S⟩, both over lower triangles.
    let lower_dot = |a: &[f64], b: &[f64], n: usize| {
        (0..n)
            .flat_map(|i| (0..=i).map(move |j| (i, j)))
            .map(|(i, j)| a[i * n + j] * b[i * n + j])
            .sum::<f64>()
    };
    for n in AD_SIZES {
        let (l, s, lbar) = ad_case(n);
        let (mut t, mut c) = (vec![f64::NAN; n * n], vec![f64::NAN; n * n]);
        cholesky_tangent(&l, &s, &mut t, 1, n, false, Par::Seq).unwrap();
        cholesky_cotangent(&l, &lbar, &mut c, 1, n, false, Par::Seq).unwrap();
        let (lhs, rhs) = (lower_dot(&lbar, &t, n), lower_dot(&c, &s, n));
        let scale = lower_dot(&lbar, &lbar, n).sqrt() * lower_dot(&t, &t, n).sqrt();
        assert!((lhs - rhs).abs() <= 1e-12 * n as f64 * scale, "n = {n}: {lhs} vs {rhs}");
        for i in 0..n {
            assert!(c[i * n + i + 1..(i + 1) * n].iter().all(|&x| x == 0.0), "upper zeroed");
        }
    }
}

/// [`cholesky_tangent`] (`reverse`: [`cholesky_cotangent`]) of `T`.
fn cholesky_ad<T: Real>(
    reverse: bool,
    l: &[f64],
    x: &[f64],
    b: usize,
    n: usize,
    p: Par,
) -> Vec<f64> {
    let (l, x): (Vec<T>, Vec<T>) = (
        l.iter().map(|&v| T::from_f64_(v)).collect(),
        x.iter().map(|&v| T::from_f64_(v)).collect(),
    );
    let mut o = vec![T::NAN; x.len()];
    let f = if reverse { cholesky_cotangent::<T> } else { cholesky_tangent::<T> };
    f(&l, &x, &mut o, b, n, false, p).unwrap();
    f64s(&o)
}

#[test]
fn cholesky_derivatives_in_f32_batches_and_threads() {
    let (batch, n) = (3, 40);
    let (mut l, mut s, mut lbar) = (Vec::new(), Vec::new(), Vec::new());
    for b in 0..batch {
        let (lb, sb, cb) = ad_case(n + b);
        // The leading n × n blocks (a factor's leading block is a factor).
        for i in 0..n {
            l.extend_from_slice(&lb[i * (n + b)..i * (n + b) + n]);
            s.extend_from_slice(&sb[i * (n + b)..i * (n + b) + n]);
            lbar.extend_from_slice(&cb[i * (n + b)..i * (n + b) + n]);
        }
    }
    let per = n * n;
    for (reverse, x) in [(false, &s), (true, &lbar)] {
        let whole = cholesky_ad::<f64>(reverse, &l, x, batch, n, Par::Seq);
        let threads = cholesky_ad::<f64>(reverse, &l, x, batch, n, Par::rayon(2));
        assert_eq!(whole, threads, "thread count changes bits");
        for i in 0..batch {
            let r = i * per..(i + 1) * per;
            let one = cholesky_ad::<f64>(reverse, &l[r.clone()], &x[r.clone()], 1, n, Par::Seq);
            assert_eq!(whole[r], one[..], "batching changes bits");
        }
        let single = cholesky_ad::<f32>(reverse, &l, x, batch, n, Par::Seq);
        assert_close("f32", &single, &whole, tol::<f32>(n, max_abs(&whole)) * 10.0);
    }
}

/// `(A + Aᵀ)·0.5` of each `n × n` matrix of `a`, as the graph's
/// symmetrisation computes it.
fn symmetric_part(a: &[f64], n: usize) -> Vec<f64> {
    let nn = (n * n).max(1);
    a.chunks(nn)
        .flat_map(|m| (0..n * n).map(move |k| (m[k] + m[(k % n) * n + k / n]) * 0.5))
        .collect()
}

#[test]
fn cholesky_symmetrized_is_cholesky_of_the_symmetric_part_bit_for_bit() {
    // Every path: the unblocked loop (n ≤ 16), faer (a batch, or n < 512),
    // the blocked factorisation (one matrix, n ≥ 512).
    for (batch, n) in [(3, 5), (2, 40), (1, 100), (1, 520)] {
        let mut rng = Rng(11 + n as u64);
        let mut a: Vec<f64> = rng.spd(batch, n);
        // Not symmetric; its symmetric part stays positive definite.
        for x in a.iter_mut() {
            *x += 0.01 * rng.next();
        }
        let mut want = vec![f64::NAN; a.len()];
        cholesky(&symmetric_part(&a, n), &mut want, batch, n, FailMode::Error, Par::Seq).unwrap();
        for par in [Par::Seq, Par::rayon(2)] {
            let mut got = vec![f64::NAN; a.len()];
            cholesky_symmetrized(&a, &mut got, batch, n, FailMode::Error, par).unwrap();
            assert!(got == want, "{batch} × {n}: not the factor of (A + Aᵀ)/2");
        }
        let mut lower = vec![f64::NAN; a.len()];
        cholesky(&a, &mut lower, batch, n, FailMode::Error, Par::Seq).unwrap();
        assert!(lower != want, "{batch} × {n}: the test cannot tell the triangles apart");
    }
    let bad = [1.0, 5.0, -5.0, -1.0_f64]; // (A + Aᵀ)/2 = diag(1, -1)
    let mut l = [0.0; 4];
    let err = cholesky_symmetrized(&bad, &mut l, 1, 2, FailMode::Error, Par::Seq).unwrap_err();
    assert_eq!(err, LinalgError::NotPositiveDefinite { batch_index: 0, pivot: 1 });
}

#[test]
fn symmetrized_cholesky_derivatives_are_the_plain_ones_symmetrized_bit_for_bit() {
    // Sizes for the unblocked loops (n ≤ 32), blocks of 32 and of 128; a
    // batch split across threads.
    for (batch, n) in [(3, 7), (1, 40), (1, 260), (2, 45)] {
        let (mut l, mut s, mut lbar) = (Vec::new(), Vec::new(), Vec::new());
        for b in 0..batch {
            let (lb, sb, cb) = ad_case(n);
            l.extend_from_slice(&lb);
            // Different tangents per matrix, junk above the diagonal kept.
            s.extend(sb.iter().map(|x| x * (b + 1) as f64));
            lbar.extend(cb.iter().map(|x| x - b as f64));
        }
        for par in [Par::Seq, Par::rayon(2)] {
            let run = |reverse: bool, x: &[f64], sym: bool| {
                let mut o = vec![f64::NAN; x.len()];
                let f = if reverse { cholesky_cotangent::<f64> } else { cholesky_tangent::<f64> };
                f(&l, x, &mut o, batch, n, sym, par).unwrap();
                o
            };
            let t = run(false, &s, true);
            assert!(t == run(false, &symmetric_part(&s, n), false), "{batch} × {n}: tangent");
            let c = run(true, &lbar, true);
            let want = symmetric_part(&run(true, &lbar, false), n);
            assert!(c == want, "{batch} × {n}: cotangent");
            assert!(t != run(false, &s, false), "{batch} × {n}: S's upper triangle unread");
        }
    }
}

#[test]
fn cholesky_blocked_path_thread_count_and_repeat() {
    // The blocked path (one matrix, n ≥ 512) runs its panel solves and
    // trailing updates on the threads `par` allows. faer splits those over
    // output blocks, never over a sum, so the results are identical from
    // call to call and between one and two threads (also checked by hand at
    // n = 1100; this test stays at 600 to stay fast in debug builds).
    let n = 600;
    let a: Vec<f64> = Rng(5).spd(1, n);
    let runs: Vec<Vec<f64>> = [Par::Seq, Par::Seq, Par::rayon(2)]
        .into_iter()
        .map(|par| {
            let mut l = vec![0.0; n * n];
            cholesky(&a, &mut l, 1, n, FailMode::Error, par).unwrap();
            l
        })
        .collect();
    assert!(runs[0] == runs[1], "two sequential calls differ");
    assert!(runs[0] == runs[2], "one thread and two threads differ");
}

/// `(ẇ, V̇)` of one matrix by the formula, on full matrices.
fn eigh_tangent_reference(w: &[f64], v: &[f64], da: &[f64], n: usize, sym: bool) -> Vec<f64> {
    let s: Vec<f64> = (0..n * n)
        .map(|k| {
            let (i, j) = (k / n, k % n);
            if sym {
                (da[i * n + j] + da[j * n + i]) / 2.0
            } else {
                da[i.max(j) * n + i.min(j)]
            }
        })
        .collect();
    let x = matmul(&transpose(v, n, n), &matmul(&s, v, n, n, n), n, n, n);
    let tol = 16.0 * f64::EPSILON * w.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let fx: Vec<f64> = (0..n * n)
        .map(|k| {
            let d = w[k % n] - w[k / n];
            if d.abs() > tol {
                x[k] / d
            } else {
                0.0
            }
        })
        .collect();
    let mut out: Vec<f64> = (0..n).map(|i| x[i * n + i]).collect();
    out.extend(matmul(v, &fx, n, n, n));
    out
}

#[test]
fn eigh_tangent_pair_matches_the_formula_and_is_adjoint() {
    let mut rng = Rng(41);
    for n in SIZES {
        let batch = 3;
        let w: Vec<f64> = (0..batch * n).map(|k| (k % n) as f64 + 0.3 * rng.next()).collect();
        let (v, da): (Vec<f64>, Vec<f64>) = (rng.vec(batch * n * n), rng.vec(batch * n * n));
        let (wbar, vbar): (Vec<f64>, Vec<f64>) = (rng.vec(batch * n), rng.vec(batch * n * n));
        for sym in [true, false] {
            let (mut dw, mut dv) = (vec![f64::NAN; batch * n], vec![f64::NAN; batch * n * n]);
            eigh_tangent(&w, &v, &da, &mut dw, &mut dv, batch, n, sym, Par::rayon(2)).unwrap();
            let mut abar = vec![f64::NAN; batch * n * n];
            eigh_cotangent(&w, &v, &wbar, &vbar, &mut abar, batch, n, sym, Par::rayon(2)).unwrap();
            let per = n * n;
            for b in 0..batch {
                let (wb, vb) = (&w[b * n..][..n], &v[b * per..][..per]);
                let want = eigh_tangent_reference(wb, vb, &da[b * per..][..per], n, sym);
                let got: Vec<f64> =
                    dw[b * n..][..n].iter().chain(&dv[b * per..][..per]).copied().collect();
                let tol = 1e-12 * max_abs(&want).max(1.0);
                assert_close(&format!("n = {n}, sym = {sym}"), &got, &want, tol);
                // Alone, on one thread: the same bits.
                let (mut w1, mut v1) = (vec![0.0; n], vec![0.0; per]);
                let da1 = &da[b * per..][..per];
                eigh_tangent(wb, vb, da1, &mut w1, &mut v1, 1, n, sym, Par::Seq).unwrap();
                assert!(w1.iter().chain(&v1).zip(&got).all(|(a, b)| a.to_bits() == b.to_bits()));
                // ⟨(w̄, V̄), T(Ȧ)⟩ = ⟨C(w̄, V̄), Ȧ⟩.
                let bar: Vec<f64> =
                    wbar[b * n..][..n].iter().chain(&vbar[b * per..][..per]).copied().collect();
                let lhs: f64 = bar.iter().zip(&got).map(|(a, b)| a * b).sum();
                let rhs: f64 = abar[b * per..][..per].iter().zip(da1).map(|(a, b)| a * b).sum();
                let scale = max_abs(&bar) * max_abs(&got) * (n * n) as f64;
                assert!((lhs - rhs).abs() <= 1e-12 * scale.max(1.0), "n = {n}: {lhs} vs {rhs}");
            }
        }
    }
}

#[test]
fn eigh_tangent_pair_checks_buffer_lengths() {
    let (mut dw, mut dv) = ([0.0; 2], [0.0; 4]);
    let e = eigh_tangent(&[1.0, 2.0], &[0.0; 3], &[0.0; 4], &mut dw, &mut dv, 1, 2, true, Par::Seq);
    assert!(matches!(e, Err(LinalgError::BufferLength { .. })), "{e:?}");
    let mut out = [0.0; 4];
    let e = eigh_cotangent(&[1.0], &[0.0; 4], &[0.0; 2], &[0.0; 4], &mut out, 1, 2, true, Par::Seq);
    assert!(matches!(e, Err(LinalgError::BufferLength { .. })), "{e:?}");
}
