//! Every standard primitive checked against a naive reference.
//!
//! The references are written here, as plain loops over `Vec<f64>` with
//! explicit multi-index arithmetic; anvil never computes an expected value.
//! The tests are tables of cases. Each case runs in every dtype it admits
//! (f64 and f32 for the float ops, i64 where integers are allowed) and under
//! two execution contexts: the default one, and one with every parallel
//! threshold at its minimum, so that the threaded paths (rayon chunks, faer's
//! parallel GEMM, batched products split across threads) run on small inputs
//! too. Inputs come from a seeded TestRng, so every run sees the same data.
//!
//! f32 cases are compared with a reference computed in f64 from the
//! f32-rounded inputs; tolerances are `|got - want| <= tol * (1 + |want|)`
//! with `tol` 1e-12 for f64, 1e-5 for f32 and 0 (exact) for i64 and bool.

use anvil::prelude::*;
use anvil::{iota_dtype, Parallelism};
use std::f64::consts::{FRAC_PI_2, FRAC_PI_4, PI};

const F64: DType = DType::F64;
const F32: DType = DType::F32;
const I64: DType = DType::I64;
const BOOL: DType = DType::Bool;
const FLOATS: [DType; 2] = [F64, F32];
const NUMERIC: [DType; 3] = [F64, F32, I64];
const INF: f64 = f64::INFINITY;
const NAN: f64 = f64::NAN;

// ---------------------------------------------------------------- inputs

/// TestRng (Steele, Lea and Flood): a seeded stream of 64-bit values.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform integer in `lo..=hi`.
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
    }

    fn sign(&mut self) -> f64 {
        if self.next_u64() & 1 == 0 {
            1.0
        } else {
            -1.0
        }
    }
}

/// How the values of a random input are drawn.
#[derive(Clone, Copy, Debug)]
enum Gen {
    /// Uniform in `[lo, hi)`.
    Uniform(f64, f64),
    /// Magnitude uniform in `[lo, hi)`, random sign (stays away from zero).
    Signed(f64, f64),
    /// Integers in `lo..=hi` (exact in every dtype).
    Int(i64, i64),
    /// Integer magnitudes in `lo..=hi`, random sign.
    SignedInt(i64, i64),
}

impl Gen {
    fn sample(self, rng: &mut Rng) -> f64 {
        match self {
            Gen::Uniform(lo, hi) => lo + (hi - lo) * rng.unit(),
            Gen::Signed(lo, hi) => {
                let s = rng.sign();
                s * (lo + (hi - lo) * rng.unit())
            }
            Gen::Int(lo, hi) => rng.int(lo, hi) as f64,
            Gen::SignedInt(lo, hi) => {
                let s = rng.sign();
                s * rng.int(lo, hi) as f64
            }
        }
    }
}

// ---------------------------------------------------------- the reference

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Row-major flat position of a multi-index.
fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    assert_eq!(idx.len(), shape.len());
    idx.iter().zip(shape).fold(0, |acc, (&i, &d)| {
        assert!(i < d, "index {idx:?} out of {shape:?}");
        acc * d + i
    })
}

/// Calls `f` on every multi-index of `shape` in row-major order.
fn for_each_index(shape: &[usize], mut f: impl FnMut(&[usize])) {
    if shape.contains(&0) {
        return;
    }
    let mut idx = vec![0; shape.len()];
    loop {
        f(&idx);
        let mut d = shape.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

fn norm_axis(axis: i64, rank: usize) -> usize {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    assert!((0..rank as i64).contains(&a), "reference: axis {axis} for rank {rank}");
    a as usize
}

/// A reference n-d array: row-major `f64` data.
#[derive(Clone, Debug, PartialEq)]
struct Nd {
    shape: Vec<usize>,
    data: Vec<f64>,
}

impl Nd {
    fn new(shape: &[usize], data: Vec<f64>) -> Nd {
        assert_eq!(numel(shape), data.len(), "reference: data for {shape:?}");
        Nd { shape: shape.to_vec(), data }
    }

    fn from_fn(shape: &[usize], mut f: impl FnMut(&[usize]) -> f64) -> Nd {
        let mut data = Vec::with_capacity(numel(shape));
        for_each_index(shape, |i| data.push(f(i)));
        Nd::new(shape, data)
    }

    fn rand(rng: &mut Rng, shape: &[usize], gen: Gen) -> Nd {
        Nd::new(shape, (0..numel(shape)).map(|_| gen.sample(rng)).collect())
    }

    fn rank(&self) -> usize {
        self.shape.len()
    }

    fn at(&self, idx: &[usize]) -> f64 {
        self.data[ravel(idx, &self.shape)]
    }

    /// The element read at `idx` of a larger shape this array broadcasts to.
    fn at_broadcast(&self, idx: &[usize]) -> f64 {
        let lead = idx.len() - self.rank();
        let mut flat = 0;
        for (d, &n) in self.shape.iter().enumerate() {
            let i = if n == 1 { 0 } else { idx[lead + d] };
            assert!(i < n);
            flat = flat * n + i;
        }
        self.data[flat]
    }

    fn map(&self, f: impl Fn(f64) -> f64) -> Nd {
        Nd::new(&self.shape, self.data.iter().map(|&v| f(v)).collect())
    }

    fn reshaped(&self, shape: &[usize]) -> Nd {
        Nd::new(shape, self.data.clone())
    }
}

/// The NumPy broadcast of several shapes.
fn broadcast_shape(shapes: &[&[usize]]) -> Vec<usize> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    (0..rank)
        .map(|i| {
            let mut d = 1;
            for s in shapes {
                if i + s.len() >= rank {
                    let n = s[i + s.len() - rank];
                    if n != 1 {
                        assert!(d == 1 || d == n, "reference: {shapes:?} do not broadcast");
                        d = n;
                    }
                }
            }
            d
        })
        .collect()
}

fn zip_ref(a: &Nd, b: &Nd, f: impl Fn(f64, f64) -> f64) -> Nd {
    let shape = broadcast_shape(&[&a.shape, &b.shape]);
    Nd::from_fn(&shape, |i| f(a.at_broadcast(i), b.at_broadcast(i)))
}

fn select_ref(c: &Nd, a: &Nd, b: &Nd) -> Nd {
    let shape = broadcast_shape(&[&c.shape, &a.shape, &b.shape]);
    Nd::from_fn(&shape, |i| {
        if c.at_broadcast(i) != 0.0 {
            a.at_broadcast(i)
        } else {
            b.at_broadcast(i)
        }
    })
}

fn b2f(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

/// `as`-cast semantics: what a value becomes in `dtype`.
fn as_cast(v: f64, dtype: DType) -> f64 {
    match dtype {
        DType::F64 => v,
        DType::F32 => v as f32 as f64,
        DType::I64 => v.trunc(),
        DType::Bool => b2f(v != 0.0),
    }
}

/// NumPy's `maximum`: NaN if either operand is NaN.
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        NAN
    } else if b > a {
        b
    } else {
        a
    }
}

fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        NAN
    } else if b < a {
        b
    } else {
        a
    }
}

/// `erf` from its Maclaurin series for `|x| <= 2` (cancellation stays below
/// 1e-15 there) and from the continued fraction of `erfc` beyond.
fn erf_ref(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    if a <= 2.0 {
        // erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1))
        let (mut term, mut sum) = (x, x);
        for n in 1..200 {
            term *= -x * x / n as f64;
            let t = term / (2 * n + 1) as f64;
            sum += t;
            if t.abs() < 1e-18 {
                break;
            }
        }
        return sum * 2.0 / PI.sqrt();
    }
    if a > 27.0 {
        return x.signum();
    }
    // erfc(a) = exp(-a^2)/sqrt(pi) / (a + (1/2)/(a + 1/(a + (3/2)/(a + ...))))
    let mut t = a;
    for k in (1..=400).rev() {
        t = a + (k as f64 / 2.0) / t;
    }
    let erfc = (-a * a).exp() / (PI.sqrt() * t);
    x.signum() * (1.0 - erfc)
}

fn round_half_even(x: f64) -> f64 {
    if !x.is_finite() {
        return x;
    }
    let f = floor_ref(x);
    let d = x - f;
    if d < 0.5 || (d == 0.5 && f % 2.0 == 0.0) {
        f
    } else {
        f + 1.0
    }
}

fn floor_ref(x: f64) -> f64 {
    let t = x.trunc();
    if t > x {
        t - 1.0
    } else {
        t
    }
}

fn ceil_ref(x: f64) -> f64 {
    let t = x.trunc();
    if t < x {
        t + 1.0
    } else {
        t
    }
}

fn sign_ref(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        x
    }
}

/// For each element of the reduction of `x` over `axes` (normalised), the
/// reduced values in row-major order; and the shape of the result.
fn groups(x: &Nd, axes: &[usize], keepdims: bool) -> (Vec<usize>, Vec<Vec<f64>>) {
    let kept: Vec<usize> =
        x.shape.iter().enumerate().map(|(d, &n)| if axes.contains(&d) { 1 } else { n }).collect();
    let mut g = vec![Vec::new(); numel(&kept)];
    for_each_index(&x.shape, |i| {
        let o: Vec<usize> =
            i.iter().enumerate().map(|(d, &k)| if axes.contains(&d) { 0 } else { k }).collect();
        g[ravel(&o, &kept)].push(x.at(i));
    });
    let shape = if keepdims {
        kept
    } else {
        x.shape.iter().enumerate().filter(|(d, _)| !axes.contains(d)).map(|(_, &n)| n).collect()
    };
    (shape, g)
}

fn reduce_ref(x: &Nd, axes: &[i64], keepdims: bool, f: impl Fn(&[f64]) -> f64) -> Nd {
    let axes: Vec<usize> = axes.iter().map(|&a| norm_axis(a, x.rank())).collect();
    let (shape, g) = groups(x, &axes, keepdims);
    Nd::new(&shape, g.iter().map(|v| f(v)).collect())
}

fn sum_of(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |a, &b| a + b)
}

fn mean_of(v: &[f64]) -> f64 {
    sum_of(v) / v.len() as f64
}

fn var_of(v: &[f64]) -> f64 {
    let m = mean_of(v);
    v.iter().map(|&x| (x - m) * (x - m)).fold(0.0, |a, b| a + b) / v.len() as f64
}

fn logsumexp_of(v: &[f64]) -> f64 {
    let m = v.iter().fold(-INF, |a, &b| nan_max(a, b));
    let shift = if m.is_finite() { m } else { 0.0 };
    v.iter().map(|&x| (x - shift).exp()).fold(0.0, |a, b| a + b).ln() + shift
}

/// Index of the first maximum (minimum); the first NaN wins, as in NumPy.
fn arg_best(v: &[f64], max: bool) -> f64 {
    let mut best = 0;
    for (k, &y) in v.iter().enumerate().skip(1) {
        let b = v[best];
        if b.is_nan() {
            break;
        }
        if y.is_nan() || (max && y > b) || (!max && y < b) {
            best = k;
        }
    }
    best as f64
}

