//! Batched symmetric eigendecomposition: a lane-parallel tridiagonal QR
//! solver on stack arrays for small matrices (`small_eigh`), faer's
//! tridiagonal divide and conquer for larger ones.

use super::batch::{plan, run, Per};
use super::error::check_len;
use super::small_eigh::{eigh_group, LANES};
use super::transpose::transpose;
use super::{LinalgError, Real, SMALL_DIM};
use faer::dyn_stack::{MemBuffer, MemStack, StackReq};
use faer::linalg::evd::{self_adjoint_evd, self_adjoint_evd_scratch, ComputeEigenvectors};
use faer::{ColMut, MatRef, Par};

/// Eigendecomposition of a batch of symmetric `n × n` matrices:
/// `A = V·diag(w)·Vᵀ` with `VᵀV = I`.
///
/// * `a`: `[batch, n, n]`; only the lower triangle (diagonal included) is
///   read, the upper one is taken to mirror it (LAPACK's `syevd` with
///   `'L'`). The lead's op symmetrises before the call, so either triangle
///   gives the same result there.
/// * `w`: `[batch, n]`, eigenvalues in ascending order.
/// * `v`: `[batch, n, n]`, the eigenvectors as columns
///   (`v[i·n + j]` is component `i` of eigenvector `j`).
///
/// Sign convention: the component of largest magnitude of each eigenvector
/// is positive (the first one, by index, on exact ties). Within an
/// eigenspace of a repeated eigenvalue the basis is whatever the algorithm
/// produced (orthonormal, deterministic for a given input).
///
/// Matrices with `n ≤` [`SMALL_DIM`] take an
/// allocation-free path on stack arrays that works on 8 matrices at once
/// (one per SIMD lane): Householder tridiagonalisation, then implicit QR
/// with Wilkinson shifts, deflating off-diagonal entries at most
/// `ε·max|a_ij|`, so eigenvalues are accurate to a few ulp × n of the
/// matrix's norm (and each matrix is computed exactly as it would be
/// alone). Larger ones use faer's self-adjoint solver on a row-major view
/// (faer copies the matrix into its own workspace). Non-finite input gives
/// NaN output on the small path; faer's result on it is unspecified (NaN or
/// [`LinalgError::NoConvergence`]).
///
/// # Errors
///
/// [`LinalgError::BufferLength`] if a buffer does not match the sizes,
/// [`LinalgError::NoConvergence`] if faer's iteration fails (not seen in
/// practice).
///
/// # Example
///
/// ```
/// use anvil_cpu::linalg::eigh;
/// use faer::Par;
///
/// let a = [2.0, 1.0, 1.0, 2.0_f64];
/// let (mut w, mut v) = ([0.0; 2], [0.0; 4]);
/// eigh(&a, &mut w, &mut v, 1, 2, Par::Seq).unwrap();
/// assert!((w[0] - 1.0).abs() < 1e-15 && (w[1] - 3.0).abs() < 1e-15);
/// // eigenvector of 3 is (1, 1)/√2, largest component positive
/// assert!((v[1] - 0.5f64.sqrt()).abs() < 1e-15 && (v[3] - 0.5f64.sqrt()).abs() < 1e-15);
/// ```
pub fn eigh<T: Real>(
    a: &[T],
    w: &mut [T],
    v: &mut [T],
    batch: usize,
    n: usize,
    par: Par,
) -> Result<(), LinalgError> {
    let per = check_len("a", a.len(), &[batch, n, n])?;
    check_len("w", w.len(), &[batch, n])?;
    check_len("v", v.len(), &[batch, n, n])?;
    if n <= SMALL_DIM {
        return eigh_small::<T, true>(a, w, v, batch, n, par);
    }
    let plan = plan(par, batch, n, 9.0 * (n * n * n) as f64);
    let scratch = || FaerScratch::<T>::new(n, ComputeEigenvectors::Yes, plan.inner);
    run(batch, plan, (Per(w, n), Per(v, per)), scratch, |i, (Per(wi, _), Per(vi, _)), s| {
        let ai = &a[i * per..(i + 1) * per];
        s.evd(ai, n, wi, Some(vi), plan.inner).map_err(|_| no_convergence(i))
    })
}

