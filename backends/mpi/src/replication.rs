//! Replication types: which values of a sharded function are the same on
//! every rank (replicated) and which may differ (varying), inferred when the
//! function is traced, and the rewrite that uses them so that the
//! cotangent of a replicated value costs no communication.
//!
//! This is JAX `shard_map`'s convention (`check_vma`, formerly
//! `check_rep`, with `pvary`): a value is **replicated** or **varying**
//! over the mesh, and
//!
//! - a replicated value's cotangent is itself replicated (every rank holds
//!   the whole cotangent), so the transpose of `all_reduce_sum` (varying →
//!   replicated) is the identity ([`Pvary`]), with no communication, and a
//!   replicated result's cotangent enters the per-rank computation as it is;
//! - where a replicated value meets varying ones (`w` used with each rank's
//!   examples), the rewrite inserts [`Pvary`] (the identity, replicated →
//!   varying), whose transpose is the one all-reduce of the backward pass:
//!   the ranks' cotangent contributions summed ([`PsumReplicated`]);
//! - `all_reduce_sum` of a replicated value is `x * p` and `all_gather` of
//!   one is `p` copies side by side: both local, with local transposes;
//! - `all_gather` of a varying value is replicated ([`GatherReplicated`]),
//!   its transpose each rank's own block ([`TakeShard`]), local again; a
//!   sharded argument of `shard_map` is that block of a replicated value.
//!
//! The inner products behind the transposes (the dot-product test) count a
//! replicated value once and sum a varying one over the ranks.
//!
//! The rules, value by value (`R` replicated, `V` varying):
//!
//! | value | type |
//! |---|---|
//! | a replicated argument of `shard_map` (`in_axes` `None`), a tensor it captures, a constant | `R` |
//! | a sharded argument of `shard_map`; every argument, capture and constant of `spmd` | `V` |
//! | `all_reduce_sum`, `all_gather` (of anything), `all_reduce_max`/`broadcast` of `R` | `R` |
//! | `all_reduce_max`/`broadcast` of `V`, `reduce_scatter`, `axis_index` | `V` |
//! | any other op | `R` when all its operands are `R`, else `V` (the `R` operands through `Pvary`) |
//! | `cond`, `scan`, `while`, `map`, custom-rule calls | as their bodies' outputs (see below) |
//! | another op whose bodies contain a collective | `V` (its `R` operands through `Pvary`) |
//!
//! The types are sound by construction (`R` only where every rank computes
//! the same value from the same replicated inputs), and conservative: a
//! value that is the same on every rank for a reason the rules do not see
//! (`pmax`'s result, say) is `V`, which costs communication in its
//! transpose, never a wrong result. A `shard_map` result with `out_axes`
//! `None` that is `V` is taken as the program's promise that the ranks hold
//! the same value ([`Replicated`]): its cotangent is split evenly between
//! them (a local division).
//!
//! The types are given **while the function is traced**, as JAX's
//! `shard_map` binds each primitive with its operands' types: a sharded
//! function installs a hook ([`anvil_core::trace::with_apply_hook`]) that
//! applies every op of its body by the rules above (a `psum` of a varying
//! value is traced as [`PsumReplicated`], a replicated operand of varying
//! work goes through [`Pvary`]). So a transform taken *inside* the body
//! (`grad` within `f`) differentiates typed ops and has JAX's answer: the
//! gradient of `psum(loss)` with respect to a replicated parameter is the
//! sum of the ranks' gradients on every rank, and with respect to a
//! sharded argument each rank's own block (`psumᵀ` is the identity). The
//! traces a transform opens inside the body (`grad`, `vmap`, `jvp`,
//! `jacfwd`/`jacrev`, `map`) declare which outer values their inputs stand
//! for (`trace_fn_for`), so their values are typed too. The same rules then
//! rewrite the traced graph once more ([`rewrite`]; a typed graph is left as
//! it is) for the transforms taken *of* the sharded function
//! (`grad(shard_map(f))`, `hessian(data_parallel(loss))`).
//!
//! **Bodies of control flow and custom rules are typed too.** The
//! functions of `cond`, `switch`, `scan` (and `fori_loop`), `while_loop`,
//! `map` and `custom_jvp`/`custom_vjp` traced inside a sharded body have
//! inputs that stand for the op's operands, so their values are typed as
//! they are traced, as JAX's rules for these primitives type them under
//! `check_vma` (the core side is [`anvil_core::trace::TraceTypes`]):
//!
//! - a loop's carry has one type on entry and on exit: a carry that
//!   enters replicated and leaves varying (a sum of each rank's examples)
//!   enters varying (through [`Pvary`]), and the body is traced again, to
//!   the fixpoint (JAX's scan rule with `pvary`); a `while_loop` whose
//!   predicate varies runs each rank its own number of steps, so all its
//!   carries vary;
//! - each result of a `cond`/`switch` is as general as every branch's and
//!   as the index: a branch whose result is replicated where another's
//!   varies, or where the index varies, returns it through [`Pvary`];
//! - the op itself is applied as it is (no [`Pvary`] on its operands: its
//!   bodies hold the ones they need, so a replicated operand's cotangent
//!   is summed over the ranks once), its results typed by its bodies'
//!   outputs;
//! - the `jvp` rule of a `custom_jvp` is typed with each tangent as its
//!   primal; a `custom_vjp`'s `bwd` is typed when reverse mode emits it
//!   into a typed trace. As in JAX, `bwd` gives a replicated argument a
//!   replicated cotangent (a `psum` over the ranks of each rank's part).
//!
//! So a `grad` taken inside such a body (a gradient-descent step in a
//! `fori_loop`) or through it (the gradient of a loss computed by a
//! `scan` closing over a replicated parameter) has JAX's answer. An op
//! with bodies that these rules do not know (a plugin's) is typed by the
//! general rule: its results vary when an operand varies or its bodies
//! communicate, its replicated operands entering through [`Pvary`].
//!
//! [`Pvary`]: crate::collectives::Pvary
//! [`PsumReplicated`]: crate::collectives::PsumReplicated
//! [`GatherReplicated`]: crate::collectives::GatherReplicated
//! [`TakeShard`]: crate::collectives::TakeShard
//! [`Replicated`]: crate::collectives::Replicated

