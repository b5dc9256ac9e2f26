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
//! compare cleanly, and its steps do not hand the cores back and forth.
//! The path not taken is tried again now and then, after an interval that
//! doubles each time it loses (from [`MIN_INTERVAL`] to [`MAX_INTERVAL`]
//! runs) and drops back to the minimum when it wins, or when the path taken
//! becomes the slower one: a machine that becomes busy moves the choice to
//! one thread within two runs, and one that becomes idle moves it back
//! within about `MAX_INTERVAL` tries' lengths of runs (a try that beats the
//! path taken replaces its path's older times, so it is taken from the
//! next call).
//! On an idle machine the cost is a serial call in `MAX_INTERVAL`, and the
//! parallel calls after it, which run cold (see below): W2's Jacobian at
//! n = 512 took 7 % longer than always on two threads with tries every 64
//! calls. The interval counts calls per call of the last try: a try of
//! several threads lasts until they are warm, many calls when the calls
//! are short, and is repeated that many times less often (W8a's Newton
//! body, 0.16 ms a call, where one thread is faster: a fifth of its calls
//! were tries of several threads, 8 % slower than serial, before).
//!
//! A call is timed only when its path is warm: a serial call always, a
//! call on several threads when the call before it took the same path and
//! a run of calls on several threads has gone on for [`PARALLEL_WARM_NS`].
//! The first calls of several threads after serial ones pay for waking
//! idle threads, for caches warmed on another core and,
//! on a VM, for a virtual CPU the host let go cold (W1's Jacobian at
//! n = 256 on a 2-vCPU VM: 0.45 ms a call on two threads when they run
//! call after call, 0.8–0.9 ms for the first few to twenty after two
//! serial calls, 0.62 ms on one thread). Timed from their first call, a
//! try of several threads lost to one thread on an idle machine, and a
//! serial try made the parallel path look slower than it is: the plan
//! went serial and stayed there. A try is so a run of calls that ends
//! with its first warm one, and a try of several threads that is slower
//! than one thread goes on until it has run for [`PARALLEL_TRY_NS`]: on the
//! same VM, after serial calls, two threads sometimes ran at 0.72 ms a call
//! for 5 to 30 ms before dropping to 0.43 (W1 at n = 256; cold spells
//! measured over 40 switches after 100 serial calls), so tries that ended
//! at 5 ms lost, their interval grew, and a third of runs stayed on one
//! thread (0.60 ms a call). On a busy machine, where several threads stay
//! slower, a try costs that many calls, and its interval is counted in
//! calls per call of the try, as above.
//!
//! The times are hints kept by the plan (a [`Slot`]), not settings: races
//! between concurrent calls of one plan lose a measurement at worst. Only steps whose kernels give the same bits on
//! any number of threads are eligible (fused elementwise programs and
//! matrix products: faer's GEMM accumulates each output element in the
//! same order on one thread and on several,
//! `gemm_bits_do_not_depend_on_threads` below), so the choice never
//! changes a result.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::time::Instant;

/// Calls between two tries of the path not taken, at first and after it wins.
pub const MIN_INTERVAL: u32 = 4;
/// The most calls between two tries of the path not taken.
pub const MAX_INTERVAL: u32 = 128;

/// How long several threads must have run call after call before a call
/// of theirs is timed (see the module documentation).
pub const PARALLEL_WARM_NS: u64 = 5_000_000;

/// The longest a try of several threads goes on while its warm calls are
/// slower than one thread (see the module documentation).
pub const PARALLEL_TRY_NS: u64 = 30_000_000;

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

    /// Every sample `ns`.
    fn fill(&self, ns: f64) {
        for t in &self.ns {
            t.store(ns.max(1.0).to_bits(), Relaxed);
        }
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
    /// Whether a try of the path not taken is under way (until one of its
    /// calls is warm).
    trying: AtomicBool,
    /// Calls of the try under way so far.
    try_calls: AtomicU32,
    /// The path of the last call: 0 none yet, 1 one thread, 2 several.
    last: AtomicU8,
    /// When the run of calls on the last call's path began (nanoseconds
    /// since [`epoch`]).
    run_start: AtomicU64,
}

