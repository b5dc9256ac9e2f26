//! The derivative checks of the conformance kit: an op's jvp rule against
//! finite differences ([`check_op_jvp`]), the transpose rules its jvp emits
//! by the dot-product test ([`check_op_transpose`]), the batching of its jvp
//! ([`check_op_vmap_of_jvp`]), and all the checks of a sample at once with
//! a report ([`check_op`]).

use super::sample::fnv1a;
use super::{all_passed, check_op_vmap, check_vmap, Derivative, InputKind, OpSample, TestRng};
use anvil::core::function::check_arity;
use anvil::core::jvp_rules;
use anvil::core::tree::{Dyn, TreeDef};
use anvil::transforms::Jvp;
use anvil::{jit, jvp, vjp, DType, Eval, Function, Jit, Op, Result, Tensor, TensorType, Var};
use std::fmt;

/// The number of random tangent directions [`check_op_jvp`] tries.
const JVP_DIRECTIONS: usize = 3;
/// The number of random `(u, v)` pairs [`check_op_transpose`] tries.
const TRANSPOSE_PAIRS: usize = 2;
/// The batch size of [`check_op_vmap_of_jvp`].
const BATCH: usize = 3;

/// The precision a sample's derivative is checked at: the lowest among its
/// differentiable inputs and its output.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Precision {
    /// The finite-difference step (`h`; `h / 2` is the other step).
    step: f64,
    /// Relative tolerance of the comparison with finite differences.
    fd_tol: f64,
    /// Relative tolerance of the dot-product test.
    dot_tol: f64,
}

/// `f64`: with Richardson extrapolation the finite differences are good to
/// about `1e-10` relative on the standard samples (truncation `O(h^4)`,
/// rounding `~eps / h`), so `1e-6` leaves four orders of margin while any
/// wrong rule is off by far more. Steps of at most `1e-3` per entry stay well
/// inside the margins the input kinds keep (0.05 between `Distinct` values,
/// 0.1 from the grid for `OffGrid`).
const F64: Precision = Precision { step: 1e-3, fd_tol: 1e-6, dot_tol: 1e-10 };
/// `f32`: rounding dominates (`eps / h ~ 1e-5`), hence a larger step and
/// looser tolerances.
const F32: Precision = Precision { step: 1e-2, fd_tol: 1e-3, dot_tol: 1e-4 };

impl Precision {
    fn of(sample: &OpSample, outs: &[TensorType]) -> Precision {
        let single = outs.iter().any(|o| o.dtype() == DType::F32)
            || sample
                .inputs
                .iter()
                .zip(sample.differentiable())
                .any(|(t, d)| d && t.dtype() == DType::F32);
        let p = if single { F32 } else { F64 };
        // A sample compared with looser tolerances elsewhere is here too.
        Precision { fd_tol: p.fd_tol.max(sample.rtol), dot_tol: p.dot_tol.max(sample.rtol), ..p }
    }
}

/// The outcome of one check of a sample (see [`check_op`]).
#[derive(Clone, Debug, PartialEq)]
pub enum CheckOutcome {
    /// The check ran and passed.
    Passed,
    /// Nothing to check, which counts as a pass: no derivative (the output
    /// is not a float, or no input is differentiable), nothing to batch (an
    /// op without operands). Says why.
    Trivial(String),
    /// Not applicable to this op, which counts as a pass: an op that cannot
    /// be evaluated, forward mode of a reverse-mode-only op. Says why.
    Skipped(String),
    /// The check failed: the message names the sample and the mismatch.
    Failed(String),
}

impl CheckOutcome {
    /// Whether the check passed, trivially or not, or was skipped.
    pub fn is_ok(&self) -> bool {
        !matches!(self, CheckOutcome::Failed(_))
    }

    /// `Err(message)` for a failure, `Ok(())` otherwise.
    ///
    /// # Errors
    /// The failure's message.
    pub fn into_result(self) -> std::result::Result<(), String> {
        match self {
            CheckOutcome::Failed(e) => Err(e),
            _ => Ok(()),
        }
    }

    fn from_result(r: std::result::Result<(), String>) -> CheckOutcome {
        r.map_or_else(CheckOutcome::Failed, |()| CheckOutcome::Passed)
    }
}

impl fmt::Display for CheckOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckOutcome::Passed => f.write_str("passed"),
            CheckOutcome::Trivial(why) => write!(f, "passed trivially ({why})"),
            CheckOutcome::Skipped(why) => write!(f, "skipped ({why})"),
            CheckOutcome::Failed(e) => write!(f, "FAILED: {e}"),
        }
    }
}

/// The report of [`check_op`]: every check run on one sample and its outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct ConformanceResult {
    /// The sample ([`OpSample::describe`]).
    pub sample: String,
    /// `(check, outcome)` in the order run: `"vmap"`, `"jvp"`,
    /// `"transpose"`, `"vmap_of_jvp"`.
    pub checks: Vec<(&'static str, CheckOutcome)>,
}

