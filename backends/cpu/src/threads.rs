//! The choice between one thread and several for a plan's large steps, by
//! measured cost (see [`Parallelism::adaptive`](crate::Parallelism::adaptive)).
//!
//! A fixed rule ("products of at least 200³ multiply-adds and loops of at
//! least 2¹⁵ elements use every thread") is right on an idle machine and
//! wrong on a busy one: faer splits a GEMM evenly between its threads, so
//! when other processes hold the cores, the half given to a descheduled
//! thread finishes late and the step takes longer than on one thread (W1's
//! Jacobian at n = 512 beside two busy processes: 20 ms on two threads, 16
//! ms on one; at n = 256, 4.0 against 1.8 ms).
//!
//! So a plan with eligible steps keeps the times of its last three calls
//! on each path (those steps on one thread, or on several), and a call
//! takes the path with the smaller median (a median, so that one call
//! slowed by a preemption does not move the choice). The choice is per
//! call, not per step: a call does the same work every time, so its times
//! compare cleanly, and its steps do not hand the cores back and forth. The path not taken is tried again now and then,
//! after an interval that doubles each time it loses (from [`MIN_INTERVAL`]
//! to [`MAX_INTERVAL`] runs) and drops back to the minimum when it wins, or
//! when the path taken becomes the slower one: a machine that becomes busy
//! moves the choice to one thread within two runs, and one that becomes
//! idle moves it back within at most `2 × MAX_INTERVAL` runs (two tries
//! must win). On an idle machine the cost is one serial run in
//! `MAX_INTERVAL` (about 1 % of a step that two threads make 1.8× faster).
//!
//! The times are hints kept by the plan (a [`Slot`]), not settings: races
//! between concurrent calls of one plan lose a measurement at worst. Only steps whose kernels give the same bits on
//! any number of threads are eligible (fused elementwise programs and
//! matrix products: faer's GEMM accumulates each output element in the
//! same order on one thread and on several,
//! `gemm_bits_do_not_depend_on_threads` below), so the choice never
//! changes a result.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

/// Calls between two tries of the path not taken, at first and after it wins.
pub const MIN_INTERVAL: u32 = 4;
/// The most calls between two tries of the path not taken.
pub const MAX_INTERVAL: u32 = 64;

/// Samples kept per path: a path's time is the median of its last three.
const KEPT: usize = 3;

/// The last [`KEPT`] times of one path, in nanoseconds (`f64` bits; 0.0 =
/// no sample yet).
#[derive(Debug)]
struct Times {
    ns: [AtomicU64; KEPT],
    next: AtomicU32,
}

impl Times {
    const fn new() -> Times {
        Times { ns: [const { AtomicU64::new(0) }; KEPT], next: AtomicU32::new(0) }
    }

    fn push(&self, ns: f64) {
        let i = self.next.fetch_add(1, Relaxed) as usize % KEPT;
        self.ns[i].store(ns.max(1.0).to_bits(), Relaxed);
    }

    /// The median of the samples there are (the lower one of two), or 0.0.
    fn median(&self) -> f64 {
        let mut v = [0.0; KEPT];
        let mut n = 0;
        for t in &self.ns {
            let x = f64::from_bits(t.load(Relaxed));
            if x > 0.0 {
                v[n] = x;
                n += 1;
            }
        }
        let v = &mut v[..n];
        v.sort_by(f64::total_cmp);
        if n == 0 {
            0.0
        } else {
            v[(n - 1) / 2]
        }
    }
}

/// The record of one plan: each path's recent call times.
#[derive(Debug)]
pub(crate) struct Slot {
    /// One thread.
    seq: Times,
    /// Several threads.
    par: Times,
    /// Calls left before the path not taken is tried again.
    countdown: AtomicU32,
    /// The current interval between tries.
    interval: AtomicU32,
}

impl Slot {
    pub(crate) const fn new() -> Slot {
        Slot {
            seq: Times::new(),
            par: Times::new(),
            countdown: AtomicU32::new(MIN_INTERVAL),
            interval: AtomicU32::new(MIN_INTERVAL),
        }
    }

    fn times(&self, parallel: bool) -> &Times {
        if parallel {
            &self.par
        } else {
            &self.seq
        }
    }

    /// Whether both paths have been timed (for tests).
    #[cfg(test)]
    pub(crate) fn tried_both(&self) -> bool {
        self.time(false) > 0.0 && self.time(true) > 0.0
    }

    fn time(&self, parallel: bool) -> f64 {
        self.times(parallel).median()
    }

    /// Which path the next call takes, and whether it is a try of the path
    /// that is not the current best.
    fn choose(&self) -> Choice {
        let (seq, par) = (self.time(false), self.time(true));
        if par == 0.0 {
            // The first call: the fixed rule's path.
            return Choice { parallel: true, trial: false };
        }
        if seq == 0.0 {
            return Choice { parallel: false, trial: true };
        }
        let best = par <= seq;
        let left = self.countdown.load(Relaxed);
        if left == 0 {
            self.countdown.store(self.interval.load(Relaxed), Relaxed);
            Choice { parallel: !best, trial: true }
        } else {
            self.countdown.store(left - 1, Relaxed);
            Choice { parallel: best, trial: false }
        }
    }