impl Slot {
    pub(crate) const fn new() -> Slot {
        Slot {
            seq: Times::new(),
            par: Times::new(),
            countdown: AtomicU32::new(MIN_INTERVAL),
            interval: AtomicU32::new(MIN_INTERVAL),
            trying: AtomicBool::new(false),
            try_calls: AtomicU32::new(0),
            last: AtomicU8::new(0),
            run_start: AtomicU64::new(0),
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

    /// Which path the next call takes, and whether it is a try of the
    /// path that is not the current best.
    fn choose(&self) -> Choice {
        let (seq, par) = (self.time(false), self.time(true));
        // Until both paths have a time, each is tried in turn, the fixed
        // rule's (several threads) first.
        let best = par > 0.0 && (seq == 0.0 || par <= seq);
        if self.trying.load(Relaxed) {
            self.try_calls.fetch_add(1, Relaxed);
            return Choice { parallel: !best, trial: true };
        }
        let countdown = self.countdown.load(Relaxed);
        if par == 0.0 || seq == 0.0 || countdown == 0 {
            // (The countdown to the next try is set when this one ends.)
            self.trying.store(true, Relaxed);
            self.try_calls.store(1, Relaxed);
            return Choice { parallel: !best, trial: true };
        }
        self.countdown.store(countdown - 1, Relaxed);
        Choice { parallel: best, trial: false }
    }

    /// Whether a call on `parallel`'s path starting at `now` (nanoseconds
    /// since [`epoch`]) is warm, and so timed: a serial call always; a
    /// parallel one when the call before was parallel too and several
    /// threads have run for [`PARALLEL_WARM_NS`].
    fn warm(&self, parallel: bool, now: u64) -> Warmth {
        let path = 1 + u8::from(parallel);
        let age = if self.last.swap(path, Relaxed) == path {
            now.saturating_sub(self.run_start.load(Relaxed))
        } else {
            self.run_start.store(now, Relaxed);
            0
        };
        Warmth { warm: !parallel || age >= PARALLEL_WARM_NS, age }
    }

    /// Records that `choice` took `ns` nanoseconds.
    fn record(&self, choice: Choice, warmth: Warmth, ns: f64) {
        if !warmth.warm {
            return;
        }
        let p = choice.parallel;
        let was_best = self.time(p) <= self.time(!p);
        let other = self.time(!p);
        if choice.trial {
            // A try of the other path: if it beats the path taken, its
            // older times (from before the machine changed) are dropped and
            // it is taken from the next call on; if not, it is tried less
            // often. A try of several threads that has not yet beaten one
            // thread goes on until it has run for PARALLEL_TRY_NS: they may
            // still be cold.
            let wins = other == 0.0 || ns < other;
            if p && !wins && warmth.age < PARALLEL_TRY_NS {
                return;
            }
            self.trying.store(false, Relaxed);
            if wins {
                self.times(p).fill(ns);
            } else {
                self.times(p).push(ns);
            }
            let next = if wins {
                MIN_INTERVAL
            } else {
                self.interval.load(Relaxed).saturating_mul(2).min(MAX_INTERVAL)
            };
            self.interval.store(next, Relaxed);
            // The next try comes after `next` calls per call this one took:
            // a try that needed a long warm-up (many short calls on several
            // threads) costs the same small share of calls as a try of one.
            let calls = self.try_calls.load(Relaxed).max(1);
            self.countdown.store(next.saturating_mul(calls), Relaxed);
            return;
        }
        self.times(p).push(ns);
        if was_best && other > 0.0 && self.time(p) > other {
            // The path taken has become the slower one (the machine got
            // busier): the other is taken from now on, and this one tried
            // again soon.
            self.interval.store(MIN_INTERVAL, Relaxed);
            self.countdown.store(MIN_INTERVAL, Relaxed);
        }
    }
}

/// Whether a call was timed warm, and how long its path's run of calls had
/// gone on when it started (nanoseconds; 0 for the first call of a run).
#[derive(Clone, Copy, Debug)]
struct Warmth {
    warm: bool,
    age: u64,
}

/// One call's path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Choice {
    parallel: bool,
    trial: bool,
}

/// Nanoseconds since the first call of this function (a clock for warm
/// runs).
fn epoch(at: Instant) -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    u64::try_from(at.saturating_duration_since(start).as_nanos()).unwrap_or(u64::MAX)
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
        let warm = self.warm(choice.parallel, epoch(start));
        let r = f(choice.parallel);
        self.record(choice, warm, start.elapsed().as_nanos() as f64);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A machine for a slot: its clock, the path of its last call, and
    /// until when several threads run cold.
    #[derive(Default)]
    struct Machine {
        now: u64,
        last: Option<bool>,
        cold_until: u64,
    }

