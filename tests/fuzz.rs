//! The project's own fuzz suite (issue 18): malformed inputs to every
//! registered op, and random well-formed programs checked against
//! independent computations, each case in a child process so that a panic,
//! an abort or a hang is recorded and the run goes on.
//!
//! - **Malformed cases** start from the conformance sample of every op (the
//!   standard ones and the example plugin's) and break one thing: a
//!   dimension (grown, zero, huge), the rank, a dtype, the values (NaN, ±inf,
//!   extreme integers), the number of operands. The op then runs under
//!   `jit`, `vmap`, `grad`, `jacfwd` and `vmap(grad)`. Acceptable: an `Err`,
//!   or a result; when both the plain call and `vmap` succeed, `vmap` must
//!   equal the loop over the batch (and must not succeed where the loop
//!   fails).
//! - **Random programs** chain 3–9 ops of the public API over one or two
//!   inputs (size-0 axes included) and check `vmap` against the loop,
//!   `jacfwd` against `jacrev`, `grad` against `jvp` (the dot-product
//!   identity), `vmap(grad)` against the loop of `grad`, and, for smooth
//!   programs, `jvp` against central finite differences.
//! - **Wild programs** (one program in three) draw axes, shapes, slice
//!   bounds, permutations, pad widths and indices without regard to the
//!   shapes: each step must be a result or an `Err`; `vmap` must equal the
//!   loop where both succeed, and must refuse batches of unequal sizes.
//!
//! The bounded run is `cargo test --test fuzz` (at most about a minute).
//! A long run, reporting counts per op and verdict:
//!
//! ```text
//! ANVIL_FUZZ_MALFORMED=10000 ANVIL_FUZZ_PROGRAMS=1000 \
//!     cargo test --release --test fuzz -- --nocapture fuzz_suite
//! ```

use anvil::prelude::*;
use anvil_special_cpu as _;
use anvil_testing::{standard_samples, InputKind, OpSample, TestRng};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

// ------------------------------------------------------------------ verdicts

/// What one case did. Panics, aborts and hangs are failures; so is a wrong
/// result.
#[derive(Clone, Debug, PartialEq)]
enum Verdict {
    Ok,
    Err(String),
    Wrong(String),
    Panic(String),
}

impl Verdict {
    fn tag(&self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Err(_) => "err",
            Verdict::Wrong(_) => "WRONG",
            Verdict::Panic(_) => "PANIC",
        }
    }
}

/// A case: the op (or "program") it exercises, and how to run it.
struct Case {
    op: String,
    what: String,
    run: Box<dyn Fn() -> Verdict>,
}

// ----------------------------------------------------------- comparing values

/// Equal up to `tol` (relative and absolute), NaN equal to NaN, infinities
/// equal to themselves.
fn close(a: &Tensor, b: &Tensor, tol: f64) -> Result<(), String> {
    if a.shape() != b.shape() || a.dtype() != b.dtype() {
        return Err(format!("{} vs {}", a.ty(), b.ty()));
    }
    for (i, (x, y)) in a.to_f64_vec().iter().zip(b.to_f64_vec()).enumerate() {
        let same = (x.is_nan() && y.is_nan())
            || x == &y
            || (x - y).abs() <= tol * (1.0 + x.abs().max(y.abs()));
        if !same {
            return Err(format!("element {i}: {x} vs {y}"));
        }
    }
    Ok(())
}

fn all_close(a: &[Tensor], b: &[Tensor], tol: f64) -> Result<(), String> {
    if a.len() != b.len() {
        return Err(format!("{} vs {} results", a.len(), b.len()));
    }
    a.iter()
        .zip(b)
        .enumerate()
        .try_for_each(|(k, (x, y))| close(x, y, tol).map_err(|e| format!("result {k}: {e}")))
}