fn softmax_ref(x: &Nd, axis: i64, log: bool) -> Nd {
    let ax = norm_axis(axis, x.rank());
    Nd::from_fn(&x.shape, |i| {
        let mut j = i.to_vec();
        let row: Vec<f64> = (0..x.shape[ax])
            .map(|k| {
                j[ax] = k;
                x.at(&j)
            })
            .collect();
        let m = row.iter().fold(-INF, |a, &b| nan_max(a, b));
        let s = row.iter().map(|&v| (v - m).exp()).fold(0.0, |a, b| a + b);
        if log {
            x.at(i) - m - s.ln()
        } else {
            (x.at(i) - m).exp() / s
        }
    })
}

fn reshape_ref(x: &Nd, target: &[i64]) -> Nd {
    let known: usize = target.iter().filter(|&&d| d >= 0).map(|&d| d as usize).product();
    let shape: Vec<usize> = target
        .iter()
        .map(|&d| if d == -1 { numel(&x.shape) / known } else { d as usize })
        .collect();
    x.reshaped(&shape)
}

fn permute_ref(x: &Nd, perm: &[i64]) -> Nd {
    let p: Vec<usize> = perm.iter().map(|&a| norm_axis(a, x.rank())).collect();
    let shape: Vec<usize> = p.iter().map(|&a| x.shape[a]).collect();
    Nd::from_fn(&shape, |o| {
        let mut i = vec![0; x.rank()];
        for (k, &a) in p.iter().enumerate() {
            i[a] = o[k];
        }
        x.at(&i)
    })
}

fn pad_ref(x: &Nd, widths: &[(usize, usize)], value: f64) -> Nd {
    let shape: Vec<usize> = x.shape.iter().zip(widths).map(|(&n, &(lo, hi))| n + lo + hi).collect();
    Nd::from_fn(&shape, |o| {
        let mut i = Vec::with_capacity(o.len());
        for ((&k, &(lo, _)), &n) in o.iter().zip(widths).zip(&x.shape) {
            if k < lo || k - lo >= n {
                return value;
            }
            i.push(k - lo);
        }
        x.at(&i)
    })
}

/// The indices `range(n)[start:stop:step]` selects, by CPython's rules.
fn py_slice(n: usize, start: Option<i64>, stop: Option<i64>, step: i64) -> Vec<usize> {
    let n = n as i64;
    let (lower, upper) = if step < 0 { (-1, n - 1) } else { (0, n) };
    let adjust = |v: Option<i64>, default: i64| match v {
        None => default,
        Some(v) if v < 0 => (v + n).max(lower),
        Some(v) => v.min(upper),
    };
    let start = adjust(start, if step < 0 { upper } else { lower });
    let stop = adjust(stop, if step < 0 { lower } else { upper });
    let mut out = vec![];
    let mut i = start;
    while (step > 0 && i < stop) || (step < 0 && i > stop) {
        out.push(i as usize);
        i += step;
    }
    out
}

fn slice_ref(x: &Nd, specs: &[SliceSpec]) -> Nd {
    let picks: Vec<Vec<usize>> = x
        .shape
        .iter()
        .enumerate()
        .map(|(d, &n)| match specs.get(d) {
            Some(s) => py_slice(n, s.start, s.stop, s.step),
            None => (0..n).collect(),
        })
        .collect();
    let shape: Vec<usize> = picks.iter().map(Vec::len).collect();
    Nd::from_fn(&shape, |o| {
        let i: Vec<usize> = o.iter().zip(&picks).map(|(&k, p)| p[k]).collect();
        x.at(&i)
    })
}

fn flip_ref(x: &Nd, axes: &[i64]) -> Nd {
    let axes: Vec<usize> = axes.iter().map(|&a| norm_axis(a, x.rank())).collect();
    Nd::from_fn(&x.shape, |o| {
        let i: Vec<usize> = o
            .iter()
            .enumerate()
            .map(|(d, &k)| if axes.contains(&d) { x.shape[d] - 1 - k } else { k })
            .collect();
        x.at(&i)
    })
}

fn concat_ref(parts: &[Nd], axis: i64) -> Nd {
    let ax = norm_axis(axis, parts[0].rank());
    let mut shape = parts[0].shape.clone();
    shape[ax] = parts.iter().map(|p| p.shape[ax]).sum();
    Nd::from_fn(&shape, |o| {
        let mut k = o[ax];
        for p in parts {
            if k < p.shape[ax] {
                let mut i = o.to_vec();
                i[ax] = k;
                return p.at(&i);
            }
            k -= p.shape[ax];
        }
        unreachable!("reference: concatenate index past the parts")
    })
}

fn stack_ref(parts: &[Nd], axis: i64) -> Nd {
    let ax = norm_axis(axis, parts[0].rank() + 1);
    let mut shape = parts[0].shape.clone();
    shape.insert(ax, parts.len());
    Nd::from_fn(&shape, |o| {
        let mut i = o.to_vec();
        let p = i.remove(ax);
        parts[p].at(&i)
    })
}

/// `numpy.matmul`: 1-D operands promoted (row on the left, column on the
/// right) and the added axis dropped; batch axes broadcast.
fn matmul_ref(a: &Nd, b: &Nd) -> Nd {
    let a2 = if a.rank() == 1 { a.reshaped(&[1, a.shape[0]]) } else { a.clone() };
    let b2 = if b.rank() == 1 { b.reshaped(&[b.shape[0], 1]) } else { b.clone() };
    let (ra, rb) = (a2.rank(), b2.rank());
    let (m, k, n) = (a2.shape[ra - 2], a2.shape[ra - 1], b2.shape[rb - 1]);
    assert_eq!(k, b2.shape[rb - 2], "reference: matmul inner dimensions");
    let batch = broadcast_shape(&[&a2.shape[..ra - 2], &b2.shape[..rb - 2]]);
    let nb = batch.len();
    let mut full = batch.clone();
    full.extend([m, n]);
    let out = Nd::from_fn(&full, |o| {
        let mut ia = o[..nb].to_vec();
        ia.extend([o[nb], 0]);
        let mut ib = o[..nb].to_vec();
        ib.extend([0, o[nb + 1]]);
        let mut s = 0.0;
        for p in 0..k {
            ia[nb + 1] = p;
            ib[nb] = p;
            s += a2.at_broadcast(&ia) * b2.at_broadcast(&ib);
        }
        s
    });
    let mut shape = batch;
    if a.rank() > 1 {
        shape.push(m);
    }
    if b.rank() > 1 {
        shape.push(n);
    }
    out.reshaped(&shape)
}

fn resolve_index(i: f64, n: usize) -> usize {
    let i = i as i64;
    let j = if i < 0 { i + n as i64 } else { i };
    assert!((0..n as i64).contains(&j), "reference: index {i} for size {n}");
    j as usize
}

/// `numpy.take(x, idx, axis)`.
fn take_ref(x: &Nd, idx: &Nd, axis: i64) -> Nd {
    let ax = norm_axis(axis, x.rank());
    let ir = idx.rank();
    let mut shape = x.shape[..ax].to_vec();
    shape.extend(&idx.shape);
    shape.extend(&x.shape[ax + 1..]);
    Nd::from_fn(&shape, |o| {
        let k = resolve_index(idx.at(&o[ax..ax + ir]), x.shape[ax]);
        let mut i = o[..ax].to_vec();
        i.push(k);
        i.extend(&o[ax + ir..]);
        x.at(&i)
    })
}

/// Zeros whose axis `axis` (of the result) has `size` entries, with the
/// updates added at the indices.
fn scatter_add_ref(u: &Nd, idx: &Nd, axis: i64, size: usize) -> Nd {
    let ir = idx.rank();
    let ax = norm_axis(axis, u.rank() + 1 - ir);
    let mut shape = u.shape[..ax].to_vec();
    shape.push(size);
    shape.extend(&u.shape[ax + ir..]);
    let mut out = Nd::new(&shape, vec![0.0; numel(&shape)]);
    for_each_index(&u.shape, |i| {
        let k = resolve_index(idx.at(&i[ax..ax + ir]), size);
        let mut o = i[..ax].to_vec();
        o.push(k);
        o.extend(&i[ax + ir..]);
        out.data[ravel(&o, &shape)] += u.at(i);
    });
    out
}

// ----------------------------------------------------------------- runner

type OpFn = Box<dyn Fn(&[Var]) -> Var>;
type RefFn = Box<dyn Fn(&[Nd]) -> Nd>;

/// One checked call: the inputs with their dtypes, the traced function, the
/// reference, and the expected output dtype.
/// One single-input case per `(shape, parameter)` row of a table: `op(x, p)`
/// on a random `x` of that shape, against `reference(x, p)`.
#[allow(clippy::too_many_arguments)]
fn table_cases<P: Copy + std::fmt::Debug + 'static>(
    cases: &mut Vec<Case>,
    rng: &mut Rng,
    g: Gen,
    dtype: DType,
    what: &str,
    rows: &[(&[usize], P)],
    op: fn(&Var, P) -> Var,
    reference: fn(&Nd, P) -> Nd,
) {
    for &(shape, p) in rows {
        let name = format!("{what} {shape:?} {p:?}");
        cases.push(Case::one(
            name,
            Nd::rand(rng, shape, g),
            dtype,
            move |x| op(x, p),
            move |x| reference(x, p),
        ));
    }
}

struct Case {
    name: String,
    inputs: Vec<(Nd, DType)>,
    op: OpFn,
    reference: RefFn,
    out: DType,
    tol: Option<f64>,
}

impl Case {
    fn new(
        name: impl Into<String>,
        inputs: Vec<(Nd, DType)>,
        op: impl Fn(&[Var]) -> Var + 'static,
        reference: impl Fn(&[Nd]) -> Nd + 'static,
    ) -> Case {
        let out = inputs.first().map_or(F64, |i| i.1);
        let (op, reference) = (Box::new(op), Box::new(reference));
        Case { name: name.into(), inputs, op, reference, out, tol: None }
    }

    /// A case of one input.
    fn one(
        name: impl Into<String>,
        x: Nd,
        dtype: DType,
        op: impl Fn(&Var) -> Var + 'static,
        reference: impl Fn(&Nd) -> Nd + 'static,
    ) -> Case {
        Case::new(name, vec![(x, dtype)], move |xs| op(&xs[0]), move |xs| reference(&xs[0]))
    }

    fn out(mut self, dtype: DType) -> Case {
        self.out = dtype;
        self
    }

    fn tol(mut self, tol: f64) -> Case {
        self.tol = Some(tol);
        self
    }
}

