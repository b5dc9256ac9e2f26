//! The derivative checks of the conformance kit: an op's jvp rule against
//! finite differences ([`check_op_jvp`]), the transpose rules its jvp emits
//! by the dot-product test ([`check_op_transpose`]), the batching of its jvp
//! ([`check_op_vmap_of_jvp`]), and all the checks of a sample at once with
//! a report ([`check_op`]).

use super::sample::fnv1a;
use super::{check_op_vmap, check_vmap, Derivative, OpSample, SplitMix64};
use crate::core::function::check_arity;
use crate::core::jvp_rules;
use crate::{jit, jvp, vjp, Call, DType, Function, Op, Result, Tensor, TensorType, Var};
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
        let failures = self.failures();
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("\n"))
        }
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
/// use anvil::testing::{check_op, CheckOutcome, InputKind, OpSample};
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
/// use anvil::testing::{check_op_jvp, InputKind, OpSample};
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
/// use anvil::testing::{check_op_transpose, InputKind, OpSample};
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
/// use anvil::testing::{check_op_vmap_of_jvp, InputKind, OpSample};
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

/// The sample's op as a function of a fixed number of arguments (`vjp`
/// needs to know where the cotangents start).
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

impl Function<OpFn> for OpFn {
    type Output = Vec<Tensor>;
    fn arity(&self) -> Option<usize> {
        Some(self.arity)
    }
    fn inline(&self, args: &[Var]) -> Result<Vec<Var>> {
        check_arity(self.op.name(), Some(self.arity), args.len())?;
        let refs: Vec<&Var> = args.iter().collect();
        let tracer = args
            .first()
            .map_or_else(crate::core::trace::current_or_detached, |a| a.tracer().clone());
        tracer.try_apply(self.op.clone(), &refs)
    }
    fn name(&self) -> String {
        self.op.name().into()
    }
}

/// What a derivative check works with once the preconditions hold.
struct Setup {
    name: String,
    /// The op's result types (several for an op with several results).
    outs: Vec<TensorType>,
    diff: Vec<bool>,
    prec: Precision,
    f: OpFn,
}

/// The preconditions shared by the derivative checks: a well-formed sample
/// that can be evaluated, a float output, a differentiable input and a jvp
/// rule. `Err` is the outcome to report instead of running the check.
/// [`setup`] for the checks that use forward mode, which a reverse-only
/// sample (a `custom_vjp` function) skips.
fn forward_setup(sample: &OpSample) -> std::result::Result<Setup, CheckOutcome> {
    let s = setup(sample)?;
    if sample.derivative == Derivative::ReverseOnly {
        return Err(CheckOutcome::Skipped(
            "reverse mode only: forward mode is unsupported by design".into(),
        ));
    }
    Ok(s)
}

fn setup(sample: &OpSample) -> std::result::Result<Setup, CheckOutcome> {
    let name = sample.describe();
    if sample.kinds.len() != sample.inputs.len() {
        return Err(CheckOutcome::Failed(format!(
            "{name}: {} inputs but {} input kinds",
            sample.inputs.len(),
            sample.kinds.len()
        )));
    }
    let outs = sample.output_types().map_err(CheckOutcome::Failed)?;
    if !sample.evaluable {
        return Err(CheckOutcome::Skipped(
            "the op cannot be evaluated (not evaluable): no values to differentiate".into(),
        ));
    }
    if !outs.iter().any(|o| o.dtype().is_float()) {
        let types: Vec<String> = outs.iter().map(|o| o.dtype().to_string()).collect();
        return Err(CheckOutcome::Trivial(format!(
            "no derivative: no output is a float ({})",
            types.join(", ")
        )));
    }
    let diff = sample.differentiable();
    if diff.is_empty() {
        return Err(CheckOutcome::Trivial("no derivative: the op has no operands".into()));
    }
    if !diff.iter().any(|&d| d) {
        return Err(CheckOutcome::Trivial(
            "no derivative: no differentiable input (none is a float of a real kind)".into(),
        ));
    }
    match jvp_rules().lookup(sample.op.as_ref()) {
        Ok(Some(_)) => {}
        Ok(None) => {
            return Err(CheckOutcome::Failed(format!(
                "{name}: op {:?} has no jvp rule (register one with \
                 register_rule!(JvpRule, ...)), but it has a float output and \
                 differentiable inputs",
                sample.op.name()
            )))
        }
        Err(e) => return Err(CheckOutcome::Failed(format!("{name}: jvp rule: {e}"))),
    }
    let prec = Precision::of(sample, &outs);
    Ok(Setup { name, outs, diff, prec, f: OpFn::new(sample) })
}

