//! Buffer reuse: a plan keeps the large buffers its values no longer need and
//! hands them to the kernels of its next steps and its next calls.
//!
//! A fresh multi-megabyte buffer costs a page fault per 4 KiB the first time
//! it is written (about 1.4 µs each on the machines anvil is measured on),
//! and the system allocator returns such buffers to the kernel when they are
//! freed, so a cached plan that allocated afresh would pay those faults on
//! every call. Instead, while a [`Plan`](crate::Plan) runs, its pool is
//! installed for the calling thread:
//!
//! - a kernel asks for its output buffer with [`take`] (contents
//!   unspecified: the kernel overwrites every element) or [`filled`];
//! - a value whose last consumer has run goes back to the pool if nobody
//!   else holds its buffer;
//! - the plan's outputs are lent to the caller: at the next call, those the
//!   caller has dropped are taken back.
//!
//! Buffers are matched by dtype and exact length, which is what a cached plan
//! asks for call after call. After a call the pool holds at most the larger
//! of the plan's largest live set and, per dtype and length, as many buffers
//! as the call had out at once (what the next call asks for again): it
//! drops first the buffers beyond that demand, the smallest first. Buffers
//! below [`MIN_BYTES`] are left to the allocator, which serves them without
//! faults.
//! Everything is safe code: a buffer is reused only after `Arc::try_unwrap`
//! proved it unique. In debug builds a reused buffer is first filled with a
//! poison value (NaN), so a kernel that leaves elements unwritten fails its
//! tests instead of leaking stale values.

use anvil_core::{DType, Element, Storage, Tensor};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

/// Buffers smaller than this (in bytes) are not pooled.
pub const MIN_BYTES: usize = 16 * 1024;

/// At most this many lent buffers still held by a caller are remembered.
const MAX_LENT: usize = 64;

/// An owned, untyped buffer.
#[doc(hidden)]
#[derive(Debug)]
pub enum Buf {
    #[allow(missing_docs)]
    F64(Vec<f64>),
    #[allow(missing_docs)]
    F32(Vec<f32>),
    #[allow(missing_docs)]
    I64(Vec<i64>),
    #[allow(missing_docs)]
    Bool(Vec<bool>),
}

