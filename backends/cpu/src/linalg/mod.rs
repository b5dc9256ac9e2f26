//! Batched dense linear algebra over row-major buffers: the numerical core of
//! anvil's linear-algebra kernels.
//!
//! Every function works on a batch of matrices stored contiguously in
//! row-major order, `[batch, m, n]`, element `(b, i, j)` at
//! `b * m * n + i * n + j`, and writes into caller-provided output buffers of
//! the same layout. Nothing here knows about anvil's tensors or ops: the
//! functions take slices, a batch count and the matrix sizes, and report
//! problems through [`LinalgError`] (wrong buffer lengths name the buffer and
//! both lengths; no input makes them panic).
//!
//! | function | computes |
//! | --- | --- |
//! | [`cholesky()`] | `A = L·Lᵀ`, lower `L`, reads the lower triangle of `A` |
//! | [`cholesky_symmetrized`] | the same of `(A + Aᵀ)/2`, symmetrised as it is copied |
//! | [`cholesky_tangent`], [`cholesky_cotangent`] | its derivative `L̇` and the adjoint of that, for either reading of the input |
//! | [`triangular_solve`] | `op(A)·X = B` or `X·op(A) = B`, all of `jax.lax.linalg.triangular_solve`'s options |
//! | [`lu()`], [`lu_unpack`] | `A[perm] = L·U` with partial pivoting; never fails |
//! | [`lu_with_layout`] | [`lu()`] with the factor column-major if asked ([`FactorLayout`]) |
//! | [`lu_solve`], [`lu_solve_with_layout`] | `A·X = B` or `Aᵀ·X = B` from a factorisation |
//! | [`det`], [`slogdet`], [`det_from_lu`], [`slogdet_from_lu`] | determinants |
//! | [`inv`] | `A⁻¹` |
//! | [`qr()`] | Householder `A = Q·R`, reduced or complete |
//! | [`eigh()`], [`eigvalsh`] | `A = V·diag(w)·Vᵀ`, reads the lower triangle |
//! | [`eigh_tangent`], [`eigh_cotangent`] | its derivative `(ẇ, V̇)` and the adjoint of that |
//! | [`svd()`] | `A = U·diag(s)·Vᵀ` |
//!
//! # Conventions
//!
//! * Pivots: [`lu()`] returns both LAPACK-style row swaps (`pivots[i] = j`:
//!   at step `i` rows `i` and `j ≥ i` were swapped, 0-based, `min(m, n)` of
//!   them) and the permutation vector (`perm`, length `m`: row `i` of `L·U`
//!   is row `perm[i]` of `A`), both as `i64`, as `jax.lax.linalg.lu` does.
//! * Signs: eigenvectors and singular vectors are normalised so that the
//!   component of largest magnitude of each vector is positive (the first
//!   one on exact ties), [`qr()`] makes the diagonal of `R` non-negative. The
//!   results are therefore deterministic, and equal whatever algorithm
//!   computed them, up to rounding (and up to the usual freedom inside
//!   eigenspaces of repeated eigenvalues).
//! * Failures: Cholesky of a matrix that is not positive definite and the
//!   inverse of an exactly singular matrix either return an error naming the
//!   batch element ([`FailMode::Error`]) or fill that element's output with
//!   NaN and compute the rest ([`FailMode::Nan`], for vmapped sweeps). LU,
//!   determinants, QR, eigh and SVD never fail on finite input (NaN input
//!   gives NaN output, not an error).
//!
//! # Parallelism and small matrices
//!
//! Parallelism is always an explicit argument, a [`faer::Par`]: `Par::Seq`
//! runs everything on the calling thread; `Par::Rayon(t)` allows `t` threads
//! of rayon's global pool. A batch of small or medium matrices is split into
//! at most `t` contiguous chunks, one rayon task each, every matrix computed
//! sequentially; one matrix is only split across threads (faer's own
//! parallelism) when it is very large ([`INNER_PARALLEL_DIM`]), because on a
//! two-core machine faer with two threads was slower than with one up to
//! `n ≈ 1024` for Cholesky. A matrix is therefore computed by the same
//! sequence of operations whether it is alone or in a batch and whatever the
//! number of threads. Results are identical from call to call, always.
//! They are also identical between thread counts, with two exceptions where
//! one matrix uses several threads: a batch of matrices of at least
//! [`INNER_PARALLEL_DIM`] (faer's parallel factorisations may change the
//! last bits), and a single Cholesky of `n ≥ 512`, which takes a blocked
//! path whose panel solves and trailing GEMMs run on every allowed thread.
//! faer splits those over output blocks, never over a sum, and the blocked
//! path gave bit-identical factors on one and two threads (n = 600 and
//! 1100, `cholesky_blocked_path_thread_count_and_repeat`); being faer's
//! implementation detail, that is checked, not promised. Such a matrix
//! alone and the same matrix inside a batch are computed by different
//! algorithms and agree to rounding only.
//!
//! Matrices with at most [`SMALL_DIM`] rows and columns take a path of
//! unblocked kernels on stack arrays (Cholesky, its tangent and cotangent
//! (up to 32 rows: no allocation at all), LU, triangular solves, and
//! for `eigh` a tridiagonal QR eigensolver that runs 8 matrices at once in
//! SIMD lanes) with no heap allocation per matrix;
//! QR and SVD always use faer, with scratch allocated once per chunk of the
//! batch and reused.
//!
//! # Layout and faer
//!
//! faer's factorisations prefer column-major matrices; a row-major buffer
//! read as column-major is the transpose. Measured on this machine
//! (release, one thread, f64, quiet machine): faer's Cholesky on a
//! row-major view took 0.51 ms at n = 256 and 12.0 ms at n = 1024 against
//! 0.30 ms and 9.6 ms on a column-major one; its LU 0.95 ms / 40.8 ms
//! against 0.47 ms / 20.1 ms. Hence:
//!
//! * Cholesky copies the lower triangle of `A`, transposed, into the upper
//!   triangle of the output buffer (which, read column-major, is the lower
//!   triangle faer reads), factors the output in place column-major, and
//!   transposes the factor back: blocked transposes, `O(n²)` against the
//!   `n³/3` factorisation, measured cheaper than what the row-major view
//!   loses (about half the time at n = 256, a few percent at n = 1024; see
//!   `cholesky_faer` in cholesky.rs and the `cholesky` benchmark).
//! * LU transposes into column-major scratch and back (LU of `Aᵀ` would
//!   pivot columns, not rows; the view is twice as slow).
//! * Triangular solves give faer strided views, no copies: the triangular
//!   matrix's transpose is a free view, and `X·op(A) = B` is solved as
//!   `op(A)ᵀ·Xᵀ = Bᵀ` on the column-major view of the row-major `X`.
//! * QR and SVD copy into column-major scratch, eigh gives faer a row-major
//!   view (their own work is `O(n³)` with large constants; faer copies
//!   internally anyway).
//!
//! # Example
//!
//! ```
//! use anvil_cpu::linalg::{cholesky, FailMode};
//! use faer::Par;
//!
//! // two 2×2 symmetric positive definite matrices, row-major
//! let a = [4.0, 2.0, 2.0, 3.0, 9.0, 0.0, 0.0, 1.0_f64];
//! let mut l = [0.0; 8];
//! cholesky(&a, &mut l, 2, 2, FailMode::Error, Par::Seq).unwrap();
//! assert_eq!(l[..4], [2.0, 0.0, 1.0, 2.0_f64.sqrt()]);
//! assert_eq!(l[4..], [3.0, 0.0, 0.0, 1.0]);
//! ```