/// A batched computation against the loop of the plain one over the batch
/// (each element's arguments stacked along axis 0).
fn batched_vs_loop(
    single: impl Fn(Vec<Tensor>) -> anvil::Result<Vec<Tensor>>,
    batched: impl FnOnce(Vec<Tensor>) -> anvil::Result<Vec<Tensor>>,
    batch: &[Vec<Tensor>],
    tol: f64,
) -> Verdict {
    let loop_results: Vec<anvil::Result<Vec<Tensor>>> =
        batch.iter().map(|args| single(args.clone())).collect();
    let Some(first) = batch.first() else { return Verdict::Ok };
    let stacked: anvil::Result<Vec<Tensor>> = (0..first.len())
        .map(|i| Tensor::stack(&batch.iter().map(|a| a[i].clone()).collect::<Vec<_>>(), 0))
        .collect();
    let stacked = match stacked {
        Ok(s) => s,
        Err(e) => return Verdict::Err(e.to_string()),
    };
    let loop_ok: Option<Vec<Vec<Tensor>>> = loop_results.into_iter().map(Result::ok).collect();
    match (batched(stacked), loop_ok) {
        (Err(e), _) => Verdict::Err(e.to_string()),
        (Ok(_), None) => Verdict::Wrong("the batched call succeeds where the loop fails".into()),
        (Ok(got), Some(each)) => {
            for (o, g) in got.iter().enumerate() {
                let parts: Vec<Tensor> = each.iter().map(|r| r[o].clone()).collect();
                let want = match Tensor::stack(&parts, 0) {
                    Ok(w) => w,
                    Err(e) => return Verdict::Err(e.to_string()),
                };
                if let Err(e) = close(g, &want, tol) {
                    return Verdict::Wrong(format!("batched vs loop, output {o}: {e}"));
                }
            }
            Verdict::Ok
        }
    }
}

fn verdict<T>(r: anvil::Result<T>) -> Verdict {
    match r {
        Ok(_) => Verdict::Ok,
        Err(e) => Verdict::Err(e.to_string()),
    }
}

// ------------------------------------------------------------ malformed cases

/// Every sample: the standard ones and the example plugin's.
fn samples() -> Vec<OpSample> {
    use anvil_special::{BesselJ0, BesselJ1, CumSum, SinCos};
    let u = InputKind::Uniform { lo: -3.0, hi: 3.0 };
    let mut s = standard_samples();
    s.push(OpSample::new(BesselJ0).input(u.clone(), &[2, 3]));
    s.push(OpSample::new(BesselJ1).input(u.clone(), &[3]));
    s.push(OpSample::new(CumSum { axis: 1, reverse: false }).input(u.clone(), &[2, 3]));
    s.push(OpSample::new(SinCos).input(u, &[2, 3]));
    s
}

/// One broken thing.
#[derive(Clone, Copy, Debug)]
enum Mutation {
    Grow,
    Zero,
    Huge,
    RankUp,
    RankDown,
    DType(DType),
    Nan,
    Inf,
    ExtremeInt,
    DropOperand,
    ExtraOperand,
    /// No change: the sample itself (also runs every transform on it).
    None,
}

const MUTATIONS: [Mutation; 15] = [
    Mutation::Grow,
    Mutation::Zero,
    Mutation::Huge,
    Mutation::RankUp,
    Mutation::RankDown,
    Mutation::DType(DType::F64),
    Mutation::DType(DType::F32),
    Mutation::DType(DType::I64),
    Mutation::DType(DType::Bool),
    Mutation::Nan,
    Mutation::Inf,
    Mutation::ExtremeInt,
    Mutation::DropOperand,
    Mutation::ExtraOperand,
    Mutation::None,
];

const TRANSFORMS: [&str; 5] = ["jit", "vmap", "grad", "jacfwd", "vmap(grad)"];