use crate::axis::{Axis, AxisKind};
use crate::collectives::{
    AllGather, AllReduce, Broadcast, GatherReplicated, PsumReplicated, Pvary, ReduceScatter,
    SumToRoot, TakeShard,
};
use crate::comm::Reduce;
use anvil_core::function::{trace_fn, trace_with, TracedFn};
use anvil_core::replay::{bind, value};
use anvil_core::trace::{with_apply_hook, ApplyHook, TraceTypes, Tracer, TypeBits};
use anvil_core::{
    Constant, Dyn, Error, Function, Graph, Op, Parameter, Result, TensorType, TreeDef, Var,
};
use anvil_ops::concatenate;
use anvil_ops::cond::Cond;
use anvil_ops::control::{CustomJvpCall, CustomVjpCall, Map};
use anvil_ops::scan::Scan;
use anvil_ops::while_loop::While;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};

/// Whether a value is the same on every rank of the mesh.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rep {
    /// The same on every rank.
    Replicated,
    /// Possibly different on each rank.
    Varying,
}

use Rep::{Replicated as R, Varying as V};

/// Whether `op`'s bodies (recursively) contain an op with effects (a
/// collective).
fn bodies_communicate(op: &dyn Op) -> bool {
    op.subgraphs()
        .iter()
        .any(|g| g.iter().any(|(_, n)| n.op.has_effects() || bodies_communicate(n.op.as_ref())))
}

fn is_mesh(axis: &Axis) -> bool {
    axis.kind == AxisKind::Mesh
}

