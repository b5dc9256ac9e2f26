//! Counters of the expensive steps of a call, for the calling thread:
//! tracing a function, transforming a graph, optimising one and building a
//! plan. A cached call (a [`jit`]-style cache hit, or any call of a plan
//! compiled for symbolic shapes) moves none of them; tests and benchmarks
//! read them to show that.
//!
//! [`jit`]: https://docs.rs/anvil-ad/latest/anvil/fn.jit.html
//!
//! ```
//! use anvil_core::stats;
//! let before = stats::snapshot();
//! // ... calls ...
//! let after = stats::snapshot();
//! assert_eq!(after.since(&before).traces, 0);
//! ```

use std::cell::Cell;

/// How many times each step ran on this thread (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Functions traced into graphs (a user function, or a transformed one
    /// at its top level).
    pub traces: u64,
    /// Graph-to-graph transforms applied (vmap, jvp, transpose).
    pub transforms: u64,
    /// Graphs optimised by the compile pipeline.
    pub optimizations: u64,
    /// Plans built by the compile pipeline for a function (not counting
    /// the one-node plans constant folding evaluates with).
    pub plans: u64,
}

impl Stats {
    /// The counts between `earlier` and `self`.
    pub fn since(&self, earlier: &Stats) -> Stats {
        Stats {
            traces: self.traces.saturating_sub(earlier.traces),
            transforms: self.transforms.saturating_sub(earlier.transforms),
            optimizations: self.optimizations.saturating_sub(earlier.optimizations),
            plans: self.plans.saturating_sub(earlier.plans),
        }
    }
}

thread_local! {
    static STATS: Cell<Stats> = const { Cell::new(Stats { traces: 0, transforms: 0, optimizations: 0, plans: 0 }) };
}

/// The counts so far on this thread.
pub fn snapshot() -> Stats {
    STATS.with(Cell::get)
}

fn bump(f: impl FnOnce(&mut Stats)) {
    STATS.with(|s| {
        let mut v = s.get();
        f(&mut v);
        s.set(v);
    });
}

/// Counts a trace (called by the tracing entry points).
pub fn count_trace() {
    bump(|s| s.traces += 1);
}

/// Counts a graph transform (called by the transforms).
pub fn count_transform() {
    bump(|s| s.transforms += 1);
}

/// Counts an optimisation of a graph (called by the compile pipeline).
pub fn count_optimization() {
    bump(|s| s.optimizations += 1);
}

/// Counts a plan built for a function (called by the compile pipeline).
pub fn count_plan() {
    bump(|s| s.plans += 1);
}