    impl Machine {
        /// One call through `slot`, which takes `time(parallel, cold)`
        /// nanoseconds (`cold`: the call before took the other path).
        fn call(&mut self, slot: &Slot, mut time: impl FnMut(bool, bool) -> f64) -> Choice {
            let c = slot.choose();
            let warm = slot.warm(c.parallel, self.now);
            let ns = time(c.parallel, self.last.is_some_and(|p| p != c.parallel));
            slot.record(c, warm, ns);
            self.now += ns as u64;
            self.last = Some(c.parallel);
            c
        }
    }

    /// Feeds a slot the times of a machine where one thread takes `seq` ns
    /// and several `par` ns; returns the paths taken.
    fn drive(m: &mut Machine, slot: &Slot, calls: usize, seq: f64, par: f64) -> Vec<bool> {
        (0..calls).map(|_| m.call(slot, |p, _| if p { par } else { seq }).parallel).collect()
    }

    /// Like [`drive`], where several threads take `cold` ns a call for
    /// `cold_ns` after each switch to them from one thread, `warm` after.
    fn drive_cold(
        m: &mut Machine,
        slot: &Slot,
        calls: usize,
        seq: f64,
        (cold, cold_ns): (f64, u64),
        warm: f64,
    ) -> Vec<bool> {
        (0..calls)
            .map(|_| {
                let now = m.now;
                let mut cold_until = m.cold_until;
                let c = m.call(slot, |parallel, switched| {
                    if !parallel {
                        return seq;
                    }
                    if switched {
                        cold_until = now + cold_ns;
                    }
                    if now < cold_until {
                        cold
                    } else {
                        warm
                    }
                });
                m.cold_until = cold_until;
                c.parallel
            })
            .collect()
    }

    fn share_parallel(paths: &[bool]) -> f64 {
        paths.iter().filter(|&&p| p).count() as f64 / paths.len() as f64
    }

    /// The share of calls the path not taken gets once settled: a try of
    /// at most two calls in MAX_INTERVAL (and a half for rounding).
    const TRIES: f64 = 2.5 / MAX_INTERVAL as f64;

    /// One millisecond: the time of a call on one thread in these tests.
    const MS: f64 = 1e6;

    #[test]
    fn the_faster_path_is_taken_and_the_choice_follows_the_load() {
        let (slot, mut m) = (Slot::new(), Machine::default());
        // Idle: two threads 1.8x faster. Mostly parallel, a serial try at
        // most every MAX_INTERVAL calls once settled.
        let idle = drive(&mut m, &slot, 1000, MS, 0.55 * MS);
        assert!(share_parallel(&idle[200..]) > 1.0 - TRIES, "{idle:?}");
        // Busy: two threads 2x slower than one. Within a few calls the
        // choice is serial, with parallel tries (each for PARALLEL_TRY_NS,
        // 16 calls here) at intervals of doubling multiples of their length.
        let busy = drive(&mut m, &slot, 1000, MS, 2.0 * MS);
        let early = busy[..64].iter().filter(|&&p| p).count();
        let try_calls = (PARALLEL_TRY_NS as f64 / (2.0 * MS)) as usize + 1;
        assert!(early <= 4 + try_calls, "{busy:?}");
        assert!(share_parallel(&busy[200..]) < 0.05, "{busy:?}");
        // Idle again: back to parallel within MAX_INTERVAL tries' lengths.
        let again = drive(&mut m, &slot, 4000, MS, 0.55 * MS);
        let settled = again.windows(10).position(|w| w.iter().all(|&p| p)).unwrap();
        assert!(settled <= MAX_INTERVAL as usize * try_calls, "{again:?}");
        assert!(share_parallel(&again[settled + 200..]) > 1.0 - TRIES, "{again:?}");
    }

