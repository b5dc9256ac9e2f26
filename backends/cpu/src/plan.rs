//! Plans: a graph compiled for the CPU.
//!
//! Compiling looks every node's kernel up once (a missing kernel is an error
//! naming the op, found before anything runs) and computes, for every step,
//! which values die after it. Running walks the steps with one slot per node
//! and drops a value as soon as its last consumer has run, so peak memory is
//! the live set, not the whole graph. A freed value's buffer, and an output
//! the caller has dropped by the next call, go to the plan's pool of buffers
//! ([`crate::buffers`]), from which later steps and calls take theirs.

use crate::buffers::{self, Pool};
use crate::{kernels, Kernel, KernelFn, KernelManyFn, Parallelism, PrepareFn, Prepared};
use anvil_core::shape::{Binding, DimTable};
use anvil_core::{Error, Graph, NodeId, Op, Result, Tensor, TensorType, ValueId};
use std::sync::{Arc, Mutex};

/// A graph ready to run on the CPU.
///
/// A plan may be run from several threads at once; each call then has buffers
/// of its own.
#[derive(Debug)]
pub struct Plan {
    graph: Graph,
    steps: Vec<Step>,
    /// Buffers kept between calls (taken out by a call while it runs).
    pool: Mutex<Pool>,
    /// Whether any value is large enough to be pooled (tiny plans skip the
    /// pool: their per-call path is a few microseconds).
    pooled: bool,
    /// The most bytes of values the plan holds at once (arguments not
    /// counted; a kernel's own scratch not counted).
    peak_bytes: usize,
    /// The symbolic dimensions of the plan's types (empty for a plan of
    /// concrete shapes): a call binds them from its arguments' shapes.
    dims: DimTable,
    /// The step types of the most recent binding.
    bound: Mutex<Option<Arc<Bound>>>,
    /// When some steps may choose their thread count: the recent times of
    /// whole calls with those steps on one thread and on several (the
    /// choice is made per call, see [`Parallelism::adaptive`]).
    adaptive: Option<Box<crate::threads::Slot>>,
    /// Per output: whether it is the last output of its value, whose slot
    /// a call then moves out rather than clones.
    output_moves: Vec<bool>,
    /// Whether a loop may sum products over its steps in the background
    /// (see [`crate::contraction`]): the other cores are then left to
    /// those sums, and no loop shares its products with the pair helper.
    sums_in_background: bool,
}

thread_local! {
    /// The slot vector of the thread's last call, kept for its next one
    /// (a call nested in a kernel finds it taken and allocates its own).
    static SPARE_SLOTS: std::cell::Cell<Vec<Option<Tensor>>> =
        const { std::cell::Cell::new(Vec::new()) };
}

/// The most operands of a one-result step passed without allocating a
/// vector for them (a fused program's leaves are often more than three).
const INLINE_OPERANDS: usize = 8;

/// The most slots kept for the thread's next call.
const MAX_SPARE_SLOTS: usize = 4096;

/// One call's slots (a value per graph value), in the thread's spare
/// vector when it has one: a cached call allocates no vector for them.
/// Dropping it drops the values left and keeps the vector for the
/// thread's next call.
struct Slots(Vec<Option<Tensor>>);

impl Slots {
    fn new(n: usize) -> Slots {
        let mut v = SPARE_SLOTS.try_with(std::cell::Cell::take).unwrap_or_default();
        v.clear();
        v.resize(n, None);
        Slots(v)
    }
}

impl std::ops::Deref for Slots {
    type Target = [Option<Tensor>];
    fn deref(&self) -> &[Option<Tensor>] {
        &self.0
    }
}

impl std::ops::DerefMut for Slots {
    fn deref_mut(&mut self) -> &mut [Option<Tensor>] {
        &mut self.0
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        let mut v = std::mem::take(&mut self.0);
        v.clear();
        if v.capacity() <= MAX_SPARE_SLOTS {
            // Keep the larger of this vector and one a nested call gave back.
            let _ = SPARE_SLOTS.try_with(|s| {
                let other = s.take();
                s.set(if other.capacity() > v.capacity() { other } else { v });
            });
        }
    }
}

/// A symbolic plan's types under one binding.
#[derive(Debug)]
struct Bound {
    binding: Binding,
    /// Per step, its result types.
    outs: Vec<Vec<TensorType>>,
    /// Per step, its kernel prepared for this binding
    /// ([`StepKernel::PrepareBound`] steps only).
    prepared: Vec<Option<Box<dyn Prepared>>>,
    /// Per step, its op with symbolic parameters bound to these sizes
    /// ([`Op::bind_dims`]: a reshape's target, a pad's widths, a slice's
    /// bounds), for the kernel; `None` where the parameters are concrete.
    ops: Vec<Option<Box<dyn Op>>>,
    peak_bytes: usize,
}

/// Whether a graph or one of its bodies has a symbolic shape.
fn has_symbolic_types(g: &Graph) -> bool {
    (0..g.num_values()).filter_map(|v| ValueId::from_index(v).ok()).any(|v| g.ty(v).is_symbolic())
        || g.iter().any(|(_, n)| n.op.subgraphs().iter().any(|b| has_symbolic_types(b)))
}

#[derive(Debug)]
struct Step {
    node: NodeId,
    kernel: StepKernel,
    /// The node's result types (for kernels of several results).
    outs: Vec<TensorType>,
    /// Values whose last use is this step.
    free: Vec<ValueId>,
    /// Whether this is a large step whose results do not depend on the
    /// thread count (a fused elementwise program, a matrix product), which
    /// runs on one thread or several as the plan chooses
    /// ([`Parallelism::adaptive`]).
    adaptive: bool,
}