/// A deterministic generator for `what` of the sample named `name`.
fn rng(name: &str, what: &str) -> SplitMix64 {
    SplitMix64::new(fnv1a(format!("{name}/ad/{what}").as_bytes()))
}

/// A tensor of `shape` and `dtype` uniform in `[-1, 1)`.
fn random(shape: &[usize], dtype: DType, rng: &mut SplitMix64) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect();
    Tensor::from_vec(v, shape).map_or_else(|_| Tensor::zeros_of(shape, dtype), |t| t.cast(dtype))
}

/// A tangent for every input: random for the differentiable ones, zeros of
/// the input's dtype for the others.
fn tangents(sample: &OpSample, diff: &[bool], rng: &mut SplitMix64) -> Vec<Tensor> {
    sample
        .inputs
        .iter()
        .zip(diff)
        .map(|(x, &d)| {
            if d {
                random(x.shape(), x.dtype(), rng)
            } else {
                Tensor::zeros_of(x.shape(), x.dtype())
            }
        })
        .collect()
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

/// Runs a function of tensors, naming `what` in the error.
fn call<M, F: Function<M, Output = Vec<Tensor>>>(
    f: &F,
    args: Vec<Tensor>,
    name: &str,
    what: &str,
) -> std::result::Result<Vec<Tensor>, String> {
    f.call(args).map_err(|e| format!("{name}: {what} failed: {e}"))
}

/// The directional derivative of `f` (every output) at the sample's inputs
/// along `dirs` by central differences with Richardson extrapolation, and
/// an estimate of its error (`max |D(h/2) - D(h)|`).
fn finite_difference<F: Function<OpFn, Output = Vec<Tensor>>>(
    f: &F,
    sample: &OpSample,
    s: &Setup,
    dirs: &[Tensor],
) -> std::result::Result<(Vec<Vec<f64>>, f64), String> {
    let h = s.prec.step;
    let central = |h: f64| -> std::result::Result<Vec<Vec<f64>>, String> {
        let plus =
            call(f, shifted(&sample.inputs, dirs, &s.diff, h), &s.name, "the op at x + h v")?;
        let minus =
            call(f, shifted(&sample.inputs, dirs, &s.diff, -h), &s.name, "the op at x - h v")?;
        Ok(plus
            .iter()
            .zip(&minus)
            .map(|(p, m)| {
                p.to_f64_vec()
                    .iter()
                    .zip(m.to_f64_vec())
                    .map(|(p, m)| (p - m) / (2.0 * h))
                    .collect()
            })
            .collect())
    };
    let d1 = central(h)?;
    let d2 = central(h / 2.0)?;
    let mut est = 0.0f64;
    let fd = d1
        .iter()
        .zip(&d2)
        .map(|(a, b)| {
            a.iter()
                .zip(b)
                .map(|(a, b)| {
                    est = est.max((a - b).abs());
                    (4.0 * b - a) / 3.0
                })
                .collect()
        })
        .collect();
    Ok((fd, est))
}

fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |m, x| m.max(x.abs()))
}

fn dot(a: &Tensor, b: &Tensor) -> (f64, f64) {
    a.to_f64_vec()
        .iter()
        .zip(b.to_f64_vec())
        .fold((0.0, 0.0), |(d, m), (x, y)| (d + x * y, m + (x * y).abs()))
}

/// The outputs of `jvp` or `vjp` must have the op's types and values.
fn check_primal(
    s: &Setup,
    sample: &OpSample,
    what: &str,
    got: &[Tensor],
    want: &[Tensor],
) -> std::result::Result<(), String> {
    for (k, ((g, w), ty)) in got.iter().zip(want).zip(&s.outs).enumerate() {
        if g.ty() != *ty || !g.allclose(w, sample.rtol, sample.atol) {
            return Err(format!(
                "{}: primal output {k} of {what} differs from the op's value:\n {what}:\n{g}\n op:\n{w}",
                s.name
            ));
        }
    }
    Ok(())
}

fn as_tensor(v: Vec<f64>, shape: &[usize]) -> String {
    Tensor::from_vec(v, shape).map_or_else(|e| e.to_string(), |t| t.to_string())
}

// --------------------------------------------------------------------- jvp

fn jvp_outcome(sample: &OpSample) -> CheckOutcome {
    match forward_setup(sample) {
        Ok(s) => CheckOutcome::from_result(jvp_check(sample, &s)),
        Err(o) => o,
    }
}