/// One op applied with its operands' types `in_reps` (see the module
/// docs): its results and their type. `raw` applies the op itself to the
/// given operands; `pvary` gives operand `k` (replicated) entering varying
/// work.
fn apply_typed(
    op: &dyn Op,
    ins: &[Var],
    in_reps: &[Rep],
    constants: Rep,
    raw: &dyn Fn(&[&Var]) -> Result<Vec<Var>>,
    pvary: &mut dyn FnMut(usize) -> Var,
) -> Result<(Vec<Var>, Vec<Rep>)> {
    // An op whose bodies were typed as they were traced (their inputs stand
    // for its operands): applied as it is, its results typed by its bodies.
    if let Some(reps) = body_results(op, in_reps, constants) {
        return Ok((raw(&ins.iter().collect::<Vec<_>>())?, reps));
    }
    let (outs, rep) = apply_typed_one(op, ins, in_reps, constants, raw, pvary)?;
    let reps = vec![rep; outs.len()];
    Ok((outs, reps))
}

/// [`apply_typed`] for an op whose results all have one type.
fn apply_typed_one(
    op: &dyn Op,
    ins: &[Var],
    in_reps: &[Rep],
    constants: Rep,
    raw: &dyn Fn(&[&Var]) -> Result<Vec<Var>>,
    pvary: &mut dyn FnMut(usize) -> Var,
) -> Result<(Vec<Var>, Rep)> {
    let all_r = in_reps.iter().all(|&r| r == R);
    let x = || ins[0].clone();
    let same = || raw(&ins.iter().collect::<Vec<_>>());
    let times = |x: &Var, p: usize| x * &x.scalar_like(p as f64);
    Ok(if op.is::<Constant>() {
        (same()?, constants)
    } else if let Some(c) = op.downcast_ref::<AllReduce>().filter(|c| is_mesh(&c.axis)) {
        match (c.reduce, in_reps[0]) {
            (Reduce::Sum, R) => (vec![times(&x(), c.axis.size)], R),
            (Reduce::Sum, V) => {
                let op = PsumReplicated { axis: c.axis.clone() };
                (vec![Var::apply_op(Box::new(op), &[&x()])], R)
            }
            (Reduce::Max, R) => (vec![x()], R),
            (Reduce::Max, V) => (same()?, V),
        }
    } else if let Some(c) = op.downcast_ref::<PsumReplicated>() {
        match in_reps[0] {
            R => (vec![times(&x(), c.axis.size)], R),
            V => (same()?, R),
        }
    } else if let Some(c) = op.downcast_ref::<AllGather>().filter(|c| is_mesh(&c.axis)) {
        match in_reps[0] {
            R => (vec![tile(&x(), c.dim, c.axis.size)], R),
            V => {
                let op = GatherReplicated { axis: c.axis.clone(), dim: c.dim };
                (vec![Var::apply_op(Box::new(op), &[&x()])], R)
            }
        }
    } else if let Some(c) = op.downcast_ref::<GatherReplicated>() {
        match in_reps[0] {
            R => (vec![tile(&x(), c.dim, c.axis.size)], R),
            V => (same()?, R),
        }
    } else if op.downcast_ref::<Broadcast>().is_some_and(|c| is_mesh(&c.axis)) {
        match in_reps[0] {
            R => (vec![x()], R),
            V => (same()?, V),
        }
    } else if op.is::<Pvary>() {
        match in_reps[0] {
            R => (same()?, V),
            V => (vec![x()], V),
        }
    } else if op.is::<TakeShard>() {
        if in_reps[0] == V {
            return Err(Error::invalid(
                op.name(),
                "operand",
                "takes this rank's block of a replicated value, but the value varies across the \
                 ranks (a shard_map nested in a sharded function over the same processes?)",
            ));
        }
        (same()?, V)
    } else if op.downcast_ref::<ReduceScatter>().is_some_and(|c| is_mesh(&c.axis))
        || op.downcast_ref::<SumToRoot>().is_some_and(|c| is_mesh(&c.axis))
        || bodies_communicate(op)
        || !all_r
    {
        // Varying work: its replicated operands go through Pvary.
        let ins: Vec<Var> = (0..ins.len())
            .map(|k| match in_reps[k] {
                V => ins[k].clone(),
                R => pvary(k),
            })
            .collect();
        (raw(&ins.iter().collect::<Vec<_>>())?, V)
    } else {
        // Every operand replicated (or none): the same on every rank.
        (same()?, R)
    })
}