    /// Records that `choice` took `ns` nanoseconds.
    fn record(&self, choice: Choice, ns: f64) {
        let p = choice.parallel;
        let was_best = self.time(p) <= self.time(!p);
        self.times(p).push(ns);
        let (mine, other) = (self.time(p), self.time(!p));
        if choice.trial {
            // A try of the other path: if it is now the faster, it is taken
            // from the next call on; if not, it is tried less often.
            let next = if other == 0.0 || mine < other {
                MIN_INTERVAL
            } else {
                self.interval.load(Relaxed).saturating_mul(2).min(MAX_INTERVAL)
            };
            self.interval.store(next, Relaxed);
        } else if was_best && other > 0.0 && mine > other {
            // The path taken has become the slower one (the machine got
            // busier): the other is taken from now on, and this one tried
            // again soon.
            self.interval.store(MIN_INTERVAL, Relaxed);
            self.countdown.store(MIN_INTERVAL, Relaxed);
        }
    }
}

/// One call's path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Choice {
    parallel: bool,
    trial: bool,
}

/// Adaptive calls run on one thread and on several, since the start.
static CALLS: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];

/// How many adaptive calls have run on one thread and on several.
pub(crate) fn counts() -> [u64; 2] {
    [CALLS[0].load(Relaxed), CALLS[1].load(Relaxed)]
}

impl Slot {
    /// Runs `f` on one thread (`parallel = false`) or several, whichever
    /// has recently been faster for this plan, and records its time.
    pub(crate) fn run<R>(&self, f: impl FnOnce(bool) -> R) -> R {
        let choice = self.choose();
        CALLS[usize::from(choice.parallel)].fetch_add(1, Relaxed);
        let start = Instant::now();
        let r = f(choice.parallel);
        self.record(choice, start.elapsed().as_nanos() as f64);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds a slot the times of a machine where one thread takes `seq` ns
    /// and several `par` ns; returns the paths taken.
    fn drive(slot: &Slot, calls: usize, seq: f64, par: f64) -> Vec<bool> {
        (0..calls)
            .map(|_| {
                let c = slot.choose();
                slot.record(c, if c.parallel { par } else { seq });
                c.parallel
            })
            .collect()
    }

    fn share_parallel(paths: &[bool]) -> f64 {
        paths.iter().filter(|&&p| p).count() as f64 / paths.len() as f64
    }

    #[test]
    fn the_faster_path_is_taken_and_the_choice_follows_the_load() {
        let slot = Slot::new();
        // Idle: two threads 1.8x faster. Mostly parallel, a serial try at
        // most every MAX_INTERVAL calls once settled.
        let idle = drive(&slot, 1000, 10.0, 5.5);
        assert!(share_parallel(&idle[200..]) > 1.0 - 1.5 / MAX_INTERVAL as f64, "{idle:?}");
        // Busy: two threads 2x slower than one. Within a few calls the
        // choice is serial, with parallel tries at doubling intervals.
        let busy = drive(&slot, 1000, 10.0, 20.0);
        assert!(busy[..MAX_INTERVAL as usize].iter().filter(|&&p| p).count() <= 8, "{busy:?}");
        assert!(share_parallel(&busy[200..]) < 1.5 / MAX_INTERVAL as f64, "{busy:?}");
        // Idle again: back to parallel within MAX_INTERVAL calls.
        let again = drive(&slot, 1000, 10.0, 5.5);
        let first = again.iter().position(|&p| p).unwrap();
        assert!(first <= MAX_INTERVAL as usize + 1, "{first}");
        assert!(share_parallel(&again[200..]) > 1.0 - 1.5 / MAX_INTERVAL as f64);
    }

    #[test]
    fn one_slow_call_does_not_lock_in_the_wrong_path() {
        let slot = Slot::new();
        drive(&slot, 300, 10.0, 5.0);
        // One parallel call 10x slower (a preemption), then idle again.
        let c = loop {
            let c = slot.choose();
            if c.parallel && !c.trial {
                break c;
            }
            slot.record(c, 10.0);
        };
        slot.record(c, 50.0);
        let after = drive(&slot, 40, 10.0, 5.0);
        let serial = after.iter().filter(|&&p| !p).count();
        assert!(serial <= 2 * MIN_INTERVAL as usize, "{after:?}");
    }

    #[test]
    fn run_records_both_paths() {
        let slot = Slot::new();
        assert_eq!(slot.choose(), Choice { parallel: true, trial: false });
        let mut paths = vec![];
        for _ in 0..3 {
            slot.run(|p| {
                paths.push(p);
                std::hint::black_box((0..1000).sum::<u64>())
            });
        }
        assert_eq!(&paths[..2], [true, false], "parallel first, then one serial run");
        assert!(slot.time(false) > 0.0 && slot.time(true) > 0.0);
    }

    #[test]
    fn gemm_bits_do_not_depend_on_threads() {
        use faer::linalg::matmul::matmul;
        use faer::{Accum, MatMut, MatRef, Par};
        let threads = rayon::current_num_threads().max(2);
        for (m, k, n) in [(256, 256, 256), (300, 517, 129), (64, 1000, 700), (513, 64, 513)] {
            let a: Vec<f64> = (0..m * k).map(|i| ((i * 37 % 101) as f64 * 0.173).sin()).collect();
            let b: Vec<f64> = (0..k * n).map(|i| ((i * 11 % 97) as f64 * 0.311).cos()).collect();
            let run = |par: Par| {
                let mut c = vec![0.0; m * n];
                matmul(
                    MatMut::from_row_major_slice_mut(&mut c, m, n),
                    Accum::Replace,
                    MatRef::from_row_major_slice(&a, m, k),
                    MatRef::from_row_major_slice(&b, k, n),
                    1.0,
                    par,
                );
                c
            };
            let seq = run(Par::Seq);
            for t in 2..=threads {
                let par = run(Par::rayon(t));
                let same = seq.iter().zip(&par).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "{m}x{k}x{n} with {t} threads differs from one thread");
            }
        }
    }
}