impl ConformanceResult {
    /// Whether no check failed.
    pub fn is_ok(&self) -> bool {
        self.checks.iter().all(|(_, o)| o.is_ok())
    }

    /// The outcome of the check named `check` (`"jvp"`...), if it was run.
    pub fn outcome(&self, check: &str) -> Option<&CheckOutcome> {
        self.checks.iter().find(|(c, _)| *c == check).map(|(_, o)| o)
    }

    /// The messages of the failed checks, each prefixed with the check's name.
    pub fn failures(&self) -> Vec<String> {
        self.checks
            .iter()
            .filter_map(|(c, o)| match o {
                CheckOutcome::Failed(e) => Some(format!("[{c}] {e}")),
                _ => None,
            })
            .collect()
    }

    /// `Ok(())` when no check failed, otherwise every failure in one message.
    ///
    /// # Errors
    /// The failures, one per line group, each naming its check.
    pub fn into_result(self) -> std::result::Result<(), String> {
        all_passed(self.failures())
    }
}

impl fmt::Display for ConformanceResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.sample)?;
        for (check, outcome) in &self.checks {
            let text = outcome.to_string();
            let mut lines = text.lines();
            writeln!(f, "  {check:<12} {}", lines.next().unwrap_or(""))?;
            for line in lines {
                writeln!(f, "  {:<12} {line}", "")?;
            }
        }
        Ok(())
    }
}

/// Runs every conformance check on `sample` — [`check_op_vmap`],
/// [`check_op_jvp`], [`check_op_transpose`] and [`check_op_vmap_of_jvp`] —
/// and reports each one's outcome: passed, passed trivially (no derivative,
/// nothing to batch), skipped (and why), or failed (and how). A plugin
/// author calls this one function on each of their samples.
///
/// ```
/// use anvil::ops::elementwise::{Lt, Mul};
/// use anvil_testing::{check_op, CheckOutcome, InputKind, OpSample};
///
/// let kind = InputKind::Uniform { lo: -1.0, hi: 1.0 };
/// let mul = OpSample::new(Mul).input(kind.clone(), &[2, 3]).input(kind, &[3]);
/// let report = check_op(&mul);
/// assert!(report.is_ok(), "{report}");
/// assert_eq!(report.outcome("transpose"), Some(&CheckOutcome::Passed));
///
/// // A comparison has no derivative: its derivative checks pass trivially.
/// let lt = OpSample::new(Lt)
///     .input(InputKind::Distinct { offset: 0.0 }, &[3])
///     .input(InputKind::Distinct { offset: 0.5 }, &[3]);
/// let report = check_op(&lt);
/// assert!(matches!(report.outcome("jvp"), Some(CheckOutcome::Trivial(_))));
/// println!("{report}");
/// report.into_result()?;
/// # Ok::<(), String>(())
/// ```
pub fn check_op(sample: &OpSample) -> ConformanceResult {
    let vmap = if sample.inputs.is_empty() {
        CheckOutcome::Trivial("nothing to batch: the op has no operands".into())
    } else {
        CheckOutcome::from_result(check_op_vmap(sample))
    };
    ConformanceResult {
        sample: sample.describe(),
        checks: vec![
            ("vmap", vmap),
            ("jvp", jvp_outcome(sample)),
            ("transpose", transpose_outcome(sample)),
            ("vmap_of_jvp", vmap_of_jvp_outcome(sample)),
        ],
    }
}

/// Checks the op's jvp rule against central finite differences.
///
/// `jvp` of the op (a tangent for every input: random, uniform in
/// `[-1, 1)`, for the differentiable inputs ([`OpSample::differentiable`]),
/// zeros of the input's dtype for the others) is compared, along
/// 3 random directions `v`, with the central difference
/// `D(h) = (f(x + h v) - f(x - h v)) / 2h`, refined by Richardson
/// extrapolation `(4 D(h/2) - D(h)) / 3` (error `O(h^4)`):
///
/// `max |jvp - fd| <= tol * (1 + max |fd| + max |f(x)|)`
///
/// (max over the output's entries; the `|f(x)|` term bounds the rounding
/// error of the differences). In `f64`, `h = 1e-3` and `tol = 1e-6`: the
/// extrapolated differences are good to about `1e-10` relative on the
/// standard samples, where a plain central difference is limited to about
/// `1e-7` whatever its step (truncation against rounding), so the tolerance
/// leaves four orders of margin and still catches any wrong rule. Each
/// input entry moves by at most `h`, well inside the margins the
/// [`InputKind`](super::InputKind)s keep from non-smooth points.
/// Samples with an `f32` differentiable input or an `f32` output are
/// checked in their own precision, not cast to `f64` (so that the rule is
/// checked at the dtype it runs at, and ops whose result is `f32` whatever
/// their inputs, like a cast, are covered too): `h = 1e-2` and
/// `tol = 1e-3`. A sample with looser tolerances ([`OpSample::tol`]) gets a
/// `tol` of at least its `rtol`. The primal output of the jvp must also
/// equal the op's value.
///
/// Passes trivially when there is no derivative to check: the output is not
/// a float, or no input is differentiable (integer, boolean and index
/// inputs). Skipped for an op that cannot be evaluated
/// ([`OpSample::evaluable`]) and for a reverse-mode-only op
/// ([`Derivative::ReverseOnly`]). For an op whose derivative is zero by
/// definition ([`Derivative::Zero`]) the tangent must be zero.
///
/// ```
/// use anvil::ops::elementwise::{Pow, Sin};
/// use anvil_testing::{check_op_jvp, InputKind, OpSample};
///
/// check_op_jvp(&OpSample::new(Sin).input(InputKind::Uniform { lo: -3.0, hi: 3.0 }, &[2, 3]))?;
/// let pow = OpSample::new(Pow)
///     .input(InputKind::Uniform { lo: 0.5, hi: 2.0 }, &[2, 1])
///     .input(InputKind::Uniform { lo: -1.5, hi: 1.5 }, &[3]);
/// check_op_jvp(&pow)?;
/// # Ok::<(), String>(())
/// ```
///
/// # Errors
/// A message naming the sample ([`OpSample::describe`]): the op has no jvp
/// rule (`"... no jvp rule ..."`), the jvp fails, or differs from finite
/// differences (with both tensors, the direction and the error estimate).
pub fn check_op_jvp(sample: &OpSample) -> std::result::Result<(), String> {
    jvp_outcome(sample).into_result()
}