/// Input `i` with `m` applied; a huge dimension is a broadcast inside the
/// trace (nothing that size is allocated by the test).
fn mutate(x: &Tensor, m: Mutation, rng: &mut TestRng) -> Option<(Tensor, Option<Vec<usize>>)> {
    let mut shape = x.shape().to_vec();
    let axis = |rng: &mut TestRng, n: usize| (rng.next_u64() % n.max(1) as u64) as usize;
    let fill = |shape: &[usize], v: f64| Tensor::full(shape, v).map(|t| t.cast(x.dtype()));
    Some(match m {
        Mutation::Grow => {
            if shape.is_empty() {
                shape.push(2);
            } else {
                let a = axis(rng, shape.len());
                shape[a] += 1;
            }
            (fill(&shape, 0.5).ok()?, None)
        }
        Mutation::Zero => {
            if shape.is_empty() {
                shape.push(0);
            } else {
                let a = axis(rng, shape.len());
                shape[a] = 0;
            }
            (Tensor::zeros_of(&shape, x.dtype()).ok()?, None)
        }
        Mutation::Huge => {
            let mut big = shape.clone();
            // At least 2^36 elements (64 GiB even of bools): more than any
            // memory budget here, so a run is refused, never attempted (2^30
            // f64s fit the default budget and took minutes in a debug build).
            big.insert(0, 1 << (36 + rng.next_u64() % 28));
            (x.clone(), Some(big))
        }
        Mutation::RankUp => (Tensor::stack(&[x.clone(), x.clone()], 0).ok()?, None),
        Mutation::RankDown => {
            if shape.is_empty() {
                return None;
            }
            (x.select_axis(0, 0).ok()?, None)
        }
        Mutation::DType(d) => {
            if d == x.dtype() {
                return None;
            }
            (x.cast(d), None)
        }
        Mutation::Nan | Mutation::Inf => {
            if !x.dtype().is_float() {
                return None;
            }
            let v = if matches!(m, Mutation::Nan) { f64::NAN } else { f64::INFINITY };
            let mut data = x.to_f64_vec();
            for (k, d) in data.iter_mut().enumerate() {
                if k % 2 == 0 {
                    *d = if k % 4 == 0 { v } else { -v };
                }
            }
            (Tensor::from_vec(data, x.shape()).ok()?.cast(x.dtype()), None)
        }
        Mutation::ExtremeInt => {
            if x.dtype() != DType::I64 {
                return None;
            }
            let extremes = [i64::MIN, i64::MAX, -1, 1 << 40];
            let data: Vec<i64> =
                (0..x.numel()).map(|k| extremes[(k + rng.next_u64() as usize) % 4]).collect();
            (Tensor::from_vec(data, x.shape()).ok()?, None)
        }
        Mutation::DropOperand | Mutation::ExtraOperand | Mutation::None => (x.clone(), None),
    })
}

/// Malformed case `idx`: a sample, a mutation of one of its inputs, a transform.
fn malformed(samples: &[OpSample], idx: usize) -> Option<Case> {
    let sample = &samples[idx % samples.len()];
    let mut rng = TestRng::new(idx as u64 ^ 0x5eed);
    let m = MUTATIONS[(idx / samples.len()) % MUTATIONS.len()];
    let transform = TRANSFORMS[(idx / (samples.len() * MUTATIONS.len())) % TRANSFORMS.len()];
    let mut inputs = sample.inputs.clone();
    let mut broadcast: Vec<Option<Vec<usize>>> = vec![None; inputs.len()];
    match m {
        Mutation::DropOperand => {
            inputs.pop()?;
            broadcast.pop();
        }
        Mutation::ExtraOperand => {
            inputs.push(inputs.last().cloned().unwrap_or(Tensor::scalar(1.0)));
            broadcast.push(None);
        }
        _ if inputs.is_empty() => return None,
        _ => {
            let i = (rng.next_u64() % inputs.len() as u64) as usize;
            let (x, b) = mutate(&inputs[i], m, &mut rng)?;
            inputs[i] = x;
            broadcast[i] = b;
        }
    }
    let op = sample.op.clone();
    let n = sample.output_types().map_or(1, |t| t.len());
    let f = move |xs: &[Var]| {
        let xs: Vec<Var> = xs
            .iter()
            .zip(&broadcast)
            .map(|(x, b)| b.as_ref().map_or_else(|| x.clone(), |s| x.broadcast_to(s)))
            .collect();
        Var::apply_op_n(op.clone(), &xs.iter().collect::<Vec<_>>(), n)
    };
    let what = format!("{} with {m:?} under {transform}", sample.describe());
    let tol = 1e-9f64.max(sample.rtol);
    let h = {
        let f = f.clone();
        move |xs: &[Var]| f(xs)[0].sum_all()
    };
    let run: Box<dyn Fn() -> Verdict> = match transform {
        "jit" => Box::new(move || verdict(jit(f.clone()).eval(inputs.clone()))),
        "vmap" => Box::new(move || {
            let single = |a: Vec<Tensor>| jit(f.clone()).eval(a);
            let batched = |a: Vec<Tensor>| vmap(f.clone()).eval(a);
            batched_vs_loop(single, batched, &[inputs.clone(), inputs.clone()], tol)
        }),
        "grad" => Box::new(move || verdict(grad(h.clone()).eval(inputs.clone()))),
        "jacfwd" => Box::new(move || {
            let f = f.clone();
            verdict(jacfwd(move |xs: &[Var]| vec![f(xs)[0].clone()]).eval(inputs.clone()))
        }),
        _ => Box::new(move || {
            let single = |a: Vec<Tensor>| grad(h.clone()).eval(a).map(|g| vec![g]);
            let batched = |a: Vec<Tensor>| vmap(grad(h.clone())).eval(a).map(|g| vec![g]);
            batched_vs_loop(single, batched, &[inputs.clone(), inputs.clone()], tol)
        }),
    };
    Some(Case { op: sample.op.name().to_string(), what, run })
}