fn tensor(x: &Nd, dtype: DType) -> Tensor {
    let t = match dtype {
        DType::F64 => Tensor::from_vec(x.data.clone(), &x.shape),
        DType::F32 => Tensor::from_vec(x.data.iter().map(|&v| v as f32).collect(), &x.shape),
        DType::I64 => {
            assert!(x.data.iter().all(|v| v.fract() == 0.0), "i64 input with a fraction");
            Tensor::from_vec(x.data.iter().map(|&v| v as i64).collect(), &x.shape)
        }
        DType::Bool => Tensor::from_vec(x.data.iter().map(|&v| v != 0.0).collect(), &x.shape),
    };
    t.expect("building an input tensor")
}

fn values(t: &Tensor) -> Vec<f64> {
    match t.dtype() {
        DType::F64 => t.as_slice::<f64>().unwrap().to_vec(),
        DType::F32 => t.as_slice::<f32>().unwrap().iter().map(|&v| f64::from(v)).collect(),
        DType::I64 => t.as_slice::<i64>().unwrap().iter().map(|&v| v as f64).collect(),
        DType::Bool => t.as_slice::<bool>().unwrap().iter().map(|&v| b2f(v)).collect(),
    }
}

fn default_tol(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-12,
        DType::F32 => 1e-5,
        DType::I64 | DType::Bool => 0.0,
    }
}

/// Every parallel threshold at its minimum, at least two threads.
fn parallel_ctx() -> Parallelism {
    Parallelism::default().threads(2).min_parallel_elems(1).min_parallel_flops(1)
}

#[track_caller]
fn assert_close(label: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{label}: number of elements");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = g == w || (g.is_nan() && w.is_nan()) || (g - w).abs() <= tol * (1.0 + w.abs());
        if !ok {
            let all = if got.len() <= 64 {
                format!("\n  got  {got:?}\n  want {want:?}")
            } else {
                String::new()
            };
            panic!("{label}: element {i}: got {g}, want {w} (tol {tol}){all}");
        }
    }
}

fn run(case: &Case) {
    let types: Vec<String> = case.inputs.iter().map(|(_, d)| d.to_string()).collect();
    let label = format!("{} [{}]", case.name, types.join(", "));
    let args: Vec<Tensor> = case.inputs.iter().map(|(x, d)| tensor(x, *d)).collect();
    let rounded: Vec<Nd> = case.inputs.iter().map(|(x, d)| x.map(|v| as_cast(v, *d))).collect();
    let want = (case.reference)(&rounded);
    let tol = case.tol.unwrap_or_else(|| default_tol(case.out));
    let f = jit(|xs: &[Var]| vec![(case.op)(xs)]);
    for (ctx_name, ctx) in
        [("default ctx", Parallelism::default()), ("parallel ctx", parallel_ctx())]
    {
        let label = format!("{label} {ctx_name}");
        let out = f.eval_with(args.clone(), &ctx).unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(out.len(), 1, "{label}: outputs");
        let got = &out[0];
        assert_eq!(got.dtype(), case.out, "{label}: dtype");
        assert_eq!(got.shape(), &want.shape[..], "{label}: shape");
        assert_close(&label, &values(got), &want.data, tol);
    }
    assert_eq!(f.cache_len(), 1, "{label}: one compiled plan");
}

fn run_all(cases: &[Case]) {
    assert!(!cases.is_empty());
    for case in cases {
        run(case);
    }
}

// ------------------------------------------------------------------ unary

struct Unary {
    name: &'static str,
    op: fn(&Var) -> Var,
    reference: fn(f64) -> f64,
    gen: Gen,
    specials: &'static [f64],
    int: bool,
}

fn un(
    name: &'static str,
    op: fn(&Var) -> Var,
    reference: fn(f64) -> f64,
    gen: Gen,
    specials: &'static [f64],
    int: bool,
) -> Unary {
    Unary { name, op, reference, gen, specials, int }
}

fn unary_ops() -> Vec<Unary> {
    use Gen::*;
    let rounding: &'static [f64] =
        &[-2.5, -2.0, -1.5, -0.5, -0.0, 0.5, 1.5, 2.0, 2.5, 1e300, -INF, NAN];
    vec![
        un(
            "neg",
            |x| x.neg(),
            |x| -x,
            Uniform(-3.0, 3.0),
            &[0.0, -0.0, 1.5, -2.0, INF, -INF, NAN],
            true,
        ),
        un(
            "sin",
            |x| x.sin(),
            f64::sin,
            Uniform(-4.0, 4.0),
            &[0.0, 1e-9, FRAC_PI_2, PI, -PI, 100.0, INF, NAN],
            false,
        ),
        un(
            "cos",
            |x| x.cos(),
            f64::cos,
            Uniform(-4.0, 4.0),
            &[0.0, 1e-9, FRAC_PI_4, -PI, 100.0, INF, NAN],
            false,
        ),
        un(
            "tan",
            |x| x.tan(),
            f64::tan,
            Uniform(-1.3, 1.3),
            &[0.0, 1e-9, FRAC_PI_4, -FRAC_PI_4, 1.5, NAN],
            false,
        ),
        un(
            "exp",
            |x| x.exp(),
            f64::exp,
            Uniform(-5.0, 5.0),
            &[0.0, 1e-10, -1e-10, 1.0, 20.0, -20.0, INF, -INF, NAN],
            false,
        ),
        un(
            "log",
            |x| x.log(),
            f64::ln,
            Uniform(0.01, 10.0),
            &[1.0, 0.0, 1e-30, 1e30, INF, -1.0, NAN],
            false,
        ),
        un(
            "log1p",
            |x| x.log1p(),
            f64::ln_1p,
            Uniform(-0.9, 5.0),
            &[0.0, 1e-10, -1e-10, -0.5, -1.0, 1e10, NAN],
            false,
        ),
        un(
            "expm1",
            |x| x.expm1(),
            f64::exp_m1,
            Uniform(-3.0, 3.0),
            &[0.0, 1e-10, -1e-10, 1.0, 10.0, -INF, NAN],
            false,
        ),
        un(
            "sqrt",
            |x| x.sqrt(),
            f64::sqrt,
            Uniform(0.0, 10.0),
            &[0.0, 1.0, 4.0, 2.0, 1e-20, INF, -1.0, NAN],
            false,
        ),
        un(
            "rsqrt",
            |x| x.rsqrt(),
            |x| 1.0 / x.sqrt(),
            Uniform(0.01, 10.0),
            &[1.0, 4.0, 0.25, 0.0, 1e-10, INF, NAN],
            false,
        ),
        un(
            "recip",
            |x| x.recip(),
            |x| 1.0 / x,
            Signed(0.1, 10.0),
            &[1.0, -2.0, 0.5, 0.0, -0.0, 1e-10, INF, NAN],
            false,
        ),
        un(
            "tanh",
            |x| x.tanh(),
            f64::tanh,
            Uniform(-5.0, 5.0),
            &[0.0, 1e-9, 20.0, -20.0, INF, -INF, NAN],
            false,
        ),
        un(
            "logistic",
            |x| x.logistic(),
            |x| 1.0 / (1.0 + (-x).exp()),
            Uniform(-10.0, 10.0),
            &[0.0, 30.0, -30.0, 700.0, -700.0, INF, -INF, NAN],
            false,
        ),
        un(
            "abs",
            |x| x.abs(),
            |x| if x < 0.0 { -x } else { x },
            Uniform(-3.0, 3.0),
            &[0.0, -0.0, -3.0, 2.5, INF, -INF, NAN],
            true,
        ),
        un(
            "sign",
            |x| x.sign(),
            sign_ref,
            Uniform(-3.0, 3.0),
            &[0.0, -0.0, 2.0, -3.0, 1e-300, -1e-300, INF, -INF, NAN],
            true,
        ),
        un("floor", |x| x.floor(), floor_ref, Uniform(-5.0, 5.0), rounding, false),
        un("ceil", |x| x.ceil(), ceil_ref, Uniform(-5.0, 5.0), rounding, false),
        un(
            "round",
            |x| x.round(),
            round_half_even,
            Uniform(-5.0, 5.0),
            &[
                -3.5,
                -2.5,
                -1.5,
                -0.5,
                0.5,
                1.5,
                2.5,
                3.5,
                0.49999999999999994,
                4503599627370497.0,
                INF,
                NAN,
            ],
            false,
        ),
        un(
            "erf",
            |x| x.erf(),
            erf_ref,
            Uniform(-3.0, 3.0),
            &[0.0, 0.5, -0.5, 1.0, 2.0, -2.0, 3.0, 4.0, -5.0, 7.0, INF, -INF, NAN],
            false,
        ),
    ]
}

#[test]
fn unary_ops_match_reference() {
    let mut rng = Rng::new(1);
    let mut cases = vec![];
    for dtype in FLOATS {
        for u in unary_ops() {
            let inputs = [
                ("[3, 7]", Nd::rand(&mut rng, &[3, 7], u.gen)),
                ("specials", Nd::new(&[u.specials.len()], u.specials.to_vec())),
                ("rank 0", Nd::rand(&mut rng, &[], u.gen)),
                ("[2, 0]", Nd::new(&[2, 0], vec![])),
            ];
            for (what, x) in inputs {
                let (op, r) = (u.op, u.reference);
                cases
                    .push(Case::one(format!("{} {what}", u.name), x, dtype, op, move |x| x.map(r)));
            }
            // Large enough for several parallel chunks.
            if ["sin", "abs", "round"].contains(&u.name) {
                let (op, r) = (u.op, u.reference);
                let x = Nd::rand(&mut rng, &[300, 130], u.gen);
                cases.push(Case::one(format!("{} [300, 130]", u.name), x, dtype, op, move |x| {
                    x.map(r)
                }));
            }
        }
    }
    // The integer ops: exact, with wrapping-free values.
    let int_specials = vec![0.0, 1.0, -1.0, 7.0, -7.0, 1099511627776.0, -1099511627776.0];
    for u in unary_ops().into_iter().filter(|u| u.int) {
        let inputs = [
            ("[4, 5]", Nd::rand(&mut rng, &[4, 5], Gen::Int(-1000, 1000))),
            ("specials", Nd::new(&[int_specials.len()], int_specials.clone())),
            ("rank 0", Nd::new(&[], vec![-12.0])),
            ("[0, 3]", Nd::new(&[0, 3], vec![])),
        ];
        for (what, x) in inputs {
            let (op, r) = (u.op, u.reference);
            cases.push(Case::one(format!("{} {what}", u.name), x, I64, op, move |x| x.map(r)));
        }
    }
    run_all(&cases);
}

