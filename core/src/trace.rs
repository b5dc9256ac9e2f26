//! Tracing: building a graph by running ordinary Rust code on [`Var`]s.
//!
//! A [`Tracer`] owns the graph under construction. A `Var` is a handle to one
//! of its nodes; applying an op to `Var`s appends a node after checking the
//! op's shape rule. Operators (`&a + &b`, `x * 2.0`) cannot return a
//! `Result`, so a failed shape rule is *recorded* in the tracer and the result
//! is a poisoned `Var` that every later op passes through silently; the call
//! that ran the trace returns the first recorded error. Nothing panics.
//!
//! The arithmetic operators are implemented here (Rust's orphan rule puts
//! `impl Add for &Var` in this crate) but the ops they build live in
//! `anvil-ops`: that crate registers an [`OperatorImpl`] through `inventory`,
//! and the operators call it. Without it linked, an operator records a
//! [`Error::MissingRule`] instead.
//!
//! Ops with no `Var` argument (constants) attach to the innermost active
//! trace on this thread ([`Tracer::current`]), as `jnp.zeros` does in JAX.
//!
//! A concrete [`Tensor`] used with a `Var` (`x * &w`, `x.matmul(&w)`, a
//! tensor a closure captured) goes through one mechanism,
//! [`Tracer::capture`]. In the trace a call opens to compile a function
//! ([`Tracer::lifting`]), a tensor of at least [`LIFT_MIN_ELEMS`]
//! elements becomes an *implicit parameter*: an input of that trace's
//! graph after the declared ones, whose value the call passes in at run
//! time ([`Tracer::lifted`]), so the graph holds no copy of it and no pass
//! folds or compares its data. Inside the functions a transform traces
//! (under `vmap`, `grad`, in a `cond` branch), that input is an outer
//! value like any other and is captured through the inner traces (see
//! [`Tracer::child`]): unbatched, with no tangent. Smaller tensors, and
//! every tensor in a trace that does not lift (`trace`, `lower`, a
//! transform's own graphs), are constants, which rewrites and constant
//! folding see.

use crate::dtype::Scalar;
use crate::error::{Error, Result};
use crate::graph::{Constant, Graph, ValueId};
use crate::op::Op;
use crate::shape::TensorType;
use crate::tensor::Tensor;
use crate::DType;
use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

/// The graph under construction and the first error met while building it.
///
/// A trace opened inside another ([`Tracer::child`]: how a transform traces
/// the function it wraps) may use the values of the traces around it, as
/// a closure uses the variables of its scope: such a value becomes a new
/// input of the inner graph, after the declared ones, and
/// [`Tracer::captures`] lists the outer values those inputs stand for. The
/// transform passes them in as it emits the inner graph into the outer
/// trace (unbatched under `vmap`, with no tangent under `jvp`), so
/// `vmap(|y| y * z)` inside a function of `z` works under every transform,
/// as JAX's tracer levels allow.
#[derive(Debug, Default)]
pub struct Tracer {
    graph: RefCell<Graph>,
    error: RefCell<Option<Error>>,
    parent: Option<Rc<Tracer>>,
    captures: RefCell<Vec<(Var, ValueId)>>,
    /// Whether large captured tensors become inputs ([`Tracer::lifting`]).
    lifts: bool,
    lifted: RefCell<Vec<(Tensor, ValueId)>>,
    /// Outer values the declared inputs stand for ([`Tracer::stand_for`]).
    sources: RefCell<Vec<(ValueId, Var)>>,
}

/// What a crate that types values at trace time provides (the
/// replication types of a sharded function, as JAX's `shard_map` binds
/// each primitive with its operands' types), installed with
/// [`with_apply_hook`]: it applies every op in place of
/// [`Tracer::try_apply`], seeing and adjusting it as it is traced (it
/// applies the op itself with [`Tracer::try_apply_unhooked`]; ops it
/// applies are not hooked again), and it answers the transforms that
/// trace bodies (`cond`, `scan`, loops): where values meet without an op
/// (a loop's carry on entry and on exit, the results of two branches),
/// their types are joined.
///
/// Types are opaque here: a set of bits ([`TypeBits`]), where a larger
/// set is more general (JAX's set of mesh axes a value varies over) and
/// two types join by union; `0` is the most precise.
pub trait TraceTypes {
    /// Applies `op` to `args` in `tracer`.
    ///
    /// # Errors
    /// As [`Tracer::try_apply`].
    fn apply(&self, tracer: &Rc<Tracer>, op: Box<dyn Op>, args: &[&Var]) -> Result<Vec<Var>>;