// ------------------------------------------------------------ random programs

/// A random well-formed program over `xs`, the same for the same `seed`
/// and argument shapes (so the traces of `jit`, `vmap` and the derivatives
/// build one program). `smooth` leaves out kinks (abs, max, select).
fn program(xs: &[Var], seed: u64, smooth: bool) -> Var {
    let mut rng = TestRng::new(seed);
    let mut vals: Vec<Var> = xs.to_vec();
    let steps = 3 + (rng.next_u64() % 7) as usize;
    let pick = |rng: &mut TestRng, n: usize| (rng.next_u64() % n as u64) as usize;
    for _ in 0..steps {
        let x = vals[pick(&mut rng, vals.len())].clone();
        let y = vals[pick(&mut rng, vals.len())].clone();
        let r = x.rank();
        let axis = |rng: &mut TestRng| pick(rng, r.max(1)) as i64;
        // `y` where it broadcasts with `x`, else its sum (a scalar).
        let partner = |y: &Var| {
            let ok = y.rank() <= x.rank()
                && y.shape()
                    .iter()
                    .rev()
                    .zip(x.shape().iter().rev())
                    .all(|(a, b)| a == b || *a == 1);
            if ok {
                y.clone()
            } else {
                y.sum_all()
            }
        };
        let choice = pick(&mut rng, if smooth { 20 } else { 24 });
        let v = match choice {
            0 => x.sin(),
            1 => x.tanh(),
            2 => x.tanh().exp(),
            3 => (x.square() + 1.0).log(),
            4 => (x.square() + 1.0).sqrt(),
            5 => x.sigmoid(),
            6 => &x * 1.5 - 0.25,
            7 => &x + &partner(&y),
            8 => &x * &partner(&y),
            9 => &x / &(partner(&y).square() + 1.0),
            10 if r > 0 => x.sum(&[axis(&mut rng)]),
            11 if r > 0 => x.sum_keepdims(&[axis(&mut rng)]),
            12 if r > 0 => x.mean_axes(&[axis(&mut rng)], false),
            13 if r > 0 => x.logsumexp(&[axis(&mut rng)], false),
            14 if r > 0 => x.softmax(axis(&mut rng)),
            15 if r >= 2 => x.transpose(),
            16 => x.reshape(&[-1]),
            17 => x.unsqueeze(0).broadcast_to(&[&[2][..], x.shape()].concat()),
            18 if r > 0 => anvil::concatenate(&[&x, &x.cos()], axis(&mut rng)),
            19 if r == 2 && x.shape()[1] > 0 => x.matmul(&x.transpose()),
            19 if r == 1 => x.pad(&[(1, 2)], 0.5),
            20 => x.abs(),
            21 => x.relu(),
            22 => x.maximum(&partner(&y)),
            23 => x.gt(&partner(&y)).select(&x, &(&partner(&y) * 2.0)),
            _ if r > 0 => {
                let a = axis(&mut rng);
                let n = x.shape()[a as usize] as i64;
                x.slice_axis(a, Some(n / 2), None, 1)
            }
            _ => x.cos(),
        };
        vals.push(v);
    }
    vals.pop().unwrap_or_else(|| xs[0].clone())
}