#[test]
fn erf_matches_known_values() {
    let known = [
        (0.1, 0.1124629160182849),
        (0.5, 0.5204998778130465),
        (1.0, 0.8427007929497149),
        (-1.5, -0.9661051464753108),
        (2.0, 0.9953222650189527),
        (3.0, 0.9999779095030014),
        (4.0, 0.9999999845827421),
    ];
    let (xs, want): (Vec<f64>, Vec<f64>) = known.iter().copied().unzip();
    // The reference itself first.
    let ours: Vec<f64> = xs.iter().map(|&x| erf_ref(x)).collect();
    assert_close("erf reference", &ours, &want, 1e-15);
    let f = jit(|x: &Var| x.erf());
    let x = Tensor::from_vec(xs.clone(), &[xs.len()]).unwrap();
    let expected = Tensor::from_vec(want.clone(), &[want.len()]).unwrap();
    f.eval(&x).unwrap().assert_allclose(&expected, 1e-15, 1e-15);
    let got = f.eval(x.cast(F32)).unwrap();
    assert_eq!(got.dtype(), F32);
    got.assert_allclose(&expected, 1e-6, 1e-6);
}

// ----------------------------------------------------------------- binary

type BinaryRef = fn(f64, f64) -> f64;
/// Integer operand generators and the integer reference of a binary op.
type IntOperands = (Gen, Gen, BinaryRef);

struct Binary {
    name: &'static str,
    op: fn(&Var, &Var) -> Var,
    reference: fn(f64, f64) -> f64,
    gens: (Gen, Gen),
    /// Integer operand generators and reference, for ops that take i64.
    int: Option<IntOperands>,
    /// A comparison (result `bool`).
    compare: bool,
}

fn bin(
    name: &'static str,
    op: fn(&Var, &Var) -> Var,
    reference: fn(f64, f64) -> f64,
    gens: (Gen, Gen),
    int: Option<IntOperands>,
    compare: bool,
) -> Binary {
    Binary { name, op, reference, gens, int, compare }
}

fn binary_ops() -> Vec<Binary> {
    use Gen::*;
    let u = Uniform(-3.0, 3.0);
    let i = Int(-100, 100);
    let ties = Int(-2, 2);
    vec![
        bin("add", |a, b| a + b, |a, b| a + b, (u, u), Some((i, i, |a, b| a + b)), false),
        bin("sub", |a, b| a - b, |a, b| a - b, (u, u), Some((i, i, |a, b| a - b)), false),
        bin("mul", |a, b| a * b, |a, b| a * b, (u, u), Some((i, i, |a, b| a * b)), false),
        bin(
            "div",
            // `lax::div`: the op itself (the `/` operator divides integers as f64).
            anvil::lax::div,
            |a, b| a / b,
            (u, Signed(0.5, 2.0)),
            Some((i, SignedInt(1, 7), |a, b| (a / b).trunc())),
            false,
        ),
        bin(
            "pow",
            |a, b| a.pow(b),
            f64::powf,
            (Uniform(0.5, 2.0), Uniform(-2.0, 2.0)),
            None,
            false,
        ),
        bin("maximum", |a, b| a.maximum(b), nan_max, (u, u), Some((ties, ties, nan_max)), false),
        bin("minimum", |a, b| a.minimum(b), nan_min, (u, u), Some((ties, ties, nan_min)), false),
        bin("atan2", |a, b| a.atan2(b), f64::atan2, (u, u), None, false),
        bin(
            "lt",
            |a, b| a.lt(b),
            |a, b| b2f(a < b),
            (ties, ties),
            Some((ties, ties, |a, b| b2f(a < b))),
            true,
        ),
        bin(
            "le",
            |a, b| a.le(b),
            |a, b| b2f(a <= b),
            (ties, ties),
            Some((ties, ties, |a, b| b2f(a <= b))),
            true,
        ),
        bin(
            "gt",
            |a, b| a.gt(b),
            |a, b| b2f(a > b),
            (ties, ties),
            Some((ties, ties, |a, b| b2f(a > b))),
            true,
        ),
        bin(
            "ge",
            |a, b| a.ge(b),
            |a, b| b2f(a >= b),
            (ties, ties),
            Some((ties, ties, |a, b| b2f(a >= b))),
            true,
        ),
        bin(
            "equal",
            |a, b| a.equal(b),
            |a, b| b2f(a == b),
            (ties, ties),
            Some((ties, ties, |a, b| b2f(a == b))),
            true,
        ),
        bin(
            "not_equal",
            |a, b| a.not_equal(b),
            |a, b| b2f(a != b),
            (ties, ties),
            Some((ties, ties, |a, b| b2f(a != b))),
            true,
        ),
    ]
}

/// Shape pairs covering NumPy broadcasting: equal shapes, size-1 axes on
/// either side, rank mismatch either way, rank-0 operands, size-0 axes.
const BROADCAST_PAIRS: &[(&[usize], &[usize])] = &[
    (&[3, 4], &[3, 4]),
    (&[3, 1], &[1, 4]),
    (&[2, 3, 4], &[4]),
    (&[4], &[2, 3, 4]),
    (&[2, 3, 4], &[3, 1]),
    (&[1], &[7]),
    (&[], &[2, 3]),
    (&[2, 3], &[]),
    (&[], &[]),
    (&[0, 3], &[1, 3]),
    (&[2, 0, 4], &[4]),
    (&[0], &[]),
    (&[5, 1, 3], &[1, 4, 1]),
    (&[2, 1, 1, 3], &[1, 5, 1]),
];

fn binary_case(b: &Binary, x: Nd, y: Nd, dtype: DType, r: fn(f64, f64) -> f64) -> Case {
    let name = format!("{} {:?} {:?}", b.name, x.shape, y.shape);
    let op = b.op;
    let case = Case::new(
        name,
        vec![(x, dtype), (y, dtype)],
        move |xs| op(&xs[0], &xs[1]),
        move |xs| zip_ref(&xs[0], &xs[1], r),
    );
    if b.compare {
        case.out(BOOL)
    } else {
        case
    }
}

#[test]
fn binary_ops_broadcast_like_numpy() {
    let mut rng = Rng::new(2);
    let mut cases = vec![];
    for dtype in NUMERIC {
        for b in binary_ops() {
            let (ga, gb, r) = match (dtype, b.int) {
                (DType::I64, Some(int)) => int,
                (DType::I64, None) => continue,
                _ => (b.gens.0, b.gens.1, b.reference),
            };
            for (sa, sb) in BROADCAST_PAIRS {
                let (x, y) = (Nd::rand(&mut rng, sa, ga), Nd::rand(&mut rng, sb, gb));
                cases.push(binary_case(&b, x, y, dtype, r));
            }
            // Large enough for several parallel chunks, with a broadcast operand.
            if ["add", "maximum", "lt"].contains(&b.name) {
                let (x, y) = (Nd::rand(&mut rng, &[300, 130], ga), Nd::rand(&mut rng, &[130], gb));
                cases.push(binary_case(&b, x, y, dtype, r));
                let (x, y) = (Nd::rand(&mut rng, &[300, 1], ga), Nd::rand(&mut rng, &[1, 130], gb));
                cases.push(binary_case(&b, x, y, dtype, r));
            }
            // NaN, infinities and signed zeros.
            if dtype != I64 {
                let x = Nd::new(&[8], vec![NAN, 1.0, NAN, -INF, INF, 0.0, -0.0, 2.0]);
                let y = Nd::new(&[8], vec![0.0, NAN, NAN, 2.0, INF, -0.0, 0.0, -INF]);
                cases.push(binary_case(&b, x, y, dtype, r));
            }
        }
    }
    // Comparisons of bool operands.
    for b in binary_ops().iter().filter(|b| b.compare) {
        let (x, y) =
            (Nd::rand(&mut rng, &[3, 1], Gen::Int(0, 1)), Nd::rand(&mut rng, &[4], Gen::Int(0, 1)));
        cases.push(binary_case(b, x, y, BOOL, b.reference));
    }
    run_all(&cases);
}

struct ScalarForm {
    name: &'static str,
    op: fn(&Var) -> Var,
    reference: fn(f64) -> f64,
    gen: Gen,
    int: bool,
}

fn sf(
    name: &'static str,
    op: fn(&Var) -> Var,
    reference: fn(f64) -> f64,
    gen: Gen,
    int: bool,
) -> ScalarForm {
    ScalarForm { name, op, reference, gen, int }
}

#[test]
fn scalar_operands_on_either_side() {
    use Gen::*;
    let u = Uniform(-3.0, 3.0);
    let forms: Vec<ScalarForm> = vec![
        sf("x * 2.0", |x| x * 2.0, |x| x * 2.0, u, true),
        sf("2.0 * x", |x| 2.0 * x, |x| 2.0 * x, u, true),
        sf("x + 1.5", |x| x + 1.5, |x| x + 1.5, u, false),
        sf("1.5 + x", |x| 1.5 + x, |x| 1.5 + x, u, false),
        sf("x - 0.25", |x| x - 0.25, |x| x - 0.25, u, false),
        sf("2.0 - x", |x| 2.0 - x, |x| 2.0 - x, u, true),
        sf("x / 4.0", |x| x / 4.0, |x| x / 4.0, u, false),
        sf("3.0 / x", |x| 3.0 / x, |x| 3.0 / x, Signed(0.5, 2.0), false),
        sf("-x", |x| -x, |x| -x, u, true),
        sf("-(x * 3.0) + 1.0", |x| -(x * 3.0) + 1.0, |x| -(x * 3.0) + 1.0, u, true),
        sf("(x * 2.0 - 1.0) / 3.0", |x| (x * 2.0 - 1.0) / 3.0, |x| (x * 2.0 - 1.0) / 3.0, u, false),
        sf("x * x + x", |x| x * x + x, |x| x * x + x, u, true),
        sf("x.square()", |x| x.square(), |x| x * x, u, true),
        sf("x.powf(3.0)", |x| x.powf(3.0), |x| x * x * x, Signed(0.5, 2.0), false),
        sf("x.powf(0.5)", |x| x.powf(0.5), f64::sqrt, Uniform(0.0, 4.0), false),
        sf("x.relu()", |x| x.relu(), |x| if x > 0.0 { x } else { 0.0 }, u, true),
        sf("x.sigmoid()", |x| x.sigmoid(), |x| 1.0 / (1.0 + (-x).exp()), u, false),
    ];
    let mut rng = Rng::new(3);
    let mut cases = vec![];
    for dtype in NUMERIC {
        for form in forms.iter().filter(|f| dtype != I64 || f.int) {
            let gen = if dtype == I64 { Int(-50, 50) } else { form.gen };
            for shape in [&[4, 3][..], &[], &[0, 2]] {
                let (op, r) = (form.op, form.reference);
                let x = Nd::rand(&mut rng, shape, gen);
                let name = format!("{} {shape:?}", form.name);
                // A float literal with an integer array is a float array
                // (JAX's weak scalars), except where no literal appears.
                let float_literal = form
                    .name
                    .as_bytes()
                    .windows(3)
                    .any(|w| w[0].is_ascii_digit() && w[1] == b'.' && w[2].is_ascii_digit());
                let out = if dtype == I64 && float_literal { F64 } else { dtype };
                cases.push(Case::one(name, x, dtype, op, move |x| x.map(r)).out(out));
            }
        }
    }
    run_all(&cases);
}