/// Checks the transpose rules of the linear ops the op's jvp emits, by the
/// dot-product test: for random `u` (a cotangent of the output) and `v` (a
/// tangent of the differentiable inputs, zero for the others),
/// `<u, J v> = <J^T u, v>`, with `J v` from `jvp` and `J^T u` from `vjp`
/// (reverse mode transposes the jvp's linear part, through the transpose
/// rules). Two random pairs; the two sides must agree to a relative `1e-10`
/// in `f64` (`1e-4` with `f32` values, at least the sample's `rtol`), relative
/// to `sum |u_i (J v)_i| + sum |(J^T u)_j v_j|`, which is robust when the
/// dot products cancel. The primal output of `vjp` must equal the op's value.
///
/// Passes trivially, or is skipped, in the same cases as [`check_op_jvp`],
/// except for a reverse-mode-only op ([`Derivative::ReverseOnly`]): there,
/// `J v` comes from finite differences instead of `jvp` (as in
/// [`check_op_jvp`], with its tolerance), which checks the user-given
/// reverse-mode derivative itself.
///
/// ```
/// use anvil::ops::matmul::Matmul;
/// use anvil_testing::{check_op_transpose, InputKind, OpSample};
///
/// let kind = InputKind::Uniform { lo: -1.0, hi: 1.0 };
/// let sample = OpSample::new(Matmul).input(kind.clone(), &[2, 3]).input(kind, &[3, 4]);
/// check_op_transpose(&sample)?;
/// # Ok::<(), String>(())
/// ```
///
/// # Errors
/// A message naming the sample: no jvp rule, `jvp` or `vjp` failing (an op
/// on the jvp's linear path without a transpose rule), or the two sides of
/// the test differing.
pub fn check_op_transpose(sample: &OpSample) -> std::result::Result<(), String> {
    transpose_outcome(sample).into_result()
}

/// Checks that the op's jvp batches: `vmap(jvp(op))` equals a loop of jvps
/// ([`check_vmap`] on the `jvp` of the op), in three configurations over a
/// batch of 3:
///
/// - primals and tangents batched at axis 0 (3 variants of every input,
///   3 random tangents of the differentiable ones);
/// - tangents only batched, at axis 0, the primals shared: what `jacfwd`
///   does (the primal computation stays unbatched);
/// - primals batched at their last axis and tangents at axis 0, so that
///   jvp rules meet operands batched at different axes.
///
/// Tangents of the inputs that are not differentiable are zeros, shared.
/// Results are compared with the sample's tolerances. Passes trivially or
/// is skipped as [`check_op_jvp`] (for a reverse-mode-only op too).
///
/// ```
/// use anvil::ops::reduce::ReduceProd;
/// use anvil_testing::{check_op_vmap_of_jvp, InputKind, OpSample};
///
/// let sample = OpSample::new(ReduceProd { axes: vec![1], keepdims: false })
///     .input(InputKind::Uniform { lo: 0.5, hi: 1.5 }, &[2, 3]);
/// check_op_vmap_of_jvp(&sample)?;
/// # Ok::<(), String>(())
/// ```
///
/// # Errors
/// A message naming the sample, the configuration and the mismatch, for
/// every configuration that failed.
pub fn check_op_vmap_of_jvp(sample: &OpSample) -> std::result::Result<(), String> {
    vmap_of_jvp_outcome(sample).into_result()
}

// ------------------------------------------------------------------ shared

/// The sample's op as a function of its (fixed number of) arguments.
#[derive(Clone, Debug)]
struct OpFn {
    op: Box<dyn Op>,
    arity: usize,
}

