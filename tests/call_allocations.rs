//! The per-call path of a cached plan: a tiny `jacfwd` (the W7 workload of
//! the benchmarks) costs a bounded number of heap allocations per call, not
//! one per shape, stride list or scratch block. Counted on the calling
//! thread by a counting allocator (this binary only).

use anvil::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    // `try_with`: the thread-local may already be gone while a thread exits.
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; counting touches only a const-initialised thread-local `Cell`,
// which does not allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded as is.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn allocations_of(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

#[test]
fn a_cached_tiny_jacobian_call_allocates_a_bounded_number_of_times() {
    let j = jit(jacfwd(|x: &Var| x.sin() * x.flip(&[0])));
    let x = Tensor::from_vec(vec![0.1, 0.2, 0.3], &[3]).unwrap();
    let first = j.eval(&x).unwrap(); // traces and compiles
    let n = allocations_of(|| {
        let again = j.eval(&x).unwrap();
        assert_eq!(again, first);
    });
    // 17 when this was written (two per kernel output, the slot table, the
    // argument and output lists); 57 before the per-call work; 20 once the
    // identity seed became a generator recomputed (with a slice of it) by
    // every call; 15 since plans compute argument-free small values once.
    assert!(n <= 16, "{n} allocations for one cached call");
    assert!(n > 0, "the counter does not count");
}