    /// The type of `v`, `None` where it is not typed.
    fn type_of(&self, _v: &Var) -> Option<TypeBits> {
        None
    }

    /// `v` as a value of the more general type `to` (an identity op that
    /// retypes it: JAX's `pvary`); `v` itself where it already is.
    fn raise(&self, v: &Var, _to: TypeBits) -> Var {
        v.clone()
    }
}

/// A trace-time type (see [`TraceTypes`]): a set of bits, joined by union.
pub type TypeBits = u64;

/// The installed trace-time typing (see [`TraceTypes`]).
pub type ApplyHook = Rc<dyn TraceTypes>;

impl<F: Fn(&Rc<Tracer>, Box<dyn Op>, &[&Var]) -> Result<Vec<Var>>> TraceTypes for F {
    fn apply(&self, tracer: &Rc<Tracer>, op: Box<dyn Op>, args: &[&Var]) -> Result<Vec<Var>> {
        self(tracer, op, args)
    }
}

/// The type of `v` by the innermost installed typing (see
/// [`TraceTypes`]); `None` where none is installed or `v` is untyped.
pub fn type_of(v: &Var) -> Option<TypeBits> {
    let hook = HOOKS.with(|h| h.borrow().0.last().cloned())?;
    hook.type_of(v)
}

/// `v` raised to the type `to` joined with its own by the innermost
/// installed typing (see [`TraceTypes::raise`]); `v` itself where none is
/// installed, `v` is untyped or already that general.
pub fn raise(v: &Var, to: TypeBits) -> Var {
    let Some(hook) = HOOKS.with(|h| h.borrow().0.last().cloned()) else { return v.clone() };
    match hook.type_of(v) {
        Some(t) if t | to != t => hook.raise(v, t | to),
        _ => v.clone(),
    }
}

/// Captured tensors with at least this many elements become implicit
/// parameters of a compiled call rather than constants (see the module
/// docs); smaller ones stay constants that rewrites and folding can see.
pub const LIFT_MIN_ELEMS: usize = 64;

thread_local! {
    static ACTIVE: RefCell<Vec<Rc<Tracer>>> = const { RefCell::new(Vec::new()) };
    /// The user-facing function being built, outermost first (see [`as_op`]).
    static USER_OP: RefCell<Vec<&'static str>> = const { RefCell::new(Vec::new()) };
    /// The installed apply hooks, innermost last, and whether one runs.
    static HOOKS: RefCell<(Vec<ApplyHook>, bool)> = const { RefCell::new((Vec::new(), false)) };
}

/// Runs `body` with `hook` applying every op traced on this thread (see
/// [`ApplyHook`]); the innermost hook wins. While the hook runs, the ops
/// it applies go straight to the trace.
///
/// ```
/// use anvil_core::trace::{with_apply_hook, Tracer};
/// use std::cell::Cell;
/// use std::rc::Rc;
/// let seen = Rc::new(Cell::new(0));
/// let s = seen.clone();
/// let hook: anvil_core::trace::ApplyHook =
///     Rc::new(move |t: &Rc<Tracer>, op: Box<dyn anvil_core::Op>, args: &[&anvil_core::Var]| {
///         s.set(s.get() + 1);
///         t.try_apply_unhooked(op, args)
///     });
/// let t = Tracer::new();
/// with_apply_hook(hook, || t.constant(anvil_core::Tensor::scalar(1.0)));
/// assert_eq!(seen.get(), 1);
/// ```
pub fn with_apply_hook<R>(hook: ApplyHook, body: impl FnOnce() -> R) -> R {
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            HOOKS.with(|h| h.borrow_mut().0.pop());
        }
    }
    HOOKS.with(|h| h.borrow_mut().0.push(hook));
    let _pop = Pop;
    body()
}

/// Runs `build` — the primitives a composite function is made of — so that
/// an error recorded while it runs names `name`, the function the user
/// called, instead of the primitive that failed (`stack` rather than
/// `unsqueeze`). Nested calls keep the outermost name.
///
/// ```
/// use anvil_core::trace::{as_op, Tracer};
/// use anvil_core::Error;
/// let t = Tracer::new();
/// as_op("stack", || t.record(Error::invalid("unsqueeze", "axis", "4 is out of range")));
/// assert_eq!(t.error().unwrap().op(), Some("stack"));
/// ```
pub fn as_op<R>(name: &'static str, build: impl FnOnce() -> R) -> R {
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            USER_OP.with(|u| u.borrow_mut().pop());
        }
    }
    USER_OP.with(|u| u.borrow_mut().push(name));
    let _pop = Pop;
    build()
}

