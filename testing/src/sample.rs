//! [`OpSample`]: one concrete instance of an op with valid inputs, and the
//! seeded generator ([`TestRng`]) its inputs and their batched
//! variants are drawn from.

use super::run;
use anvil::{DType, Op, Result, Tensor, TensorType, Var};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, RngCore, SeedableRng};

/// The seeded generator samples are drawn from: `rand`'s [`StdRng`]
/// behind the few draws the kit needs. The same seed gives the same numbers
/// on every platform (for one version of `rand`), so samples and their
/// batched variants are reproducible.
///
/// ```
/// use anvil_testing::TestRng;
/// let mut a = TestRng::new(7);
/// let mut b = TestRng::new(7);
/// assert_eq!(a.next_u64(), b.next_u64());
/// let u = a.next_f64();
/// assert!((0.0..1.0).contains(&u));
/// ```
#[derive(Clone, Debug)]
pub struct TestRng(StdRng);

impl TestRng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> TestRng {
        TestRng(StdRng::seed_from_u64(seed))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A float uniform in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        self.0.random::<f64>()
    }

    /// A float uniform in `[lo, hi)` (`lo` when the range is empty).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        if hi > lo {
            self.0.random_range(lo..hi)
        } else {
            lo
        }
    }

    /// An integer uniform in `[lo, hi)` (`lo` when the range is empty).
    pub fn int(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        self.0.random_range(lo..hi)
    }

    /// Shuffles `v` in place.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        v.shuffle(&mut self.0);
    }

    /// The underlying `rand` generator, for draws the methods above do not
    /// offer.
    pub fn rng(&mut self) -> &mut StdRng {
        &mut self.0
    }
}

/// What an input of an [`OpSample`] is, and so how further values of it are
/// drawn (the batched variants `vmap` checks stack, the points a
/// finite-difference check may perturb). Real-valued kinds keep away from the
/// points where the ops they feed are not smooth.
#[derive(Clone, Debug, PartialEq)]
pub enum InputKind {
    /// Real values uniform in `[lo, hi)` (positive ranges for `log`, `sqrt`...).
    Uniform {
        /// Lower bound (inclusive).
        lo: f64,
        /// Upper bound (exclusive).
        hi: f64,
    },
    /// Real values of either sign with `|x|` uniform in `[lo, hi)`: for `abs`,
    /// `sign`, `recip` and divisors, kept away from 0.
    AwayFromZero {
        /// Smallest magnitude (positive).
        lo: f64,
        /// Largest magnitude.
        hi: f64,
    },
    /// Real values uniform in `[lo, hi)` but at least 0.1 away from every
    /// multiple of 0.5: for `floor`, `ceil`, `round` and casts to integers.
    OffGrid {
        /// Lower bound.
        lo: f64,
        /// Upper bound.
        hi: f64,
    },
    /// Pairwise-distinct reals, a random pick of points `0.1 * (k + offset)`
    /// for integers `k`, for `max`, `min`, `argmax` and comparisons: no ties
    /// within a tensor, and none between an input with offset 0 and one with
    /// offset 0.5 (at least 0.05 apart).
    Distinct {
        /// Shift of the grid, in units of the grid step (0.1).
        offset: f64,
    },
    /// Square matrices in the last two axes (any leading batch axes), well
    /// conditioned: entries uniform in `[-1, 1)` plus `n + 0.5` on the
    /// diagonal (strictly diagonally dominant), for `solve`-like ops. On a
    /// shape whose last two axes are not square, like `Uniform` in `[-1, 1)`.
    WellConditioned,
    /// Symmetric matrices in the last two axes with well separated
    /// eigenvalues: `3i - 1.5` on the diagonal in a random order (so that
    /// ascending eigenvalues do not follow the axes) plus symmetric noise in
    /// `[-0.3, 0.3)` (eigenvalue gaps above 1 up to `n = 4`), for `eigh`. On a non-square shape, like `Uniform` in `[-1, 1)`.
    SeparatedEigenvalues,
    /// Integer data (not indices) uniform in `[lo, hi)`, for `i64` ops.
    Int {
        /// Lower bound (inclusive).
        lo: i64,
        /// Upper bound (exclusive).
        hi: i64,
    },
    /// `i64` indices into an axis of `size` entries: in `[0, size)`, or in
    /// `[-size, size)` when `negative` (negative indices count from the end).
    /// Always in bounds, and repeats are likely (which `scatter_add` must
    /// accumulate).
    Index {
        /// The size of the indexed axis.
        size: usize,
        /// Whether negative indices are drawn too.
        negative: bool,
    },
    /// Booleans, each a fair coin.
    Bool,
    /// Never varied: every element of a batch is the sample's own input
    /// (for an input that only one value makes valid).
    Fixed,
}

