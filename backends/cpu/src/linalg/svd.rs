//! Batched singular value decomposition.

use super::batch::{plan, run, Per};
use super::eigh::fix_sign;
use super::error::check_len;
use super::transpose::transpose;
use super::{LinalgError, Real};
use faer::dyn_stack::{MemBuffer, MemStack, StackReq};
use faer::linalg::svd::{svd as faer_svd, svd_scratch, ComputeSvdVectors};
use faer::{ColMut, MatMut, MatRef, Par};

/// What [`svd`] computes, as `full_matrices` and `compute_uv` of
/// `jnp.linalg.svd`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SvdMode {
    /// Singular values only (`compute_uv=False`): `u` and `vt` are empty.
    ValuesOnly,
    /// `U` is `m × k`, `Vᵀ` is `k × n` (`full_matrices=False`).
    #[default]
    Reduced,
    /// `U` is `m × m`, `Vᵀ` is `n × n` (`full_matrices=True`).
    Full,
}

/// Singular value decomposition of a batch of `m × n` matrices:
/// `A = U·diag(s)·Vᵀ`, `k = min(m, n)`, any `m`, `n` (faer transposes the
/// wide case internally).
///
/// * `a`: `[batch, m, n]`; `s`: `[batch, k]`, descending, non-negative.
/// * `u`: `[batch, m, k]` ([`SvdMode::Reduced`]), `[batch, m, m]`
///   ([`SvdMode::Full`]) or empty ([`SvdMode::ValuesOnly`]); singular
///   vectors as columns.
/// * `vt`: `[batch, k, n]`, `[batch, n, n]` or empty: `Vᵀ`, singular
///   vectors as rows (JAX's `vh`).
///
/// Non-finite input gives all-NaN outputs.
///
/// Sign convention: for `j < k` the component of largest magnitude of
/// column `j` of `U` is positive (first on exact ties), and row `j` of `Vᵀ`
/// is negated with it; the extra columns of a full `U` and extra rows of a
/// full `Vᵀ` (bases of the null spaces) are each normalised the same way on
/// their own. Repeated singular values leave the basis of their subspace to
/// the algorithm.
///
/// Always faer (bidiagonalisation, then divide and conquer or QR
/// iterations), with scratch allocated once per chunk of the batch. faer
/// writes `V` column-major, which is `Vᵀ` row-major: it is copied as is;
/// `U` is transposed.
///
/// # Errors
///
/// [`LinalgError::BufferLength`] if a buffer does not match the sizes (in
/// [`SvdMode::ValuesOnly`] `u` and `vt` must be empty),
/// [`LinalgError::NoConvergence`] if faer's iteration fails.
///
/// # Example
///
/// ```
/// use anvil_cpu::linalg::{svd, SvdMode};
/// use faer::Par;
///
/// let a = [0.0, 2.0, 0.0, 0.0, 0.0, -3.0_f64]; // 2 × 3
/// let (mut s, mut u, mut vt) = ([0.0; 2], [0.0; 4], [0.0; 6]);
/// svd(&a, &mut s, &mut u, &mut vt, 1, 2, 3, SvdMode::Reduced, Par::Seq).unwrap();
/// assert_eq!(s, [3.0, 2.0]);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn svd<T: Real>(
    a: &[T],
    s: &mut [T],
    u: &mut [T],
    vt: &mut [T],
    batch: usize,
    m: usize,
    n: usize,
    mode: SvdMode,
    par: Par,
) -> Result<(), LinalgError> {
    let k = m.min(n);
    let (uc, vr) = match mode {
        SvdMode::ValuesOnly => (0, 0),
        SvdMode::Reduced => (k, k),
        SvdMode::Full => (m, n),
    };
    let per = check_len("a", a.len(), &[batch, m, n])?;
    check_len("s", s.len(), &[batch, k])?;
    let per_u = check_len("u", u.len(), &[batch, m, uc])?;
    let per_v = check_len("vt", vt.len(), &[batch, vr, n])?;
    let plan = plan(par, batch, m.max(n), 10.0 * (m * n * k) as f64);
    let parts = (Per(s, k), Per(u, per_u), Per(vt, per_v));
    let scratch = || Scratch::<T>::new(m, n, mode, plan.inner);
    run(batch, plan, parts, scratch, |i, (Per(si, _), Per(ui, _), Per(vi, _)), sc| {
        sc.svd(&a[i * per..(i + 1) * per], si, ui, vi, plan.inner)
            .map_err(|_| LinalgError::NoConvergence { batch_index: i })
    })
}

