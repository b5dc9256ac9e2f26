//! The per-call path of a cached plan: a tiny `jacfwd` (the W7 workload of
//! the benchmarks) costs a bounded number of heap allocations per call, not
//! one per shape, stride list or scratch block. Counted on the calling
//! thread by a counting allocator (this binary only).

use anvil::prelude::*;
#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::allocations_of;

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