#[derive(Debug)]
enum StepKernel {
    /// A parameter: argument `k` of the call.
    Input(usize),
    One(KernelFn),
    Many(KernelManyFn),
    Prepared(Box<dyn Prepared>),
    /// A kernel prepared per binding: a loop over symbolic shapes, whose
    /// op and bodies are specialised to each binding's sizes.
    PrepareBound(PrepareFn),
    /// Results computed once, when the plan was built: the node reads no
    /// argument (see [`precompute`]).
    Known(Vec<Tensor>),
    /// Nothing to run: a known node read only by known nodes.
    Skip,
}

/// Results below this many bytes that depend on no argument (an identity
/// seed, a basis generator, a slice of one) are computed once, when the
/// plan is built: a cached call then only clones them. Larger ones are
/// recomputed by every call rather than held by the plan (the pool serves
/// their buffers), as the compile pipeline leaves them unfolded on purpose.
pub const PRECOMPUTE_BELOW_BYTES: usize = buffers::MIN_BYTES;

/// Compiles a verified graph into a plan.
///
/// # Errors
/// [`Error::MissingRule`] naming the first op without a CPU kernel;
/// [`Error::DuplicateRegistration`] if an op's kernel was registered twice;
/// a kernel's preparation failing; an invalid graph.
pub fn compile(graph: &Graph) -> Result<Plan> {
    graph.verify()?;
    let rewritten = crate::plan_rewrites().run_graph_passes(graph, |e| e.rewrite)?;
    let graph = crate::fusion::fuse(rewritten.as_ref().unwrap_or(graph))?;
    let mut last_use: Vec<Option<NodeId>> = vec![None; graph.num_values()];
    for (id, n) in graph.iter() {
        for i in &n.inputs {
            last_use[i.index()] = Some(id);
        }
    }
    let mut is_output = vec![false; graph.num_values()];
    for o in graph.outputs() {
        is_output[o.index()] = true;
    }
    let mut steps: Vec<Step> = Vec::with_capacity(graph.len());
    for (id, n) in graph.iter() {
        let outs: Vec<TensorType> = n.results().map(|v| graph.ty(v).clone()).collect();
        let kernel = match n.op.parameter_index() {
            Some(k) => StepKernel::Input(k),
            None => {
                let hint = " (link the crate that defines the op, or register one with anvil_cpu::register_kernel!)";
                match kernels().get(n.op.as_ref(), hint)?.kernel {
                    Kernel::One(f) => StepKernel::One(f),
                    Kernel::Many(f) => StepKernel::Many(f),
                    Kernel::Prepare(f) => {
                        let ins: Vec<TensorType> =
                            n.inputs.iter().map(|&i| graph.ty(i).clone()).collect();
                        // An op whose parameters hold a symbolic size (a scan's
                        // length, with no scanned operand to show it in a type)
                        // cannot bind it without the call's sizes either.
                        let symbolic = ins.iter().chain(&outs).any(TensorType::is_symbolic)
                            || n.op.subgraphs().iter().any(|g| has_symbolic_types(g))
                            || n.op.bind_dims(&anvil_core::shape::Binding::new()).is_err();
                        if symbolic {
                            StepKernel::PrepareBound(f)
                        } else {
                            let mut p = f(n.op.as_ref(), &ins, &outs)?;
                            let read: Vec<bool> = n
                                .results()
                                .map(|v| is_output[v.index()] || last_use[v.index()].is_some())
                                .collect();
                            p.results_read(&read);
                            StepKernel::Prepared(p)
                        }
                    }
                }
            }
        };
        let adaptive = adaptive_eligible(&graph, id)?
            || matches!(&kernel, StepKernel::Prepared(p) if p.thread_invariant());
        steps.push(Step { node: id, kernel, outs, free: vec![], adaptive });
    }
    // A value dies after its last reader; an unread value (a result nobody
    // uses) right after its own step.
    for (id, n) in graph.iter() {
        for v in n.results() {
            if !is_output[v.index()] {
                let at = last_use[v.index()].unwrap_or(id);
                steps[at.index()].free.push(v);
            }
        }
    }
    precompute(&graph, &mut steps, &is_output);
    let pooled = (0..graph.num_values())
        .filter_map(|v| ValueId::from_index(v).ok())
        .any(|v| graph.ty(v).bytes().unwrap_or(usize::MAX) >= buffers::MIN_BYTES);
    let peak_bytes = peak_bytes(&graph, &steps, |v| graph.ty(v).bytes().unwrap_or(usize::MAX));
    let dims = (0..graph.num_values())
        .filter_map(|v| ValueId::from_index(v).ok())
        .flat_map(|v| graph.ty(v).shape().to_vec());
    let dims = DimTable::new(dims)?;
    let adaptive = steps.iter().any(|s| s.adaptive).then(|| Box::new(crate::threads::Slot::new()));
    let mut seen = vec![false; graph.num_values()];
    let mut output_moves = vec![false; graph.outputs().len()];
    for (k, o) in graph.outputs().iter().enumerate().rev() {
        output_moves[k] = !std::mem::replace(&mut seen[o.index()], true);
    }
    let sums_in_background = graph.nodes().iter().any(|n| {
        n.op.downcast_ref::<crate::placement::PlacedScan>()
            .is_some_and(|p| p.contractions.iter().any(Option::is_some))
    });
    Ok(Plan {
        sums_in_background,
        graph,
        steps,
        pool: Mutex::default(),
        pooled,
        peak_bytes,
        dims,
        bound: Mutex::default(),
        adaptive,
        output_moves,
    })
}