#[test]
fn integer_literals_keep_integer_arrays_integer() {
    let x = Nd::rand(&mut Rng::new(4), &[3, 2], Gen::Int(-9, 9));
    let cases = vec![
        Case::one("x * 3 + 1", x.clone(), I64, |x| x * 3 + 1, |x| x.map(|v| v * 3.0 + 1.0)),
        Case::one("2 - x", x.clone(), I64, |x| 2 - x, |x| x.map(|v| 2.0 - v)),
        Case::one("x * 3 (f64)", x.clone(), F64, |x| x * 3, |x| x.map(|v| v * 3.0)),
        Case::one("x * 3 (f32)", x, F32, |x| x * 3, |x| x.map(|v| v * 3.0)),
    ];
    run_all(&cases);
}

#[test]
fn select_broadcasts_three_ways() {
    let shapes: &[(&[usize], &[usize], &[usize])] = &[
        (&[5], &[5], &[5]),
        (&[3, 1], &[1, 4], &[]),
        (&[2, 1, 4], &[3, 1], &[4]),
        (&[], &[2, 3], &[2, 3]),
        (&[2, 3], &[], &[]),
        (&[4, 1, 1], &[1, 3, 1], &[1, 1, 2]),
        (&[0, 1], &[1, 3], &[3]),
        (&[300, 1], &[130], &[300, 130]),
    ];
    let mut rng = Rng::new(4);
    let mut cases = vec![];
    for dtype in [F64, F32, I64, BOOL] {
        let gen = if dtype == BOOL { Gen::Int(0, 1) } else { Gen::Int(-50, 50) };
        for (sc, sa, sb) in shapes {
            let c = Nd::rand(&mut rng, sc, Gen::Int(0, 1));
            let (a, b) = (Nd::rand(&mut rng, sa, gen), Nd::rand(&mut rng, sb, gen));
            cases.push(
                Case::new(
                    format!("select {sc:?} {sa:?} {sb:?}"),
                    vec![(c, BOOL), (a, dtype), (b, dtype)],
                    |xs| xs[0].select(&xs[1], &xs[2]),
                    |xs| select_ref(&xs[0], &xs[1], &xs[2]),
                )
                .out(dtype),
            );
        }
    }
    // Float values, and the free-function spelling.
    let c = Nd::rand(&mut rng, &[3, 4], Gen::Int(0, 1));
    let (a, b) = (
        Nd::rand(&mut rng, &[4], Gen::Uniform(-1.0, 1.0)),
        Nd::rand(&mut rng, &[3, 1], Gen::Uniform(-1.0, 1.0)),
    );
    for dtype in FLOATS {
        cases.push(
            Case::new(
                "where_ [3, 4] [4] [3, 1]",
                vec![(c.clone(), BOOL), (a.clone(), dtype), (b.clone(), dtype)],
                |xs| anvil::where_(&xs[0], &xs[1], &xs[2]),
                |xs| select_ref(&xs[0], &xs[1], &xs[2]),
            )
            .out(dtype),
        );
        // A mask computed in the trace.
        cases.push(Case::new(
            "select(x > y, x, y * 2)",
            vec![(a.clone(), dtype), (b.clone(), dtype)],
            |xs| xs[0].gt(&xs[1]).select(&xs[0], &(&xs[1] * 2.0)),
            |xs| zip_ref(&xs[0], &xs[1], |x, y| if x > y { x } else { y * 2.0 }),
        ));
    }
    run_all(&cases);
}

#[test]
fn casts_between_all_dtypes() {
    let dtypes = [F64, F32, I64, BOOL];
    let mut cases = vec![];
    for from in dtypes {
        let data: Vec<f64> = match from {
            DType::F64 | DType::F32 => {
                vec![-2.7, -1.0, -0.5, -0.0, 0.0, 0.3, 1.0, 2.5, 3.9, 1e10, 16777217.0, -123.456]
            }
            DType::I64 => vec![-3.0, -1.0, 0.0, 1.0, 2.0, 5.0, 1099511627776.0, 16777217.0],
            DType::Bool => vec![1.0, 0.0, 1.0, 1.0, 0.0],
        };
        for to in dtypes {
            let inputs = [
                Nd::new(&[data.len()], data.clone()),
                Nd::new(&[], vec![data[0]]),
                Nd::new(&[2, 0], vec![]),
            ];
            for x in inputs {
                let name = format!("cast {from} -> {to} {:?}", x.shape);
                let case = Case::one(
                    name,
                    x,
                    from,
                    move |x| x.cast(to),
                    move |x| x.map(|v| as_cast(v, to)),
                );
                cases.push(case.out(to).tol(0.0));
            }
        }
    }
    // A cast inside arithmetic: f32 -> f64 -> f32 round trip.
    cases.push(Case::one(
        "f32 -> f64 -> f32",
        Nd::new(&[3], vec![0.1, -2.5, 7.0]),
        F32,
        |x| (x.cast(F64) * 2.0).cast(F32),
        |x| x.map(|v| as_cast(v * 2.0, F32)),
    ));
    run_all(&cases);
}

// --------------------------------------------------------------- movement

/// Shape, `(before, after)` widths, fill value.
type PadCase = (&'static [usize], &'static [(usize, usize)], f64);