/// Eigenvalues of a batch of symmetric `n × n` matrices, ascending: the `w`
/// of [`eigh`] (same triangle read, same algorithms), without computing
/// eigenvectors. `a` is `[batch, n, n]`, `w` `[batch, n]`.
///
/// # Errors
///
/// As [`eigh`].
pub fn eigvalsh<T: Real>(
    a: &[T],
    w: &mut [T],
    batch: usize,
    n: usize,
    par: Par,
) -> Result<(), LinalgError> {
    let per = check_len("a", a.len(), &[batch, n, n])?;
    check_len("w", w.len(), &[batch, n])?;
    if n <= SMALL_DIM {
        return eigh_small::<T, false>(a, w, &mut [], batch, n, par);
    }
    let plan = plan(par, batch, n, 4.0 * (n * n * n) as f64);
    let scratch = || FaerScratch::<T>::new(n, ComputeEigenvectors::No, plan.inner);
    run(batch, plan, Per(w, n), scratch, |i, Per(wi, _), s| {
        let ai = &a[i * per..(i + 1) * per];
        s.evd(ai, n, wi, None, plan.inner).map_err(|_| no_convergence(i))
    })
}

fn no_convergence(batch_index: usize) -> LinalgError {
    LinalgError::NoConvergence { batch_index }
}

/// faer's workspace, made once per chunk of the batch.
struct FaerScratch<T> {
    u: Vec<T>,
    mem: MemBuffer,
}

impl<T: Real> FaerScratch<T> {
    fn new(n: usize, vectors: ComputeEigenvectors, par: Par) -> Self {
        if n <= SMALL_DIM {
            return FaerScratch { u: Vec::new(), mem: MemBuffer::new(StackReq::EMPTY) };
        }
        let u_len = if vectors == ComputeEigenvectors::Yes { n * n } else { 0 };
        FaerScratch {
            u: vec![T::ZERO; u_len],
            mem: MemBuffer::new(self_adjoint_evd_scratch::<T>(n, vectors, par, Default::default())),
        }
    }

    /// One matrix: faer reads the lower triangle of the row-major view,
    /// writes eigenvectors column-major into `u`; they get the sign
    /// convention there (contiguous columns) and are transposed into `v`.
    fn evd(
        &mut self,
        a: &[T],
        n: usize,
        w: &mut [T],
        v: Option<&mut [T]>,
        par: Par,
    ) -> Result<(), faer::linalg::evd::EvdError> {
        if !lower_is_finite(a, n) {
            // faer's iteration on non-finite input is not specified; the
            // small path's answer, NaN, is.
            w.fill(T::NAN);
            if let Some(v) = v {
                v.fill(T::NAN);
            }
            return Ok(());
        }
        let av = MatRef::from_row_major_slice(a, n, n);
        let s = ColMut::from_slice_mut(w).as_diagonal_mut();
        let u = v.is_some().then(|| faer::MatMut::from_column_major_slice_mut(&mut self.u, n, n));
        self_adjoint_evd(av, s, u, par, MemStack::new(&mut self.mem), Default::default())?;
        if let Some(v) = v {
            for col in self.u.chunks_exact_mut(n) {
                fix_sign(col);
            }
            transpose(&self.u, n, n, v);
        }
        Ok(())
    }
}

/// Whether the lower triangle of the `n × n` row-major `a` is finite.
fn lower_is_finite<T: Real>(a: &[T], n: usize) -> bool {
    a.chunks_exact(n.max(1)).enumerate().all(|(i, row)| row[..=i].iter().all(|x| x.is_finite_()))
}

