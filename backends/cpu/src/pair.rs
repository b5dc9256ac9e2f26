//! A second core for a loop's matrix–vector products (and mid-size GEMMs).
//!
//! A loop such as W9's RK4 scan multiplies one cached matrix by a new
//! vector four times a step, each product waiting for the one before. At
//! 128 × 128 a product streams 128 KiB from L2 (1.3–1.5 µs on one core of
//! a Zen 3), and the loop is mostly those products. Two cores each holding
//! half of the matrix in their own L2 stream it in half the time, but a
//! rayon fork-join per product costs about as much as the product (W9 at
//! d = 128 on a rayon split: 3.2–5.8 ms, against 2.0–2.2 ms on one thread,
//! session 16), so [`crate::matvec::gevm_split`] is kept for matrices of
//! 256 × 256 and up.
//!
//! Here one helper thread, spawned once per process, waits for a loop to
//! [`lease`] it, and then spins on one atomic word for the loop's products:
//! the loop's thread posts a product (the columns of the helper's half),
//! computes its own half, and takes the result; a round trip between the
//! two cores costs about 70 ns on this VM. After a loop the helper spins
//! for [`LINGER`] in case another follows (the reverse pass after the
//! forward one, the next call: waking from sleep takes tens of µs, and
//! paired calls of W9's program had a p90 of 4.0–5.4 ms against a median
//! of 3.6–3.7 ms without it, 3.7–3.8 ms with it), then sleeps on a
//! condition variable.
//!
//! - **Never waiting for a helper that has not started.** When its own
//!   half is done, the loop's thread takes the posted half back if the
//!   helper has not claimed it (one compare-and-swap), and computes it
//!   itself: a helper that is descheduled, or busy elsewhere, costs the
//!   serial time, not a wait.
//! - **Same bits.** Each output column is the same chain over the rows
//!   whichever core computes it, so a paired product gives the bits of
//!   the serial one ([`crate::matvec::gevm_panels`]).
//! - **Chosen by measured cost.** A loop leases the helper only when its
//!   plan runs it with several threads; a plan whose loops pair products
//!   chooses between that and one thread by the times of its recent calls
//!   (see [`crate::threads`]), so a machine whose other core is busy runs
//!   the serial path.
//! - **One loop at a time.** A second loop that asks while the helper is
//!   leased runs its products on its own thread.
//!
//! The same handoff serves work outside loops through [`join`]: a GEMM
//! below rayon's threshold (1–8 M multiply-adds, such as a product after
//! a loop, when the helper is still lingering) gives half its rows to the
//! helper (`kernels::matmul`), with the same steal-back and the same bits.
//!
//! A plan whose loops sum products over their steps in the background
//! ([`crate::contraction`], W9's `dA`) leases no helper: the other core is
//! left to those sums (W9 at d = 128 on an AVX-512 VM, one window: 4.1–4.7
//! ms a call that way, 4.8–5.8 ms with its forward products paired, whose
//! helper then competed with the sums, and 4.8–5.4 ms on one thread; the
//! build before the sums took 5.5–5.8 ms on one thread, 7.1–7.3 paired).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Acquire, Ordering::Relaxed};
use std::sync::atomic::{AtomicUsize, Ordering::AcqRel, Ordering::Release};
use std::sync::{Condvar, Mutex, OnceLock};

/// The smallest matrix (elements) whose products a leased loop shares:
/// 64 KiB of `f64`, from where half a product (0.3 µs or more) is worth
/// two handoffs between cores (see `BENCHMARKS.md`, session 24).
pub(crate) const PAIR_MIN: usize = 1 << 13;

/// How long the helper spins for a next lease before it sleeps.
const LINGER: std::time::Duration = std::time::Duration::from_micros(200);

/// The phases of a posted product, in the low two bits of [`Helper::state`]
/// (the product's sequence number above them).
const POSTED: u64 = 0;
const TAKEN: u64 = 1;
const DONE: u64 = 2;
/// Taken back by the loop's thread before the helper claimed it.
const KEPT: u64 = 3;

/// The work posted to the helper: a closure on the poster's stack, valid
/// until the poster has settled it (see [`Handback`]); it returns whether
/// it did its work (`false`: the poster does it instead).
type Task<'a> = dyn Fn() -> bool + Sync + 'a;

/// The posted task, its lifetime erased (see [`Helper::job`]).
#[derive(Clone, Copy)]
struct Job {
    task: *const Task<'static>,
}

