//! Batched Householder QR.

use super::batch::{plan, run, Per};
use super::error::check_len;
use super::transpose::transpose;
use super::{LinalgError, Real};
use faer::dyn_stack::{MemBuffer, MemStack, StackReq};
use faer::linalg::householder::{
    apply_block_householder_sequence_on_the_left_in_place_scratch as apply_scratch,
    apply_block_householder_sequence_on_the_left_in_place_with_conj as apply_q,
};
use faer::linalg::qr::no_pivoting::factor::{
    qr_in_place, qr_in_place_scratch, recommended_block_size,
};
use faer::{Conj, MatMut, MatRef, Par};

/// The shapes of [`qr`]'s factors (`k = min(m, n)`), as `mode` of
/// `jnp.linalg.qr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QrMode {
    /// `Q` is `m × k`, `R` is `k × n`.
    #[default]
    Reduced,
    /// `Q` is `m × m`, `R` is `m × n`.
    Complete,
}

/// QR factorisation of a batch of `m × n` matrices by Householder
/// reflections: `A = Q·R` with `QᵀQ = I` and `R` upper triangular
/// (trapezoidal when `m ≠ n`).
///
/// `a` is `[batch, m, n]`; `q_out` `[batch, m, k]` and `r_out`
/// `[batch, k, n]` ([`QrMode::Reduced`]) or `[batch, m, m]` and
/// `[batch, m, n]` ([`QrMode::Complete`]), `k = min(m, n)`, any `m`, `n`.
///
/// Sign convention: the diagonal of `R` is non-negative (a row of `R` and
/// the matching column of `Q` are negated where Householder left it
/// negative), so `Q` and `R` are unique for a matrix of full column rank.
/// Rank-deficient matrices are factored too (zeros on `R`'s diagonal).
///
/// Always faer (blocked Householder, then `Q` accumulated from the
/// reflectors), on a column-major copy in scratch that is allocated once
/// per chunk of the batch; outputs are transposed back.
///
/// # Errors
///
/// [`LinalgError::BufferLength`] if a buffer does not match the sizes.
///
/// # Example
///
/// ```
/// use anvil_cpu::linalg::{qr, QrMode};
/// use faer::Par;
///
/// let a = [3.0, 4.0_f64]; // a 2 × 1 matrix
/// let (mut q, mut r) = ([0.0; 2], [0.0; 1]);
/// qr(&a, &mut q, &mut r, 1, 2, 1, QrMode::Reduced, Par::Seq).unwrap();
/// assert!((r[0] - 5.0).abs() < 1e-15);
/// assert!((q[0] - 0.6).abs() < 1e-15 && (q[1] - 0.8).abs() < 1e-15);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn qr<T: Real>(
    a: &[T],
    q_out: &mut [T],
    r_out: &mut [T],
    batch: usize,
    m: usize,
    n: usize,
    mode: QrMode,
    par: Par,
) -> Result<(), LinalgError> {
    let k = m.min(n);
    let (qc, rr) = match mode {
        QrMode::Reduced => (k, k),
        QrMode::Complete => (m, m),
    };
    let per = check_len("a", a.len(), &[batch, m, n])?;
    let per_q = check_len("q_out", q_out.len(), &[batch, m, qc])?;
    let per_r = check_len("r_out", r_out.len(), &[batch, rr, n])?;
    let plan = plan(par, batch, m.max(n), 2.0 * (m * n * k) as f64 + (m * qc * k) as f64);
    let parts = (Per(q_out, per_q), Per(r_out, per_r));
    let scratch = || Scratch::<T>::new(m, n, qc, plan.inner);
    run(batch, plan, parts, scratch, |i, (Per(q, _), Per(r, _)), s| {
        s.factor(&a[i * per..(i + 1) * per], q, r, plan.inner);
        Ok(())
    })
}

/// Column-major copies and faer's workspace, one per chunk of the batch.
struct Scratch<T> {
    m: usize,
    n: usize,
    qc: usize,
    block: usize,
    a: Vec<T>,
    h: Vec<T>,
    q: Vec<T>,
    mem: MemBuffer,
}

impl<T: Real> Scratch<T> {
    fn new(m: usize, n: usize, qc: usize, par: Par) -> Self {
        let k = m.min(n);
        let block = recommended_block_size::<T>(m, n);
        let req = if k == 0 {
            StackReq::EMPTY
        } else {
            StackReq::any_of(&[
                qr_in_place_scratch::<T>(m, n, block, par, Default::default()),
                apply_scratch::<T>(m, block, qc),
            ])
        };
        Scratch {
            m,
            n,
            qc,
            block,
            a: vec![T::ZERO; m * n],
            h: vec![T::ZERO; block * k],
            q: vec![T::ZERO; m * qc],
            mem: MemBuffer::new(req),
        }
    }

    /// One matrix: factor the column-major copy, read `R` off its upper
    /// triangle, accumulate `Q` from the identity, fix the signs,
    /// transpose `Q` out.
    fn factor(&mut self, a: &[T], q: &mut [T], r: &mut [T], par: Par) {
        let (m, n, qc) = (self.m, self.n, self.qc);
        let k = m.min(n);
        self.q.fill(T::ZERO);
        for j in 0..qc.min(m) {
            self.q[j * m + j] = T::ONE;
        }
        r.fill(T::ZERO);
        if k > 0 {
            transpose(a, m, n, &mut self.a);
            let h = MatMut::from_column_major_slice_mut(&mut self.h, self.block, k);
            let av = MatMut::from_column_major_slice_mut(&mut self.a, m, n);
            qr_in_place(av, h, par, MemStack::new(&mut self.mem), Default::default());
            for (i, row) in r.chunks_exact_mut(n).enumerate() {
                for (j, x) in row.iter_mut().enumerate().skip(i) {
                    *x = self.a[j * m + i];
                }
            }
            let basis = MatRef::from_column_major_slice(&self.a[..m * k], m, k);
            let h = MatRef::from_column_major_slice(&self.h, self.block, k);
            let qv = MatMut::from_column_major_slice_mut(&mut self.q, m, qc);
            apply_q(basis, h, Conj::No, qv, par, MemStack::new(&mut self.mem));
            for i in 0..k {
                if r[i * n + i] < T::ZERO {
                    r[i * n..(i + 1) * n].iter_mut().for_each(|x| *x = -*x);
                    self.q[i * m..(i + 1) * m].iter_mut().for_each(|x| *x = -*x);
                }
            }
        }
        transpose(&self.q, qc, m, q);
    }
}