/// Whether a node may choose its thread count by measured cost: an op
/// whose kernel gives the same bits on any number of threads (declared
/// with [`register_thread_invariant!`](crate::register_thread_invariant):
/// a fused elementwise program, a matrix product), of concrete types, whose
/// operands and results hold at least [`Parallelism::parallel_elems`]
/// elements in all by default (smaller ones run on one thread anyway).
///
/// # Errors
/// The declaration registered twice for the op.
fn adaptive_eligible(graph: &Graph, id: NodeId) -> Result<bool> {
    let n = graph.node(id);
    if !crate::thread_invariant().lookup(n.op.as_ref())?.is_some_and(|t| t.same_bits) {
        return Ok(false);
    }
    let types = n.inputs.iter().copied().chain(n.results()).map(|v| graph.ty(v));
    let mut elems = 0usize;
    for t in types {
        if t.is_symbolic() {
            return Ok(false);
        }
        elems = elems.saturating_add(t.numel());
    }
    Ok(elems >= Parallelism::default().parallel_elems())
}

/// Evaluates, once, the nodes that read no argument (directly or through
/// other nodes) and whose results are each below
/// [`PRECOMPUTE_BELOW_BYTES`], with their kernels, and turns their steps
/// into [`StepKernel::Known`] (or [`StepKernel::Skip`] when only other
/// known nodes read them). Higher-order ops (their bodies may loop for
/// long) and kernels that fail are left to run at call time, where a
/// failure is reported with the call.
fn precompute(graph: &Graph, steps: &mut [Step], is_output: &[bool]) {
    let ctx = Parallelism::sequential();
    let mut known: Vec<Option<Tensor>> = vec![None; graph.num_values()];
    let mut any = false;
    for step in steps.iter_mut() {
        let node = graph.node(step.node);
        let small = step.outs.iter().all(|t| t.bytes().is_some_and(|b| b < PRECOMPUTE_BELOW_BYTES));
        let args: Option<Vec<&Tensor>> =
            node.inputs.iter().map(|i| known[i.index()].as_ref()).collect();
        let (Some(args), true) = (args, small) else { continue };
        let op = node.op.as_ref();
        let results = match &step.kernel {
            StepKernel::One(k) => k(op, &args, &step.outs[0], &ctx).map(|t| vec![t]),
            StepKernel::Many(k) => k(op, &args, &step.outs, &ctx),
            _ => continue,
        };
        let Ok(results) = results else { continue };
        let fits = results.len() == step.outs.len()
            && results
                .iter()
                .zip(&step.outs)
                .all(|(t, ty)| t.dtype() == ty.dtype() && t.shape() == ty.shape());
        if !fits {
            continue;
        }
        for (v, t) in node.results().zip(&results) {
            known[v.index()] = Some(t.clone());
        }
        step.kernel = StepKernel::Known(results);
        any = true;
    }
    if !any {
        return;
    }
    // A known node whose results only known nodes read needs no step.
    let mut needed: Vec<bool> = is_output.to_vec();
    for step in steps.iter() {
        if !matches!(step.kernel, StepKernel::Known(_)) {
            for i in &graph.node(step.node).inputs {
                needed[i.index()] = true;
            }
        }
    }
    for step in steps.iter_mut() {
        if matches!(step.kernel, StepKernel::Known(_))
            && !graph.node(step.node).results().any(|v| needed[v.index()])
        {
            step.kernel = StepKernel::Skip;
        }
    }
}

/// [`peak_bytes`] with the step types of one binding.
fn bound_peak_bytes(graph: &Graph, steps: &[Step], outs: &[Vec<TensorType>]) -> usize {
    let mut bytes = vec![0usize; graph.num_values()];
    for (step, types) in steps.iter().zip(outs) {
        for (v, t) in graph.node(step.node).results().zip(types) {
            bytes[v.index()] = t.bytes().unwrap_or(usize::MAX);
        }
    }
    peak_bytes(graph, steps, |v| bytes[v.index()])
}

/// The largest number of bytes the values of `steps` occupy at once, with
/// `bytes(v)` the size of value `v` (saturating: a graph's values are
/// addressable, their sum need not be). Arguments are not counted.
fn peak_bytes(graph: &Graph, steps: &[Step], bytes: impl Fn(ValueId) -> usize) -> usize {
    let (mut live, mut peak) = (0usize, 0usize);
    for step in steps {
        if !matches!(step.kernel, StepKernel::Input(_)) {
            let node = graph.node(step.node);
            live = node.results().fold(live, |l, v| l.saturating_add(bytes(v)));
            peak = peak.max(live);
            live = step
                .free
                .iter()
                .filter(|&&v| graph.producer_node(v).op.parameter_index().is_none())
                .fold(live, |l, &v| l.saturating_sub(bytes(v)));
        }
    }
    peak
}

impl Plan {
    /// The graph this plan runs.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The most bytes the plan's values occupy at once during a call,
    /// computed from their types when the plan was built (the arguments
    /// and a kernel's internal scratch are not counted). A call whose
    /// [`Parallelism::memory_budget`] is smaller is refused before any
    /// step runs.
    pub fn peak_bytes(&self) -> usize {
        self.peak_bytes
    }

    /// The types the plan's arguments must have.
    pub fn input_types(&self) -> Vec<TensorType> {
        self.graph.input_types()
    }