/// The helper's side of the handoff.
struct Helper {
    /// `seq << 2 | phase` of the last posted product.
    state: AtomicU64,
    /// The posted product: written by the lease holder before it stores
    /// `POSTED` (release), read by the helper after it claims that product
    /// (acquire), and not written again until the holder has seen it
    /// `DONE` or kept it.
    job: UnsafeCell<Job>,
    /// Whether a loop holds the helper.
    leased: AtomicBool,
    /// Whether the helper should spin (set with a lease, cleared when it
    /// goes back to sleep), under the lock the helper sleeps on.
    awake: Mutex<bool>,
    wake: Condvar,
    /// Products the helper computed, and those the loop's thread computed
    /// instead (kept back, or handed back by the helper) — a diagnostic,
    /// for tests.
    counts: [AtomicUsize; 2],
}

// SAFETY: `job` is the only field without its own synchronisation; the
// protocol on `state` (see the field's documentation) orders every write
// of it before every read of that product, and never lets a write overlap
// a read.
unsafe impl Sync for Helper {}

/// The process's helper, spawned on first use; `None` where the thread
/// could not be spawned.
fn helper() -> Option<&'static Helper> {
    static HELPER: OnceLock<Option<&'static Helper>> = OnceLock::new();
    *HELPER.get_or_init(|| {
        let h: &'static Helper = Box::leak(Box::new(Helper {
            state: AtomicU64::new(KEPT),
            job: UnsafeCell::new(Job { task: &|| false }),
            leased: AtomicBool::new(false),
            awake: Mutex::new(false),
            wake: Condvar::new(),
            counts: [AtomicUsize::new(0), AtomicUsize::new(0)],
        }));
        std::thread::Builder::new().name("anvil-pair".into()).spawn(move || h.serve()).ok()?;
        Some(h)
    })
}

impl Helper {
    /// The helper thread: sleeps until a lease, then takes posted products
    /// until the lease ends.
    fn serve(&self) {
        loop {
            {
                let mut awake = self.awake.lock().unwrap_or_else(|e| e.into_inner());
                while !*awake {
                    awake = self.wake.wait(awake).unwrap_or_else(|e| e.into_inner());
                }
            }
            loop {
                while self.leased.load(Relaxed) {
                    let s = self.state.load(Acquire);
                    if s & 3 != POSTED
                        || self.state.compare_exchange(s, s | TAKEN, AcqRel, Relaxed).is_err()
                    {
                        std::hint::spin_loop();
                        continue;
                    }
                    // SAFETY: the task `s` is claimed: its job was written
                    // before `POSTED` was stored and is not written again
                    // until `DONE` (or `KEPT`) is seen; the closure it points
                    // to lives until then (the poster settles it before it
                    // returns or unwinds, see `Handback`).
                    let job = unsafe { *self.job.get() };
                    let run = || unsafe { (*job.task)() };
                    // A task that fails (or panics) here is handed back
                    // (`KEPT`), for the poster to run: never a wait forever.
                    let ok = matches!(
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)),
                        Ok(true)
                    );
                    self.counts[usize::from(!ok)].fetch_add(1, Relaxed);
                    self.state.store((s & !3) | if ok { DONE } else { KEPT }, Release);
                }
                // Linger before sleeping: a program's next loop (the
                // reverse pass after the forward one, the next call) often
                // follows within microseconds, and waking from the
                // condition variable takes tens of them.
                let idle = std::time::Instant::now();
                while !self.leased.load(Relaxed) && idle.elapsed() < LINGER {
                    std::hint::spin_loop();
                }
                if !self.leased.load(Relaxed) {
                    break;
                }
            }
            // Sleep unless a new lease came in meanwhile.
            let mut awake = self.awake.lock().unwrap_or_else(|e| e.into_inner());
            if !self.leased.load(Relaxed) {
                *awake = false;
            }
        }
    }
}

/// The helper, held by one loop until dropped.
pub(crate) struct Lease {
    helper: &'static Helper,
    seq: u64,
    /// The helper's share of a product's columns, in 64ths (see
    /// [`Lease::gevm_panels`]).
    share: usize,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Lease")
    }
}

