//! The per-call path of a cached plan: a tiny `jacfwd` (the W7 workload of
//! the benchmarks) costs a bounded number of heap allocations per call, not
//! one per shape, stride list or scratch block. Counted on the calling
//! thread by a counting allocator (this binary only).

use anvil::prelude::*;
#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::allocations_of;

/// Allocations of one cached call of `f` on `x` (after two warm-up calls),
/// with the result checked against the first call's.
fn per_call<R: PartialEq + std::fmt::Debug>(f: impl Fn() -> R) -> usize {
    let first = f(); // traces and compiles
    let _ = f(); // the thread's spare vectors are now in place
    let mut again = None;
    let n = allocations_of(|| again = Some(f()));
    assert_eq!(again.unwrap(), first);
    n
}

#[test]
fn a_cached_tiny_jacobian_call_allocates_only_its_result() {
    let j = jit(jacfwd(|x: &Var| x.sin() * x.flip(&[0])));
    let x = Tensor::from_vec(vec![0.1, 0.2, 0.3], &[3]).unwrap();
    let n = per_call(|| j.eval(&x).unwrap());
    // The result's buffer and its `Arc`: the argument list, the output
    // list and the fused kernel's operand list are reused or on the stack.
    // 17 when this was first written, 15 in session 12, 5 before the
    // argument and output vectors were kept per thread (session 13).
    assert!(n <= 2, "{n} allocations for one cached call");
    assert!(n > 0, "the counter does not count");
}

#[test]
fn a_cached_call_of_several_arguments_and_results_allocates_only_its_results() {
    // Two arguments, a tuple of two results, a fused step of more than
    // three operands.
    let f = jit(|x: &Var, y: &Var| (x.sin() * y + x.flip(&[0]) * y.cos(), (x * y).exp()));
    let x = Tensor::from_vec(vec![0.1, 0.2, 0.3], &[3]).unwrap();
    let y = Tensor::from_vec(vec![1.0, -2.0, 0.5], &[3]).unwrap();
    let n = per_call(|| f.eval((&x, &y)).unwrap());
    // Two per result (5 while the tuple's structure was built per call).
    assert!(n <= 4, "{n} allocations for one cached call with two results");
}

#[test]
fn kept_call_vectors_hold_no_tensor_alive_and_threads_get_their_own() {
    let f = jit(|x: &Var| x.sin() * 2.0);
    let x = Tensor::from_vec(vec![0.1, 0.2, 0.3], &[3]).unwrap();
    let expected = f.eval(&x).unwrap();
    // Neither the argument nor the result is still referenced by the
    // vectors the thread keeps for its next call.
    assert_eq!(x.storage().ref_count(), 1);
    assert_eq!(expected.storage().ref_count(), 1);
    // A call refused (wrong shape) leaves them empty too.
    assert!(f.eval(Tensor::zeros(&[2, 2]).unwrap()).is_ok());
    assert!(f.eval((&x, &x)).is_err());
    assert_eq!(x.storage().ref_count(), 1);
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                for _ in 0..50 {
                    assert_eq!(f.eval(&x).unwrap(), expected);
                }
            });
        }
    });
    assert_eq!(x.storage().ref_count(), 1);
}