/// Negates `x` if its component of largest magnitude (the first on ties)
/// is negative; returns whether it did.
pub(crate) fn fix_sign<T: Real>(x: &mut [T]) -> bool {
    let mut best = T::ZERO;
    let mut at = 0;
    for (i, &xi) in x.iter().enumerate() {
        if xi.abs_() > best {
            best = xi.abs_();
            at = i;
        }
    }
    if x.get(at).is_some_and(|&xi| xi < T::ZERO) {
        for xi in x.iter_mut() {
            *xi = -*xi;
        }
        return true;
    }
    false
}

/// The small path of [`eigh`] (`V`) and [`eigvalsh`]: groups of [`LANES`]
/// matrices through [`eigh_group`], the groups split across threads.
fn eigh_small<T: Real, const V: bool>(
    a: &[T],
    w: &mut [T],
    v: &mut [T],
    batch: usize,
    n: usize,
    par: Par,
) -> Result<(), LinalgError> {
    if n == 0 {
        return Ok(());
    }
    let per = n * n;
    let groups = batch.div_ceil(LANES);
    let plan = plan(par, groups, n, (LANES * 9 * per * n) as f64);
    let per_v = if V { LANES * per } else { 0 };
    run(
        groups,
        plan,
        (Per(w, LANES * n), Per(v, per_v)),
        || (),
        |g, (Per(wg, _), Per(vg, _)), _| {
            let count = wg.len() / n;
            let start = g * LANES * per;
            small_dyn::<T, V>(&a[start..start + count * per], n, count, wg, vg);
            Ok(())
        },
    )
}

/// [`eigh_group`] for the runtime size `n ≤ SMALL_DIM`, compiled for
/// AVX2 when the CPU has it (the crate is built for baseline x86-64, SSE2:
/// AVX2 runs the 8 lanes in half the instructions). Without FMA, both give
/// bit-identical results. An AVX-512F instance was tried and removed: it
/// was never measured faster than AVX2.
fn small_dyn<T: Real, const V: bool>(a: &[T], n: usize, count: usize, w: &mut [T], v: &mut [T]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        macro_rules! sizes {
            ($($k:literal)*) => {
                match n {
                    // SAFETY: the only requirement of calling a function
                    // compiled with `target_feature(enable = "avx2")` is
                    // that the CPU supports AVX2, detected just above.
                    $($k => unsafe { group_avx2::<T, $k, V>(a, count, w, v) },)*
                    _ => {}
                }
            };
        }
        sizes!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
        return;
    }
    small_sizes::<T, V>(a, n, count, w, v);
}

/// [`eigh_group`] compiled with AVX2 (it is inlined here). One instance per
/// size, each with a stack frame for its own size only.
///
/// # Safety
///
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn group_avx2<T: Real, const N: usize, const V: bool>(
    a: &[T],
    count: usize,
    w: &mut [T],
    v: &mut [T],
) {
    eigh_group::<T, N, V>(a, count, w, v);
}

/// [`eigh_group`] for baseline x86-64 (and other architectures).
#[inline(never)]
fn group_baseline<T: Real, const N: usize, const V: bool>(
    a: &[T],
    count: usize,
    w: &mut [T],
    v: &mut [T],
) {
    eigh_group::<T, N, V>(a, count, w, v);
}

/// The baseline instance of [`eigh_group`] for the runtime size (one
/// function per size: the arrays live on the stack with constant bounds).
pub(crate) fn small_sizes<T: Real, const V: bool>(
    a: &[T],
    n: usize,
    count: usize,
    w: &mut [T],
    v: &mut [T],
) {
    macro_rules! sizes {
        ($($k:literal)*) => {
            match n {
                $($k => group_baseline::<T, $k, V>(a, count, w, v),)*
                _ => {}
            }
        };
    }
    const _: () = assert!(SMALL_DIM == 16, "the size lists above must cover SMALL_DIM");
    sizes!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
}