/// A random program whose op arguments are drawn without regard to the
/// shapes (axes past the rank or negative, reshapes to other sizes, bad
/// permutations, slices with any bounds and steps, indices out of bounds,
/// partners of any shape): most steps are errors, which must be `Err`s.
fn wild_program(xs: &[Var], seed: u64) -> Var {
    let mut rng = TestRng::new(seed);
    let mut vals: Vec<Var> = xs.to_vec();
    let int = |rng: &mut TestRng, lo: i64, hi: i64| rng.int(lo, hi);
    for _ in 0..(2 + rng.next_u64() % 6) {
        let x = vals[(rng.next_u64() % vals.len() as u64) as usize].clone();
        let y = vals[(rng.next_u64() % vals.len() as u64) as usize].clone();
        let r = x.rank() as i64;
        // Two steps in three take a valid axis, so programs get past their
        // first step.
        let axis = if rng.next_u64() % 3 == 0 || r == 0 {
            int(&mut rng, -r - 2, r + 2)
        } else {
            int(&mut rng, -r, r - 1)
        };
        let dims = |rng: &mut TestRng| -> Vec<usize> {
            (0..rng.int(0, 4)).map(|_| rng.int(0, 5) as usize).collect()
        };
        let v = match rng.next_u64() % 16 {
            0 => x.sum(&[axis]),
            1 => x.max(&[axis, int(&mut rng, -r - 1, r + 1)], true),
            2 => x.softmax(axis),
            3 if rng.next_u64() % 2 == 0 => x.reshape(&[-1]),
            3 => x.reshape(&dims(&mut rng).iter().map(|&d| d as i64 - 1).collect::<Vec<_>>()),
            4 => x.permute(&(0..r).map(|_| int(&mut rng, -1, r + 1)).collect::<Vec<_>>()),
            5 => {
                let (a, b, st) = (int(&mut rng, -5, 5), int(&mut rng, -5, 5), int(&mut rng, -2, 3));
                x.slice_axis(axis, Some(a), Some(b), st)
            }
            6 => x.pad(&dims(&mut rng).iter().map(|&d| (d, d % 3)).collect::<Vec<_>>(), 1.0),
            7 => anvil::concatenate(&[&x, &y], axis),
            8 => stack(&[&x, &y], axis),
            9 => x.broadcast_to(&dims(&mut rng)),
            10 => x.matmul(&y),
            11 => {
                let idx: Vec<i64> = (0..rng.int(0, 4)).map(|_| rng.int(-6, 6)).collect();
                let n = idx.len();
                x.take(&x.constant_like(Tensor::from_vec(idx, &[n]).unwrap()), axis)
            }
            12 => x.squeeze(&[axis]),
            13 => x.unsqueeze(axis),
            14 => &x * &y,
            _ => x.flip(&[axis]),
        };
        vals.push(v);
    }
    vals.pop().unwrap_or_else(|| xs[0].clone())
}

/// Wild program case `idx`: the plain call, `vmap` against the loop, `grad`
/// and `vmap` with batch sizes that disagree (which must be an error).
fn wild_case(idx: usize) -> Case {
    let mut rng = TestRng::new(idx as u64 ^ 0x3117d);
    let seed = rng.next_u64();
    let shapes: Vec<Vec<usize>> =
        (0..2).map(|_| (0..rng.int(0, 4)).map(|_| rng.int(0, 4) as usize).collect()).collect();
    let draw = move |k: u64| -> Vec<Tensor> {
        shapes
            .iter()
            .enumerate()
            .map(|(i, s)| anvil_testing::random_tensor(s, seed ^ (k * 31 + i as u64)))
            .collect()
    };
    let f = move |xs: &[Var]| vec![wild_program(xs, seed)];
    let h = move |xs: &[Var]| wild_program(xs, seed).sum_all();
    let check = ["jit", "vmap vs loop", "grad", "vmap of unequal batches"][idx % 4];
    let run: Box<dyn Fn() -> Verdict> = match check {
        "jit" => Box::new(move || verdict(jit(f).eval(draw(1)))),
        "vmap vs loop" => Box::new(move || {
            let single = |a: Vec<Tensor>| jit(f).eval(a);
            let batched = |a: Vec<Tensor>| vmap(f).eval(a);
            batched_vs_loop(single, batched, &[draw(1), draw(2)], 1e-12)
        }),
        "grad" => Box::new(move || verdict(grad(h).eval(draw(1)))),
        _ => Box::new(move || {
            let (a, b) = (draw(1), draw(2));
            let two = Tensor::stack(&[a[0].clone(), b[0].clone()], 0);
            let three = Tensor::stack(&[a[1].clone(), b[1].clone(), a[1].clone()], 0);
            let (Ok(two), Ok(three)) = (two, three) else { return Verdict::Err("stack".into()) };
            match vmap(f).eval(vec![two, three]) {
                Ok(_) => Verdict::Wrong("vmap accepted batch sizes 2 and 3".into()),
                Err(e) => Verdict::Err(e.to_string()),
            }
        }),
    };
    Case { op: "wild program".into(), what: format!("wild program {idx} ({check})"), run }
}