impl OpFn {
    fn new(sample: &OpSample) -> OpFn {
        OpFn { op: sample.op.clone(), arity: sample.inputs.len() }
    }
}

impl Function for OpFn {
    type Args = Vec<Var>;
    type Output = Vec<Var>;
    fn inline(&self, _: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        check_arity(self.op.name(), Some(self.arity), args.len())?;
        let refs: Vec<&Var> = args.iter().collect();
        let tracer = args
            .first()
            .map_or_else(anvil::core::trace::current_or_detached, |a| a.tracer().clone());
        let outs = tracer.try_apply(self.op.clone(), &refs)?;
        Ok(Dyn::of(&outs))
    }
    fn name(&self) -> String {
        self.op.name().into()
    }
}

/// The result of a check: `Err` is the message of a failure.
type Checked<T = ()> = std::result::Result<T, String>;

/// The op jitted and its jvp, as the derivative checks run them.
type Jitted = Jit<OpFn>;
type JvpOf = Jvp<OpFn>;

/// What a derivative check works with once the preconditions hold.
struct Setup<'a> {
    sample: &'a OpSample,
    name: String,
    /// The op's result types (several for an op with several results).
    outs: Vec<TensorType>,
    /// Which inputs are differentiable ([`OpSample::differentiable`]).
    diff: Vec<bool>,
    prec: Precision,
    f: OpFn,
}

impl Setup<'_> {
    /// Runs a function of tensors, naming the sample and `what` in the error.
    fn call<F: Function<Args = Vec<Var>, Output = Vec<Var>>>(
        &self,
        f: &F,
        args: Vec<Tensor>,
        what: &str,
    ) -> Checked<Vec<Tensor>> {
        f.eval(&args).map_err(|e| format!("{}: {what} failed: {e}", self.name))
    }

    /// The jvp at the sample's inputs along `tangents`: the outputs, then
    /// their tangents (`2 m` values).
    fn call_jvp(&self, jf: &JvpOf, tangents: &[Tensor]) -> Checked<Vec<Tensor>> {
        let (mut out, touts) = jf
            .eval((&self.sample.inputs, tangents))
            .map_err(|e| format!("{}: jvp failed: {e}", self.name))?;
        let m = self.outs.len();
        if out.len() != m || touts.len() != m {
            let name = &self.name;
            return Err(format!(
                "{name}: jvp returns {} outputs and {} tangents, expected {m} of each",
                out.len(),
                touts.len()
            ));
        }
        out.extend(touts);
        Ok(out)
    }
}

/// The outcome of `check` once the preconditions of `setup` hold, or the
/// outcome `setup` reports instead.
fn outcome(
    setup: std::result::Result<Setup, CheckOutcome>,
    check: fn(&Setup) -> Checked,
) -> CheckOutcome {
    setup.map_or_else(|o| o, |s| CheckOutcome::from_result(check(&s)))
}

/// [`setup`] for the checks that use forward mode, which a reverse-only
/// sample (a `custom_vjp` function) skips.
fn forward_setup(sample: &OpSample) -> std::result::Result<Setup<'_>, CheckOutcome> {
    let s = setup(sample)?;
    if sample.derivative == Derivative::ReverseOnly {
        return Err(CheckOutcome::Skipped(
            "reverse mode only: forward mode is unsupported by design".into(),
        ));
    }
    Ok(s)
}

/// The preconditions shared by the derivative checks: a well-formed sample
/// that can be evaluated, a float output, a differentiable input and a jvp
/// rule. `Err` is the outcome to report instead of running the check.
fn setup(sample: &OpSample) -> std::result::Result<Setup<'_>, CheckOutcome> {
    sample.check_kinds().map_err(CheckOutcome::Failed)?;
    let outs = sample.output_types().map_err(CheckOutcome::Failed)?;
    if !sample.evaluable {
        return Err(CheckOutcome::Skipped(
            "the op cannot be evaluated (not evaluable): no values to differentiate".into(),
        ));
    }
    let diff = sample.differentiable();
    if let Some(why) = no_derivative(&outs, &diff) {
        return Err(CheckOutcome::Trivial(why));
    }
    check_jvp_rule(sample).map_err(CheckOutcome::Failed)?;
    let prec = Precision::of(sample, &outs);
    Ok(Setup { sample, name: sample.describe(), outs, diff, prec, f: OpFn::new(sample) })
}

/// Why an op with results `outs` and differentiable inputs `diff` has no
/// derivative to check, if it has none.
fn no_derivative(outs: &[TensorType], diff: &[bool]) -> Option<String> {
    if !outs.iter().any(|o| o.dtype().is_float()) {
        let types: Vec<String> = outs.iter().map(|o| o.dtype().to_string()).collect();
        return Some(format!("no derivative: no output is a float ({})", types.join(", ")));
    }
    if diff.is_empty() {
        return Some("no derivative: the op has no operands".into());
    }
    let none = "no derivative: no differentiable input (none is a float of a real kind)";
    (!diff.iter().any(|&d| d)).then(|| none.into())
}