impl InputKind {
    /// The dtype a value of this kind has by default: `f64` for the real
    /// kinds, `i64` for integers and indices, `bool` for booleans. `None` for
    /// [`InputKind::Fixed`], whose value is given.
    pub fn default_dtype(&self) -> Option<DType> {
        match self {
            InputKind::Uniform { .. }
            | InputKind::AwayFromZero { .. }
            | InputKind::OffGrid { .. }
            | InputKind::Distinct { .. }
            | InputKind::WellConditioned
            | InputKind::SeparatedEigenvalues => Some(DType::F64),
            InputKind::Int { .. } | InputKind::Index { .. } => Some(DType::I64),
            InputKind::Bool => Some(DType::Bool),
            InputKind::Fixed => None,
        }
    }

    /// Whether the kind is real-valued (a float input of this kind is a
    /// point a derivative can be taken at).
    pub fn is_real(&self) -> bool {
        self.default_dtype() == Some(DType::F64)
    }

    /// A fresh value of this kind, of `shape`, cast to `dtype`; `None` for
    /// [`InputKind::Fixed`].
    pub fn generate(&self, shape: &[usize], dtype: DType, rng: &mut TestRng) -> Option<Tensor> {
        let n: usize = shape.iter().product();
        let t = match *self {
            InputKind::Uniform { lo, hi } => f64s(uniform(n, lo, hi, rng), shape),
            InputKind::AwayFromZero { lo, hi } => f64s(away_from_zero(n, lo, hi, rng), shape),
            InputKind::OffGrid { lo, hi } => f64s(off_grid(n, lo, hi, rng), shape),
            InputKind::Distinct { offset } => f64s(distinct(n, offset, rng), shape),
            InputKind::WellConditioned => f64s(well_conditioned(shape, rng), shape),
            InputKind::SeparatedEigenvalues => f64s(separated(shape, rng), shape),
            InputKind::Int { lo, hi } => ints(lo, hi, shape, rng)?,
            InputKind::Index { size, negative } => {
                let size = size as i64;
                ints(if negative { -size } else { 0 }, size, shape, rng)?
            }
            InputKind::Bool => {
                let v: Vec<bool> = (0..n).map(|_| rng.next_u64() & 1 == 1).collect();
                Tensor::from_vec(v, shape).ok()?
            }
            InputKind::Fixed => return None,
        };
        Some(if t.dtype() == dtype { t } else { t.cast(dtype) })
    }
}

/// `n` reals uniform in `[lo, hi)`.
fn uniform(n: usize, lo: f64, hi: f64, rng: &mut TestRng) -> Vec<f64> {
    (0..n).map(|_| rng.uniform(lo, hi)).collect()
}

/// `n` reals of random sign with magnitudes uniform in `[lo, hi)`.
fn away_from_zero(n: usize, lo: f64, hi: f64, rng: &mut TestRng) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let m = rng.uniform(lo, hi);
            if rng.next_u64() & 1 == 0 {
                m
            } else {
                -m
            }
        })
        .collect()
}

/// `n` reals drawn in `[lo, hi)`, then moved to at least 0.1 from the
/// nearest multiple of 0.5.
fn off_grid(n: usize, lo: f64, hi: f64, rng: &mut TestRng) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let x = rng.uniform(lo, hi);
            let base = (2.0 * x).floor() / 2.0;
            base + (x - base).clamp(0.1, 0.4)
        })
        .collect()
}

/// `n` distinct points `0.1 * (k + offset)`, `k` a random pick in `[-n - 4, n + 4)`.
fn distinct(n: usize, offset: f64, rng: &mut TestRng) -> Vec<f64> {
    let m = n as i64 + 4;
    let mut ks: Vec<i64> = (-m..m).collect();
    rng.shuffle(&mut ks);
    ks[..n].iter().map(|&k| 0.1 * (k as f64 + offset)).collect()
}