/// The helper for one loop, `None` when another loop holds it, it could
/// not be started, or the caller is a rayon worker (whose pool may be
/// busy with the other cores: a spinning helper would take one from it).
pub(crate) fn lease() -> Option<Lease> {
    if rayon::current_thread_index().is_some() {
        return None;
    }
    let helper = helper()?;
    helper.leased.compare_exchange(false, true, AcqRel, Relaxed).ok()?;
    let mut awake = helper.awake.lock().unwrap_or_else(|e| e.into_inner());
    *awake = true;
    helper.wake.notify_one();
    drop(awake);
    let seq = helper.state.load(Acquire) >> 2;
    Some(Lease { helper, seq, share: 32 })
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.helper.leased.store(false, Release);
    }
}

/// Waits, when dropped, until the posted product is no longer the
/// helper's to compute: kept back or done. Settled on unwinding too, so the
/// helper never writes into a buffer that is gone.
struct Handback<'a> {
    helper: &'a Helper,
    posted: u64,
    settled: bool,
}

/// How a posted product was settled.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Settled {
    /// Taken back before the helper claimed it: this thread computes it.
    Kept,
    /// Done by the helper before this thread finished its own half.
    Ready,
    /// Done by the helper after this thread waited for it.
    Waited,
}

impl Handback<'_> {
    /// Takes the product back if the helper has not claimed it, else waits
    /// until the helper is done.
    fn settle(&mut self) -> Settled {
        self.settled = true;
        let h = self.helper;
        let kept = (self.posted & !3) | KEPT;
        match h.state.compare_exchange(self.posted, kept, AcqRel, Acquire) {
            Ok(_) => {
                h.counts[1].fetch_add(1, Relaxed);
                Settled::Kept
            }
            Err(now) => {
                let done = (self.posted & !3) | DONE;
                if now == done {
                    return Settled::Ready;
                }
                loop {
                    match h.state.load(Acquire) {
                        s if s == done => return Settled::Waited,
                        s if s == kept => return Settled::Kept,
                        _ => std::hint::spin_loop(),
                    }
                }
            }
        }
    }
}

impl Drop for Handback<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.settle();
        }
    }
}

/// A raw pointer that may cross to the helper (its use is argued where it
/// is dereferenced).
#[derive(Clone, Copy)]
pub(crate) struct SendPtr<T>(pub(crate) *mut T);
// SAFETY: only a carrier; every dereference has its own argument.
unsafe impl<T> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    /// The pointer (a method, so that a closure captures the carrier, not
    /// its field).
    pub(crate) fn get(self) -> *mut T {
        self.0
    }
}

