//! Repeated calls of a cached plan take their large buffers (outputs,
//! intermediates, kernels' scratch) from the plan's pool instead of the
//! allocator: a fresh multi-page buffer costs a page fault per 4 KiB on
//! every call (issue 22, item 3). Counted on the calling thread by a
//! counting allocator that sees only allocations of at least 128 KiB
//! (this binary only): from that size on the system allocator maps fresh
//! pages for each allocation, so each one would fault every call. Smaller
//! per-task blocks (a fused kernel's slots, about 20 KiB) are served from
//! the allocator's free lists without faults and are not counted.

use anvil::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// glibc's default `mmap` threshold.
const LARGE: usize = 128 * 1024;

struct Counting;

thread_local! {
    static LARGE_ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count(size: usize) {
    if size >= LARGE {
        // `try_with`: the thread-local may already be gone while a thread exits.
        let _ = LARGE_ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; counting touches only a const-initialised thread-local `Cell`,
// which does not allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: forwarded as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: forwarded as is.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
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

fn large_allocations_of(f: impl FnOnce()) -> usize {
    let before = LARGE_ALLOCATIONS.with(Cell::get);
    f();
    LARGE_ALLOCATIONS.with(Cell::get) - before
}

/// 128 × 128 f64 is 128 KiB: the matrices are large, the vectors are not.
const N: usize = 128;

fn matrix() -> Tensor {
    let data = (0..N * N)
        .map(|k| {
            let (i, j) = (k / N, k % N);
            if i == j {
                4.0
            } else {
                ((i * 7 + j * 3) as f64 * 0.37).sin() / N as f64
            }
        })
        .collect();
    Tensor::from_vec(data, &[N, N]).unwrap()
}

/// Calls `f` until its plan is warm, then counts the large allocations of
/// one more call, checking it gives the same result.
fn steady_state_large_allocations(f: impl Fn() -> Vec<Tensor>) -> usize {
    let first = f();
    for _ in 0..2 {
        assert_eq!(f(), first);
    }
    large_allocations_of(|| assert_eq!(f(), first))
}

#[test]
fn repeated_solves_take_no_fresh_large_buffers() {
    // solve → lu + lu_solve: the factor (an intermediate) and the LU's
    // column-major scratch come from the pool.
    let (a, b) = (matrix(), Tensor::linspace(-1.0, 1.0, N).unwrap());
    let f = jit(|a: &Var, b: &Var| a.solve(b));
    let n = steady_state_large_allocations(|| vec![f.eval((&a, &b)).unwrap()]);
    assert_eq!(n, 0, "{n} fresh large buffers per cached solve call");
    // Several right-hand sides: the solution itself is large.
    let bm = Tensor::from_vec((0..N * N).map(|k| (k as f64 * 0.1).cos()).collect(), &[N, N]);
    let bm = bm.unwrap();
    let n = steady_state_large_allocations(|| vec![f.eval((&a, &bm)).unwrap()]);
    assert_eq!(n, 0, "{n} fresh large buffers per cached matrix solve call");
}

#[test]
fn repeated_newton_steps_take_no_fresh_large_buffers() {
    // A Newton step with a Jacobian and a solve (the W8 benchmark's shape),
    // called from a Rust loop and as a fori_loop inside one plan.
    let f = |x: &Var, m: &Var| x + m.matmul(x).tanh() * 0.1 - 1.0;
    let step = move |x: &Var, m: &Var| -> anvil::Result<Var> {
        let jac = jacfwd(f).apply((x, m))?;
        Ok(x - jac.solve(&f(x, m)))
    };
    let (m, x0) = (matrix(), Tensor::zeros(&[N]).unwrap());
    let stepper = jit(step);
    let n = steady_state_large_allocations(|| {
        let mut x = x0.clone();
        for _ in 0..3 {
            x = stepper.eval((&x, &m)).unwrap();
        }
        vec![x]
    });
    assert_eq!(n, 0, "{n} fresh large buffers per 3 cached Newton steps");
    let looped = jit(move |x0: &Var, m: &Var| fori_loop(0, 3, |_: &Var, x: &Var| step(x, m), x0));
    let n = steady_state_large_allocations(|| vec![looped.eval((&x0, &m)).unwrap()]);
    assert_eq!(n, 0, "{n} fresh large buffers per cached fori_loop of Newton steps");
}

#[test]
fn repeated_batched_while_loops_take_no_fresh_large_buffers() {
    // vmap of a while_loop with a batched predicate runs by lane groups; its
    // carries' results (20,000 f64 each: 160 KiB) come from the pool.
    let root = |a: &Var| -> anvil::Result<Var> {
        let (x, _) = while_loop(
            |(x, it): &(Var, Var)| {
                let go = (x * x - a).abs().ge(&x.full_like(1e-12));
                go.select(&it.lt(&it.full_like(30.0)), &go)
            },
            |(x, it): &(Var, Var)| (x - &((x * x - a) / (x * 2.0)), it + 1.0),
            (&a.ones_like(), &a.zeros_like()),
        )?;
        Ok(x)
    };
    let a = Tensor::linspace(0.5, 4.0, 20_000).unwrap();
    let f = jit(vmap(root));
    let n = steady_state_large_allocations(|| vec![f.eval(&a).unwrap()]);
    assert_eq!(n, 0, "{n} fresh large buffers per cached batched while_loop call");
    let x = f.eval(&a).unwrap().to_f64_vec();
    let want = a.to_f64_vec();
    assert!(x.iter().zip(&want).all(|(x, a)| (x * x - a).abs() < 1e-9));
}

#[test]
fn repeated_factorisations_take_no_fresh_large_buffers() {
    let a = matrix();
    let spd = jit(|a: &Var| a.matmul(&a.transpose()) + 1.0);
    let s = spd.eval(&a).unwrap();
    type Program = Box<dyn Fn() -> Vec<Tensor>>;
    let programs: Vec<(&str, Program)> = vec![
        ("inv", {
            let f = jit(|a: &Var| a.inv());
            let a = a.clone();
            Box::new(move || vec![f.eval(&a).unwrap()])
        }),
        ("det", {
            let f = jit(|a: &Var| a.det());
            let a = a.clone();
            Box::new(move || vec![f.eval(&a).unwrap()])
        }),
        ("cholesky", {
            let f = jit(|a: &Var| a.cholesky());
            let s = s.clone();
            Box::new(move || vec![f.eval(&s).unwrap()])
        }),
    ];
    for (name, f) in programs {
        let n = steady_state_large_allocations(f);
        assert_eq!(n, 0, "{n} fresh large buffers per cached {name} call");
    }
}

/// Minor page faults of the calling thread so far (`minflt`, field 10 of
/// `/proc/thread-self/stat`), or `None` where that file does not exist.
fn thread_minor_faults() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(7)?.parse().ok()
}

#[test]
fn dropped_results_come_back_without_page_faults() {
    // Per-example gradients (`vmap(grad)`, W5's shape): the result is a
    // large fresh array on every call unless the buffers of results the
    // caller dropped are reused. On one thread, so every page the call
    // touches is faulted (or not) by this thread.
    let Some(_) = thread_minor_faults() else { return };
    let (batch, din, hidden) = (64, 32, 128);
    let loss = |w: &Var, x: &Var, y: &Var| (w.matmul(x).tanh().sum_all() - y).square();
    let f = jit(vmap(grad(loss)).in_axes([None, Some(0), Some(0)]));
    let w = Tensor::from_vec(
        (0..hidden * din).map(|i| (i as f64 * 0.3).sin()).collect(),
        &[hidden, din],
    );
    let x =
        Tensor::from_vec((0..batch * din).map(|i| (i as f64 * 0.7).cos()).collect(), &[batch, din]);
    let (w, x, y) = (w.unwrap(), x.unwrap(), Tensor::zeros(&[batch]).unwrap());
    let one = anvil::Parallelism::default().threads(1);
    let call = || f.eval_with((&w, &x, &y), &one).unwrap();
    let pages = (batch * hidden * din * 8 / 4096) as u64; // 512 pages
    let first = call();
    assert_eq!(first.shape(), [batch, hidden, din]);
    drop(first);
    call();
    // Results dropped after each call: their buffers come back.
    let before = thread_minor_faults().unwrap();
    for _ in 0..10 {
        let r = call();
        drop(r);
    }
    let reused = thread_minor_faults().unwrap() - before;
    assert!(reused < pages, "{reused} minor faults in 10 calls (a fresh result: {pages} each)");
    // The control: results kept alive cannot be reused, so each call maps
    // a fresh result (this is what the test above would see without the pool).
    let before = thread_minor_faults().unwrap();
    let kept: Vec<Tensor> = (0..10).map(|_| call()).collect();
    let fresh = thread_minor_faults().unwrap() - before;
    assert!(
        fresh >= 10 * pages * 9 / 10,
        "{fresh} minor faults for 10 kept results of {pages} pages"
    );
    drop(kept);
    // Once the kept results are dropped, calls reuse buffers again. (That
    // the pool then keeps what one call asks for, not the 10 results that
    // came back, is `the_pool_keeps_what_a_call_asks_for_and_no_more` in
    // backends/cpu/src/plan.rs.)
    for _ in 0..3 {
        drop(call());
    }
    let before = thread_minor_faults().unwrap();
    for _ in 0..10 {
        drop(call());
    }
    let after = thread_minor_faults().unwrap() - before;
    assert!(after < pages, "{after} minor faults in 10 calls after the kept results were dropped");
}