/// Entries uniform in `[-1, 1)`, plus `r + 0.5` on the diagonal of every
/// square `r x r` matrix in the last two axes.
fn well_conditioned(shape: &[usize], rng: &mut TestRng) -> Vec<f64> {
    let mut v = uniform(shape.iter().product(), -1.0, 1.0, rng);
    if let [.., r, c] = *shape {
        if r == c && r > 0 {
            for (i, x) in v.iter_mut().enumerate() {
                if i % (r * r) % (r + 1) == 0 {
                    *x += r as f64 + 0.5;
                }
            }
        }
    }
    v
}

/// Symmetric `r x r` matrices in the last two axes with eigenvalues about
/// `0, 3, 6, ...` (see [`InputKind::SeparatedEigenvalues`]).
fn separated(shape: &[usize], rng: &mut TestRng) -> Vec<f64> {
    let n: usize = shape.iter().product();
    let [.., r, c] = *shape else { return uniform(n, -1.0, 1.0, rng) };
    if r != c || r == 0 {
        return uniform(n, -1.0, 1.0, rng);
    }
    let mut v = vec![0.0; n];
    for m in v.chunks_mut(r * r) {
        let mut order: Vec<usize> = (0..r).collect();
        rng.shuffle(&mut order);
        for i in 0..r {
            for j in 0..=i {
                let x = rng.uniform(-0.3, 0.3);
                m[i * r + j] = x;
                m[j * r + i] = x;
            }
            m[i * r + i] += 3.0 * order[i] as f64 - 1.5;
        }
    }
    v
}

/// An `i64` tensor of `shape` with entries uniform in `[lo, hi)`.
fn ints(lo: i64, hi: i64, shape: &[usize], rng: &mut TestRng) -> Option<Tensor> {
    let n: usize = shape.iter().product();
    Tensor::from_vec((0..n).map(|_| rng.int(lo, hi)).collect::<Vec<i64>>(), shape).ok()
}

fn f64s(v: Vec<f64>, shape: &[usize]) -> Tensor {
    Tensor::from_vec(v, shape)
        .or_else(|_| Tensor::zeros(shape))
        .expect("a sample's shape fits in memory")
}

/// FNV-1a, to derive a sample's seed from its description.
pub(super) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xCBF2_9CE4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3))
}

/// How the derivative checks treat an op whose derivative is not simply
/// the derivative of the function it computes (see [`OpSample::derivative`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Derivative {
    /// The usual case: forward and reverse mode, checked against finite
    /// differences of the op's own values.
    #[default]
    FiniteDifferences,
    /// The derivative is zero by definition, whatever the op computes
    /// (`stop_gradient`, the identity with no derivative): the jvp must be
    /// zero, and finite differences are not compared.
    Zero,
    /// Reverse mode only (a `custom_vjp` call, as in JAX): the op's jvp rule
    /// emits a tangent that only reverse mode can use, so the forward-mode
    /// checks are skipped, and the vjp is compared with finite differences
    /// (the dot-product test with `J v` from finite differences).
    ReverseOnly,
}

/// One concrete instance of an op with valid sample inputs: what the
/// conformance checks ([`check_op_vmap`](super::check_op_vmap),
/// [`check_op_jvp`](super::check_op_jvp) and the other derivative checks,
/// [`check_op`](super::check_op) for all of them) run an op on.
///
/// Each input comes with its [`InputKind`], which says how to draw more
/// values like it (all valid for the op: indices in bounds, positive values
/// for `log`). Build one with [`OpSample::new`] and the builder methods; a
/// plugin crate builds samples of its own ops the same way.
///
/// ```
/// use anvil::ops::reduce::ReduceMax;
/// use anvil_testing::{InputKind, OpSample};
///
/// let s = OpSample::new(ReduceMax { axes: vec![1], keepdims: true })
///     .input(InputKind::Distinct { offset: 0.0 }, &[2, 3]);
/// assert_eq!(s.describe(), "reduce_max[axes=[1], keepdims=true](f64[2,3])");
/// assert_eq!(s.output_type()?.shape(), [2, 1]);
/// // Variant 0 is the input itself; the others are fresh draws of its kind.
/// assert_eq!(s.variant(0, 0), s.inputs[0]);
/// assert_ne!(s.variant(0, 1), s.inputs[0]);
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Debug)]
pub struct OpSample {
    /// The op, with its parameters.
    pub op: Box<dyn Op>,
    /// One valid value per operand.
    pub inputs: Vec<Tensor>,
    /// What each input is (same length as `inputs`).
    pub kinds: Vec<InputKind>,
    /// Relative tolerance when comparing results computed two ways.
    pub rtol: f64,
    /// Absolute tolerance when comparing results computed two ways.
    pub atol: f64,
    /// Whether the op can be evaluated. `false` for an op that exists only
    /// to be transformed (the tangent node of a `custom_vjp`, whose kernel is
    /// an error): checks then compare types only.
    pub evaluable: bool,
    /// How the derivative checks treat the op:
    /// [`Derivative::FiniteDifferences`] unless set with
    /// [`OpSample::zero_derivative`] or [`OpSample::reverse_only`].
    pub derivative: Derivative,
}