/// `Err` naming the sample unless its op has a jvp rule.
fn check_jvp_rule(sample: &OpSample) -> Checked {
    match jvp_rules().lookup(sample.op.as_ref()) {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(format!(
            "{}: op {:?} has no jvp rule (register one with \
             register_rule!(JvpRule, ...)), but it has a float output and \
             differentiable inputs",
            sample.describe(),
            sample.op.name()
        )),
        Err(e) => Err(format!("{}: jvp rule: {e}", sample.describe())),
    }
}

/// A deterministic generator for `what` of the sample named `name`.
fn rng(name: &str, what: &str) -> TestRng {
    TestRng::new(fnv1a(format!("{name}/ad/{what}").as_bytes()))
}

/// A tensor of `shape` and `dtype`: uniform in `[-1, 1)` when `random`,
/// zeros otherwise.
fn random_or_zeros(shape: &[usize], dtype: DType, random: bool, rng: &mut TestRng) -> Tensor {
    let uniform = InputKind::Uniform { lo: -1.0, hi: 1.0 };
    let values = if random { uniform.generate(shape, dtype, rng) } else { None };
    match values {
        Some(v) => v,
        None => Tensor::zeros_of(shape, dtype).expect("a sample's shape fits in memory"),
    }
}

/// A tangent for every input: random for the differentiable ones, zeros of
/// the input's dtype for the others.
fn tangents(s: &Setup, rng: &mut TestRng) -> Vec<Tensor> {
    let inputs = s.sample.inputs.iter().zip(&s.diff);
    inputs.map(|(x, &d)| random_or_zeros(x.shape(), x.dtype(), d, rng)).collect()
}

/// A cotangent for every output: random for the float ones, zeros of the
/// output's dtype for the others.
fn cotangents(s: &Setup, rng: &mut TestRng) -> Vec<Tensor> {
    let random = |t: &TensorType| t.dtype().is_float();
    s.outs.iter().map(|t| random_or_zeros(t.shape(), t.dtype(), random(t), rng)).collect()
}

/// `x + t v` for the differentiable inputs (computed in `f64`, cast back to
/// the input's dtype), `x` for the others.
fn shifted(inputs: &[Tensor], dirs: &[Tensor], diff: &[bool], t: f64) -> Vec<Tensor> {
    inputs
        .iter()
        .zip(dirs)
        .zip(diff)
        .map(|((x, v), &d)| {
            if !d {
                return x.clone();
            }
            let s: Vec<f64> =
                x.to_f64_vec().iter().zip(v.to_f64_vec()).map(|(x, v)| x + t * v).collect();
            Tensor::from_vec(s, x.shape()).map_or_else(|_| x.clone(), |s| s.cast(x.dtype()))
        })
        .collect()
}

/// The directional derivative of `f` (every output) at the sample's inputs
/// along `dirs` by central differences with Richardson extrapolation
/// `(4 D(h/2) - D(h)) / 3`, and an estimate of its error
/// (`max |D(h/2) - D(h)|`).
fn finite_difference(f: &Jitted, s: &Setup, dirs: &[Tensor]) -> Checked<(Vec<Vec<f64>>, f64)> {
    let d1 = central_difference(f, s, dirs, s.prec.step)?;
    let d2 = central_difference(f, s, dirs, s.prec.step / 2.0)?;
    let pairs = || d1.iter().zip(&d2);
    let est =
        pairs().flat_map(|(a, b)| a.iter().zip(b)).fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    let fd = pairs().map(|(a, b)| a.iter().zip(b).map(|(a, b)| (4.0 * b - a) / 3.0).collect());
    Ok((fd.collect(), est))
}

/// `D(h) = (f(x + h v) - f(x - h v)) / 2h`, every output's entries.
fn central_difference(f: &Jitted, s: &Setup, dirs: &[Tensor], h: f64) -> Checked<Vec<Vec<f64>>> {
    let at = |t: f64, what: &str| s.call(f, shifted(&s.sample.inputs, dirs, &s.diff, t), what);
    let plus = at(h, "the op at x + h v")?;
    let minus = at(-h, "the op at x - h v")?;
    let difference = |(p, m): (&Tensor, &Tensor)| -> Vec<f64> {
        p.to_f64_vec().iter().zip(m.to_f64_vec()).map(|(p, m)| (p - m) / (2.0 * h)).collect()
    };
    Ok(plus.iter().zip(&minus).map(difference).collect())
}

fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |m, x| m.max(x.abs()))
}

/// The dot product of `a` and `b`, and the sum of the magnitudes of its terms.
fn dot(a: &Tensor, b: &Tensor) -> (f64, f64) {
    a.to_f64_vec()
        .iter()
        .zip(b.to_f64_vec())
        .fold((0.0, 0.0), |(d, m), (x, y)| (d + x * y, m + (x * y).abs()))
}