const PROGRAM_CHECKS: [&str; 5] = [
    "vmap vs loop",
    "jacfwd vs jacrev",
    "grad vs jacfwd",
    "vmap(grad) vs loop",
    "jvp vs finite differences",
];

/// Random program case `idx`.
fn program_case(idx: usize) -> Case {
    let mut rng = TestRng::new(idx as u64 ^ 0xfee1);
    let check = PROGRAM_CHECKS[idx % PROGRAM_CHECKS.len()];
    let smooth = check == "jvp vs finite differences" || rng.next_u64() % 2 == 0;
    let seed = rng.next_u64();
    let n_inputs = 1 + (rng.next_u64() % 2) as usize;
    let shape = |rng: &mut TestRng| -> Vec<usize> {
        let rank = (rng.next_u64() % 4) as usize;
        (0..rank)
            .map(|_| if rng.next_u64() % 12 == 0 { 0 } else { 1 + (rng.next_u64() % 3) as usize })
            .collect()
    };
    let shapes: Vec<Vec<usize>> = (0..n_inputs).map(|_| shape(&mut rng)).collect();
    let draw = move |k: u64| -> Vec<Tensor> {
        shapes
            .iter()
            .enumerate()
            .map(|(i, s)| anvil_testing::random_tensor(s, seed ^ (k * 31 + i as u64)))
            .collect()
    };
    let f = move |xs: &[Var]| vec![program(xs, seed, smooth)];
    let h = move |xs: &[Var]| program(xs, seed, smooth).sum_all();
    let tol = 1e-8;
    let run: Box<dyn Fn() -> Verdict> = match check {
        "vmap vs loop" => Box::new(move || {
            let single = |a: Vec<Tensor>| jit(f).eval(a);
            let batched = |a: Vec<Tensor>| vmap(f).eval(a);
            batched_vs_loop(single, batched, &[draw(1), draw(2), draw(3)], tol)
        }),
        "jacfwd vs jacrev" => Box::new(move || {
            let (a, b) = (jacfwd(f).eval(draw(1)), jacrev(f).eval(draw(1)));
            match (a, b) {
                (Ok(a), Ok(b)) => compare(&a, &b, tol),
                (Err(e), Err(_)) => Verdict::Err(e.to_string()),
                (a, b) => Verdict::Wrong(format!("jacfwd {:?} but jacrev {:?}", a.err(), b.err())),
            }
        }),
        "grad vs jacfwd" => Box::new(move || {
            let (a, b) = (grad(h).eval(draw(1)), jacfwd(h).eval(draw(1)));
            match (a, b) {
                (Ok(a), Ok(b)) => compare(&[a], &[b], tol),
                (Err(e), Err(_)) => Verdict::Err(e.to_string()),
                (a, b) => Verdict::Wrong(format!("grad {:?} but jacfwd {:?}", a.err(), b.err())),
            }
        }),
        "vmap(grad) vs loop" => Box::new(move || {
            let single = |a: Vec<Tensor>| grad(h).eval(a).map(|g| vec![g]);
            let batched = |a: Vec<Tensor>| vmap(grad(h)).eval(a).map(|g| vec![g]);
            batched_vs_loop(single, batched, &[draw(1), draw(2)], tol)
        }),
        _ => Box::new(move || finite_differences(h, draw(1))),
    };
    Case { op: "program".into(), what: format!("program {idx} ({check}, seed {seed})"), run }
}

fn compare(a: &[Tensor], b: &[Tensor], tol: f64) -> Verdict {
    match all_close(a, b, tol) {
        Ok(()) => Verdict::Ok,
        Err(e) => Verdict::Wrong(e),
    }
}