/// Element types the pool can hand out.
pub trait Pooled: Element + Default {
    /// The typed buffer inside an untyped one.
    #[doc(hidden)]
    fn from_buf(b: Buf) -> Option<Vec<Self>>;
    /// The buffer as an untyped one.
    #[doc(hidden)]
    fn into_buf(v: Vec<Self>) -> Buf;
    /// A value no kernel computes by accident, written into reused buffers
    /// in debug builds.
    #[doc(hidden)]
    fn poison() -> Self;
    /// The elements as a block of a result (for block math).
    #[doc(hidden)]
    fn block_mut(v: &mut [Self]) -> anvil_core::BlockMut<'_>;
    /// The elements of a block of this dtype (`None` for another dtype).
    #[doc(hidden)]
    fn from_block(b: anvil_core::Block<'_>) -> Option<&[Self]>;
}

macro_rules! pooled {
    ($t:ty, $d:ident, $poison:expr) => {
        impl Pooled for $t {
            fn from_buf(b: Buf) -> Option<Vec<Self>> {
                match b {
                    Buf::$d(v) => Some(v),
                    _ => None,
                }
            }
            fn into_buf(v: Vec<Self>) -> Buf {
                Buf::$d(v)
            }
            fn poison() -> Self {
                $poison
            }
            fn block_mut(v: &mut [Self]) -> anvil_core::BlockMut<'_> {
                anvil_core::BlockMut::$d(v)
            }
            fn from_block(b: anvil_core::Block<'_>) -> Option<&[Self]> {
                match b {
                    anvil_core::Block::$d(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}
pooled!(f64, F64, f64::NAN);
pooled!(f32, F32, f32::NAN);
pooled!(i64, I64, i64::MIN);
pooled!(bool, Bool, true);

/// The buffers one plan keeps between its steps and its calls.
#[derive(Default)]
pub(crate) struct Pool {
    free: HashMap<(DType, usize), Vec<Buf>>,
    /// Bytes held in `free`.
    bytes: usize,
    /// The storages of the last call's outputs, taken back once the caller
    /// has dropped them.
    lent: Vec<Storage>,
    /// Bytes of kernel scratch ([`scratch`]) taken from this pool and not
    /// yet given back, and the most of them at once during the current call.
    scratch_out: usize,
    scratch_peak: usize,
    /// Per dtype and length, during the current call: buffers asked for
    /// and not yet given back, and the most of them at once. The next call
    /// of the same plan asks for as many.
    demand: HashMap<(DType, usize), (usize, usize)>,
}

fn dtype_len(b: &Buf) -> (DType, usize) {
    match b {
        Buf::F64(v) => (DType::F64, v.len()),
        Buf::F32(v) => (DType::F32, v.len()),
        Buf::I64(v) => (DType::I64, v.len()),
        Buf::Bool(v) => (DType::Bool, v.len()),
    }
}

impl Pool {
    fn put(&mut self, b: Buf) {
        let (dtype, len) = dtype_len(&b);
        if let Some((out, _)) = self.demand.get_mut(&(dtype, len)) {
            *out = out.saturating_sub(1);
        }
        self.bytes += len * dtype.size_of();
        self.free.entry((dtype, len)).or_default().push(b);
    }

    /// A pooled buffer of `len` elements, if there is one; either way the
    /// request counts toward this call's demand.
    fn take<T: Pooled>(&mut self, len: usize) -> Option<Vec<T>> {
        let (out, most) = self.demand.entry((T::DTYPE, len)).or_default();
        *out += 1;
        *most = (*most).max(*out);
        let list = self.free.get_mut(&(T::DTYPE, len))?;
        let b = list.pop()?;
        self.bytes -= len * T::DTYPE.size_of();
        T::from_buf(b)
    }

    /// Pools `storage`'s buffer if it is large enough and nobody else holds it.
    fn recycle(&mut self, storage: Storage) {
        if storage.len() * storage.dtype().size_of() < MIN_BYTES {
            return;
        }
        let buf = match storage {
            Storage::F64(a) => Arc::try_unwrap(a).ok().map(Buf::F64),
            Storage::F32(a) => Arc::try_unwrap(a).ok().map(Buf::F32),
            Storage::I64(a) => Arc::try_unwrap(a).ok().map(Buf::I64),
            Storage::Bool(a) => Arc::try_unwrap(a).ok().map(Buf::Bool),
        };
        if let Some(b) = buf {
            self.put(b);
        }
    }

    /// Takes back the outputs of earlier calls that the caller has dropped.
    /// Those still held are kept for a later call (a loop passes a step's
    /// outputs to the next step and drops them only after it), up to
    /// [`MAX_LENT`] buffers.
    pub(crate) fn reclaim_lent(&mut self) {
        self.scratch_out = 0;
        self.scratch_peak = 0;
        self.demand.clear();
        let lent = std::mem::take(&mut self.lent);
        for s in lent {
            if s.ref_count() == 1 {
                self.recycle(s);
            } else if self.lent.len() < MAX_LENT {
                self.lent.push(s);
            }
        }
    }

    /// Remembers the outputs handed to the caller.
    pub(crate) fn lend(&mut self, outputs: &[Tensor]) {
        self.lent.extend(
            outputs
                .iter()
                .filter(|t| t.numel() * t.dtype().size_of() >= MIN_BYTES)
                .map(|t| t.storage().clone()),
        );
    }

    /// Drops buffers until at most `cap` bytes are held, or the buffers
    /// this call asked for at most at once if they are more: of each dtype
    /// and length, those beyond this call's demand go first (all of a size
    /// the call never asked for), the smallest sizes first.
    ///
    /// A plan whose values take buffers of other sizes at other times (a
    /// loop's stored steps, then the reverse loop's) needs them all at the
    /// next call, more than its largest live set: kept, they are reused
    /// instead of faulted in afresh.
    pub(crate) fn trim(&mut self, cap: usize) {
        let wanted = |key: &(DType, usize)| self.demand.get(key).map_or(0, |&(_, most)| most);
        let needed: usize =
            self.demand.iter().map(|(&(d, len), &(_, most))| most * len * d.size_of()).sum();
        let cap = cap.max(needed);
        if self.bytes <= cap {
            return;
        }
        let mut keys: Vec<((DType, usize), usize)> =
            self.free.keys().map(|&k| (k, wanted(&k))).collect();
        keys.sort_by_key(|&((d, len), _)| len * d.size_of());
        for (key, keep) in keys {
            let Some(list) = self.free.get_mut(&key) else { continue };
            while self.bytes > cap && list.len() > keep && list.pop().is_some() {
                self.bytes -= key.1 * key.0.size_of();
            }
            if list.is_empty() {
                self.free.remove(&key);
            }
            if self.bytes <= cap {
                break;
            }
        }
    }

    /// The most bytes of kernel scratch out of the pool at once since the
    /// call began (the pool may keep that much beyond the values' peak).
    pub(crate) fn scratch_peak(&self) -> usize {
        self.scratch_peak
    }

    /// Whether the pool holds nothing, not even lent outputs.
    pub(crate) fn is_empty(&self) -> bool {
        self.free.is_empty() && self.lent.is_empty()
    }

    /// Bytes held for reuse.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("buffers", &self.free.values().map(Vec::len).sum::<usize>())
            .field("bytes", &self.bytes)
            .field("lent", &self.lent.len())
            .finish()
    }
}

/// Installs a pool for the calling thread and puts the previous one back
/// when dropped, even if a kernel panics.
pub(crate) struct Installed {
    previous: Option<Option<Pool>>,
}

impl Installed {
    /// Makes `pool` the calling thread's pool until [`Installed::finish`] or drop.
    pub(crate) fn new(pool: Pool) -> Installed {
        Installed { previous: Some(install(pool)) }
    }

    /// Removes the pool, puts the previous one back, and returns it.
    pub(crate) fn finish(mut self) -> Pool {
        uninstall(self.previous.take().flatten())
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        if let Some(previous) = self.previous.take() {
            uninstall(previous);
        }
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Pool>> = const { RefCell::new(None) };
}

/// Makes `pool` the calling thread's pool; returns the one it replaces (a
/// plan may run inside another plan's kernel, as the body of a `map`).
pub(crate) fn install(pool: Pool) -> Option<Pool> {
    CURRENT.with(|c| c.borrow_mut().replace(pool))
}

/// Removes the calling thread's pool, putting `previous` back.
pub(crate) fn uninstall(previous: Option<Pool>) -> Pool {
    CURRENT.with(|c| std::mem::replace(&mut *c.borrow_mut(), previous)).unwrap_or_default()
}

/// Gives a value's buffer back to the calling thread's pool, if there is one
/// and nobody else holds the buffer.
pub(crate) fn recycle(t: Tensor) {
    CURRENT.with(|c| {
        if let Some(p) = c.borrow_mut().as_mut() {
            p.recycle(t.into_storage());
        }
    });
}

/// A buffer of `len` elements whose contents are unspecified: the caller
/// must overwrite every element. Reused from the running plan's pool when
/// it has one of this dtype and length, freshly allocated otherwise.
///
/// ```
/// let mut v: Vec<f64> = anvil_cpu::buffers::take(4);
/// v.iter_mut().enumerate().for_each(|(i, x)| *x = i as f64);
/// assert_eq!(v, [0.0, 1.0, 2.0, 3.0]);
/// ```
pub fn take<T: Pooled>(len: usize) -> Vec<T> {
    if len * T::DTYPE.size_of() < MIN_BYTES {
        return small(len, T::default());
    }
    if let Some(mut v) = CURRENT.with(|c| c.borrow_mut().as_mut().and_then(|p| p.take(len))) {
        if cfg!(debug_assertions) {
            v.fill(T::poison());
        }
        return v;
    }
    vec![T::default(); len]
}

/// A kernel's scratch buffer of `len` elements, contents unspecified (the
/// kernel must write before it reads): taken like [`take`], and given back
/// to the running plan's pool when dropped, so that the next step or call
/// reuses it instead of faulting in fresh pages. Dropped on a thread
/// without a pool (a rayon worker), or below [`MIN_BYTES`], it is simply
/// freed.
///
/// ```
/// let mut s = anvil_cpu::buffers::scratch::<f64>(3);
/// s.copy_from_slice(&[1.0, 2.0, 3.0]);
/// assert_eq!(s.iter().sum::<f64>(), 6.0);
/// ```
pub fn scratch<T: Pooled>(len: usize) -> Scratch<T> {
    let buf = take(len);
    let bytes = len * T::DTYPE.size_of();
    let counted = bytes >= MIN_BYTES
        && CURRENT.with(|c| match c.borrow_mut().as_mut() {
            Some(p) => {
                p.scratch_out += bytes;
                p.scratch_peak = p.scratch_peak.max(p.scratch_out);
                true
            }
            None => false,
        });
    Scratch { buf, counted }
}

/// A scratch buffer from [`scratch`]; derefs to its elements.
///
/// ```
/// let s: anvil_cpu::buffers::Scratch<f32> = Default::default();
/// assert!(s.is_empty());
/// ```
#[derive(Debug)]
pub struct Scratch<T: Pooled> {
    buf: Vec<T>,
    /// Whether it was counted as out of the pool installed when it was taken.
    counted: bool,
}

impl<T: Pooled> Default for Scratch<T> {
    /// An empty scratch buffer (nothing to give back).
    fn default() -> Self {
        Scratch { buf: Vec::new(), counted: false }
    }
}

impl<T: Pooled> std::ops::Deref for Scratch<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.buf
    }
}

impl<T: Pooled> std::ops::DerefMut for Scratch<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.buf
    }
}

impl<T: Pooled> Drop for Scratch<T> {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        let bytes = buf.len() * T::DTYPE.size_of();
        if bytes < MIN_BYTES {
            return;
        }
        let counted = self.counted;
        // `try_with`: a scratch buffer may be dropped while its thread exits.
        let _ = CURRENT.try_with(|c| {
            if let Some(p) = c.borrow_mut().as_mut() {
                if counted {
                    p.scratch_out = p.scratch_out.saturating_sub(bytes);
                }
                p.put(T::into_buf(buf));
            }
        });
    }
}