/// The outputs of `jvp` or `vjp` must have the op's types and values.
fn check_primal(s: &Setup, what: &str, got: &[Tensor], want: &[Tensor]) -> Checked {
    for (k, ((g, w), ty)) in got.iter().zip(want).zip(&s.outs).enumerate() {
        if g.ty() != *ty
            || !approx::relative_eq!(*g, *w, epsilon = s.sample.atol, max_relative = s.sample.rtol)
        {
            return Err(format!(
                "{}: primal output {k} of {what} differs from the op's value:\n {what}:\n{g}\n op:\n{w}",
                s.name
            ));
        }
    }
    Ok(())
}

/// Why a comparison fails, or `None` when it passes: every value finite and
/// `err <= bound`. `over` says by how much `err` is over its bound.
fn excess(finite: bool, err: f64, bound: f64, over: impl FnOnce() -> String) -> Option<String> {
    if !finite {
        Some("not finite (NaN or infinite entries)".into())
    } else if err > bound {
        Some(over())
    } else {
        None
    }
}

fn as_tensor(v: Vec<f64>, shape: &[usize]) -> String {
    Tensor::from_vec(v, shape).map_or_else(|e| e.to_string(), |t| t.to_string())
}

/// Tensors printed one after the other.
fn show(ts: &[Tensor]) -> String {
    ts.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
}

// --------------------------------------------------------------------- jvp

fn jvp_outcome(sample: &OpSample) -> CheckOutcome {
    outcome(forward_setup(sample), jvp_check)
}

/// [`check_op_jvp`] once its preconditions hold: the primal and every float
/// output's tangent along each random direction.
fn jvp_check(s: &Setup) -> Checked {
    let (f, jf, m) = (jit(s.f.clone()), jvp(s.f.clone()), s.outs.len());
    let y = s.call(&f, s.sample.inputs.clone(), "the op")?;
    let mut rng = rng(&s.name, "jvp");
    for k in 0..JVP_DIRECTIONS {
        let dirs = tangents(s, &mut rng);
        let out = s.call_jvp(&jf, &dirs)?;
        check_primal(s, "jvp", &out[..m], &y)?;
        let fd = if s.sample.derivative == Derivative::Zero {
            None
        } else {
            Some(finite_difference(&f, s, &dirs)?)
        };
        let dir = Direction { k, dirs: &dirs, fd: fd.as_ref() };
        for (o, t) in out[m..].iter().enumerate() {
            if s.outs[o].dtype().is_float() {
                check_tangent(s, &dir, o, t, &y[o])?;
            }
        }
    }
    Ok(())
}

/// One random direction of the jvp check: its number, the tangents, and
/// the finite differences along it with their error estimate (`None` for
/// an op whose derivative is zero by definition).
struct Direction<'a> {
    k: usize,
    dirs: &'a [Tensor],
    fd: Option<&'a (Vec<Vec<f64>>, f64)>,
}

/// The jvp's tangent `t` of output `o` (of value `y`) along `dir` has the
/// output's type and is zero for a zero derivative, otherwise close to the
/// finite differences.
fn check_tangent(s: &Setup, dir: &Direction, o: usize, t: &Tensor, y: &Tensor) -> Checked {
    let ty = &s.outs[o];
    if t.ty() != *ty {
        let name = &s.name;
        return Err(format!(
            "{name}: jvp gives a tangent of type {} for output {o}, expected {ty}",
            t.ty()
        ));
    }
    match dir.fd {
        None => check_zero_tangent(s, dir.k, t),
        Some((fd, est)) => compare_with_fd(s, dir, o, t, y, (&fd[o], *est)),
    }
}

/// For an op whose derivative is zero by definition: the tangent is zero.
fn check_zero_tangent(s: &Setup, k: usize, t: &Tensor) -> Checked {
    if t.to_f64_vec().iter().all(|&x| x == 0.0) {
        return Ok(());
    }
    Err(format!(
        "{}: the derivative is zero by definition, but jvp along direction {k} gives\n{t}",
        s.name
    ))
}

/// `max |jvp - fd| <= tol * (1 + max |fd| + max |f(x)|)` for the tangent `t`
/// of output `o` (of value `y`), with `fd` the output's finite differences
/// and their error estimate.
fn compare_with_fd(
    s: &Setup,
    dir: &Direction,
    o: usize,
    t: &Tensor,
    y: &Tensor,
    (fd, est): (&[f64], f64),
) -> Checked {
    let jt = t.to_f64_vec();
    let err = jt.iter().zip(fd).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    let scale = 1.0 + max_abs(fd) + max_abs(&y.to_f64_vec());
    let (tol, bound) = (s.prec.fd_tol, s.prec.fd_tol * scale);
    let finite = jt.iter().chain(fd).all(|x| x.is_finite());
    let over = || {
        format!("max |jvp - fd| = {err:.3e} > {bound:.3e} (tolerance {tol:e} x scale {scale:.3})")
    };
    let Some(how) = excess(finite, err, bound, over) else {
        return Ok(());
    };
    Err(format!(
        "{}: jvp of output {o} differs from central finite differences along random \
         direction {}: {how}; finite-difference error estimate {est:.1e}, step {:e}\n \
         jvp:\n{t}\n finite differences:\n{}\n direction:\n{}",
        s.name,
        dir.k,
        s.prec.step,
        as_tensor(fd.to_vec(), s.outs[o].shape()),
        show(dir.dirs)
    ))
}