impl OpSample {
    /// A sample of `op` with no inputs yet and tolerances of `1e-12`.
    pub fn new(op: impl Op) -> OpSample {
        OpSample::from_boxed(Box::new(op))
    }

    /// Like [`OpSample::new`], for an op already boxed.
    pub fn from_boxed(op: Box<dyn Op>) -> OpSample {
        OpSample {
            op,
            inputs: Vec::new(),
            kinds: Vec::new(),
            rtol: 1e-12,
            atol: 1e-12,
            evaluable: true,
            derivative: Derivative::FiniteDifferences,
        }
    }

    /// Adds an input of `kind` and `shape`, of the kind's default dtype
    /// (`f64`, `i64` or `bool`), drawn deterministically from the sample's
    /// description so far.
    ///
    /// # Panics
    /// For [`InputKind::Fixed`], which has no values of its own (use
    /// [`OpSample::given`]).
    pub fn input(self, kind: InputKind, shape: &[usize]) -> OpSample {
        let dtype = kind.default_dtype().expect("InputKind::Fixed needs a value: use given()");
        self.input_dtype(kind, shape, dtype)
    }

    /// Like [`OpSample::input`], cast to `dtype` (an `f32` input of a real
    /// kind, an `f64` input holding integers).
    ///
    /// # Panics
    /// For [`InputKind::Fixed`].
    pub fn input_dtype(self, kind: InputKind, shape: &[usize], dtype: DType) -> OpSample {
        let seed = fnv1a(
            format!("{}/{}/{kind:?}/{shape:?}/{dtype}", self.describe(), self.inputs.len())
                .as_bytes(),
        );
        let t = kind
            .generate(shape, dtype, &mut TestRng::new(seed))
            .expect("InputKind::Fixed needs a value: use given()");
        self.given(t, kind)
    }

    /// Adds an input with the given value; `kind` says how to draw more
    /// values like it (variants are cast to `value`'s dtype).
    pub fn given(mut self, value: Tensor, kind: InputKind) -> OpSample {
        self.inputs.push(value);
        self.kinds.push(kind);
        self
    }

    /// Sets the tolerances used when comparing results.
    pub fn tol(mut self, rtol: f64, atol: f64) -> OpSample {
        self.rtol = rtol;
        self.atol = atol;
        self
    }

    /// Marks the op as not evaluable (see [`OpSample::evaluable`]).
    pub fn not_evaluable(mut self) -> OpSample {
        self.evaluable = false;
        self
    }

    /// Marks the op's derivative as zero by definition
    /// ([`Derivative::Zero`]), like `stop_gradient`'s.
    pub fn zero_derivative(mut self) -> OpSample {
        self.derivative = Derivative::Zero;
        self
    }

    /// Marks the op as differentiable in reverse mode only
    /// ([`Derivative::ReverseOnly`]), like a `custom_vjp` call.
    pub fn reverse_only(mut self) -> OpSample {
        self.derivative = Derivative::ReverseOnly;
        self
    }

    /// The op and the input types, as in error messages:
    /// `sum[axes=[0], keepdims=false](f64[2,3])`.
    pub fn describe(&self) -> String {
        let types: Vec<String> = self.inputs.iter().map(|t| t.ty().to_string()).collect();
        format!("{}({})", self.op.display(), types.join(", "))
    }

    /// Which inputs are differentiable: floats of a real-valued kind.
    pub fn differentiable(&self) -> Vec<bool> {
        self.inputs
            .iter()
            .zip(&self.kinds)
            .map(|(t, k)| t.dtype().is_float() && k.is_real())
            .collect()
    }

