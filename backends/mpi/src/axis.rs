//! Axis names: which mapped axes a collective may name, while tracing.
//!
//! As in JAX, a collective names the mapped axis it acts over
//! (`axis_name`). Two things bind a name while the function inside them is
//! traced: [`shard_map`](crate::shard_map) binds its name to the MPI
//! processes (a *mesh* axis), [`vmap_named`](crate::vmap_named) to its
//! batch axis. The bindings are a stack, innermost last, kept per thread
//! for the duration of one trace (JAX's axis environment is the same
//! dynamic scope): a collective naming an axis that nothing binds is an
//! error when it is traced, and a name already bound cannot be bound again
//! inside (no shadowing, so every name means one axis).

use anvil_core::{Error, Result, Var};
use std::cell::RefCell;
use std::rc::Rc;

/// What an axis name stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AxisKind {
    /// The MPI processes of a [`shard_map`](crate::shard_map).
    Mesh,
    /// The batch axis of a [`vmap_named`](crate::vmap_named).
    Vmap,
}

/// A named mapped axis, as an op parameter: its name, its size (the number
/// of processes, or the batch size) and what it is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Axis {
    /// The name collectives use.
    pub name: String,
    /// The number of members (processes, or batch elements).
    pub size: usize,
    /// A mesh axis or a vmapped one.
    pub kind: AxisKind,
}

thread_local! {
    static BOUND: RefCell<Vec<Axis>> = const { RefCell::new(Vec::new()) };
    static RESOLVING: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    static WITNESSES: RefCell<Vec<(String, Var)>> = const { RefCell::new(Vec::new()) };
}

/// Runs `body` (the function of a `vmap_named`, traced per element) with
/// `zero`, a zero that depends on the batch, as the witness of axis `name`.
pub(crate) fn with_witness<R>(name: &str, zero: Var, body: impl FnOnce() -> R) -> R {
    WITNESSES.with(|w| w.borrow_mut().push((name.to_string(), zero)));
    let _pop = Pop(|| {
        WITNESSES.with(|w| w.borrow_mut().pop());
    });
    body()
}

/// The witness of the `vmap_named` axis `name`, if `x` is in its trace: a
/// zero whose batched value varies along the batch, so that `x + zero`
/// does.
pub(crate) fn witness(name: &str, x: &Var) -> Option<Var> {
    WITNESSES.with(|w| {
        w.borrow()
            .iter()
            .rev()
            .find(|(n, z)| n == name && Rc::ptr_eq(z.tracer(), x.tracer()))
            .map(|(_, z)| z.clone())
    })
}

/// Whether a mesh axis is bound: the trace in progress is inside a sharded
/// function.
pub(crate) fn inside_mesh() -> bool {
    BOUND.with(|b| b.borrow().iter().any(|a| a.kind == AxisKind::Mesh))
}

/// The innermost binding of `name`, if any.
pub fn lookup(name: &str) -> Option<Axis> {
    BOUND.with(|b| b.borrow().iter().rev().find(|a| a.name == name).cloned())
}

/// Pops the binding it pushed when dropped (also on an early return).
struct Pop(fn());

impl Drop for Pop {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// Runs `body` with `axis` bound.
///
/// # Errors
/// The name is already bound (by an enclosing `shard_map` or `vmap_named`).
pub(crate) fn with_axis<R>(what: &str, axis: Axis, body: impl FnOnce() -> Result<R>) -> Result<R> {
    if let Some(outer) = lookup(&axis.name) {
        return Err(Error::invalid(
            what,
            "axis_name",
            format!(
                "'{}' is already bound by an enclosing {} of size {}: name nested mapped axes apart",
                axis.name,
                match outer.kind {
                    AxisKind::Mesh => "shard_map",
                    AxisKind::Vmap => "vmap_named",
                },
                outer.size
            ),
        ));
    }
    BOUND.with(|b| b.borrow_mut().push(axis));
    let _pop = Pop(|| {
        BOUND.with(|b| b.borrow_mut().pop());
    });
    body()
}

/// Runs `body` (the batching walk of a `vmap_named`) with `name` as the
/// axis whose collectives the batching rules resolve.
pub(crate) fn resolving<R>(name: &str, body: impl FnOnce() -> R) -> R {
    RESOLVING.with(|r| r.borrow_mut().push(name.to_string()));
    let _pop = Pop(|| {
        RESOLVING.with(|r| r.borrow_mut().pop());
    });
    body()
}

/// Whether the batching walk in progress is the `vmap_named` of `axis`.
pub(crate) fn is_resolving(axis: &Axis) -> bool {
    axis.kind == AxisKind::Vmap
        && RESOLVING.with(|r| r.borrow().last().is_some_and(|n| *n == axis.name))
}

/// The binding of `name` for a collective `op` being traced.
///
/// # Errors
/// Nothing binds `name`.
pub fn bound(op: &str, name: &str) -> Result<Axis> {
    lookup(name).ok_or_else(|| {
        Error::invalid(
            op,
            "axis_name",
            format!(
                "'{name}' is not bound: a collective is traced only inside a shard_map (or \
                 vmap_named) that maps an axis of that name"
            ),
        )
    })
}