// --------------------------------------------------------------- transpose

fn transpose_outcome(sample: &OpSample) -> CheckOutcome {
    outcome(setup(sample), transpose_check)
}

/// [`check_op_transpose`] once its preconditions hold: the dot-product test
/// on each random pair `(u, v)`.
fn transpose_check(s: &Setup) -> Checked {
    let (f, jf) = (jit(s.f.clone()), jvp(s.f.clone()));
    let y = s.call(&f, s.sample.inputs.clone(), "the op")?;
    let mut rng = rng(&s.name, "transpose");
    for k in 0..TRANSPOSE_PAIRS {
        let v = tangents(s, &mut rng);
        let u = cotangents(s, &mut rng);
        let (jv, tol) = jacobian_times(s, &f, &jf, &v)?;
        let jtu = transpose_times(s, &u, &y)?;
        DotTest { k, u, v, jv, jtu, tol }.check(s)?;
    }
    Ok(())
}

/// `J v`, from jvp or (reverse mode only) from finite differences, and the
/// tolerance of the dot-product test that goes with its source.
fn jacobian_times(s: &Setup, f: &Jitted, jf: &JvpOf, v: &[Tensor]) -> Checked<(Vec<Tensor>, f64)> {
    if s.sample.derivative != Derivative::ReverseOnly {
        let mut out = s.call_jvp(jf, v)?;
        return Ok((out.split_off(s.outs.len()), s.prec.dot_tol));
    }
    let (fd, _) = finite_difference(f, s, v)?;
    let jv = fd
        .into_iter()
        .zip(&s.outs)
        .map(|(d, t)| Tensor::from_vec(d, t.shape()).map_err(|e| e.to_string()))
        .collect::<Checked<_>>()?;
    Ok((jv, s.prec.fd_tol))
}

/// `J^T u`, from vjp, whose primal outputs must be the op's values `y` and
/// whose cotangents must have the inputs' types.
fn transpose_times(s: &Setup, u: &[Tensor], y: &[Tensor]) -> Checked<Vec<Tensor>> {
    let failed = |e: anvil::Error| format!("{}: vjp failed: {e}", s.name);
    let (out, pullback) = vjp(&s.f, &s.sample.inputs).map_err(failed)?;
    check_primal(s, "vjp", &out, y)?;
    let jtu = pullback.eval(u).map_err(failed)?;
    let n = s.sample.inputs.len();
    if jtu.len() != n {
        return Err(format!("{}: vjp returns {} cotangents, expected {n}", s.name, jtu.len()));
    }
    for (i, (ct, x)) in jtu.iter().zip(&s.sample.inputs).enumerate() {
        if ct.ty() != x.ty() {
            return Err(format!(
                "{}: vjp gives a cotangent of type {} for input {i} of type {}",
                s.name,
                ct.ty(),
                x.ty()
            ));
        }
    }
    Ok(jtu)
}

/// One random pair of the dot-product test: a cotangent per output `u`, a
/// tangent per input `v`, `J v` (and the tolerance its source allows) and
/// `J^T u`.
struct DotTest {
    k: usize,
    u: Vec<Tensor>,
    v: Vec<Tensor>,
    jv: Vec<Tensor>,
    jtu: Vec<Tensor>,
    tol: f64,
}

impl DotTest {
    /// `<u, J v> = <J^T u, v>` to `tol` relative to the magnitude of their
    /// terms (plus 1 when `J v` comes from finite differences).
    fn check(&self, s: &Setup) -> Checked {
        let (lhs, rhs, mag) = self.sides(s);
        let reverse_only = s.sample.derivative == Derivative::ReverseOnly;
        let scale = if reverse_only { 1.0 + mag } else { mag };
        let (tol, err, bound) = (self.tol, (lhs - rhs).abs(), self.tol * scale);
        let finite = lhs.is_finite() && rhs.is_finite();
        let over = || {
            let (times, culprit) = if reverse_only {
                (
                    format!("(1 + {mag:.3e})"),
                    "the reverse-mode derivative disagrees with finite differences",
                )
            } else {
                (format!("{mag:.3e}"), "a transpose rule of an op the jvp emits is wrong")
            };
            format!("|difference| {err:.3e} > {bound:.3e} (tolerance {tol:e} x {times}); {culprit}")
        };
        let Some(why) = excess(finite, err, bound, over) else {
            return Ok(());
        };
        let how = if reverse_only { "finite differences" } else { "jvp" };
        Err(format!(
            "{}: the dot-product test fails for random pair {}: <u, J v> = {lhs:.9e} \
             (J v by {how}), <J^T u, v> = {rhs:.9e} (J^T u by vjp): {why}\n J v:\n{}\n \
             J^T u:\n{}",
            s.name,
            self.k,
            show(&self.jv),
            show(&self.jtu)
        ))
    }