    #[test]
    fn a_path_is_judged_warm_not_by_its_first_calls() {
        // Several threads take twice their time on the first calls after a
        // serial one (idle threads woken, caches warmed on another core, a
        // cold virtual CPU): here for 3 ms. A busy spell makes them slower
        // than one thread; once it is over they are 1.6x faster when warm,
        // but slower than one thread while cold: the choice must go back
        // to them, and serial tries must not make them look slow.
        let (slot, mut m) = (Slot::new(), Machine::default());
        let busy = drive_cold(&mut m, &slot, 100, MS, (4.0 * MS, 3_000_000), 2.0 * MS);
        assert!(share_parallel(&busy[50..]) < 0.25, "{busy:?}");
        let idle = drive_cold(&mut m, &slot, 1000, MS, (1.25 * MS, 3_000_000), 0.625 * MS);
        assert!(share_parallel(&idle[200..]) > 1.0 - TRIES, "{idle:?}");
    }

    #[test]
    fn several_threads_cold_for_long_after_serial_calls_are_still_chosen() {
        // On a 2-vCPU VM, several threads may run slower than one for 5 to
        // 30 ms after serial calls (W1's Jacobian at n = 256: 0.72 ms a
        // call against 0.60 on one thread, then 0.43 when warm). A try that
        // ended at its first warm call lost there, and the choice stayed
        // serial: tries must outlast the cold spell.
        let (slot, mut m) = (Slot::new(), Machine::default());
        let paths = drive_cold(&mut m, &slot, 3000, MS, (1.2 * MS, 20_000_000), 0.7 * MS);
        assert!(share_parallel(&paths[500..]) > 0.9, "{paths:?}");
    }

    #[test]
    fn tries_that_need_many_calls_come_that_much_less_often() {
        // Short calls (0.16 ms, W8a's Newton body) on which several threads
        // are slower, and cold for 3 ms after serial calls: a try of them
        // lasts until warm, about twenty calls. Repeated every MAX_INTERVAL
        // calls, tries would be a seventh of all calls; spaced by their
        // length, a few percent.
        let (slot, mut m) = (Slot::new(), Machine::default());
        let paths = drive_cold(&mut m, &slot, 20_000, 0.16 * MS, (0.4 * MS, 3_000_000), 0.21 * MS);
        assert!(share_parallel(&paths[5_000..]) < 0.05, "{}", share_parallel(&paths[5_000..]));
    }

    #[test]
    fn one_slow_call_does_not_lock_in_the_wrong_path() {
        let (slot, mut m) = (Slot::new(), Machine::default());
        drive(&mut m, &slot, 300, MS, 0.5 * MS);
        // One parallel call 10x slower (a preemption), then idle again.
        loop {
            let c = m.call(&slot, |p, _| if p { 0.5 * MS } else { MS });
            if c.parallel && !c.trial && m.last == Some(true) {
                break;
            }
        }
        m.call(&slot, |p, _| if p { 5.0 * MS } else { MS });
        let after = drive(&mut m, &slot, 40, MS, 0.5 * MS);
        let serial = after.iter().filter(|&&p| !p).count();
        assert!(serial <= 2 * MIN_INTERVAL as usize, "{after:?}");
    }

    #[test]
    fn run_records_both_paths() {
        let slot = Slot::new();
        assert_eq!(slot.choose(), Choice { parallel: true, trial: true });
        let slot = Slot::new();
        let mut paths = vec![];
        while !slot.tried_both() {
            slot.run(|p| {
                paths.push(p);
                std::thread::sleep(std::time::Duration::from_micros(500));
            });
            assert!(paths.len() < 100, "{paths:?}");
        }
        let first_serial = paths.iter().position(|&p| !p).unwrap();
        assert!(paths[..first_serial].len() >= 2, "parallel first, until warm: {paths:?}");
        assert!(paths[first_serial..].iter().all(|&p| !p), "then serial: {paths:?}");
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