fn jvp_check(sample: &OpSample, s: &Setup) -> std::result::Result<(), String> {
    let f = jit(s.f.clone());
    let jf = jvp(s.f.clone());
    let m = s.outs.len();
    let y = call(&f, sample.inputs.clone(), &s.name, "the op")?;
    let mut rng = rng(&s.name, "jvp");
    for k in 0..JVP_DIRECTIONS {
        let dirs = tangents(sample, &s.diff, &mut rng);
        let args: Vec<Tensor> = sample.inputs.iter().cloned().chain(dirs.iter().cloned()).collect();
        let out = call(&jf, args, &s.name, "jvp")?;
        if out.len() != 2 * m {
            return Err(format!(
                "{}: jvp returns {} values, expected {}",
                s.name,
                out.len(),
                2 * m
            ));
        }
        check_primal(s, sample, "jvp", &out[..m], &y)?;
        let fd = if sample.derivative == Derivative::Zero {
            None
        } else {
            Some(finite_difference(&f, sample, s, &dirs)?)
        };
        for (o, ty) in s.outs.iter().enumerate() {
            if !ty.dtype().is_float() {
                continue;
            }
            let t = &out[m + o];
            if t.ty() != *ty {
                return Err(format!(
                    "{}: jvp gives a tangent of type {} for output {o}, expected {ty}",
                    s.name,
                    t.ty()
                ));
            }
            let jt = t.to_f64_vec();
            let Some((fd, est)) = &fd else {
                if jt.iter().any(|&x| x != 0.0) {
                    return Err(format!(
                        "{}: the derivative is zero by definition, but jvp along direction {k} gives\n{t}",
                        s.name
                    ));
                }
                continue;
            };
            let fd = &fd[o];
            let err = jt.iter().zip(fd).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
            let scale = 1.0 + max_abs(fd) + max_abs(&y[o].to_f64_vec());
            let bound = s.prec.fd_tol * scale;
            let finite = jt.iter().chain(fd).all(|x| x.is_finite());
            if !finite || err > bound {
                let how = if finite {
                    format!(
                        "max |jvp - fd| = {err:.3e} > {bound:.3e} (tolerance {:e} x scale {scale:.3})",
                        s.prec.fd_tol
                    )
                } else {
                    "not finite (NaN or infinite entries)".into()
                };
                return Err(format!(
                    "{}: jvp of output {o} differs from central finite differences along random \
                     direction {k}: {how}; finite-difference error estimate {est:.1e}, step {:e}\n \
                     jvp:\n{t}\n finite differences:\n{}\n direction:\n{}",
                    s.name,
                    s.prec.step,
                    as_tensor(fd.clone(), ty.shape()),
                    dirs.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
                ));
            }
        }
    }
    Ok(())
}

// --------------------------------------------------------------- transpose

fn transpose_outcome(sample: &OpSample) -> CheckOutcome {
    let s = match setup(sample) {
        Ok(s) => s,
        Err(o) => return o,
    };
    CheckOutcome::from_result(transpose_check(sample, &s))
}