fn join(a: Rep, b: Rep) -> Rep {
    if a == V || b == V {
        V
    } else {
        R
    }
}

/// The type of the results of `op` (one with no bodies, or bodies it is
/// not known how to type: every result the same) when its operands have
/// the types `in_reps`: the rules of [`apply_typed`] for a graph already
/// typed (whose `Pvary`s and typed collectives are in place).
fn rep_rule(op: &dyn Op, in_reps: &[Rep], constants: Rep) -> Rep {
    let first = in_reps.first().copied().unwrap_or(R);
    if op.is::<Constant>() {
        constants
    } else if let Some(c) = op.downcast_ref::<AllReduce>().filter(|c| is_mesh(&c.axis)) {
        match c.reduce {
            Reduce::Sum => R,
            Reduce::Max => first,
        }
    } else if op.is::<PsumReplicated>()
        || op.is::<GatherReplicated>()
        || op.downcast_ref::<AllGather>().is_some_and(|c| is_mesh(&c.axis))
    {
        R
    } else if op.downcast_ref::<Broadcast>().is_some_and(|c| is_mesh(&c.axis)) {
        first
    } else if op.is::<Pvary>()
        || op.is::<TakeShard>()
        || op.downcast_ref::<ReduceScatter>().is_some_and(|c| is_mesh(&c.axis))
        || op.downcast_ref::<SumToRoot>().is_some_and(|c| is_mesh(&c.axis))
        || bodies_communicate(op)
    {
        V
    } else {
        in_reps.iter().fold(R, |a, &b| join(a, b))
    }
}

/// The types of `graph`'s outputs when its inputs have the types `inputs`
/// (a graph typed as it was traced: its types are read, not changed).
fn infer_graph(graph: &Graph, inputs: &[Rep], constants: Rep) -> Vec<Rep> {
    let mut reps: Vec<Rep> = vec![V; graph.num_values()];
    for (&id, &r) in graph.inputs().iter().zip(inputs) {
        reps[id.index()] = r;
    }
    for (_, node) in graph.iter() {
        let op = node.op.as_ref();
        if op.is::<Parameter>() {
            continue;
        }
        let in_reps: Vec<Rep> = node.inputs.iter().map(|i| reps[i.index()]).collect();
        let out = body_results(op, &in_reps, constants)
            .unwrap_or_else(|| vec![rep_rule(op, &in_reps, constants); node.num_results()]);
        for (v, r) in node.results().zip(out) {
            reps[v.index()] = r;
        }
    }
    graph.outputs().iter().map(|o| reps[o.index()]).collect()
}