mod batch;
mod cholesky;
mod cholesky_ad;
mod eigh;
mod eigh_ad;
mod error;
mod lu;
mod lu_blocked;
mod qr;
mod real;
mod small;
mod small_eigh;
mod svd;
pub(crate) mod transpose;
mod triangular;

#[cfg(test)]
mod tests;

pub use cholesky::{cholesky, cholesky_symmetrized};
pub use cholesky_ad::{cholesky_cotangent, cholesky_tangent};
pub use eigh::{eigh, eigvalsh};
pub use eigh_ad::{eigh_cotangent, eigh_tangent};
pub use error::{FailMode, LinalgError};
pub use lu::{
    det, det_from_lu, factors_row_major, inv, lu, lu_solve, lu_solve_with_layout, lu_unpack,
    lu_with_layout, slogdet, slogdet_from_lu, FactorLayout,
};
pub use qr::{qr, QrMode};
pub use real::Real;
pub use svd::{svd, SvdMode};
pub use triangular::{triangular_solve, ABatch, TriangularSolve};

/// Matrices with at most this many rows and columns take the unblocked,
/// allocation-free path (stack arrays, no faer call).
pub const SMALL_DIM: usize = 16;

/// Matrices of at least this dimension are factored with faer's own
/// parallelism (when more than one thread is allowed); smaller ones are
/// computed sequentially and only the batch is split across threads.
///
/// On the two-core machine this was tuned on, faer's Cholesky with two
/// threads was slower than with one at `n = 256` and `n = 1024`.
pub const INNER_PARALLEL_DIM: usize = 1536;