    /// `<u, J v>` over the float outputs, `<J^T u, v>` over the
    /// differentiable inputs, and the sum of the magnitudes of all their terms.
    fn sides(&self, s: &Setup) -> (f64, f64, f64) {
        let outs = self.u.iter().zip(&self.jv).zip(&s.outs);
        let (lhs, mag) = sum_dots(outs.filter(|(_, t)| t.dtype().is_float()).map(|(p, _)| p), 0.0);
        let ins = self.jtu.iter().zip(&self.v).zip(&s.diff);
        let (rhs, mag) = sum_dots(ins.filter(|(_, &d)| d).map(|(p, _)| p), mag);
        (lhs, rhs, mag)
    }
}

/// The sum of the dot products of `pairs`, and `mag` plus the magnitudes of
/// their terms (see [`dot`]), accumulated in order.
fn sum_dots<'a>(pairs: impl Iterator<Item = (&'a Tensor, &'a Tensor)>, mag: f64) -> (f64, f64) {
    pairs.fold((0.0, mag), |(sum, mag), (a, b)| {
        let (d, g) = dot(a, b);
        (sum + d, mag + g)
    })
}

// ------------------------------------------------------------- vmap of jvp

/// The configurations of [`check_op_vmap_of_jvp`]: a description, and where
/// the primals are batched (`None`: shared; `Some(last)`: at their last
/// axis, or at axis 0). The tangents of differentiable inputs are always
/// batched at axis 0, the others shared.
const JVP_BATCHINGS: [(&str, Option<bool>); 3] = [
    ("primals and tangents batched at axis 0", Some(false)),
    ("tangents batched, primals shared (as jacfwd)", None),
    ("primals batched at their last axis, tangents at axis 0", Some(true)),
];

fn vmap_of_jvp_outcome(sample: &OpSample) -> CheckOutcome {
    outcome(forward_setup(sample), vmap_of_jvp_check)
}

/// [`check_op_vmap_of_jvp`] once its preconditions hold: [`check_vmap`] on
/// the jvp in each configuration of [`JVP_BATCHINGS`].
fn vmap_of_jvp_check(s: &Setup) -> Checked {
    let jf = FlatJvp(jvp(s.f.clone()), s.sample.inputs.len());
    let mut rng = rng(&s.name, "vmap_of_jvp");
    let tangent_batch: Vec<Vec<Tensor>> = (0..BATCH).map(|_| tangents(s, &mut rng)).collect();
    let mut failures = Vec::new();
    for (what, primal_axis) in JVP_BATCHINGS {
        let axes = jvp_in_axes(s, primal_axis);
        let r = jvp_batched_args(s, &axes, &tangent_batch)
            .map_err(|e| format!("building the batched inputs: {e}"))
            .and_then(|args| check_vmap(&jf, &args, &axes, s.sample.rtol, s.sample.atol));
        if let Err(e) = r {
            failures.push(format!("{}: vmap of jvp, {what} (in_axes {axes:?}): {e}", s.name));
        }
    }
    all_passed(failures)
}

/// The jvp as a function of `2 n` arguments, the primals then the
/// tangents, returning the outputs then their tangents: the form the
/// generic vmap check batches argument by argument.
#[derive(Clone, Debug)]
struct FlatJvp(JvpOf, usize);

impl Function for FlatJvp {
    type Args = Vec<Var>;
    type Output = Vec<Var>;
    fn inline(&self, _: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        let list = TreeDef::List(vec![TreeDef::Leaf; self.1]);
        let out = self.0.inline(&TreeDef::Tuple(vec![list.clone(), list]), args)?;
        Ok(Dyn::of(&out.leaves))
    }
}

/// The in_axes of the jvp's arguments: the primals' as `primal_axis` says
/// (the last axis of an input of rank `r` batched is `r`), then the
/// tangents' (0 for the differentiable inputs, shared for the others).
fn jvp_in_axes(s: &Setup, primal_axis: Option<bool>) -> Vec<Option<usize>> {
    let primal = |x: &Tensor| primal_axis.map(|last| if last { x.rank() } else { 0 });
    let primals = s.sample.inputs.iter().map(primal);
    primals.chain(s.diff.iter().map(|&d| d.then_some(0))).collect()
}

/// The jvp's arguments batched as `axes` says: variants of the primals,
/// then the tangents of `batch` (its first element's, where shared).
fn jvp_batched_args(
    s: &Setup,
    axes: &[Option<usize>],
    batch: &[Vec<Tensor>],
) -> Result<Vec<Tensor>> {
    let n = s.sample.inputs.len();
    let tangent = |i: usize| match axes[n + i] {
        Some(axis) => {
            Tensor::stack(&batch.iter().map(|ts| ts[i].clone()).collect::<Vec<_>>(), axis)
        }
        None => Ok(batch[0][i].clone()),
    };
    let primals = (0..n).map(|i| s.sample.batched(i, axes[i], BATCH));
    primals.chain((0..n).map(tangent)).collect()
}