    /// Checks arguments against the plan's signature.
    ///
    /// # Errors
    /// A wrong number of arguments, or an argument of the wrong dtype or shape.
    pub fn check_inputs(&self, inputs: &[Tensor]) -> Result<()> {
        if !self.dims.is_empty() {
            return self.bind(inputs).map(|_| ());
        }
        self.check_arity_and_dtypes(inputs)?;
        for (i, (&p, x)) in self.graph.inputs().iter().zip(inputs).enumerate() {
            let t = self.graph.ty(p);
            if t.shape() != x.shape() {
                return Err(Error::shape(
                    "call",
                    &[x.shape(), t.shape()],
                    format!(
                        "argument {i} has shape {:?}, the plan was compiled for {:?}",
                        x.shape(),
                        t.shape()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Runs the plan.
    ///
    /// # Errors
    /// Arguments that do not match the signature ([`Plan::check_inputs`]);
    /// [`Error::OutOfMemory`] when the plan's [peak](Plan::peak_bytes)
    /// exceeds the call's memory budget; a kernel's run-time error (an
    /// index out of bounds).
    pub fn run(&self, inputs: &[Tensor], ctx: &Parallelism) -> Result<Vec<Tensor>> {
        let mut outputs = Vec::with_capacity(self.graph.outputs().len());
        self.run_into(inputs, ctx, &mut outputs)?;
        Ok(outputs)
    }

    /// [`Plan::run`], appending the outputs to `outputs` (left as it was on
    /// an error): a caller that runs plans often keeps one vector for
    /// them, and a call then allocates no vector of its own.
    ///
    /// ```
    /// use anvil_core::{trace, Tensor, Var};
    /// use anvil_cpu::{compile, Parallelism};
    /// let plan = compile(&trace(&|x: &Var| x.clone() * 2.0, &Tensor::zeros(&[2])?)?)?;
    /// let mut outputs = Vec::with_capacity(1);
    /// plan.run_into(&[Tensor::ones(&[2])?], &Parallelism::default(), &mut outputs)?;
    /// assert_eq!(outputs[0].to_vec::<f64>()?, vec![2.0, 2.0]);
    /// # Ok::<(), anvil_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Plan::run`].
    pub fn run_into(
        &self,
        inputs: &[Tensor],
        ctx: &Parallelism,
        outputs: &mut Vec<Tensor>,
    ) -> Result<()> {
        let quiet;
        let ctx = if self.sums_in_background {
            quiet = ctx.without_pairing();
            &quiet
        } else {
            ctx
        };
        let bound = if self.dims.is_empty() {
            self.check_inputs(inputs)?;
            None
        } else {
            Some(self.bind(inputs)?)
        };
        let peak = bound.as_ref().map_or(self.peak_bytes, |b| b.peak_bytes);
        if peak > ctx.memory_budget_bytes() {
            return Err(Error::OutOfMemory {
                what: "plan".into(),
                bytes: peak,
                msg: format!(
                    "its values need {} bytes at their peak, more than the memory budget of {} bytes \
                     (set it with Parallelism::memory_budget)",
                    peak,
                    ctx.memory_budget_bytes()
                ),
            });
        }
        let bound = bound.as_deref();
        if !self.pooled {
            return self.run_steps(inputs, bound, ctx, outputs).map(|_| ());
        }
        let first = outputs.len();
        // The lock is never held while kernels run; were it poisoned, the
        // buffers would still be just buffers.
        let mut pool = std::mem::take(&mut *self.pool.lock().unwrap_or_else(|e| e.into_inner()));
        pool.reclaim_lent();
        let installed = buffers::Installed::new(pool);
        let result = self.run_steps(inputs, bound, ctx, outputs);
        let mut pool = installed.finish();
        if let Ok(peak_bytes) = &result {
            // The values' peak plus the kernels' scratch: enough to serve
            // every buffer of the next call, bounded by what one call uses.
            let cap = peak_bytes.saturating_add(pool.scratch_peak());
            pool.trim(cap);
            pool.lend(&outputs[first..]);
        }
        let mut slot = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_empty() || slot.bytes() < pool.bytes() {
            *slot = pool;
        }
        result.map(|_| ())
    }

    /// Whether the plan's shapes have symbolic dimensions, bound by each
    /// call from its arguments (see [`anvil_core::shape::dim_var`]).
    pub fn is_symbolic(&self) -> bool {
        !self.dims.is_empty()
    }

    /// The number of arguments and their dtypes against the signature.
    fn check_arity_and_dtypes(&self, inputs: &[Tensor]) -> Result<()> {
        let params = self.graph.inputs();
        if params.len() != inputs.len() {
            return Err(Error::Arity {
                what: "call".into(),
                kind: "arguments".into(),
                expected: params.len(),
                got: inputs.len(),
            });
        }
        for (i, (&p, x)) in params.iter().zip(inputs).enumerate() {
            let t = self.graph.ty(p);
            if t.dtype() != x.dtype() {
                return Err(Error::dtype("call", i.to_string(), x.dtype(), t.dtype().name()));
            }
        }
        Ok(())
    }

    /// Binds the plan's symbolic dimensions from the arguments' shapes and
    /// evaluates every step's types (reusing those of the previous call
    /// when the binding is the same).
    ///
    /// # Errors
    /// A wrong number of arguments, a wrong dtype, a shape that does not
    /// fit the plan's symbolic signature, a size outside a variable's range.
    fn bind(&self, inputs: &[Tensor]) -> Result<Arc<Bound>> {
        self.check_arity_and_dtypes(inputs)?;
        let specs: Vec<&[usize]> =
            self.graph.inputs().iter().map(|&p| self.graph.ty(p).shape()).collect();
        let given: Vec<&[usize]> = inputs.iter().map(Tensor::shape).collect();
        let binding = self.dims.bind(&specs, &given)?;
        let mut last = self.bound.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = last.as_ref().filter(|b| b.binding == binding) {
            return Ok(b.clone());
        }
        drop(last);
        let values = self.dims.eval(&binding)?;
        let outs = self
            .steps
            .iter()
            .map(|st| {
                st.outs
                    .iter()
                    .map(|t| Ok(TensorType::new(t.dtype(), self.dims.resolve(&values, t.shape())?)))
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        for t in outs.iter().flatten() {
            t.check_size("call")?;
        }
        let peak_bytes = bound_peak_bytes(&self.graph, &self.steps, &outs);
        // Loops over symbolic shapes: their op and bodies specialised to
        // these sizes, then prepared (their bodies compiled) once per binding.
        let prepared = self
            .steps
            .iter()
            .zip(&outs)
            .map(|(st, types)| match &st.kernel {
                StepKernel::PrepareBound(f) => {
                    let node = self.graph.node(st.node);
                    let ins = node
                        .inputs
                        .iter()
                        .map(|&i| self.graph.ty(i).bind(&binding))
                        .collect::<Result<Vec<_>>>()?;
                    let op = anvil_core::graph::bind_op(node.op.as_ref(), &binding)?;
                    f(op.as_ref(), &ins, types).map(Some)
                }
                _ => Ok(None),
            })
            .collect::<Result<Vec<_>>>()?;
        let ops = self
            .steps
            .iter()
            .map(|st| match &st.kernel {
                StepKernel::One(_) | StepKernel::Many(_) => {
                    self.graph.node(st.node).op.bind_dims(&binding)
                }
                _ => Ok(None),
            })
            .collect::<Result<Vec<_>>>()?;
        let b = Arc::new(Bound { binding, outs, prepared, ops, peak_bytes });
        last = self.bound.lock().unwrap_or_else(|e| e.into_inner());
        *last = Some(b.clone());
        Ok(b)
    }

    /// Runs the steps with the pool installed; appends the outputs to
    /// `outputs` (left as it was on an error) and returns the largest
    /// number of bytes live at once. The adaptive steps run with `ctx` or
    /// on one thread, as the plan's recent call times say.
    fn run_steps(
        &self,
        inputs: &[Tensor],
        bound: Option<&Bound>,
        ctx: &Parallelism,
        outputs: &mut Vec<Tensor>,
    ) -> Result<usize> {
        match &self.adaptive {
            Some(slot) if ctx.is_adaptive() && ctx.thread_count() > 1 => {
                let one = ctx.threads(1);
                slot.run(|parallel| {
                    let eligible = if parallel { ctx } else { &one };
                    self.run_steps_with(inputs, bound, ctx, eligible, outputs)
                })
            }
            _ => self.run_steps_with(inputs, bound, ctx, ctx, outputs),
        }
    }

    /// [`Plan::run_steps`] with `eligible` for the adaptive steps.
    fn run_steps_with(
        &self,
        inputs: &[Tensor],
        bound: Option<&Bound>,
        ctx: &Parallelism,
        eligible: &Parallelism,
        outputs: &mut Vec<Tensor>,
    ) -> Result<usize> {
        let bytes = |t: &Tensor| t.numel() * t.dtype().size_of();
        let (mut live, mut peak) = (0usize, 0usize);
        let mut slots = Slots::new(self.graph.num_values());
        for (k, step) in self.steps.iter().enumerate() {
            let outs = bound.map_or(&step.outs[..], |b| &b.outs[k][..]);
            let step_ctx = if step.adaptive { eligible } else { ctx };
            let node = self.graph.node(step.node);
            // A kernel that panics (a plugin's bug, or one of ours) is an
            // error naming its op, not a panic unwinding through the
            // caller's program. (W7's call, runners alternated: 0.89–0.94 µs
            // without the catch, 0.92–1.01 µs with one per step and
            // 0.94–0.99 µs with one per run: within this VM's noise.)
            Error::catching(node.op.name(), "CPU kernel", || {
                self.run_step(step, outs, bound.map(|b| (b, k)), inputs, &mut slots, step_ctx)
            })?;
            if self.pooled {
                live += node
                    .results()
                    .map(|v| slots[v.index()].as_ref().map_or(0, bytes))
                    .sum::<usize>();
                peak = peak.max(live);
            }
            for f in &step.free {
                if let Some(t) = slots[f.index()].take() {
                    if self.pooled {
                        live -= bytes(&t);
                        buffers::recycle(t);
                    }
                }
            }
        }
        let first = outputs.len();
        outputs.reserve(self.graph.outputs().len());
        for (o, &moves) in self.graph.outputs().iter().zip(&self.output_moves) {
            let slot = &mut slots[o.index()];
            match if moves { slot.take() } else { slot.clone() } {
                Some(value) => outputs.push(value),
                None => {
                    outputs.truncate(first);
                    return Err(Error::InvalidGraph {
                        node: o.index(),
                        msg: "output was not computed".into(),
                    });
                }
            }
        }
        Ok(peak)
    }

    /// Runs one step, storing its results in `slots`.
    fn run_step(
        &self,
        step: &Step,
        types: &[TensorType],
        bound: Option<(&Bound, usize)>,
        inputs: &[Tensor],
        slots: &mut [Option<Tensor>],
        ctx: &Parallelism,
    ) -> Result<()> {
        let node = self.graph.node(step.node);
        let op = bound
            .and_then(|(b, k)| b.ops.get(k))
            .and_then(Option::as_deref)
            .unwrap_or(node.op.as_ref());
        let outs = {
            let arg = |k: usize| {
                slots[node.inputs[k].index()].as_ref().ok_or_else(|| Error::InvalidGraph {
                    node: step.node.index(),
                    msg: "input value was freed early".into(),
                })
            };
            let all_args = || (0..node.inputs.len()).map(arg).collect::<Result<Vec<&Tensor>>>();
            match &step.kernel {
                StepKernel::Input(k) => {
                    let x = inputs.get(*k).ok_or_else(|| Error::InvalidGraph {
                        node: step.node.index(),
                        msg: format!("the plan reads argument {k}, which is missing"),
                    })?;
                    slots[node.out().index()] = Some(x.clone());
                    return Ok(());
                }
                StepKernel::One(kernel) => {
                    let out = &types[0];
                    // Up to INLINE_OPERANDS operands on the stack: no
                    // allocation per step.
                    let t = crate::gathered::<_, _, INLINE_OPERANDS>(
                        node.inputs.len(),
                        arg,
                        |operands| kernel(op, operands, out, ctx),
                    )?;
                    check_result(op.name(), &t, out)?;
                    slots[node.out().index()] = Some(t);
                    return Ok(());
                }
                StepKernel::Many(kernel) => kernel(op, &all_args()?, types, ctx)?,
                StepKernel::Prepared(p) => p.run(&all_args()?, types, ctx)?,
                StepKernel::PrepareBound(_) => {
                    let p = bound.and_then(|(b, k)| b.prepared.get(k)).and_then(Option::as_ref);
                    let p = p.ok_or_else(|| Error::InvalidGraph {
                        node: step.node.index(),
                        msg: "a loop over symbolic shapes run without a binding".into(),
                    })?;
                    p.run(&all_args()?, types, ctx)?
                }
                StepKernel::Known(values) => {
                    for (v, t) in node.results().zip(values) {
                        slots[v.index()] = Some(t.clone());
                    }
                    return Ok(());
                }
                StepKernel::Skip => return Ok(()),
            }
        };
        self.store(step, types, outs, slots)
    }

    /// Stores the results of a step of several results.
    fn store(
        &self,
        step: &Step,
        types: &[TensorType],
        outs: Vec<Tensor>,
        slots: &mut [Option<Tensor>],
    ) -> Result<()> {
        let node = self.graph.node(step.node);
        if outs.len() != types.len() {
            return Err(Error::invalid(
                node.op.name(),
                "CPU kernel",
                format!("returned {} results; the op has {}", outs.len(), types.len()),
            ));
        }
        for ((v, t), ty) in node.results().zip(outs).zip(types) {
            check_result(node.op.name(), &t, ty)?;
            slots[v.index()] = Some(t);
        }
        Ok(())
    }
}

/// A kernel must return its result's static type (compared field by field:
/// `out.ty()` would allocate). A plugin's kernel that does not is an error
/// naming its op: every later step relies on the types the plan was built
/// for.
fn check_result(op: &str, out: &Tensor, ty: &TensorType) -> Result<()> {
    if out.dtype() == ty.dtype() && out.shape() == ty.shape() {
        return Ok(());
    }
    Err(Error::invalid(
        op,
        "CPU kernel",
        format!("returned {}, not {ty} (the type the op's shape rule gives)", out.ty()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use anvil_core::{trace, Var};
    use anvil_ops::VarExt;

    #[test]
    fn values_are_freed_right_after_their_last_use_and_outputs_never() {
        // Two outputs, and intermediates with one reader each.
        let traced =
            trace(&|x: &Var| vec![x.exp().sin().cos(), x.exp()], Tensor::zeros(&[4]).unwrap())
                .unwrap();
        let plan = compile(&traced).unwrap();
        // The plan runs its own (fused) graph: sin and cos are one node.
        let g = plan.graph().clone();
        assert!(g.len() < traced.len(), "{g}");
        let freed: Vec<Vec<usize>> =
            plan.steps.iter().map(|s| s.free.iter().map(|n| n.index()).collect()).collect();
        // The input dies at the last node that reads it.
        let last_reader_of_input = g
            .iter()
            .filter(|(_, n)| n.inputs.iter().any(|i| i.index() == 0))
            .map(|(id, _)| id.index())
            .max()
            .unwrap();
        assert!(freed[last_reader_of_input].contains(&0), "{freed:?}\n{g}");
        let outputs: Vec<usize> = g.outputs().iter().map(|o| o.index()).collect();
        assert!(
            freed.iter().flatten().all(|v| !outputs.contains(v)),
            "an output was freed: {freed:?}"
        );
        let run = plan.run(&[Tensor::zeros(&[4]).unwrap()], &Parallelism::sequential()).unwrap();
        assert_eq!(run[0].to_vec::<f64>().unwrap(), vec![1f64.sin().cos(); 4]);
    }

    fn ptr(t: &Tensor) -> *const f64 {
        t.as_slice::<f64>().unwrap().as_ptr()
    }

    #[test]
    fn an_output_the_caller_dropped_is_reused_by_the_next_call_and_a_kept_one_is_not() {
        let n = 4096; // 32 KiB: pooled.
        let traced = trace(&|x: &Var| x.exp().sin() + x, Tensor::zeros(&[n]).unwrap()).unwrap();
        let plan = compile(&traced).unwrap();
        let ctx = Parallelism::sequential();
        let x = Tensor::linspace(0.0, 1.0, n).unwrap();
        let first = plan.run(std::slice::from_ref(&x), &ctx).unwrap().remove(0);
        let (p1, v1) = (ptr(&first), first.to_vec::<f64>().unwrap());
        drop(first);
        let second = plan.run(std::slice::from_ref(&x), &ctx).unwrap().remove(0);
        assert_eq!(ptr(&second), p1, "the dropped output's buffer is reused");
        assert!(second.to_vec::<f64>().unwrap() == v1);
        // Kept by the caller: the next call must not write into it.
        let third = plan.run(&[Tensor::zeros(&[n]).unwrap()], &ctx).unwrap().remove(0);
        assert_ne!(ptr(&third), ptr(&second));
        assert!(second.to_vec::<f64>().unwrap() == v1, "a kept output was overwritten");
        assert!(third.to_vec::<f64>().unwrap().iter().all(|&v| v == 1f64.sin()));
        // The caller's input is never taken, even though the plan reads it last.
        assert_eq!(x.to_vec::<f64>().unwrap()[n - 1], 1.0);
    }

    #[test]
    fn repeated_calls_through_reused_buffers_give_the_same_values() {
        // Kernels of every kind write into reused (in debug: NaN-poisoned)
        // buffers from the second call on; every element must be written.
        let (r, c) = (48usize, 64usize);
        let f = |a: &Var, b: &Var| {
            let m = a.matmul(&b.transpose()); // r × r through MatmulT
            let p = m.pad(&[(1, 2), (0, 3)], 0.5).tanh(); // pad, fused chain
            let s = p.sum(&[1]).reshape(&[1, (r + 3) as i64]);
            let cat = anvil_ops::concatenate(&[&s, &s.exp()], 0);
            let t = a.transpose().exp() * 2.0; // tiled transpose, scalar broadcast
            vec![cat, t.sum(&[0]), m.matmul(a), p.lt(&m.mean()).select(&p, &p.neg())]
        };
        let a = Tensor::from_vec((0..r * c).map(|i| (i as f64 * 0.37).sin()).collect(), &[r, c]);
        let b = Tensor::from_vec((0..r * c).map(|i| (i as f64 * 0.11).cos()).collect(), &[r, c]);
        let (a, b) = (a.unwrap(), b.unwrap());
        let traced =
            anvil_core::trace_with(&[a.ty(), b.ty()], |v: &[Var]| Ok(f(&v[0], &v[1]))).unwrap();
        let plan = compile(&traced).unwrap();
        for ctx in [Parallelism::sequential(), Parallelism::default().min_parallel_elems(64)] {
            let first = plan.run(&[a.clone(), b.clone()], &ctx).unwrap();
            let want: Vec<Vec<f64>> = first.iter().map(|t| t.to_vec().unwrap()).collect();
            assert!(want.iter().flatten().all(|x| x.is_finite()));
            drop(first);
            for _ in 0..3 {
                let got: Vec<Vec<f64>> = plan
                    .run(&[a.clone(), b.clone()], &ctx)
                    .unwrap()
                    .iter()
                    .map(|t| t.to_vec().unwrap())
                    .collect();
                assert!(got == want, "a call through reused buffers differs");
            }
        }
    }

    #[test]
    fn an_output_listed_twice_is_given_twice() {
        // `e` is the first and the third output: the first is a clone, the
        // last takes the slot (calls nested in a kernel, a loop's body,
        // are run by the loop tests of the workspace).
        let mut g = Graph::new();
        let x = g.add_input(TensorType::new(anvil_core::DType::F64, [3])).unwrap();
        let e = g.push(Box::new(anvil_ops::elementwise::Exp), &[x]).unwrap();
        let e = g.node(e).out();
        let s = g.push(Box::new(anvil_ops::elementwise::Sin), &[x]).unwrap();
        let s = g.node(s).out();
        g.set_outputs(vec![e, s, e]);
        let plan = compile(&g).unwrap();
        assert_eq!(plan.output_moves, vec![false, true, true]);
        let xs = Tensor::from_vec(vec![0.5, 1.0, 2.0], &[3]).unwrap();
        for _ in 0..3 {
            let out = plan.run(std::slice::from_ref(&xs), &Parallelism::sequential()).unwrap();
            // (vmath: within an ulp or two of libm.)
            let close = |t: &Tensor, f: fn(f64) -> f64| {
                let got = t.to_vec::<f64>().unwrap();
                got.iter().zip([0.5f64, 1.0, 2.0]).all(|(g, x)| (g - f(x)).abs() <= 1e-15 * f(x))
            };
            assert!(close(&out[0], f64::exp) && close(&out[1], f64::sin), "{out:?}");
            assert!(out[0] == out[2], "{out:?}");
        }
    }

    #[test]
    fn the_pool_keeps_what_a_call_asks_for_and_no_more() {
        // x -> 2n -> 3n -> 4n elements -> a scalar: each value dies at the
        // next step, so at most two are live (3n + 4n), while the run asks
        // for 2n + 3n + 4n. The next call asks for the same three sizes:
        // the pool keeps all three (no fresh pages), and never more.
        let n = 4096;
        let f = |x: &Var| {
            let p = |v: Var| v.pad(&[(0, n)], 1.0);
            p(p(p(x.clone()))).sum(&[0])
        };
        let plan = compile(&trace(&f, Tensor::zeros(&[n]).unwrap()).unwrap()).unwrap();
        for _ in 0..4 {
            let out = plan.run(&[Tensor::ones(&[n]).unwrap()], &Parallelism::sequential()).unwrap();
            assert_eq!(out[0].to_vec::<f64>().unwrap(), vec![(4 * n) as f64]);
            let held = plan.pool.lock().unwrap().bytes();
            assert_eq!(held, 9 * n * 8, "the pool holds {held} bytes");
        }
    }

    #[test]
    fn values_that_read_no_argument_are_computed_once_when_the_plan_is_built() {
        // exp(c) and its slice read only a constant: computed at build time;
        // the slice's operand is then read by no step that runs. A large
        // argument-free value is left to the calls.
        let f = |x: &Var| {
            let c = x.constant_like(Tensor::linspace(0.0, 1.0, 8).unwrap());
            let big = x.constant_like(Tensor::zeros(&[4096]).unwrap()).exp();
            let e = c.exp();
            vec![x * e.slice_axis(0, Some(0), Some(4), 1), big]
        };
        let plan = compile(&trace(&f, Tensor::zeros(&[4]).unwrap()).unwrap()).unwrap();
        let kinds: Vec<&str> = plan
            .steps
            .iter()
            .map(|s| match s.kernel {
                StepKernel::Known(_) => "known",
                StepKernel::Skip => "skip",
                StepKernel::Input(_) => "input",
                _ => "run",
            })
            .collect();
        let g = plan.graph();
        let kind_of = |name: &str, bytes: usize| {
            let at = g
                .iter()
                .position(|(_, n)| {
                    n.op.name() == name && n.results().all(|v| g.ty(v).bytes() == Some(bytes))
                })
                .unwrap_or_else(|| panic!("no {name} of {bytes} bytes in\n{g}"));
            kinds[at]
        };
        assert_eq!(kind_of("fused", 64), "skip", "exp(c), read only by the slice\n{g}");
        assert_eq!(kind_of("slice", 32), "known", "the slice, read by x * _\n{g}");
        assert_eq!(kind_of("fused", 4096 * 8), "run", "too large to hold\n{g}");
        let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[4]).unwrap();
        for _ in 0..2 {
            let out = plan.run(std::slice::from_ref(&x), &Parallelism::sequential()).unwrap();
            let got = out[0].to_vec::<f64>().unwrap();
            for (i, g) in got.iter().enumerate() {
                let want = (i + 1) as f64 * (i as f64 / 7.0).exp();
                assert!((g - want).abs() <= 1e-14 * want, "{got:?}");
            }
            assert!(out[1].to_vec::<f64>().unwrap().iter().all(|&v| v == 1.0));
        }
    }
    #[test]
    fn adaptive_steps_take_both_paths_and_give_the_same_bits() {
        // Matrix products and fused chains large enough to be adaptive:
        // whichever path each step takes, the results are the same bits,
        // call after call and against one thread and the fixed rule.
        let n = 200;
        let f = |a: &Var, b: &Var| {
            let h = a.matmul(b).tanh() * 0.5 + a; // matmul, fused chain
            h.matmul(&b.transpose()).exp() // matmul_t, fused chain
        };
        let a = Tensor::from_vec(
            (0..n * n).map(|i| ((i % 97) as f64 * 0.013).sin()).collect(),
            &[n, n],
        );
        let b = Tensor::from_vec(
            (0..n * n).map(|i| ((i % 89) as f64 * 0.021).cos()).collect(),
            &[n, n],
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        let traced =
            anvil_core::trace_with(&[a.ty(), b.ty()], |v: &[Var]| Ok(vec![f(&v[0], &v[1])]))
                .unwrap();
        let plan = compile(&traced).unwrap();
        let adaptive = plan.steps.iter().filter(|s| s.adaptive).count();
        assert!(adaptive >= 3, "{adaptive} adaptive steps\n{}", plan.graph());
        let args = [a, b];
        let bits = |ctx: &Parallelism| -> Vec<u64> {
            let out = plan.run(&args, ctx).unwrap().remove(0);
            out.to_vec::<f64>().unwrap().iter().map(|x| x.to_bits()).collect()
        };
        let one = bits(&Parallelism::sequential());
        let two = Parallelism::default().threads(2).min_parallel_flops(1).min_parallel_elems(1);
        assert!(
            bits(&two.adaptive(false)) == one,
            "the fixed rule's bits differ from one thread's"
        );
        // Until both paths ran: a parallel try is timed only once parallel
        // calls have run for a while (threads.rs), which takes more calls
        // the faster a call is (a dozen in a debug build, dozens optimised).
        let slot = plan.adaptive.as_ref().unwrap();
        for calls in 0.. {
            assert!(bits(&two) == one, "an adaptive call's bits differ from one thread's");
            if two.thread_count() == 1 || (calls >= 12 && slot.tried_both()) {
                break;
            }
            assert!(calls < 2000, "never tried both paths in {calls} calls");
        }
    }

    /// `2 x`, with a kernel (test-local), declared thread-invariant when
    /// `DECLARED`.
    #[derive(Clone, Debug, PartialEq, Eq, Hash)]
    struct Twice<const DECLARED: bool>;

    impl<const DECLARED: bool> Op for Twice<DECLARED> {
        fn name(&self) -> &'static str {
            "twice"
        }
        fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
            anvil_core::op::expect_arity(self, inputs, 1)?;
            Ok(inputs[0].clone())
        }
    }

    fn twice(_: &dyn Op, x: &[&Tensor], _: &TensorType, _: &Parallelism) -> Result<Tensor> {
        let v: Vec<f64> = x[0].to_vec::<f64>()?.iter().map(|a| 2.0 * a).collect();
        Tensor::from_vec(v, x[0].shape())
    }

    crate::register_kernel!(Twice<false>, twice);
    crate::register_kernel!(Twice<true>, twice);
    crate::register_thread_invariant!(Twice<true>);

    #[test]
    fn an_op_declared_thread_invariant_chooses_its_thread_count() {
        let n = Parallelism::default().parallel_elems();
        for (op, want) in
            [(Box::new(Twice::<false>) as Box<dyn Op>, false), (Box::new(Twice::<true>), true)]
        {
            let mut g = Graph::new();
            let x = g.add_input(TensorType::new(anvil_core::DType::F64, [n])).unwrap();
            let node = g.push(op, &[x]).unwrap();
            g.set_outputs(vec![g.node(node).out()]);
            assert_eq!(adaptive_eligible(&g, node).unwrap(), want);
            let plan = compile(&g).unwrap();
            assert_eq!(plan.steps.iter().any(|s| s.adaptive), want);
        }
    }
}