/// The types of the results of an op with bodies that were typed as they
/// were traced (the bodies of `cond`, `switch`, `scan`, `while_loop`,
/// `map` and of custom-derivative functions, whose inputs stand for the
/// op's operands), from its operands' types `in_reps`: each result as its
/// bodies' output, a loop's carries at their fixpoint (a carry varying on
/// exit varies on entry), and every result of a branch or loop chosen by a
/// varying index or predicate varying. `None` for another op.
fn body_results(op: &dyn Op, in_reps: &[Rep], constants: Rep) -> Option<Vec<Rep>> {
    let infer = |g: &Graph, ins: &[Rep]| infer_graph(g, ins, constants);
    // Raises the carries `ins[at..at + n]` to `outs[..n]` joined with
    // `floor`; whether any changed.
    let raise = |ins: &mut [Rep], at: usize, outs: &[Rep], floor: Rep| {
        let mut changed = false;
        for (i, &o) in ins[at..].iter_mut().zip(outs) {
            let j = join(*i, join(o, floor));
            changed |= j != *i;
            *i = j;
        }
        changed
    };
    if let Some(c) = op.downcast_ref::<Cond>() {
        let index = *in_reps.first()?;
        let mut out: Option<Vec<Rep>> = None;
        for b in &c.branches {
            let o = infer(b.graph(), &in_reps[1..]);
            out = Some(match out {
                None => o.into_iter().map(|r| join(r, index)).collect(),
                Some(acc) => acc.into_iter().zip(o).map(|(a, r)| join(a, r)).collect(),
            });
        }
        out
    } else if let Some(sc) = op.downcast_ref::<Scan>() {
        let mut ins = in_reps.to_vec();
        loop {
            let out = infer(sc.body.graph(), &ins);
            let (nc, nk) = (sc.consts, sc.carries);
            if !raise(&mut ins[..nc + nk], nc, &out[..nk], R) {
                return Some(out);
            }
        }
    } else if let Some(w) = op.downcast_ref::<While>() {
        let mut ins = in_reps.to_vec();
        loop {
            let pred = infer(w.cond.graph(), &ins).first().copied().unwrap_or(V);
            let out = infer(w.body.graph(), &ins);
            if !raise(&mut ins, w.consts, &out, pred) {
                return Some(ins[w.consts..].to_vec());
            }
        }
    } else if let Some(m) = op.downcast_ref::<Map>() {
        Some(infer(m.body.graph(), in_reps))
    } else if let Some(c) = op.downcast_ref::<CustomJvpCall>() {
        Some(infer(c.primal.graph(), in_reps))
    } else {
        op.downcast_ref::<CustomVjpCall>().map(|c| infer(c.primal.graph(), in_reps))
    }
}

/// `graph` typed and rewritten for the mesh `mesh` (see the module docs):
/// `inputs` are its inputs' types, `constants` the type of its constants.
/// Returns the new graph (same signature) and its outputs' types.
///
/// # Errors
/// A graph the rewrite cannot type (a sharded block taken of a varying
/// value); an op's error while re-emitting.
pub fn rewrite(
    graph: &Graph,
    mesh: &Axis,
    inputs: &[Rep],
    constants: Rep,
) -> Result<(Graph, Vec<Rep>)> {
    let out_reps = RefCell::new(Vec::new());
    let g = trace_with(&graph.input_types(), |args| {
        let mut env: Vec<Option<Var>> = vec![None; graph.num_values()];
        let mut reps: Vec<Rep> = vec![V; graph.num_values()];
        // One `Pvary` per replicated value used in varying work.
        let mut varied: Vec<Option<Var>> = vec![None; graph.num_values()];
        for ((&id, a), &r) in graph.inputs().iter().zip(args).zip(inputs) {
            env[id.index()] = Some(a.clone());
            reps[id.index()] = r;
        }
        for (_, node) in graph.iter() {
            let op = node.op.as_ref();
            if op.is::<Parameter>() {
                continue;
            }
            let in_reps: Vec<Rep> = node.inputs.iter().map(|i| reps[i.index()]).collect();
            let ins: Vec<Var> =
                node.inputs.iter().map(|&i| value(&env, i)).collect::<Result<_>>()?;
            let raw = |a: &[&Var]| Ok(Var::apply_op_n(op.boxed(), a, node.num_results()));
            let mut pvary = |k: usize| {
                let i = node.inputs[k].index();
                varied[i]
                    .get_or_insert_with(|| {
                        Var::apply_op(Box::new(Pvary { axis: mesh.clone() }), &[&ins[k]])
                    })
                    .clone()
            };
            let (outs, out_reps) = apply_typed(op, &ins, &in_reps, constants, &raw, &mut pvary)?;
            for (v, rep) in node.results().zip(out_reps) {
                reps[v.index()] = rep;
            }
            bind(&mut env, node, outs);
        }
        *out_reps.borrow_mut() = graph.outputs().iter().map(|o| reps[o.index()]).collect();
        graph.outputs().iter().map(|&o| value(&env, o)).collect()
    })?;
    Ok((g, out_reps.into_inner()))
}