/// Keeps a tracer on this thread's stack of active traces while alive.
#[derive(Debug)]
pub struct ActiveGuard(());

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        ACTIVE.with(|a| a.borrow_mut().pop());
    }
}

impl Tracer {
    /// A new, empty trace, closed: values of other traces are errors.
    pub fn new() -> Rc<Tracer> {
        Rc::new(Tracer::default())
    }

    /// A new, empty trace inside the innermost active one: it may use the
    /// values of that trace and of the traces around it (see
    /// [`Tracer::captures`]). Outside any trace, a closed trace.
    pub fn child() -> Rc<Tracer> {
        Rc::new(Tracer { parent: Tracer::current(), ..Tracer::default() })
    }

    /// A new, closed trace in which captured tensors of at least
    /// [`LIFT_MIN_ELEMS`] elements become inputs (implicit parameters),
    /// listed by [`Tracer::lifted`]: the top-level trace of a compiled call.
    pub fn lifting() -> Rc<Tracer> {
        Rc::new(Tracer { lifts: true, ..Tracer::default() })
    }

    /// The tensors this trace turned into inputs, in the order of those
    /// inputs (after the declared ones): what a call passes in after its
    /// arguments.
    pub fn lifted(&self) -> Vec<Tensor> {
        self.lifted.borrow().iter().map(|(t, _)| t.clone()).collect()
    }

    /// `value`, a concrete tensor used in this trace (a closure's capture,
    /// an operand of `x * &w`), as a value of this trace: an input of the
    /// nearest lifting trace around it (or of itself), captured into this
    /// one, when it has at least [`LIFT_MIN_ELEMS`] elements; a constant
    /// otherwise (see the module docs). A tensor captured twice (the same
    /// buffer, shape and dtype) is one input.
    pub fn capture(self: &Rc<Self>, value: Tensor) -> Var {
        let lifting = std::iter::successors(Some(self), |t| t.parent.as_ref()).find(|t| t.lifts);
        match lifting {
            Some(root) if value.numel() >= LIFT_MIN_ELEMS => {
                let ty = value.ty();
                match root.lift(value).and_then(|v| self.id_of(&v, "capture", &|| "tensor".into()))
                {
                    Ok(id) => Var { tracer: self.clone(), id: Some(id), ty },
                    Err(e) => {
                        self.record(e);
                        self.poisoned()
                    }
                }
            }
            _ => self.constant(value),
        }
    }

    /// The input of this trace that stands for `value`, added on first use.
    fn lift(self: &Rc<Self>, value: Tensor) -> Result<Var> {
        let ty = value.ty();
        let known = self.lifted.borrow().iter().find(|(t, _)| t.same_buffer(&value)).map(|p| p.1);
        let id = match known {
            Some(id) => id,
            None => {
                let id = self.graph.borrow_mut().add_input(ty.clone())?;
                self.lifted.borrow_mut().push((value, id));
                id
            }
        };
        Ok(Var { tracer: self.clone(), id: Some(id), ty })
    }

    /// The outer values this trace used, in the order of the inputs that
    /// stand for them (after the inputs declared with [`Tracer::input`]).
    pub fn captures(&self) -> Vec<Var> {
        self.captures.borrow().iter().map(|(v, _)| v.clone()).collect()
    }

    /// Whether `other` is a trace around this one (this trace was opened
    /// inside it, directly or not).
    pub fn is_inside(&self, other: &Rc<Tracer>) -> bool {
        let mut t = self.parent.as_ref();
        while let Some(p) = t {
            if Rc::ptr_eq(p, other) {
                return true;
            }
            t = p.parent.as_ref();
        }
        false
    }