#[test]
fn movement_ops_match_reference() {
    let mut rng = Rng::new(5);
    let mut cases = vec![];
    for dtype in [F64, F32, I64, BOOL] {
        let g = if dtype == BOOL { Gen::Int(0, 1) } else { Gen::Int(-50, 50) };
        // reshape, with -1
        let reshapes: &[(&[usize], &[i64])] = &[
            (&[2, 3, 4], &[4, -1]),
            (&[2, 3, 4], &[-1]),
            (&[2, 3, 4], &[24]),
            (&[2, 3, 4], &[2, -1, 2]),
            (&[2, 3, 4], &[1, 24, 1]),
            (&[2, 3, 4], &[-1, 3, 2, 1]),
            (&[], &[1, 1]),
            (&[1], &[]),
            (&[0, 3], &[3, 0]),
            (&[0, 3], &[-1, 3]),
        ];
        table_cases(
            &mut cases,
            &mut rng,
            g,
            dtype,
            "reshape",
            reshapes,
            |x, t| x.reshape(t),
            reshape_ref,
        );
        cases.push(Case::one(
            "flatten",
            Nd::rand(&mut rng, &[2, 3, 4], g),
            dtype,
            |x| x.flatten(),
            |x| reshape_ref(x, &[-1]),
        ));
        // permute, negative entries
        let perms: &[(&[usize], &[i64])] = &[
            (&[2, 3, 4], &[2, 0, 1]),
            (&[2, 3, 4], &[-1, 0, -2]),
            (&[2, 3, 4], &[0, 1, 2]),
            (&[2, 3, 4], &[1, 2, 0]),
            (&[3, 5], &[1, 0]),
            (&[2, 3, 4, 5], &[3, 1, 0, 2]),
            (&[], &[]),
            (&[0, 2, 3], &[2, 0, 1]),
        ];
        table_cases(
            &mut cases,
            &mut rng,
            g,
            dtype,
            "permute",
            perms,
            |x, p| x.permute(p),
            permute_ref,
        );
        // transpose (last two axes; rank < 2 unchanged) and swap_axes
        for shape in [&[3, 5][..], &[2, 3, 4], &[5], &[]] {
            let name = format!("transpose {shape:?}");
            cases.push(Case::one(
                name,
                Nd::rand(&mut rng, shape, g),
                dtype,
                |x| x.transpose(),
                |x| {
                    let r = x.rank() as i64;
                    let mut p: Vec<i64> = (0..r).collect();
                    if r >= 2 {
                        p.swap(r as usize - 1, r as usize - 2);
                    }
                    permute_ref(x, &p)
                },
            ));
        }
        for (a, b, perm) in [(0, -1, [2, 1, 0]), (1, 1, [0, 1, 2]), (-3, 1, [1, 0, 2])] {
            let name = format!("swap_axes({a}, {b})");
            cases.push(Case::one(
                name,
                Nd::rand(&mut rng, &[2, 3, 4], g),
                dtype,
                move |x| x.swap_axes(a, b),
                move |x| permute_ref(x, &perm),
            ));
        }
        // broadcast_to / expand
        let bcasts: &[(&[usize], &[usize])] = &[
            (&[3], &[2, 3]),
            (&[3, 1], &[3, 4]),
            (&[], &[2, 2]),
            (&[1, 1], &[0, 1]),
            (&[2, 1, 3], &[4, 2, 5, 3]),
            (&[2, 3], &[2, 3]),
            (&[1], &[0]),
        ];
        table_cases(
            &mut cases,
            &mut rng,
            g,
            dtype,
            "broadcast_to",
            bcasts,
            |x, t| x.broadcast_to(t),
            |x, t| Nd::from_fn(t, |i| x.at_broadcast(i)),
        );
        let name = "expand [4, 1] -> [2, 4, 3]";
        cases.push(Case::one(
            name,
            Nd::rand(&mut rng, &[4, 1], g),
            dtype,
            |x| x.expand(&[2, 4, 3]),
            |x| Nd::from_fn(&[2, 4, 3], |i| x.at_broadcast(i)),
        ));
        // pad
        let pads: &[PadCase] = &[
            (&[2, 3], &[(1, 2), (0, 3)], 7.0),
            (&[2, 3, 4], &[(0, 1), (2, 2), (1, 0)], -5.0),
            (&[4], &[(0, 0)], 1.0),
            (&[], &[], 3.0),
            (&[0, 2], &[(1, 1), (2, 0)], -3.0),
        ];
        for (shape, widths, value) in pads {
            let (w1, w2, v) = (widths.to_vec(), widths.to_vec(), *value);
            let name = format!("pad {shape:?} {widths:?} {value}");
            cases.push(Case::one(
                name,
                Nd::rand(&mut rng, shape, g),
                dtype,
                move |x| x.pad(&w1, v),
                move |x| pad_ref(x, &w2, as_cast(v, dtype)),
            ));
        }
        // slice: hand-picked Python edge cases, then random specs
        let spec = |start, stop, step| SliceSpec { start, stop, step };
        let picked: Vec<(Vec<usize>, Vec<SliceSpec>)> = vec![
            (vec![7], vec![spec(None, None, -1)]),
            (vec![7], vec![spec(Some(100), Some(-100), -1)]),
            (vec![7], vec![spec(Some(-100), Some(100), 1)]),
            (vec![7], vec![spec(Some(5), Some(2), 1)]),
            (vec![7], vec![spec(Some(2), Some(5), -1)]),
            (vec![7], vec![spec(None, None, 10)]),
            (vec![7], vec![spec(None, None, -10)]),
            (vec![7], vec![spec(Some(-1), None, -2)]),
            (vec![7], vec![spec(Some(6), Some(0), -2)]),
            (vec![7], vec![spec(Some(-3), Some(-1), 1)]),
            (vec![7], vec![SliceSpec::range(1, 3)]),
            (vec![3, 4], vec![SliceSpec::FULL, spec(None, None, -1)]),
            (vec![0, 4], vec![spec(None, None, -1), spec(Some(1), None, 2)]),
            (vec![], vec![]),
        ];
        let mut slices = picked;
        for shape in [vec![7], vec![5, 6], vec![3, 4, 5], vec![4, 0]] {
            for _ in 0..12 {
                let n = rng.int(1, shape.len() as i64);
                let specs = (0..n)
                    .map(|_| {
                        let mut bound =
                            || if rng.int(0, 3) == 0 { None } else { Some(rng.int(-9, 9)) };
                        let (start, stop) = (bound(), bound());
                        let step = [-3, -2, -1, 1, 2, 3][rng.int(0, 5) as usize];
                        spec(start, stop, step)
                    })
                    .collect();
                slices.push((shape.clone(), specs));
            }
        }
        for (shape, specs) in slices {
            let (s1, s2) = (specs.clone(), specs.clone());
            let shown: Vec<String> = specs.iter().map(ToString::to_string).collect();
            let name = format!("slice {shape:?} [{}]", shown.join(", "));
            let x = Nd::rand(&mut rng, &shape, g);
            cases.push(Case::one(
                name,
                x,
                dtype,
                move |x| x.slice(&s1),
                move |x| slice_ref(x, &s2),
            ));
        }
        let slice_axes =
            [(-1, Some(1), None, 2), (0, None, Some(-1), -1), (1, Some(-2), Some(-100), -1)];
        for (axis, start, stop, step) in slice_axes {
            let name = format!("slice_axis({axis}, {start:?}, {stop:?}, {step})");
            let x = Nd::rand(&mut rng, &[3, 4, 5], g);
            cases.push(Case::one(
                name,
                x,
                dtype,
                move |x| x.slice_axis(axis, start, stop, step),
                move |x| {
                    let mut specs = vec![SliceSpec::FULL; 3];
                    specs[norm_axis(axis, 3)] = spec(start, stop, step);
                    slice_ref(x, &specs)
                },
            ));
        }
        // flip
        let flips: &[(&[usize], &[i64])] = &[
            (&[2, 3, 4], &[0]),
            (&[2, 3, 4], &[-1]),
            (&[2, 3, 4], &[0, 2]),
            (&[2, 3, 4], &[]),
            (&[2, 3, 4], &[2, 1, 0]),
            (&[0, 3], &[0]),
        ];
        table_cases(&mut cases, &mut rng, g, dtype, "flip", flips, |x, a| x.flip(a), flip_ref);
        // squeeze / unsqueeze (negative axes)
        let squeezes: &[(&[usize], &[i64], &[usize])] = &[
            (&[1, 3, 1], &[], &[3]),
            (&[1, 3, 1], &[0], &[3, 1]),
            (&[1, 3, 1], &[-1], &[1, 3]),
            (&[1, 3, 1], &[0, -1], &[3]),
            (&[1, 1], &[], &[]),
            (&[], &[], &[]),
            (&[2, 1, 0], &[1], &[2, 0]),
        ];
        for (shape, axes, to) in squeezes {
            let (a, t) = (axes.to_vec(), to.to_vec());
            let name = format!("squeeze {shape:?} {axes:?}");
            cases.push(Case::one(
                name,
                Nd::rand(&mut rng, shape, g),
                dtype,
                move |x| x.squeeze(&a),
                move |x| x.reshaped(&t),
            ));
        }
        let unsqueezes: &[(&[usize], i64, &[usize])] = &[
            (&[2, 3], 0, &[1, 2, 3]),
            (&[2, 3], 1, &[2, 1, 3]),
            (&[2, 3], 2, &[2, 3, 1]),
            (&[2, 3], -1, &[2, 3, 1]),
            (&[2, 3], -2, &[2, 1, 3]),
            (&[2, 3], -3, &[1, 2, 3]),
            (&[], 0, &[1]),
            (&[], -1, &[1]),
        ];
        for (shape, axis, to) in unsqueezes {
            let (a, t) = (*axis, to.to_vec());
            let name = format!("unsqueeze {shape:?} {axis}");
            cases.push(Case::one(
                name,
                Nd::rand(&mut rng, shape, g),
                dtype,
                move |x| x.unsqueeze(a),
                move |x| x.reshaped(&t),
            ));
        }
        // concatenate and stack (variadic)
        let concats: &[(&[&[usize]], i64)] = &[
            (&[&[2, 3], &[4, 3]], 0),
            (&[&[2, 3], &[2, 1], &[2, 0], &[2, 2]], 1),
            (&[&[2, 3, 1], &[2, 3, 2]], -1),
            (&[&[0, 3], &[2, 3]], 0),
            (&[&[2, 2]], 0),
            (&[&[3], &[3]], -1),
        ];
        for (shapes, axis) in concats {
            let parts: Vec<(Nd, DType)> =
                shapes.iter().map(|s| (Nd::rand(&mut rng, s, g), dtype)).collect();
            let a = *axis;
            let name = format!("concatenate {shapes:?} axis {axis}");
            cases.push(Case::new(
                name,
                parts,
                move |xs| anvil::concatenate(&xs.iter().collect::<Vec<_>>(), a),
                move |xs| concat_ref(xs, a),
            ));
        }
        let stacks: &[(usize, &[usize], i64)] = &[
            (3, &[2, 3], 0),
            (3, &[2, 3], 1),
            (3, &[2, 3], 2),
            (3, &[2, 3], -1),
            (3, &[2, 3], -3),
            (4, &[], 0),
            (2, &[0, 2], 1),
            (1, &[3], -1),
        ];
        for (n, shape, axis) in stacks {
            let parts: Vec<(Nd, DType)> =
                (0..*n).map(|_| (Nd::rand(&mut rng, shape, g), dtype)).collect();
            let a = *axis;
            let name = format!("stack {n} x {shape:?} axis {axis}");
            cases.push(Case::new(
                name,
                parts,
                move |xs| anvil::stack(&xs.iter().collect::<Vec<_>>(), a),
                move |xs| stack_ref(xs, a),
            ));
        }
        // Large enough for several parallel chunks, which then start mid-row
        // and walk negative and zero strides.
        let big = Nd::rand(&mut rng, &[200, 130], g);
        cases.push(Case::one(
            "transpose [200, 130]",
            big.clone(),
            dtype,
            |x| x.transpose(),
            |x| permute_ref(x, &[1, 0]),
        ));
        cases.push(Case::one(
            "flip [200, 130] [0, 1]",
            big.clone(),
            dtype,
            |x| x.flip(&[0, 1]),
            |x| flip_ref(x, &[0, 1]),
        ));
        let specs = [spec(None, None, -1), spec(Some(1), None, 2)];
        cases.push(Case::one(
            "slice [200, 130] [::-1, 1::2]",
            big,
            dtype,
            move |x| x.slice(&specs),
            move |x| slice_ref(x, &specs),
        ));
        let row = Nd::rand(&mut rng, &[130], g);
        cases.push(Case::one(
            "broadcast_to [130] -> [200, 130]",
            row,
            dtype,
            |x| x.broadcast_to(&[200, 130]),
            |x| Nd::from_fn(&[200, 130], |i| x.at_broadcast(i)),
        ));
    }
    run_all(&cases);
}

// ------------------------------------------------------------- reductions

/// Shapes with the axis sets reduced over them: negative axes, unsorted
/// lists, the empty list (identity) and size-0 axes.
fn reduction_axes() -> Vec<(Vec<usize>, Vec<Vec<i64>>)> {
    vec![
        (
            vec![2, 3, 4],
            vec![
                vec![],
                vec![0],
                vec![1],
                vec![2],
                vec![-1],
                vec![0, 2],
                vec![-3, -1],
                vec![2, 0],
                vec![1, -1],
                vec![0, 1, 2],
            ],
        ),
        (vec![5], vec![vec![], vec![0], vec![-1]]),
        (vec![], vec![vec![]]),
        (vec![3, 0, 2], vec![vec![], vec![0], vec![1], vec![0, 2], vec![1, 2], vec![0, 1, 2]]),
        (vec![1, 4, 1], vec![vec![0], vec![0, 2], vec![-2]]),
    ]
}

type ReduceOp = fn(&Var, &[i64], bool) -> Var;
type Fold = fn(&[f64]) -> f64;
/// A reference fold over the reduced values; the dtype gives the identity
/// of an empty `max` / `min` (the dtype's lowest / highest value).
type ReduceRef = fn(&[f64], DType) -> f64;

fn max_of(v: &[f64], dtype: DType) -> f64 {
    let lowest = if dtype == I64 { i64::MIN as f64 } else { -INF };
    v.iter().fold(lowest, |a, &b| nan_max(a, b))
}

fn min_of(v: &[f64], dtype: DType) -> f64 {
    let highest = if dtype == I64 { i64::MAX as f64 } else { INF };
    v.iter().fold(highest, |a, &b| nan_min(a, b))
}