// ------------------------------------------------ typing while tracing

/// The types of the values of one sharded function's body while it is
/// traced, and of the traces opened inside it (a `grad`, a `vmap` within).
pub(crate) struct Typing {
    mesh: Axis,
    /// The type of constants.
    constants: Rep,
    /// The type of values of the traces around the body.
    outer: Rep,
    /// The body's trace, once its inputs are known.
    body: RefCell<Option<Rc<Tracer>>>,
    /// Types by trace (its address, and the trace to tell a reused
    /// address apart) and value.
    reps: RefCell<HashMap<usize, TraceReps>>,
}

/// One trace's value types, and the trace (to tell a reused address apart).
type TraceReps = (Weak<Tracer>, HashMap<usize, Rep>);

impl Typing {
    /// The typing of a body over `mesh`.
    pub(crate) fn new(mesh: Axis, constants: Rep, outer: Rep) -> Rc<Typing> {
        Rc::new(Typing {
            mesh,
            constants,
            outer,
            body: RefCell::new(None),
            reps: RefCell::new(HashMap::new()),
        })
    }

    fn set(&self, v: &Var, rep: Rep) {
        let Some(id) = v.id() else { return };
        let t = v.tracer();
        let mut reps = self.reps.borrow_mut();
        let entry = reps
            .entry(Rc::as_ptr(t) as usize)
            .or_insert_with(|| (Rc::downgrade(t), HashMap::new()));
        if !entry.0.upgrade().is_some_and(|e| Rc::ptr_eq(&e, t)) {
            *entry = (Rc::downgrade(t), HashMap::new());
        }
        entry.1.insert(id.index(), rep);
    }

    /// Whether `t` is the body's trace or a trace inside it.
    fn in_body(&self, t: &Rc<Tracer>) -> bool {
        self.body.borrow().as_ref().is_some_and(|b| Rc::ptr_eq(t, b) || t.is_inside(b))
    }

    /// The type of `v`, `None` where it is not known: a value of a trace
    /// that a transform opened on its own (its graphs' inputs stand for
    /// nothing), or of a trace opened inside the body whose inputs were
    /// not declared to stand for outer values.
    fn rep_of(&self, v: &Var) -> Option<Rep> {
        let id = v.id()?;
        let t = v.tracer();
        let known = self.reps.borrow().get(&(Rc::as_ptr(t) as usize)).and_then(|(w, m)| {
            w.upgrade().filter(|e| Rc::ptr_eq(e, t)).and_then(|_| m.get(&id.index()).copied())
        });
        if known.is_some() {
            return known;
        }
        if self.in_body(t) {
            let p = v.producer()?;
            if p.op_as::<Parameter>().is_some() {
                return t.outer(id).and_then(|o| self.rep_of(&o));
            }
            return p.op_as::<Constant>().map(|_| self.constants);
        }
        let body = self.body.borrow();
        body.as_ref().filter(|b| b.is_inside(t)).map(|_| self.outer)
    }

    /// The typing that applies every op traced in the body with its
    /// operands' types (see [`apply_typed`]).
    pub(crate) fn hook(self: &Rc<Self>) -> ApplyHook {
        Rc::new(Hook(self.clone()))
    }
}

/// A [`Typing`] installed while a body is traced.
struct Hook(Rc<Typing>);