    /// The id in this trace of `v`: its own, or for a value of a trace
    /// around this one, the input that captures it (added on first use).
    ///
    /// # Errors
    /// `v` from an unrelated trace ([`Error::ForeignVar`], naming `op` and
    /// `arg`); a poisoned `v` (the error recorded earlier).
    fn id_of(self: &Rc<Self>, v: &Var, op: &str, arg: &dyn Fn() -> String) -> Result<ValueId> {
        let poisoned = || {
            v.tracer
                .error()
                .or_else(|| self.error())
                .unwrap_or_else(|| Error::invalid(op, arg(), "is the result of an op that failed"))
        };
        let id = v.id.ok_or_else(poisoned)?;
        if Rc::ptr_eq(&v.tracer, self) {
            return Ok(id);
        }
        if !self.is_inside(&v.tracer) {
            return Err(Error::ForeignVar { op: op.into(), arg: arg() });
        }
        let known = self
            .captures
            .borrow()
            .iter()
            .find(|(outer, _)| Rc::ptr_eq(&outer.tracer, &v.tracer) && outer.id == Some(id))
            .map(|&(_, inner)| inner);
        if let Some(inner) = known {
            return Ok(inner);
        }
        let inner = self.graph.borrow_mut().add_input(v.ty.clone())?;
        self.captures.borrow_mut().push((v.clone(), inner));
        Ok(inner)
    }

    /// Declares that this trace's inputs, in order, stand for `outer`
    /// (values of traces around it, or of the same meaning: the element of
    /// a batched value under `vmap`), so that what is known about an outer
    /// value can be known about its input ([`Tracer::outer`]). Inputs past
    /// `outer`'s length stand for nothing.
    pub fn stand_for(&self, inputs: &[Var], outer: &[Var]) {
        let mut s = self.sources.borrow_mut();
        for (i, o) in inputs.iter().zip(outer) {
            if let Some(id) = i.id {
                s.push((id, o.clone()));
            }
        }
    }

    /// The outer value an input of this trace stands for: the captured
    /// value of a trace around it, or the value declared with
    /// [`Tracer::stand_for`]; `None` for another value.
    pub fn outer(&self, id: ValueId) -> Option<Var> {
        let c = self.captures.borrow().iter().find(|(_, i)| *i == id).map(|(v, _)| v.clone());
        c.or_else(|| self.sources.borrow().iter().find(|(i, _)| *i == id).map(|(_, v)| v.clone()))
    }

    /// The innermost trace active on this thread, if any.
    pub fn current() -> Option<Rc<Tracer>> {
        ACTIVE.with(|a| a.borrow().last().cloned())
    }

    /// Makes `self` the innermost active trace until the guard is dropped.
    pub fn activate(self: &Rc<Self>) -> ActiveGuard {
        ACTIVE.with(|a| a.borrow_mut().push(self.clone()));
        ActiveGuard(())
    }

    /// Adds a graph input of type `ty` and returns it as a `Var`.
    ///
    /// # Errors
    /// [`Error::GraphTooLarge`].
    pub fn input(self: &Rc<Self>, ty: TensorType) -> Result<Var> {
        let id = self.graph.borrow_mut().add_input(ty.clone())?;
        Ok(Var { tracer: self.clone(), id: Some(id), ty })
    }

    /// Records `e` unless an earlier error is already recorded.
    pub fn record(&self, e: Error) {
        let e = match USER_OP.with(|u| u.borrow().first().copied()) {
            Some(name) => e.with_op(name),
            None => e,
        };
        self.error.borrow_mut().get_or_insert(e);
    }

    /// The first error recorded, if any.
    pub fn error(&self) -> Option<Error> {
        self.error.borrow().clone()
    }

    /// Applies `op` to `args` and returns its results, returning an error
    /// instead of recording it.
    ///
    /// # Errors
    /// The op's shape rule failing, an argument from another trace, a
    /// poisoned argument (the error recorded earlier).
    pub fn try_apply(self: &Rc<Self>, op: Box<dyn Op>, args: &[&Var]) -> Result<Vec<Var>> {
        let hook = HOOKS.with(|h| {
            let mut h = h.borrow_mut();
            match (h.0.last().cloned(), h.1) {
                (Some(hook), false) => {
                    h.1 = true;
                    Some(hook)
                }
                _ => None,
            }
        });
        let Some(hook) = hook else { return self.try_apply_unhooked(op, args) };
        struct Done;
        impl Drop for Done {
            fn drop(&mut self) {
                HOOKS.with(|h| h.borrow_mut().1 = false);
            }
        }
        let _done = Done;
        hook.apply(self, op, args)
    }

    /// [`Tracer::try_apply`] without the installed hook (see
    /// [`ApplyHook`]).
    ///
    /// # Errors
    /// As [`Tracer::try_apply`].
    pub fn try_apply_unhooked(self: &Rc<Self>, op: Box<dyn Op>, args: &[&Var]) -> Result<Vec<Var>> {
        let ids: Vec<ValueId> = args
            .iter()
            .enumerate()
            .map(|(i, a)| self.id_of(a, op.name(), &|| i.to_string()))
            .collect::<Result<_>>()?;
        let mut g = self.graph.borrow_mut();
        let node = g.push(op, &ids)?;
        let results = g.node(node).results();
        Ok(results
            .map(|v| Var { tracer: self.clone(), id: Some(v), ty: g.ty(v).clone() })
            .collect())
    }