fn transpose_check(sample: &OpSample, s: &Setup) -> std::result::Result<(), String> {
    let n = sample.inputs.len();
    let m = s.outs.len();
    let f = jit(s.f.clone());
    let jf = jvp(s.f.clone());
    let vf = vjp(s.f.clone());
    let y = call(&f, sample.inputs.clone(), &s.name, "the op")?;
    let reverse_only = sample.derivative == Derivative::ReverseOnly;
    let mut rng = rng(&s.name, "transpose");
    for k in 0..TRANSPOSE_PAIRS {
        let v = tangents(sample, &s.diff, &mut rng);
        // A cotangent per output: random for the float ones, zeros otherwise.
        let u: Vec<Tensor> = s
            .outs
            .iter()
            .map(|t| {
                if t.dtype().is_float() {
                    random(t.shape(), t.dtype(), &mut rng)
                } else {
                    Tensor::zeros_of(t.shape(), t.dtype())
                }
            })
            .collect();
        // J v, from jvp or (reverse mode only) from finite differences.
        let (jv, tol): (Vec<Tensor>, f64) = if reverse_only {
            let (fd, _) = finite_difference(&f, sample, s, &v)?;
            let fd = fd
                .into_iter()
                .zip(&s.outs)
                .map(|(d, t)| Tensor::from_vec(d, t.shape()).map_err(|e| e.to_string()))
                .collect::<std::result::Result<_, _>>()?;
            (fd, s.prec.fd_tol)
        } else {
            let args: Vec<Tensor> =
                sample.inputs.iter().cloned().chain(v.iter().cloned()).collect();
            (call(&jf, args, &s.name, "jvp")?.split_off(m), s.prec.dot_tol)
        };
        // J^T u, from vjp.
        let args: Vec<Tensor> = sample.inputs.iter().cloned().chain(u.iter().cloned()).collect();
        let out = call(&vf, args, &s.name, "vjp")?;
        if out.len() != n + m {
            return Err(format!(
                "{}: vjp returns {} values, expected {}",
                s.name,
                out.len(),
                n + m
            ));
        }
        check_primal(s, sample, "vjp", &out[..m], &y)?;
        let (mut lhs, mut mag) = (0.0, 0.0);
        for ((uo, jvo), t) in u.iter().zip(&jv).zip(&s.outs) {
            if t.dtype().is_float() {
                let (d, g) = dot(uo, jvo);
                lhs += d;
                mag += g;
            }
        }
        let mut rhs = 0.0;
        for (i, ct) in out[m..].iter().enumerate() {
            let x = &sample.inputs[i];
            if ct.ty() != x.ty() {
                return Err(format!(
                    "{}: vjp gives a cotangent of type {} for input {i} of type {}",
                    s.name,
                    ct.ty(),
                    x.ty()
                ));
            }
            if s.diff[i] {
                let (d, g) = dot(ct, &v[i]);
                rhs += d;
                mag += g;
            }
        }
        let bound = tol * if reverse_only { 1.0 + mag } else { mag };
        let err = (lhs - rhs).abs();
        let finite = lhs.is_finite() && rhs.is_finite();
        if !finite || err > bound {
            let how = if reverse_only { "finite differences" } else { "jvp" };
            let why = if finite {
                format!(
                    "|difference| {err:.3e} > {bound:.3e} (tolerance {tol:e} x {mag:.3e}); a \
                     transpose rule of an op the jvp emits is wrong"
                )
            } else {
                "not finite (NaN or infinite entries)".into()
            };
            let show =
                |ts: &[Tensor]| ts.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n");
            return Err(format!(
                "{}: the dot-product test fails for random pair {k}: <u, J v> = {lhs:.9e} \
                 (J v by {how}), <J^T u, v> = {rhs:.9e} (J^T u by vjp): {why}\n J v:\n{}\n \
                 J^T u:\n{}",
                s.name,
                show(&jv),
                show(&out[m..])
            ));
        }
    }
    Ok(())
}

// ------------------------------------------------------------- vmap of jvp

fn vmap_of_jvp_outcome(sample: &OpSample) -> CheckOutcome {
    match forward_setup(sample) {
        Ok(s) => CheckOutcome::from_result(vmap_of_jvp_check(sample, &s)),
        Err(o) => o,
    }
}

fn vmap_of_jvp_check(sample: &OpSample, s: &Setup) -> std::result::Result<(), String> {
    let n = sample.inputs.len();
    let jf = jvp(s.f.clone());
    let mut rng = rng(&s.name, "vmap_of_jvp");
    let tangent_batch: Vec<Vec<Tensor>> =
        (0..BATCH).map(|_| tangents(sample, &s.diff, &mut rng)).collect();
    // (description, primal axes): the tangents of differentiable inputs are
    // always batched at axis 0, the others shared.
    let configs: [(&str, Option<bool>); 3] = [
        ("primals and tangents batched at axis 0", Some(false)),
        ("tangents batched, primals shared (as jacfwd)", None),
        ("primals batched at their last axis, tangents at axis 0", Some(true)),
    ];
    let mut failures = Vec::new();
    for (what, primal_axis) in configs {
        let mut args = Vec::with_capacity(2 * n);
        let mut axes = Vec::with_capacity(2 * n);
        let built: std::result::Result<(), crate::Error> = (|| {
            for (i, x) in sample.inputs.iter().enumerate() {
                match primal_axis {
                    Some(last) => {
                        let axis = if last { x.rank() } else { 0 };
                        let parts: Vec<Tensor> = (0..BATCH).map(|k| sample.variant(i, k)).collect();
                        args.push(Tensor::stack(&parts, axis)?);
                        axes.push(Some(axis));
                    }
                    None => {
                        args.push(x.clone());
                        axes.push(None);
                    }
                }
            }
            for i in 0..n {
                if s.diff[i] {
                    let parts: Vec<Tensor> = tangent_batch.iter().map(|ts| ts[i].clone()).collect();
                    args.push(Tensor::stack(&parts, 0)?);
                    axes.push(Some(0));
                } else {
                    args.push(tangent_batch[0][i].clone());
                    axes.push(None);
                }
            }
            Ok(())
        })();
        let r = built
            .map_err(|e| format!("building the batched inputs: {e}"))
            .and_then(|()| check_vmap(&jf, &args, &axes, sample.rtol, sample.atol));
        if let Err(e) = r {
            failures.push(format!("{}: vmap of jvp, {what} (in_axes {axes:?}): {e}", s.name));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}