    /// The op's result type on the sample's inputs (for an op with one result).
    ///
    /// # Errors
    /// The shape rule's error, naming the sample; an op with several results.
    pub fn output_type(&self) -> std::result::Result<TensorType, String> {
        let mut types = self.output_types()?;
        match types.len() {
            1 => Ok(types.swap_remove(0)),
            n => Err(format!("{}: the op has {n} results (use output_types)", self.describe())),
        }
    }

    /// The op's result types on the sample's inputs.
    ///
    /// # Errors
    /// The shape rule's error, naming the sample.
    pub fn output_types(&self) -> std::result::Result<Vec<TensorType>, String> {
        let types: Vec<TensorType> = self.inputs.iter().map(Tensor::ty).collect();
        self.op.infer_results(&types).map_err(|e| format!("{}: {e}", self.describe()))
    }

    /// Variant `k` of input `i`: the input itself for `k == 0` (and for a
    /// [`InputKind::Fixed`] input), otherwise a fresh value of the input's
    /// kind, shape and dtype, the same for the same `(i, k)`.
    ///
    /// # Panics
    /// When `i` is not an input index.
    pub fn variant(&self, i: usize, k: usize) -> Tensor {
        let base = &self.inputs[i];
        if k == 0 {
            return base.clone();
        }
        let seed = fnv1a(format!("{}/variant/{i}/{k}", self.describe()).as_bytes());
        self.kinds[i]
            .generate(base.shape(), base.dtype(), &mut TestRng::new(seed))
            .unwrap_or_else(|| base.clone())
    }

    /// The function that applies the op to its arguments and returns
    /// every result, for the checks.
    pub fn function(&self) -> impl Fn(&[Var]) -> Vec<Var> + Clone {
        let op = self.op.clone();
        let n = self.output_types().map_or(1, |t| t.len());
        move |xs: &[Var]| {
            let refs: Vec<&Var> = xs.iter().collect();
            Var::apply_op_n(op.clone(), &refs, n)
        }
    }

    /// Runs the op on the sample's own inputs; returns its first result.
    ///
    /// # Errors
    /// The op failing on them (a bad sample, or a broken kernel), naming the sample.
    pub fn run(&self) -> std::result::Result<Tensor, String> {
        self.run_all().map(|mut v| v.swap_remove(0))
    }

    /// Runs the op on the sample's own inputs; returns every result.
    ///
    /// # Errors
    /// As [`OpSample::run`].
    pub fn run_all(&self) -> std::result::Result<Vec<Tensor>, String> {
        run(&self.function(), &self.inputs)
            .map_err(|e| format!("{}: fails on the sample's own inputs: {e}", self.describe()))
    }
}

/// What the checks build from a sample.
impl OpSample {
    /// `Err` naming the sample unless it has one input kind per input.
    pub(super) fn check_kinds(&self) -> std::result::Result<(), String> {
        if self.kinds.len() == self.inputs.len() {
            return Ok(());
        }
        let (n, k) = (self.inputs.len(), self.kinds.len());
        Err(format!("{}: {n} inputs but {k} input kinds", self.describe()))
    }

    /// Input `i` batched: variants `first..first + n` stacked along `axis`.
    pub(super) fn stacked(&self, i: usize, first: usize, n: usize, axis: usize) -> Result<Tensor> {
        let parts: Vec<Tensor> = (first..first + n).map(|k| self.variant(i, k)).collect();
        Tensor::stack(&parts, axis)
    }

    /// Input `i` for a batch of `n`: its first `n` variants stacked along
    /// `axis`, or the input itself (shared) for `None`.
    pub(super) fn batched(&self, i: usize, axis: Option<usize>, n: usize) -> Result<Tensor> {
        axis.map_or_else(|| Ok(self.inputs[i].clone()), |axis| self.stacked(i, 0, n, axis))
    }
}

/// A deterministic tensor of `shape` with values uniform in `[-1, 1)`, from
/// [`TestRng`] seeded by `seed`: reproducible test inputs.
///
/// ```
/// use anvil_testing::random_tensor;
/// let a = random_tensor(&[2, 3], 7);
/// assert_eq!(a, random_tensor(&[2, 3], 7));
/// assert!(a.to_vec::<f64>()?.iter().all(|v| (-1.0..1.0).contains(v)));
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn random_tensor(shape: &[usize], seed: u64) -> Tensor {
    let mut rng = TestRng::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1));
    f64s(uniform(shape.iter().product(), -1.0, 1.0, &mut rng), shape)
}