    /// Applies an op with one result to `args`; a failure is recorded and a
    /// poisoned `Var` returned.
    pub fn apply(self: &Rc<Self>, op: Box<dyn Op>, args: &[&Var]) -> Var {
        let name = op.name();
        let mut out = self.apply_n(op, args, 1);
        match out.len() {
            1 => out.swap_remove(0),
            n => {
                self.record(Error::Arity {
                    what: name.into(),
                    kind: "results (applied as an op with one result)".into(),
                    expected: 1,
                    got: n,
                });
                self.poisoned()
            }
        }
    }

    /// Applies an op with `n` results to `args`; a failure is recorded and
    /// `n` poisoned `Var`s returned. (An op that turns out to have another
    /// number of results gives its real results.)
    pub fn apply_n(self: &Rc<Self>, op: Box<dyn Op>, args: &[&Var], n: usize) -> Vec<Var> {
        if args.iter().any(|a| a.id.is_none()) {
            if let Some(e) = args.iter().find_map(|a| a.tracer.error()) {
                self.record(e);
            }
            return vec![self.poisoned(); n];
        }
        let name = op.name();
        // A plugin op's shape rule that panics is an error of this op, as
        // a failed shape rule is.
        Error::catching(name, "shape rule", || self.try_apply(op, args)).unwrap_or_else(|e| {
            self.record(e.clone());
            for a in args.iter().filter(|a| !Rc::ptr_eq(&a.tracer, self)) {
                a.tracer.record(Error::ForeignVar { op: name.into(), arg: "?".into() });
            }
            vec![self.poisoned(); n]
        })
    }

    /// A `Var` standing for the result of a failed op.
    pub fn poisoned(self: &Rc<Self>) -> Var {
        Var { tracer: self.clone(), id: None, ty: TensorType::scalar(DType::F64) }
    }

    /// A constant captured into the trace.
    pub fn constant(self: &Rc<Self>, value: Tensor) -> Var {
        self.apply(Box::new(Constant { value }), &[])
    }

    /// The node that defines `v` (see [`Var::producer`]).
    fn producer(self: &Rc<Self>, v: ValueId) -> Producer {
        let g = self.graph.borrow();
        let (node, index) = g.producer(v);
        let node = g.node(node);
        let inputs = node
            .inputs
            .iter()
            .map(|&i| Var { tracer: self.clone(), id: Some(i), ty: g.ty(i).clone() })
            .collect();
        Producer { op: node.op.clone(), inputs, index }
    }

    /// Finishes the trace: sets `outputs` as the graph's outputs and returns
    /// the graph, or the first error recorded while tracing.
    ///
    /// # Errors
    /// The first recorded error; an output from another trace.
    pub fn finish(self: &Rc<Self>, outputs: &[Var]) -> Result<Graph> {
        if let Some(e) = self.error() {
            return Err(e);
        }
        let ids: Vec<ValueId> = outputs
            .iter()
            .enumerate()
            .map(|(i, o)| self.id_of(o, "output", &|| i.to_string()))
            .collect::<Result<_>>()?;
        let mut g = self.graph.borrow().clone();
        g.set_outputs(ids);
        debug_assert!(g.verify().is_ok(), "tracing built an invalid graph: {:?}", g.verify());
        Ok(g)
    }
}

/// The node that defines a traced value, as rewrite rules see it: the op
/// (with its parameters), its operands, and which of its results the value
/// is.
#[derive(Clone, Debug)]
pub struct Producer {
    /// The op.
    pub op: Box<dyn Op>,
    /// Its operands.
    pub inputs: Vec<Var>,
    /// Which result of the op the value is.
    pub index: usize,
}

impl Producer {
    /// The op as a concrete type, if it is one.
    pub fn op_as<T: Op>(&self) -> Option<&T> {
        self.op.downcast_ref::<T>()
    }
}

/// A traced value: a node of the graph being built, with its static type.
///
/// `Var`s are what a traced function receives and returns. Methods and
/// operators on them add nodes to the graph; shape errors are recorded and
/// returned by the call that ran the trace.
#[derive(Clone)]
pub struct Var {
    tracer: Rc<Tracer>,
    id: Option<ValueId>,
    ty: TensorType,
}