#[test]
fn reductions_match_reference() {
    let mut rng = Rng::new(6);
    let mut cases = vec![];
    let ops: [(&str, ReduceOp, ReduceRef, Gen); 4] = [
        (
            "sum",
            |x, a, k| if k { x.sum_keepdims(a) } else { x.sum(a) },
            |v, _| sum_of(v),
            Gen::Int(-9, 9),
        ),
        ("max", |x, a, k| x.max(a, k), max_of, Gen::Int(-9, 9)),
        ("min", |x, a, k| x.min(a, k), min_of, Gen::Int(-9, 9)),
        ("prod", |x, a, k| x.prod(a, k), |v, _| v.iter().fold(1.0, |a, &b| a * b), Gen::Int(-2, 2)),
    ];
    for dtype in NUMERIC {
        for (shape, sets) in reduction_axes() {
            for axes in sets {
                for keepdims in [false, true] {
                    for (name, op, r, gen) in ops {
                        let (a1, a2) = (axes.clone(), axes.clone());
                        let x = Nd::rand(&mut rng, &shape, gen);
                        let label = format!("{name} {shape:?} axes {axes:?} keepdims {keepdims}");
                        cases.push(Case::one(
                            label,
                            x,
                            dtype,
                            move |x| op(x, &a1, keepdims),
                            move |x| reduce_ref(x, &a2, keepdims, |v| r(v, dtype)),
                        ));
                    }
                }
            }
        }
        // Many outputs (several parallel chunks) and few long ones.
        for axes in [vec![1], vec![0], vec![0, 1]] {
            let (a1, a2) = (axes.clone(), axes.clone());
            let x = Nd::rand(&mut rng, &[20000, 3], Gen::Int(-9, 9));
            let label = format!("sum [20000, 3] axes {axes:?}");
            cases.push(Case::one(
                label,
                x.clone(),
                dtype,
                move |x| x.sum(&a1),
                move |x| reduce_ref(x, &a2, false, sum_of),
            ));
            let (a1, a2) = (axes.clone(), axes.clone());
            let label = format!("max [20000, 3] axes {axes:?}");
            cases.push(Case::one(
                label,
                x,
                dtype,
                move |x| x.max(&a1, true),
                move |x| reduce_ref(x, &a2, true, |v| max_of(v, dtype)),
            ));
        }
        cases.push(Case::one(
            "sum_all [2, 3, 4]",
            Nd::rand(&mut rng, &[2, 3, 4], Gen::Int(-9, 9)),
            dtype,
            |x| x.sum_all(),
            |x| reduce_ref(x, &[0, 1, 2], false, sum_of),
        ));
    }
    // NaN propagates through max and min (as numpy.max / numpy.min).
    let x = Nd::new(&[4, 3], vec![1.0, NAN, 3.0, NAN, -1.0, 2.0, 0.0, 5.0, 4.0, INF, -INF, NAN]);
    for dtype in FLOATS {
        for axes in [vec![1], vec![0], vec![0, 1], vec![]] {
            let (a1, a2) = (axes.clone(), axes.clone());
            let name = format!("max with NaN axes {axes:?}");
            cases.push(Case::one(
                name,
                x.clone(),
                dtype,
                move |x| x.max(&a1, false),
                move |x| reduce_ref(x, &a2, false, |v| max_of(v, dtype)),
            ));
            let (a1, a2) = (axes.clone(), axes.clone());
            let name = format!("min with NaN axes {axes:?}");
            cases.push(Case::one(
                name,
                x.clone(),
                dtype,
                move |x| x.min(&a1, false),
                move |x| reduce_ref(x, &a2, false, |v| min_of(v, dtype)),
            ));
        }
        for axis in [0, 1] {
            for max in [true, false] {
                let name = format!("arg{} with NaN axis {axis}", if max { "max" } else { "min" });
                let op =
                    move |x: &Var| if max { x.argmax(axis, false) } else { x.argmin(axis, false) };
                let r = move |x: &Nd| reduce_ref(x, &[axis], false, |v| arg_best(v, max));
                cases.push(Case::one(name, x.clone(), dtype, op, r).out(I64));
            }
        }
    }
    run_all(&cases);
}

#[test]
fn arg_reductions_pick_the_first_extreme() {
    let shapes: &[(&[usize], i64)] = &[
        (&[2, 3, 4], 0),
        (&[2, 3, 4], 1),
        (&[2, 3, 4], 2),
        (&[2, 3, 4], -1),
        (&[2, 3, 4], -3),
        (&[5], 0),
        (&[5], -1),
        (&[1], 0),
        (&[3, 0], 0),
        (&[4, 1], 1),
        (&[20000, 2], 1),
    ];
    let mut rng = Rng::new(7);
    let mut cases = vec![];
    for dtype in NUMERIC {
        for (shape, axis) in shapes {
            for keepdims in [false, true] {
                for max in [true, false] {
                    // Few distinct values: many ties.
                    let x = Nd::rand(&mut rng, shape, Gen::Int(0, 2));
                    let axis = *axis;
                    let name = format!(
                        "arg{} {shape:?} axis {axis} keepdims {keepdims}",
                        if max { "max" } else { "min" }
                    );
                    let op = move |x: &Var| {
                        if max {
                            x.argmax(axis, keepdims)
                        } else {
                            x.argmin(axis, keepdims)
                        }
                    };
                    let r = move |x: &Nd| reduce_ref(x, &[axis], keepdims, |v| arg_best(v, max));
                    cases.push(Case::one(name, x, dtype, op, r).out(I64));
                }
            }
        }
    }
    run_all(&cases);
}

#[test]
fn composite_reductions_match_reference() {
    let mut rng = Rng::new(8);
    let mut cases = vec![];
    let composites: [(&str, ReduceOp, Fold); 5] = [
        ("mean_axes", |x, a, k| x.mean_axes(a, k), mean_of),
        ("var", |x, a, k| x.var(a, k), var_of),
        ("std", |x, a, k| x.std(a, k), |v| var_of(v).sqrt()),
        ("logsumexp", |x, a, k| x.logsumexp(a, k), logsumexp_of),
        (
            "norm_axes",
            |x, a, k| x.norm_axes(a, k),
            |v| v.iter().map(|x| x * x).fold(0.0, |a, b| a + b).sqrt(),
        ),
    ];
    for dtype in FLOATS {
        for (shape, sets) in reduction_axes() {
            for axes in sets {
                for keepdims in [false, true] {
                    for (name, op, r) in composites {
                        let (a1, a2) = (axes.clone(), axes.clone());
                        let x = Nd::rand(&mut rng, &shape, Gen::Uniform(-2.0, 2.0));
                        let label = format!("{name} {shape:?} axes {axes:?} keepdims {keepdims}");
                        cases.push(Case::one(
                            label,
                            x,
                            dtype,
                            move |x| op(x, &a1, keepdims),
                            move |x| reduce_ref(x, &a2, keepdims, r),
                        ));
                    }
                }
            }
        }
        for shape in [vec![2, 3, 4], vec![], vec![0, 3]] {
            let all: Vec<i64> = (0..shape.len() as i64).collect();
            let x = Nd::rand(&mut rng, &shape, Gen::Uniform(-2.0, 2.0));
            let a = all.clone();
            let label = format!("mean {shape:?}");
            cases.push(Case::one(
                label,
                x.clone(),
                dtype,
                |x| x.mean(),
                move |x| reduce_ref(x, &a, false, mean_of),
            ));
            let label = format!("norm {shape:?}");
            cases.push(Case::one(
                label,
                x,
                dtype,
                |x| x.norm(),
                move |x| {
                    reduce_ref(x, &all, false, |v| {
                        v.iter().map(|x| x * x).fold(0.0, |a, b| a + b).sqrt()
                    })
                },
            ));
        }
        let softmaxes: &[(&[usize], i64)] = &[
            (&[2, 3, 4], 0),
            (&[2, 3, 4], 1),
            (&[2, 3, 4], -1),
            (&[5], 0),
            (&[1], 0),
            (&[3, 0], 1),
            (&[0, 3], 1),
        ];
        for (shape, axis) in softmaxes {
            let axis = *axis;
            let x = Nd::rand(&mut rng, shape, Gen::Uniform(-3.0, 3.0));
            let name = format!("softmax {shape:?} axis {axis}");
            cases.push(Case::one(
                name,
                x.clone(),
                dtype,
                move |x| x.softmax(axis),
                move |x| softmax_ref(x, axis, false),
            ));
            let name = format!("log_softmax {shape:?} axis {axis}");
            cases.push(Case::one(
                name,
                x,
                dtype,
                move |x| x.log_softmax(axis),
                move |x| softmax_ref(x, axis, true),
            ));
        }
        // Values whose exponentials overflow: the shift by the maximum must hold.
        let big = Nd::new(&[2, 3], vec![1000.0, 1001.0, 999.0, -1000.0, -1001.0, -1002.0]);
        cases.push(Case::one(
            "logsumexp large",
            big.clone(),
            dtype,
            |x| x.logsumexp(&[-1], false),
            |x| reduce_ref(x, &[-1], false, logsumexp_of),
        ));
        cases.push(Case::one(
            "softmax large",
            big,
            dtype,
            |x| x.softmax(-1),
            |x| softmax_ref(x, -1, false),
        ));
        let minus_inf = Nd::new(&[2, 2], vec![-INF, -INF, 0.0, -INF]);
        cases.push(Case::one(
            "logsumexp -inf",
            minus_inf,
            dtype,
            |x| x.logsumexp(&[1], true),
            |x| reduce_ref(x, &[1], true, logsumexp_of),
        ));
    }
    run_all(&cases);
}

// ----------------------------------------------------------------- matmul

#[test]
fn matmul_matches_numpy_semantics() {
    let pairs: &[(&[usize], &[usize])] = &[
        (&[4], &[4, 3]),
        (&[3, 4], &[4]),
        (&[5], &[5]),
        (&[3, 4], &[4, 5]),
        (&[1, 1], &[1, 1]),
        (&[2, 1, 3, 4], &[5, 4, 6]),
        (&[2, 3, 4], &[4, 5]),
        (&[4, 5], &[2, 5, 3]),
        (&[3], &[2, 3, 4]),
        (&[2, 3, 4], &[4]),
        (&[1, 3, 4], &[2, 4, 5]),
        (&[2, 3, 4], &[1, 4, 5]),
        (&[2, 2, 3], &[2, 3, 2]),
        (&[3, 1, 2, 3], &[1, 4, 3, 2]),
        // Sizes around faer's block boundaries.
        (&[63, 64], &[64, 65]),
        (&[65, 128], &[128, 63]),
        (&[2, 64, 65], &[65, 3]),
        (&[127, 129], &[129]),
        (&[3, 127], &[127, 128]),
        (&[129, 5], &[5, 127]),
        (&[128, 129], &[129, 127]),
        // Batches large enough to be split across threads.
        (&[16, 20, 30], &[16, 30, 10]),
        (&[8, 1, 16, 16], &[1, 4, 16, 16]),
        // k = 0 (the result is zeros), and empty results.
        (&[3, 0], &[0, 4]),
        (&[0], &[0]),
        (&[2, 3, 0], &[0, 5]),
        (&[0], &[0, 3]),
        (&[0, 4], &[4, 3]),
        (&[3, 4], &[4, 0]),
        (&[0, 3, 4], &[4, 2]),
        (&[1, 3, 4], &[0, 4, 2]),
    ];
    let mut rng = Rng::new(9);
    let mut cases = vec![];
    for dtype in FLOATS {
        for (sa, sb) in pairs {
            let a = Nd::rand(&mut rng, sa, Gen::Uniform(-1.0, 1.0));
            let b = Nd::rand(&mut rng, sb, Gen::Uniform(-1.0, 1.0));
            cases.push(Case::new(
                format!("matmul {sa:?} @ {sb:?}"),
                vec![(a, dtype), (b, dtype)],
                |xs| xs[0].matmul(&xs[1]),
                |xs| matmul_ref(&xs[0], &xs[1]),
            ));
        }
        // Operands produced by other ops (non-trivial layouts upstream).
        let (a, b) = (
            Nd::rand(&mut rng, &[5, 3], Gen::Uniform(-1.0, 1.0)),
            Nd::rand(&mut rng, &[4, 5], Gen::Uniform(-1.0, 1.0)),
        );
        cases.push(Case::new(
            "transpose(a) @ transpose(b)",
            vec![(a, dtype), (b, dtype)],
            |xs| xs[0].transpose().matmul(&xs[1].transpose()),
            |xs| matmul_ref(&permute_ref(&xs[0], &[1, 0]), &permute_ref(&xs[1], &[1, 0])),
        ));
    }
    run_all(&cases);
}