/// The gradient of a smooth scalar program against central differences.
fn finite_differences(h: impl Fn(&[Var]) -> Var + Clone + 'static, args: Vec<Tensor>) -> Verdict {
    let g = match grad(h.clone()).eval(args.clone()) {
        Ok(g) => g,
        Err(e) => return Verdict::Err(e.to_string()),
    };
    let Ok(value) = jit(h.clone()).eval(args.clone()) else {
        return Verdict::Err("the program fails".into());
    };
    let x0 = args[0].to_f64_vec();
    let eps = 1e-6;
    let at = |k: usize, d: f64| -> Option<f64> {
        let mut x = x0.clone();
        x[k] += d;
        let mut a = args.clone();
        a[0] = Tensor::from_vec(x, args[0].shape()).ok()?;
        jit(h.clone()).eval(a).ok()?.item().ok()
    };
    let scale = value.item().unwrap_or(1.0).abs().max(1.0);
    for (k, gk) in g.to_f64_vec().iter().enumerate().take(8) {
        let (Some(p), Some(m)) = (at(k, eps), at(k, -eps)) else {
            return Verdict::Err("a shifted evaluation fails".into());
        };
        let fd = (p - m) / (2.0 * eps);
        if !fd.is_finite() {
            continue;
        }
        if (fd - gk).abs() > 1e-5 * scale.max(gk.abs()) {
            return Verdict::Wrong(format!("d/dx[{k}]: grad {gk}, finite differences {fd}"));
        }
    }
    Verdict::Ok
}

// ------------------------------------------------------------------- harness

/// Case `idx` of a run with `n_malformed` malformed cases first.
fn case(samples: &[OpSample], n_malformed: usize, idx: usize) -> Option<Case> {
    if idx < n_malformed {
        malformed(samples, idx)
    } else if (idx - n_malformed) % 3 == 2 {
        Some(wild_case(idx - n_malformed))
    } else {
        Some(program_case(idx - n_malformed))
    }
}

/// In a child process: runs the cases `ANVIL_FUZZ_WORKER` names
/// (`n_malformed,file,first`: the indices listed in `file` from position
/// `first` on) and prints one line when each starts and one when it ends.
#[test]
#[ignore = "run by fuzz_suite in a child process"]
fn fuzz_worker() {
    let Ok(spec) = std::env::var("ANVIL_FUZZ_WORKER") else { return };
    let parts: Vec<&str> = spec.split(',').collect();
    let (Some(n), Some(file), Some(first)) = (parts.first(), parts.get(1), parts.get(2)) else {
        panic!("ANVIL_FUZZ_WORKER is n_malformed,file,first, not {spec}")
    };
    let n_malformed: usize = n.parse().expect("n_malformed");
    let first: usize = first.parse().expect("first");
    let listed = std::fs::read_to_string(file).expect("the index file");
    let all: Vec<usize> = listed.split_whitespace().filter_map(|s| s.parse().ok()).collect();
    let indices = &all[first.min(all.len())..];
    // Set ANVIL_FUZZ_BACKTRACE to see where a case panics.
    if std::env::var_os("ANVIL_FUZZ_BACKTRACE").is_none() {
        std::panic::set_hook(Box::new(|_| {}));
    }
    let samples = samples();
    for &idx in indices {
        println!("@@START {idx}");
        let Some(c) = case(&samples, n_malformed, idx) else {
            println!("@@DONE {idx}\tskip\tskip\t");
            continue;
        };
        let v = catch_unwind(AssertUnwindSafe(|| (c.run)())).unwrap_or_else(|p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Verdict::Panic(msg)
        });
        let detail = match &v {
            Verdict::Wrong(m) | Verdict::Panic(m) | Verdict::Err(m) => {
                format!("case {idx}, {}: {m}", c.what)
            }
            _ => String::new(),
        };
        println!("@@DONE {idx}\t{}\t{}\t{}", c.op, v.tag(), detail.replace(['\n', '\t'], " "));
    }
}