/// faer's workspace and the column-major `U` and `V`, per chunk.
struct Scratch<T> {
    m: usize,
    n: usize,
    mode: SvdMode,
    u: Vec<T>,
    v: Vec<T>,
    mem: MemBuffer,
}

impl<T: Real> Scratch<T> {
    fn new(m: usize, n: usize, mode: SvdMode, par: Par) -> Self {
        let k = m.min(n);
        let (compute, uc, vc) = match mode {
            SvdMode::ValuesOnly => (ComputeSvdVectors::No, 0, 0),
            SvdMode::Reduced => (ComputeSvdVectors::Thin, k, k),
            SvdMode::Full => (ComputeSvdVectors::Full, m, n),
        };
        let req = if k == 0 {
            StackReq::EMPTY
        } else {
            svd_scratch::<T>(m, n, compute, compute, par, Default::default())
        };
        Scratch {
            m,
            n,
            mode,
            u: vec![T::ZERO; m * uc],
            v: vec![T::ZERO; n * vc],
            mem: MemBuffer::new(req),
        }
    }

    fn svd(
        &mut self,
        a: &[T],
        s: &mut [T],
        u: &mut [T],
        vt: &mut [T],
        par: Par,
    ) -> Result<(), faer::linalg::svd::SvdError> {
        let (m, n) = (self.m, self.n);
        let k = m.min(n);
        if k == 0 {
            // No singular values; the full bases are identities.
            identity(u, m);
            identity(vt, n);
            return Ok(());
        }
        if !a.iter().all(|x| x.is_finite_()) {
            // faer's iteration on non-finite input is not specified.
            for out in [s, u, vt] {
                out.fill(T::NAN);
            }
            return Ok(());
        }
        let av = MatRef::from_row_major_slice(a, m, n);
        let sd = ColMut::from_slice_mut(s).as_diagonal_mut();
        if self.mode == SvdMode::ValuesOnly {
            return faer_svd(
                av,
                sd,
                None,
                None,
                par,
                MemStack::new(&mut self.mem),
                Default::default(),
            );
        }
        let (uc, vc) = (self.u.len() / m, self.v.len() / n);
        let uv = MatMut::from_column_major_slice_mut(&mut self.u, m, uc);
        let vv = MatMut::from_column_major_slice_mut(&mut self.v, n, vc);
        faer_svd(
            av,
            sd,
            Some(uv),
            Some(vv),
            par,
            MemStack::new(&mut self.mem),
            Default::default(),
        )?;
        self.fix_signs(k);
        transpose(&self.u, uc, m, u);
        vt.copy_from_slice(&self.v);
        Ok(())
    }

    /// The sign convention on the column-major `U` and `V`: see [`svd`].
    fn fix_signs(&mut self, k: usize) {
        let (m, n) = (self.m, self.n);
        let pairs = self.u.chunks_exact_mut(m).zip(self.v.chunks_exact_mut(n));
        for (uj, vj) in pairs.take(k) {
            if fix_sign(uj) {
                vj.iter_mut().for_each(|x| *x = -*x);
            }
        }
        for uj in self.u.chunks_exact_mut(m).skip(k) {
            fix_sign(uj);
        }
        for vj in self.v.chunks_exact_mut(n).skip(k) {
            fix_sign(vj);
        }
    }
}

/// Fills the row-major `buf` (`rows × cols`, `cols` = `buf.len() / rows`)
/// with the identity's pattern.
fn identity<T: Real>(buf: &mut [T], rows: usize) {
    buf.fill(T::ZERO);
    if rows == 0 {
        return;
    }
    let cols = buf.len() / rows;
    for i in 0..rows.min(cols) {
        buf[i * cols + i] = T::ONE;
    }
}
