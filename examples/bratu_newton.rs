//! Sparse Newton on the 2-D Bratu problem: find `u` on an `N × N` grid of
//! the unit square with `Δu + λ e^u = 0` and `u = 0` on the boundary
//! (5-point Laplacian, `h = 1/(N+1)`, `N²` unknowns).
//!
//! The Jacobian comes from `sparse_jacfwd`: detection finds the 5-point
//! pattern, coloring needs 5 colors whatever `N`, so a Jacobian costs 5
//! JVPs and stays `O(nnz)`. It is handed to faer without copying
//! (`as_faer`), and solved by faer's sparse LU: the symbolic analysis (the
//! fill-reducing ordering and the factors' structure) is computed once,
//! on the first step, and reused by every later step, which only
//! refactors the values. The LU factors of a 2-D grid fill in
//! superlinearly; their memory is measured here by a counting allocator.
//!
//! Run: `cargo run --release --example bratu_newton [N] [λ]` (default
//! `N = 200`, `λ = 6`: 40,000 unknowns, about a second;
//! `N = 1000` is 10⁶ unknowns).

#![deny(warnings)]
use anvil::prelude::*;
use anvil::sparse::sparse_jacfwd;
use faer::linalg::solvers::Solve;
use faer::sparse::linalg::solvers::{Lu, SymbolicLu};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

/// Counts the bytes allocated: live now, and the peak since a reset.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Relaxed) + layout.size();
            PEAK.fetch_max(now, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The residual `F(u) = Δ_h u + λ e^u` on the grid `u` (`N × N`).
fn bratu(u: &Var, lam: f64) -> Var {
    let n = u.shape()[0] as i64;
    let up = u.pad(&[(1, 1), (1, 1)], 0.0);
    let shifted = |di: i64, dj: i64| {
        up.slice_axis(0, Some(1 + di), Some(n + 1 + di), 1).slice_axis(
            1,
            Some(1 + dj),
            Some(n + 1 + dj),
            1,
        )
    };
    let laplacian = (shifted(-1, 0) + shifted(1, 0) + shifted(0, -1) + shifted(0, 1) - u * 4.0)
        * ((n + 1) as f64).powi(2);
    laplacian + u.exp() * lam
}

fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |m, x| m.max(x.abs()))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(Ok(200), |s| s.parse())?;
    let lam: f64 = args.next().map_or(Ok(6.0), |s| s.parse())?;
    println!("2-D Bratu, N = {n} ({} unknowns), λ = {lam}", n * n);

    let residual = move |u: &Var| bratu(u, lam);
    let f = jit(residual);
    let jac = sparse_jacfwd(residual);
    let mut u = Tensor::zeros(&[n, n]).unwrap();

    let t = Instant::now();
    let plan = jac.plan(&u)?;
    println!(
        "detection + coloring: {:.1} ms; Jacobian {} × {}, {} nonzeros, {} colors",
        t.elapsed().as_secs_f64() * 1e3,
        plan.pattern().nrows(),
        plan.pattern().ncols(),
        plan.pattern().nnz(),
        plan.num_colors()
    );

    let mut symbolic: Option<SymbolicLu<u32>> = None;
    // Stop at a relative 1e-10, or at the rounding floor of the residual:
    // its terms are of size (N+1)² |u|, each rounded to a few ulps.
    let r0 = max_abs(&f.eval(&u)?.to_f64_vec());
    let floor = 64.0 * f64::EPSILON * ((n + 1) as f64).powi(2);
    for step in 0..30 {
        let r = f.eval(&u)?.to_f64_vec();
        let norm = max_abs(&r);
        println!("step {step:2}: |F(u)|_inf = {norm:.3e}");
        if norm <= 1e-10 * r0 + floor {
            break;
        }
        let t = Instant::now();
        let j = jac.eval(&u)?;
        let t_jac = t.elapsed();
        let a = j.as_faer::<f64>()?;
        let t = Instant::now();
        let sym = match &symbolic {
            Some(s) => s.clone(),
            None => {
                let s = SymbolicLu::try_new(a.symbolic())?;
                println!(
                    "  symbolic analysis (once, reused by every step): {:.1} ms",
                    t.elapsed().as_secs_f64() * 1e3
                );
                symbolic = Some(s.clone());
                s
            }
        };
        let t = Instant::now();
        let before = LIVE.load(Relaxed);
        PEAK.store(before, Relaxed);
        let lu = Lu::try_new_with_symbolic(sym, a)?;
        let peak = PEAK.load(Relaxed).saturating_sub(before);
        let t_lu = t.elapsed();
        let mut rhs = faer::Mat::from_fn(r.len(), 1, |i, _| -r[i]);
        lu.solve_in_place(rhs.as_mut());
        // The factors' memory: what dropping them frees.
        let held = LIVE.load(Relaxed);
        drop(lu);
        let factor = held.saturating_sub(LIVE.load(Relaxed));
        let du: Vec<f64> = (0..r.len()).map(|i| rhs[(i, 0)]).collect();
        let next: Vec<f64> = u.to_f64_vec().iter().zip(&du).map(|(x, d)| x + d).collect();
        u = Tensor::from_vec(next, &[n, n])?;
        println!(
            "  Jacobian {:.1} ms ({:.1} MiB); LU {:.1} ms, L and U {:.1} MiB (peak {:.1} MiB while factoring)",
            t_jac.as_secs_f64() * 1e3,
            mib(j.nnz() * 8 + (j.nnz() + j.ncols() + 1) * 4),
            t_lu.as_secs_f64() * 1e3,
            mib(factor),
            mib(peak),
        );
    }
    let mid = u.to_f64_vec()[(n / 2) * n + n / 2];
    println!("u at the centre: {mid:.6}; max u: {:.6}", max_abs(&u.to_f64_vec()));
    Ok(())
}