/// Runs `indices` in child processes; a case that aborts its process or
/// runs past `timeout` is recorded and the rest go on in a new child.
/// Returns (op, verdict, detail) per case.
fn run_children(
    n_malformed: usize,
    indices: &[usize],
    timeout: Duration,
    budget: Duration,
) -> Vec<(String, String, String)> {
    let exe = std::env::current_exe().expect("the test binary");
    let file = std::env::temp_dir().join(format!("anvil-fuzz-{}.txt", std::process::id()));
    let listed: Vec<String> = indices.iter().map(|i| i.to_string()).collect();
    std::fs::write(&file, listed.join(" ")).expect("the index file");
    let start = Instant::now();
    let mut out = Vec::new();
    let mut next = 0;
    while next < indices.len() && start.elapsed() < budget {
        let spec = format!("{n_malformed},{},{next}", file.display());
        let mut child = Command::new(&exe)
            .args(["fuzz_worker", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
            .env("ANVIL_FUZZ_WORKER", spec)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("a child process");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut current: Option<usize> = None;
        loop {
            if start.elapsed() >= budget {
                let _ = child.kill();
                break;
            }
            match rx.recv_timeout(timeout) {
                Ok(line) => {
                    if let Some(i) = line.strip_prefix("@@START ") {
                        current = i.trim().parse().ok();
                    } else if let Some(rest) = line.strip_prefix("@@DONE ") {
                        let mut parts = rest.splitn(4, '\t');
                        let _idx = parts.next();
                        let op = parts.next().unwrap_or("").to_string();
                        let tag = parts.next().unwrap_or("").to_string();
                        let detail = parts.next().unwrap_or("").to_string();
                        out.push((op, tag, detail));
                        current = None;
                        next += 1;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let _ = child.kill();
                    let what = current.map_or_else(String::new, |i| format!("case {i}"));
                    out.push(("?".into(), "HANG".into(), what));
                    next += 1;
                    break;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = child.wait().ok();
                    if let Some(i) = current {
                        out.push(("?".into(), "ABORT".into(), format!("case {i}: {status:?}")));
                        next += 1;
                    }
                    break;
                }
            }
        }
        let _ = child.wait();
    }
    let _ = std::fs::remove_file(&file);
    out
}

fn env(name: &str) -> Option<usize> {
    std::env::var(name).ok()?.parse().ok()
}

/// The bounded run (about a minute at most), or the long one with
/// `ANVIL_FUZZ_MALFORMED` and `ANVIL_FUZZ_PROGRAMS` set.
#[test]
fn fuzz_suite() {
    let samples = samples();
    // Every registered op (plugin ops included) has a sample to break.
    let missing = anvil_testing::missing_samples(&samples);
    assert!(missing.is_empty(), "ops without a sample, so not fuzzed: {missing:?}");
    let full = samples.len() * MUTATIONS.len() * TRANSFORMS.len();
    eprintln!("{} samples: {full} malformed variants", samples.len());
    let (n_malformed, n_programs, budget) =
        match (env("ANVIL_FUZZ_MALFORMED"), env("ANVIL_FUZZ_PROGRAMS")) {
            (None, None) => (3000, 400, Duration::from_secs(50)),
            (m, p) => (m.unwrap_or(full), p.unwrap_or(1000), Duration::from_secs(24 * 3600)),
        };
    // A bounded run spreads its malformed cases over every sample, mutation
    // and transform (a stride coprime to their count); a long run takes
    // them all, then again with other random choices.
    let boundary = n_malformed.max(full);
    let mut indices: Vec<usize> = if n_malformed < full {
        (0..n_malformed).map(|j| (j * 7919) % full).collect()
    } else {
        (0..n_malformed).collect()
    };
    indices.extend(boundary..boundary + n_programs);
    let results = run_children(boundary, &indices, Duration::from_secs(120), budget);
    let mut table: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for (op, tag, _) in &results {
        *table.entry(op.clone()).or_default().entry(tag.clone()).or_default() += 1;
    }
    let mut totals: BTreeMap<String, usize> = BTreeMap::new();
    for (op, tags) in &table {
        let line: Vec<String> = tags.iter().map(|(t, n)| format!("{t} {n}")).collect();
        eprintln!("{op:<28} {}", line.join(", "));
        for (t, n) in tags {
            *totals.entry(t.clone()).or_default() += n;
        }
    }
    eprintln!("total: {totals:?} of {} cases in {} ops", results.len(), table.len());
    let failures: Vec<&(String, String, String)> = results
        .iter()
        .filter(|(_, t, _)| matches!(t.as_str(), "WRONG" | "PANIC" | "HANG" | "ABORT"))
        .collect();
    for (op, tag, detail) in &failures {
        eprintln!("{tag} {op}: {detail}");
    }
    if std::env::var_os("ANVIL_FUZZ_ERRORS").is_some() {
        for (op, _, detail) in results.iter().filter(|(_, t, _)| t == "err") {
            eprintln!("err {op}: {detail}");
        }
    }
    assert!(failures.is_empty(), "{} failing cases (listed above)", failures.len());
}