impl Var {
    /// The trace this value belongs to.
    pub fn tracer(&self) -> &Rc<Tracer> {
        &self.tracer
    }

    /// The value's id in its trace's graph, `None` for a poisoned value
    /// (an earlier op failed).
    pub fn id(&self) -> Option<ValueId> {
        self.id
    }

    /// The static type.
    pub fn ty(&self) -> &TensorType {
        &self.ty
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        self.ty.shape()
    }

    /// The dtype.
    pub fn dtype(&self) -> DType {
        self.ty.dtype()
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.ty.rank()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.ty.numel()
    }

    /// Whether `self` and `other` are the same value of the same trace.
    pub fn is_same(&self, other: &Var) -> bool {
        self.id.is_some() && self.id == other.id && Rc::ptr_eq(&self.tracer, &other.tracer)
    }

    /// Whether this value stands for a failed op.
    pub fn is_poisoned(&self) -> bool {
        self.id.is_none()
    }

    /// Applies the one-result op `op` to `self` and `others`. Errors are
    /// recorded in the trace.
    pub fn apply(&self, op: impl Op, others: &[&Var]) -> Var {
        let mut args = vec![self];
        args.extend_from_slice(others);
        innermost(&args).apply(Box::new(op), &args)
    }

    /// Applies the one-result op `op` to `args` in their trace (the
    /// innermost of their traces, which captures values of the others), or
    /// in the current trace when there are none.
    pub fn apply_op(op: Box<dyn Op>, args: &[&Var]) -> Var {
        innermost(args).apply(op, args)
    }

    /// Applies an op with `n` results to `args` (see [`Tracer::apply_n`]).
    pub fn apply_op_n(op: Box<dyn Op>, args: &[&Var], n: usize) -> Vec<Var> {
        innermost(args).apply_n(op, args, n)
    }

    /// The node that defines this value — its op, operands and result
    /// index — as rewrite rules inspect it (`x * 1` is recognisable from the
    /// `1`'s producer). `None` for a poisoned value.
    pub fn producer(&self) -> Option<Producer> {
        self.id.map(|v| self.tracer.producer(v))
    }

    /// The value, when it is a constant captured into the trace.
    pub fn constant_value(&self) -> Option<Tensor> {
        let p = self.producer()?;
        p.op_as::<Constant>().map(|c| c.value.clone())
    }

    /// A constant in the same trace as `self` (always a constant; a
    /// tensor used directly, `x * &w`, goes through [`Tracer::capture`]).
    pub fn constant_like(&self, value: Tensor) -> Var {
        self.tracer.constant(value)
    }

    /// `value` as a value of `self`'s trace, as a captured tensor is (see
    /// [`Tracer::capture`]).
    pub fn capture_like(&self, value: Tensor) -> Var {
        self.tracer.capture(value)
    }

    /// A rank-0 constant of `self`'s dtype with the value `v` (cast as by `as`).
    pub fn scalar_like(&self, v: f64) -> Var {
        self.refuse_dim_as_number(v);
        self.constant_like(Tensor::scalar(v).cast(self.dtype()))
    }

    /// Records an error when a number in the trace is a symbolic dimension
    /// converted with `as`: the handle's value would silently stand in for
    /// the size.
    fn refuse_dim_as_number(&self, v: f64) {
        if let Some(d) = crate::shape::dim_of_number(v) {
            self.tracer.record(Error::invalid(
                "scalar",
                "value",
                format!(
                    "{v:e} is the symbolic dimension {} converted to a number with `as`, not \
                     a size: use `x.dim_size(axis)` (or `ops::dim_value`) for a dimension's \
                     value in a traced function",
                    crate::shape::fmt_dim(d)
                ),
            ));
        }
    }

    /// `self` and a rank-0 constant `v` promoted together as JAX promotes an
    /// array with a Python scalar (a *weak* type): the array's dtype wins
    /// unless the scalar's kind is higher. An `f64` scalar with an `f32`
    /// value stays `f32`; with an `i64` or `bool` value both become `f64`
    /// (never a silent truncation of `2.5` into `2`). An `i64` scalar with a
    /// `bool` value gives `i64`; with a float value the scalar is cast to
    /// the float dtype. See the promotion table in [`crate::dtype`].
    pub fn with_weak_scalar(&self, v: Scalar) -> (Var, Var) {
        self.refuse_dim_as_number(v.to_f64());
        let target = weak_promotion(self.dtype(), v.dtype());
        let this = if target == self.dtype() { self.clone() } else { cast(self, target) };
        let c = this.constant_like(Tensor::from_scalar(v.cast(target)));
        (this, c)
    }
}