/// A [`Rep`] as a trace-time type (see [`TraceTypes`]): the set of mesh
/// axes a value varies over, here one bit for the one axis.
fn bits(r: Rep) -> TypeBits {
    match r {
        R => 0,
        V => 1,
    }
}

impl TraceTypes for Hook {
    fn apply(&self, tracer: &Rc<Tracer>, op: Box<dyn Op>, args: &[&Var]) -> Result<Vec<Var>> {
        let typing = &self.0;
        let reps: Option<Vec<Rep>> = args.iter().map(|a| typing.rep_of(a)).collect();
        let (Some(reps), true) = (reps, typing.in_body(tracer)) else {
            return tracer.try_apply_unhooked(op, args);
        };
        let ins: Vec<Var> = args.iter().map(|&a| a.clone()).collect();
        let raw = |a: &[&Var]| tracer.try_apply_unhooked(op.boxed(), a);
        let mut pvary = |k: usize| {
            let v = Var::apply_op(Box::new(Pvary { axis: typing.mesh.clone() }), &[&ins[k]]);
            typing.set(&v, V);
            v
        };
        let (outs, out_reps) =
            apply_typed(op.as_ref(), &ins, &reps, typing.constants, &raw, &mut pvary)?;
        for (o, &rep) in outs.iter().zip(&out_reps) {
            typing.set(o, rep);
        }
        Ok(outs)
    }

    fn type_of(&self, v: &Var) -> Option<TypeBits> {
        self.0.rep_of(v).map(bits)
    }

    fn raise(&self, v: &Var, to: TypeBits) -> Var {
        if self.0.rep_of(v) != Some(R) || to & bits(V) == 0 {
            return v.clone();
        }
        // A value of a trace around the body is raised in the body's trace.
        let body = self.0.body.borrow().clone();
        let tracer = match body {
            Some(b) if !self.0.in_body(v.tracer()) => b,
            _ => v.tracer().clone(),
        };
        let p = tracer.apply(Box::new(Pvary { axis: self.0.mesh.clone() }), &[v]);
        self.0.set(&p, V);
        p
    }
}

/// `f` traced as a sharded function's body: its inputs typed `reps` (see
/// [`Typing`]).
pub(crate) struct TypedBody<'a, F> {
    pub(crate) f: &'a F,
    pub(crate) typing: &'a Rc<Typing>,
    pub(crate) reps: &'a [Rep],
}

impl<F: Function> Function for TypedBody<'_, F> {
    type Args = F::Args;
    type Output = F::Output;
    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        *self.typing.body.borrow_mut() = Tracer::current();
        for (a, &r) in args.iter().zip(self.reps) {
            self.typing.set(a, r);
        }
        self.f.inline(def, args)
    }
    fn name(&self) -> String {
        self.f.name()
    }
}

/// Traces `f` as a sharded function's body over `mesh`, its arguments
/// typed `reps`, values of the traces around it `outer`, constants
/// `constants`: every op is applied with its operands' types while it is
/// traced, so transforms taken inside the body (a `grad` within `f`) see
/// the typed ops (see the module docs).
///
/// # Errors
/// As `trace_fn`; a value the rules cannot type.
pub(crate) fn trace_typed<F: Function>(
    f: &F,
    def: &TreeDef,
    types: &[TensorType],
    mesh: &Axis,
    reps: &[Rep],
    constants: Rep,
    outer: Rep,
) -> Result<TracedFn> {
    let typing = Typing::new(mesh.clone(), constants, outer);
    let body = TypedBody { f, typing: &typing, reps };
    with_apply_hook(typing.hook(), || trace_fn(&body, def, types))
}

/// `p` copies of `x` side by side along `dim` (an all-gather of a value
/// every rank holds).
pub(crate) fn tile(x: &Var, dim: usize, p: usize) -> Var {
    if p == 1 {
        return x.clone();
    }
    let copies = vec![x; p];
    concatenate(&copies, dim as i64)
}