impl Lease {
    /// Runs `mine` on this thread while the helper runs `theirs`, unless
    /// this thread takes `theirs` back first (the helper had not started
    /// it) or the helper hands it back (it returned `false` or panicked):
    /// then this thread runs it after `mine`. Returns `mine`'s result, how
    /// `theirs` was settled and what `theirs` returned (run here when it
    /// was handed back). `theirs` runs to completion once, or twice when
    /// the helper's run failed.
    fn join<R>(&mut self, mine: impl FnOnce() -> R, theirs: &Task<'_>) -> (R, Settled, bool) {
        self.seq += 1;
        let posted = (self.seq << 2) | POSTED;
        // SAFETY: the lifetime is erased for the helper's slot only; the
        // `Handback` below settles the task (taken back, or done) before
        // this function returns or unwinds, and the helper never touches it
        // after that.
        let task: *const Task<'static> =
            unsafe { std::mem::transmute::<&Task<'_>, &'static Task<'static>>(theirs) };
        // SAFETY: the last task is settled (every join settles its own), so
        // the helper does not read `job`.
        unsafe { *self.helper.job.get() = Job { task } };
        self.helper.state.store(posted, Release);
        let mut back = Handback { helper: self.helper, posted, settled: false };
        let r = mine();
        let outcome = back.settle();
        let ok = outcome != Settled::Kept || theirs();
        (r, outcome, ok)
    }

    /// `y = xᵀ M` as [`crate::matvec::gevm_panels`], the last columns
    /// (about half) computed by the helper unless this thread takes them
    /// back first; `false` (nothing written) where `gevm_panels` refuses.
    pub(crate) fn gevm_panels(
        &mut self,
        x: &[f64],
        panels: &[f64],
        width: usize,
        y: &mut [f64],
    ) -> bool {
        let (k, n) = (x.len(), y.len());
        if k * n < PAIR_MIN || n < 16 || !crate::matvec::gevm_takes(k, n) {
            return crate::matvec::gevm_panels(x, panels, width, y);
        }
        if width == 0 || panels.len() < k * n {
            return false;
        }
        // The helper's columns are the last `share` 64ths, from a multiple
        // of 8 (so that its rows start on a 64-byte boundary when the
        // panels do, see `matvec::aligned`), at least 8 columns here and 4
        // there: this thread's half is usually the slower (its L2 also
        // holds the loop's other values), so the share follows the
        // products' outcomes (more when the helper was done first, less
        // when this thread waited or kept the half). Columns are
        // independent, so the split never changes a bit.
        let mid = (n * (64 - self.share) / 64 / 8 * 8).clamp(8, n - 4);
        let theirs = n - mid;
        let (own, rest) = y.split_at_mut(mid);
        let rest = SendPtr(rest.as_mut_ptr());
        let task = move || {
            // SAFETY: `rest` is `y[mid..]` (`theirs` elements), borrowed
            // mutably for this call and written by this task alone, which
            // runs once.
            let y = unsafe { std::slice::from_raw_parts_mut(rest.get(), theirs) };
            crate::matvec::gevm_panel_columns(x, panels, width, n, mid, y)
        };
        let mine = || crate::matvec::gevm_panel_columns(x, panels, width, n, 0, own);
        let (done, outcome, theirs_done) = self.join(mine, &task);
        self.share = match outcome {
            Settled::Ready => (self.share + 1).min(56),
            Settled::Waited | Settled::Kept => self.share.saturating_sub(1).max(8),
        };
        done && theirs_done
    }
}

/// Runs `mine` on this thread and `theirs` on the helper when it is free
/// (else both here, `mine` first), as [`Lease::join`]: for work outside a
/// loop, such as a product too small for rayon's fork-join. Returns
/// `mine`'s result and whether `theirs` did its work.
pub(crate) fn join<R>(mine: impl FnOnce() -> R, theirs: &Task<'_>) -> (R, bool) {
    match lease() {
        Some(mut lease) => {
            let (r, _, ok) = lease.join(mine, theirs);
            (r, ok)
        }
        None => {
            let r = mine();
            (r, theirs())
        }
    }
}

/// Products computed by the helper and kept back by loops, in this process.
#[cfg(test)]
pub(crate) fn counts() -> [usize; 2] {
    helper().map_or([0, 0], |h| [h.counts[0].load(Relaxed), h.counts[1].load(Relaxed)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(len: usize, seed: f64) -> Vec<f64> {
        (0..len).map(|i| ((i as f64 + 1.0) * seed).sin() * (1.0 + (i % 5) as f64)).collect()
    }

    /// Paired products give the bits of the serial ones, call after call,
    /// whether the helper or this thread computes the second half; one
    /// lease at a time.
    #[test]
    fn paired_products_give_the_bits_of_serial_ones() {
        let width = crate::matvec::panel_width();
        if width == 0 {
            return;
        }
        let mut lease = waited_lease();
        assert!(super::lease().is_none(), "a second lease while the first is held");
        for (k, n) in [(128, 128), (64, 200), (300, 40), (97, 130)] {
            let m = data(k * n, 0.37);
            let mut packed = vec![0.0; k * n];
            assert!(crate::matvec::pack_panels(&m, (k, n), false, width, &mut packed));
            let mut x = data(k, 0.11);
            for _ in 0..200 {
                let (mut serial, mut paired) = (vec![f64::NAN; n], vec![f64::NAN; n]);
                assert!(crate::matvec::gevm_panels(&x, &packed, width, &mut serial));
                assert!(lease.gevm_panels(&x, &packed, width, &mut paired));
                assert_eq!(
                    serial.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    paired.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "{k} × {n}"
                );
                // The next vector depends on this product, as in a loop.
                for (i, v) in x.iter_mut().enumerate() {
                    *v = (paired[i % n] * 1e-3).sin();
                }
            }
        }
        let [helped, kept] = counts();
        assert!(helped + kept >= 800, "{helped} helped, {kept} kept");
        drop(lease);
        // Released: the next loop gets it, but never a rayon worker.
        drop(waited_lease());
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        assert!(pool.install(|| super::lease().is_none()), "a lease on a rayon worker");
    }

    /// The helper, once another test's loop (which may hold it for a
    /// moment) has let it go.
    fn waited_lease() -> Lease {
        let start = std::time::Instant::now();
        loop {
            match lease() {
                Some(l) => return l,
                None if start.elapsed().as_secs() < 60 => std::thread::yield_now(),
                None => panic!("the helper was not free for a minute"),
            }
        }
    }
}