/// Gives a kernel's temporary buffer (one from [`take`] that does not
/// become a result) back to the running plan's pool, if there is one.
///
/// ```
/// let mut tmp: Vec<f64> = anvil_cpu::buffers::take(4096);
/// tmp.fill(1.0);
/// // ... read `tmp` to compute a result ...
/// anvil_cpu::buffers::give_back(tmp); // outside a plan: simply freed
/// ```
pub fn give_back<T: Pooled>(v: Vec<T>) {
    if v.len() * T::DTYPE.size_of() < MIN_BYTES {
        return;
    }
    let _ = CURRENT.try_with(|c| {
        if let Some(p) = c.borrow_mut().as_mut() {
            p.put(T::into_buf(v));
        }
    });
}

/// A small buffer of `len` copies of `value`: `malloc` and a fill, which for
/// a few elements is cheaper than the `calloc` that `vec![0.0; len]` becomes.
pub(crate) fn small<T: Clone>(len: usize, value: T) -> Vec<T> {
    let mut v = Vec::with_capacity(len);
    v.resize(len, value);
    v
}

/// A buffer of `len` copies of `value` (reused like [`take`]).
pub fn filled<T: Pooled>(len: usize, value: T) -> Vec<T> {
    let mut v = take(len);
    v.fill(value);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_matched_by_dtype_and_length_and_only_when_unique() {
        let mut p = Pool::default();
        let n = MIN_BYTES / 8;
        let a = Tensor::from_vec(vec![1.0f64; n], &[n]).unwrap();
        let shared = a.clone();
        p.recycle(a.into_storage());
        assert_eq!(p.bytes(), 0, "a shared buffer must not be pooled");
        p.recycle(shared.into_storage());
        assert_eq!(p.bytes(), n * 8);
        assert!(p.take::<f32>(n).is_none());
        assert!(p.take::<f64>(n + 1).is_none());
        assert_eq!(p.take::<f64>(n).map(|v| v.len()), Some(n));
        assert_eq!(p.bytes(), 0);
        // Too small to pool.
        p.recycle(Tensor::from_vec(vec![1.0f64; 4], &[4]).unwrap().into_storage());
        assert_eq!(p.bytes(), 0);
    }

    #[test]
    fn lent_outputs_come_back_once_dropped_and_trim_keeps_the_largest() {
        let mut p = Pool::default();
        let n = MIN_BYTES / 8;
        let kept = Tensor::from_vec(vec![0.0f64; n], &[n]).unwrap();
        let dropped = Tensor::from_vec(vec![0.0f64; 2 * n], &[2 * n]).unwrap();
        p.lend(&[kept.clone(), dropped]);
        p.reclaim_lent();
        assert_eq!(p.bytes(), 2 * n * 8, "only the dropped output comes back");
        assert_eq!(p.lent.len(), 1, "a kept output is remembered for a later call");
        // Dropped later (a loop's carry, dropped after the next step): back then.
        drop(kept);
        p.reclaim_lent();
        assert_eq!(p.bytes(), 3 * n * 8);
        assert!(p.lent.is_empty());
        p.trim(2 * n * 8);
        assert_eq!(p.bytes(), 2 * n * 8);
        assert!(p.take::<f64>(2 * n).is_some(), "trim drops the smallest first");
    }

    #[test]
    fn trim_keeps_every_size_a_call_asked_for() {
        // A call takes a buffer of n, gives it back, then one of 2n (a
        // loop's stored steps, then the reverse loop's): its largest live
        // set is 2n, yet the next call asks for both again.
        let n = MIN_BYTES / 8;
        let mut p = Pool::default();
        p.put(Buf::F64(vec![0.0; 7 * n])); // from an earlier call, not asked for now
        p.reclaim_lent();
        let a: Vec<f64> = p.take(n).unwrap_or_else(|| vec![0.0; n]);
        p.put(Buf::F64(a));
        let b: Vec<f64> = p.take(2 * n).unwrap_or_else(|| vec![0.0; 2 * n]);
        p.put(Buf::F64(b));
        p.trim(2 * n * 8);
        assert_eq!(p.bytes(), 3 * n * 8, "both sizes kept, the unasked one dropped");
        assert!(p.take::<f64>(n).is_some() && p.take::<f64>(2 * n).is_some());
        assert!(p.take::<f64>(7 * n).is_none());
    }

    #[test]
    fn take_reuses_the_installed_pool_and_poisons_in_debug() {
        let n = MIN_BYTES / 8;
        let previous = install(Pool::default());
        recycle(Tensor::from_vec(vec![7.0f64; n], &[n]).unwrap());
        let v: Vec<f64> = take(n);
        if cfg!(debug_assertions) {
            assert!(v.iter().all(|x| x.is_nan()));
        }
        let pool = uninstall(previous);
        assert_eq!(pool.bytes(), 0);
        // No pool installed: a fresh buffer.
        assert_eq!(take::<f64>(n), vec![0.0; n]);
    }

    #[test]
    fn the_previous_pool_comes_back_even_when_a_kernel_panics() {
        let n = MIN_BYTES / 8;
        let mut outer = Pool::default();
        outer.put(Buf::F64(vec![1.0; n]));
        let outer = Installed::new(outer);
        let panicked = std::panic::catch_unwind(|| {
            let _inner = Installed::new(Pool::default());
            panic!("a kernel panicked");
        });
        assert!(panicked.is_err());
        // The outer pool is installed again: its buffer is handed out.
        assert_eq!(CURRENT.with(|c| c.borrow().as_ref().map(Pool::bytes)), Some(n * 8));
        assert_eq!(outer.finish().bytes(), n * 8);
        assert!(CURRENT.with(|c| c.borrow().is_none()));
    }
}