/// The dtype of an array of dtype `array` combined with a weakly typed
/// scalar of dtype `scalar` (JAX's lattice: bool < int < float, and a weak
/// scalar never widens a float of the same kind).
pub fn weak_promotion(array: DType, scalar: DType) -> DType {
    let kind = |d: DType| match d {
        DType::Bool => 0,
        DType::I64 => 1,
        DType::F32 | DType::F64 => 2,
    };
    if kind(scalar) > kind(array) {
        // A weak scalar promotes to the default type of its kind.
        scalar
    } else {
        array
    }
}

pub(crate) fn cast(v: &Var, dtype: DType) -> Var {
    operators(v).map_or_else(|| v.tracer.poisoned(), |o| (o.cast)(v, dtype))
}

/// The trace an op on `args` belongs to: the innermost of their traces (a
/// value of a trace around it is captured there), the current trace when
/// there are no arguments.
fn innermost(args: &[&Var]) -> Rc<Tracer> {
    let mut it = args.iter();
    let Some(first) = it.next() else {
        return current_or_detached();
    };
    let mut inner = first.tracer.clone();
    for a in it {
        if !Rc::ptr_eq(&a.tracer, &inner) && a.tracer.is_inside(&inner) {
            inner = a.tracer.clone();
        }
    }
    inner
}

/// The current trace, or a fresh one that records a "not in a trace" error
/// so that using its values in a real trace fails with a clear message.
pub fn current_or_detached() -> Rc<Tracer> {
    Tracer::current().unwrap_or_else(|| {
        let t = Tracer::new();
        t.record(Error::ForeignVar {
            op: "constant".into(),
            arg: "created outside any trace".into(),
        });
        t
    })
}

impl fmt::Debug for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.id {
            Some(id) => write!(f, "Var({id}: {})", self.ty),
            None => f.write_str("Var(poisoned)"),
        }
    }
}

// ---------------------------------------------------------------- operators

/// The implementation of the arithmetic operators on `Var`, registered by
/// the crate that defines the arithmetic ops (`anvil-ops`).
#[derive(Debug)]
pub struct OperatorImpl {
    /// `a + b` with broadcasting.
    pub add: fn(&Var, &Var) -> Var,
    /// `a - b`.
    pub sub: fn(&Var, &Var) -> Var,
    /// `a * b`.
    pub mul: fn(&Var, &Var) -> Var,
    /// `a / b` (true division: integers divide as floats, as in JAX).
    pub div: fn(&Var, &Var) -> Var,
    /// `-a`.
    pub neg: fn(&Var) -> Var,
    /// `a` converted to another dtype.
    pub cast: fn(&Var, DType) -> Var,
}

inventory::collect!(OperatorImpl);

fn operators(v: &Var) -> Option<&'static OperatorImpl> {
    let found = inventory::iter::<OperatorImpl>.into_iter().next();
    if found.is_none() {
        v.tracer.record(Error::MissingRule {
            op: "arithmetic operator".into(),
            what: "implementation".into(),
            hint: " (link anvil-ops: `use anvil_ops as _;`)".into(),
        });
    }
    found
}