// --------------------------------------------------------------- indexing

#[test]
fn indexing_matches_reference() {
    let mut rng = Rng::new(10);
    let g = Gen::Int(-50, 50);
    let idx = |shape: &[usize], v: &[f64]| Nd::new(shape, v.to_vec());
    let takes: Vec<(Vec<usize>, Nd, i64)> = vec![
        (vec![4, 5], idx(&[3], &[0.0, -1.0, 2.0]), 0),
        (vec![4, 5], idx(&[4], &[4.0, -5.0, 0.0, 0.0]), 1),
        (vec![4, 5], idx(&[4], &[4.0, -5.0, 0.0, 0.0]), -1),
        (vec![4, 5], idx(&[], &[-2.0]), 1),
        (vec![3], idx(&[], &[2.0]), 0),
        (vec![4, 5, 2], idx(&[2, 2], &[0.0, 1.0, 3.0, -4.0]), 0),
        (vec![4, 5, 2], idx(&[2, 3], &[0.0, 1.0, 4.0, -1.0, 2.0, 2.0]), 1),
        (vec![4, 5, 2], idx(&[2, 3], &[0.0, 1.0, 1.0, -1.0, -2.0, 0.0]), -1),
        (vec![4, 5], idx(&[0], &[]), 0),
        (vec![0, 3], idx(&[2], &[1.0, 2.0]), 1),
        (vec![2, 3], idx(&[0, 2], &[]), 1),
    ];
    let scatters: Vec<(Vec<usize>, Nd, i64, usize)> = vec![
        (vec![3, 4], idx(&[3], &[1.0, 1.0, -1.0]), 0, 3),
        (vec![3, 4], idx(&[4], &[0.0, 2.0, 0.0, 2.0]), 1, 3),
        (vec![3, 4], idx(&[4], &[0.0, -1.0, 0.0, 2.0]), -1, 5),
        (vec![2, 2, 5], idx(&[2, 2], &[0.0, 3.0, 3.0, -4.0]), 0, 4),
        (vec![3, 2, 2], idx(&[2, 2], &[1.0, 1.0, 0.0, -1.0]), -1, 2),
        (vec![5], idx(&[], &[1.0]), 0, 3),
        (vec![3], idx(&[], &[2.0]), 1, 4),
        (vec![3], idx(&[], &[-1.0]), -1, 4),
        (vec![0, 4], idx(&[0], &[]), 0, 2),
        (vec![6], idx(&[6], &[0.0, 0.0, 0.0, 1.0, 1.0, 0.0]), 0, 2),
    ];
    let mut cases = vec![];
    for dtype in NUMERIC {
        for (shape, i, axis) in &takes {
            let x = Nd::rand(&mut rng, shape, g);
            let axis = *axis;
            cases.push(Case::new(
                format!("take {shape:?} idx {:?} axis {axis}", i.shape),
                vec![(x, dtype), (i.clone(), I64)],
                move |xs| xs[0].take(&xs[1], axis),
                move |xs| take_ref(&xs[0], &xs[1], axis),
            ));
        }
        let lists: &[(i64, &[i64])] = &[(0, &[3, -1, 0]), (-1, &[2, 2]), (1, &[-5, 4]), (1, &[])];
        for (axis, list) in lists {
            let (axis, l1) = (*axis, list.to_vec());
            let i = Nd::new(&[list.len()], list.iter().map(|&v| v as f64).collect());
            let x = Nd::rand(&mut rng, &[4, 5], g);
            let name = format!("index({axis}, {list:?})");
            cases.push(Case::one(
                name,
                x,
                dtype,
                move |x| x.index(axis, &l1),
                move |x| take_ref(x, &i, axis),
            ));
        }
        for (shape, axis, at) in
            [(vec![4, 5], 0, -1), (vec![4, 5], 1, 2), (vec![3, 4, 5], -2, 0), (vec![3], 0, 1)]
        {
            let x = Nd::rand(&mut rng, &shape, g);
            let name = format!("at({axis}, {at}) {shape:?}");
            let i = Nd::new(&[], vec![at as f64]);
            cases.push(Case::one(
                name,
                x,
                dtype,
                move |x| x.index_axis(axis, at),
                move |x| take_ref(x, &i, axis),
            ));
        }
        for (shape, i, axis, size) in &scatters {
            let u = Nd::rand(&mut rng, shape, g);
            let (axis, size) = (*axis, *size);
            cases.push(Case::new(
                format!("scatter_add {shape:?} idx {:?} axis {axis} size {size}", i.shape),
                vec![(u, dtype), (i.clone(), I64)],
                move |xs| xs[0].scatter_add(&xs[1], axis, size),
                move |xs| scatter_add_ref(&xs[0], &xs[1], axis, size),
            ));
        }
    }
    run_all(&cases);
}

#[test]
fn out_of_bounds_indices_are_errors() {
    let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[4]).unwrap();
    let u = Tensor::from_vec(vec![1.0, 2.0], &[2]).unwrap();
    for bad in [4i64, -5, 100] {
        let i = Tensor::from_vec(vec![0i64, bad], &[2]).unwrap();
        let taken = jit(|x: &Var, i: &Var| x.take(i, 0)).eval((&x, &i));
        assert!(taken.is_err(), "take index {bad} of size 4");
        let scattered = jit(|u: &Var, i: &Var| u.scatter_add(i, 0, 4)).eval((&u, &i));
        assert!(scattered.is_err(), "scatter_add index {bad} into size 4");
    }
}

// -------------------------------------------------------------- constants

#[test]
fn constants_match_reference() {
    let mut rng = Rng::new(11);
    let g = Gen::Int(-50, 50);
    let mut cases = vec![];
    let iota_ref = |shape: Vec<usize>, axis: usize| {
        move |x: &Nd| {
            let c = Nd::from_fn(&shape, |i| i[axis] as f64);
            zip_ref(x, &c, |a, b| a + b)
        }
    };
    let eye_ref = |x: &Nd| {
        let n = x.shape[x.rank() - 1];
        zip_ref(x, &Nd::from_fn(&[n, n], |i| b2f(i[0] == i[1])), |a, b| a + b)
    };
    // The f64 constructors, used inside traced functions.
    let f64_cases = [
        Case::one(
            "x + full([2, 3], 1.5)",
            Nd::rand(&mut rng, &[2, 3], g),
            F64,
            |x| x + anvil::full(&[2, 3], 1.5),
            |x| x.map(|v| v + 1.5),
        ),
        Case::one(
            "x + full([3], -2)",
            Nd::rand(&mut rng, &[2, 3], g),
            F64,
            |x| x + full(&[3], -2.0),
            |x| x.map(|v| v - 2.0),
        ),
        Case::one(
            "full([0, 2], 3) + x",
            Nd::new(&[0, 2], vec![]),
            F64,
            |x| full(&[0, 2], 3.0) + x,
            |x| x.clone(),
        ),
        Case::one(
            "x + iota([3, 4], 0)",
            Nd::rand(&mut rng, &[3, 4], g),
            F64,
            |x| x + iota(&[3, 4], 0),
            iota_ref(vec![3, 4], 0),
        ),
        Case::one(
            "x + iota([3, 4], 1)",
            Nd::rand(&mut rng, &[3, 4], g),
            F64,
            |x| x + anvil::iota(&[3, 4], 1),
            iota_ref(vec![3, 4], 1),
        ),
        Case::one(
            "x + iota([2, 3, 4], 1)",
            Nd::rand(&mut rng, &[2, 3, 4], g),
            F64,
            |x| x + iota(&[2, 3, 4], 1),
            iota_ref(vec![2, 3, 4], 1),
        ),
        Case::one(
            "x + iota([4], 0)",
            Nd::rand(&mut rng, &[3, 4], g),
            F64,
            |x| x + iota(&[4], 0),
            iota_ref(vec![4], 0),
        ),
        Case::one(
            "x + iota([0, 3], 1)",
            Nd::new(&[0, 3], vec![]),
            F64,
            |x| x + iota(&[0, 3], 1),
            iota_ref(vec![0, 3], 1),
        ),
        Case::one(
            "x + eye(3)",
            Nd::rand(&mut rng, &[3, 3], g),
            F64,
            |x| x + anvil::eye(3),
            eye_ref,
        ),
        Case::one("x + eye(1)", Nd::rand(&mut rng, &[2, 1, 1], g), F64, |x| x + eye(1), eye_ref),
        Case::one("x + eye(0)", Nd::new(&[0, 0], vec![]), F64, |x| x + eye(0), eye_ref),
        Case::one(
            "x @ eye(4)",
            Nd::rand(&mut rng, &[2, 4], g),
            F64,
            |x| x.matmul(&eye(4)),
            |x| x.clone(),
        ),
        Case::one(
            "iota alone",
            Nd::new(&[1], vec![0.0]),
            F64,
            |_| iota(&[2, 3], 1),
            |_| Nd::from_fn(&[2, 3], |i| i[1] as f64),
        ),
        Case::one(
            "eye alone",
            Nd::new(&[1], vec![0.0]),
            F64,
            |_| eye(3),
            |_| Nd::from_fn(&[3, 3], |i| b2f(i[0] == i[1])),
        ),
    ];
    cases.extend(f64_cases);
    for dtype in NUMERIC {
        let name = format!("x + eye(3).cast({dtype})");
        cases.push(Case::one(
            name,
            Nd::rand(&mut rng, &[3, 3], g),
            dtype,
            move |x| x + eye(3).cast(dtype),
            eye_ref,
        ));
        let name = format!("x + iota_dtype([3, 4], 1, {dtype})");
        cases.push(Case::one(
            name,
            Nd::rand(&mut rng, &[3, 4], g),
            dtype,
            move |x| x + iota_dtype(&[3, 4], 1, dtype),
            iota_ref(vec![3, 4], 1),
        ));
    }
    for dtype in [F64, F32, I64, BOOL] {
        for shape in [&[2, 3][..], &[], &[0, 4]] {
            let x = Nd::rand(&mut rng, shape, Gen::Int(0, 1));
            cases.push(Case::one(
                format!("zeros_like {shape:?}"),
                x.clone(),
                dtype,
                |x| x.zeros_like(),
                |x| x.map(|_| 0.0),
            ));
            cases.push(Case::one(
                format!("ones_like {shape:?}"),
                x.clone(),
                dtype,
                |x| x.ones_like(),
                |x| x.map(|_| 1.0),
            ));
            cases.push(Case::one(
                format!("full_like 2.5 {shape:?}"),
                x,
                dtype,
                |x| x.full_like(2.5),
                move |x| x.map(|_| as_cast(2.5, dtype)),
            ));
        }
    }
    run_all(&cases);
}