macro_rules! binary_operator {
    // A Rust scalar on either side is weakly typed (see `Var::with_weak_scalar`).
    (@weak $trait:ident, $method:ident, $t:ty) => {
        impl std::ops::$trait<$t> for &Var {
            type Output = Var;
            fn $method(self, rhs: $t) -> Var {
                let (a, b) = self.with_weak_scalar(Scalar::from(rhs));
                std::ops::$trait::$method(&a, &b)
            }
        }
        impl std::ops::$trait<$t> for Var {
            type Output = Var;
            fn $method(self, rhs: $t) -> Var {
                std::ops::$trait::$method(&self, rhs)
            }
        }
        impl std::ops::$trait<&Var> for $t {
            type Output = Var;
            fn $method(self, rhs: &Var) -> Var {
                let (b, a) = rhs.with_weak_scalar(Scalar::from(self));
                std::ops::$trait::$method(&a, &b)
            }
        }
        impl std::ops::$trait<Var> for $t {
            type Output = Var;
            fn $method(self, rhs: Var) -> Var {
                std::ops::$trait::$method(self, &rhs)
            }
        }
    };
    ($trait:ident, $method:ident, $field:ident) => {
        impl std::ops::$trait<&Var> for &Var {
            type Output = Var;
            fn $method(self, rhs: &Var) -> Var {
                operators(self).map_or_else(|| self.tracer.poisoned(), |o| (o.$field)(self, rhs))
            }
        }
        impl std::ops::$trait<Var> for Var {
            type Output = Var;
            fn $method(self, rhs: Var) -> Var {
                std::ops::$trait::$method(&self, &rhs)
            }
        }
        impl std::ops::$trait<&Var> for Var {
            type Output = Var;
            fn $method(self, rhs: &Var) -> Var {
                std::ops::$trait::$method(&self, rhs)
            }
        }
        impl std::ops::$trait<Var> for &Var {
            type Output = Var;
            fn $method(self, rhs: Var) -> Var {
                std::ops::$trait::$method(self, &rhs)
            }
        }
        binary_operator!(@weak $trait, $method, f64);
        binary_operator!(@weak $trait, $method, i64);
        impl std::ops::$trait<&Tensor> for &Var {
            type Output = Var;
            fn $method(self, rhs: &Tensor) -> Var {
                std::ops::$trait::$method(self, &self.capture_like(rhs.clone()))
            }
        }
        impl std::ops::$trait<Tensor> for &Var {
            type Output = Var;
            fn $method(self, rhs: Tensor) -> Var {
                std::ops::$trait::$method(self, &self.capture_like(rhs))
            }
        }
        impl std::ops::$trait<&Tensor> for Var {
            type Output = Var;
            fn $method(self, rhs: &Tensor) -> Var {
                std::ops::$trait::$method(&self, rhs)
            }
        }
        impl std::ops::$trait<Tensor> for Var {
            type Output = Var;
            fn $method(self, rhs: Tensor) -> Var {
                std::ops::$trait::$method(&self, &rhs)
            }
        }
        impl std::ops::$trait<&Var> for &Tensor {
            type Output = Var;
            fn $method(self, rhs: &Var) -> Var {
                std::ops::$trait::$method(&rhs.capture_like(self.clone()), rhs)
            }
        }
        impl std::ops::$trait<Var> for &Tensor {
            type Output = Var;
            fn $method(self, rhs: Var) -> Var {
                std::ops::$trait::$method(self, &rhs)
            }
        }
        impl std::ops::$trait<&Var> for Tensor {
            type Output = Var;
            fn $method(self, rhs: &Var) -> Var {
                std::ops::$trait::$method(&self, rhs)
            }
        }
        impl std::ops::$trait<Var> for Tensor {
            type Output = Var;
            fn $method(self, rhs: Var) -> Var {
                std::ops::$trait::$method(&self, &rhs)
            }
        }
    };
}

binary_operator!(Add, add, add);
binary_operator!(Sub, sub, sub);
binary_operator!(Mul, mul, mul);
binary_operator!(Div, div, div);

impl std::ops::Neg for &Var {
    type Output = Var;
    fn neg(self) -> Var {
        operators(self).map_or_else(|| self.tracer.poisoned(), |o| (o.neg)(self))
    }
}

impl std::ops::Neg for Var {
    type Output = Var;
    fn neg(self) -> Var {
        -&self
    }
}

// ---------------------------------------------------------------- operands

/// An operand of a method on a traced value: a [`Var`], or a concrete
/// [`Tensor`] (a closure's capture), which becomes a value of the `Var`'s
/// trace through [`Tracer::capture`]. `x.matmul(&w)` takes either.
///
/// ```
/// use anvil_core::{trace::Operand, Tensor, Tracer, TensorType, DType};
/// let t = Tracer::new();
/// let x = t.input(TensorType::new(DType::F64, vec![2]))?;
/// let w = Tensor::from_vec(vec![1.0, 2.0], &[2])?;
/// assert_eq!(w.to_var_like(&x).shape(), &[2]);
/// assert!(x.to_var_like(&x).is_same(&x));
/// # Ok::<(), anvil_core::Error>(())
/// ```
pub trait Operand {
    /// The operand as a value of `like`'s trace.
    fn to_var_like(&self, like: &Var) -> Var;
}

impl Operand for Var {
    fn to_var_like(&self, _like: &Var) -> Var {
        self.clone()
    }
}

impl Operand for Tensor {
    fn to_var_like(&self, like: &Var) -> Var {
        like.capture_like(self.clone())
    }
}

impl<T: Operand + ?Sized> Operand for &T {
    fn to_var_like(&self, like: &Var) -> Var {
        (**self).to_var_like(like)
    }
}
