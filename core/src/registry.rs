//! Registries of per-op entries (rules, kernels), collected with `inventory`.
//!
//! Every registry is a [`RuleTable`] over one entry type that implements
//! [`Registered`]: the op's `TypeId`, its name and the source location of the
//! registration. A table is built once from `inventory::iter`, on first use;
//! two entries for the same op type are kept as a [`Error::DuplicateRegistration`]
//! naming both places, returned by every lookup of that op and by
//! [`RuleTable::check`]. A transform or backend defined in another crate
//! declares its own entry type and `inventory::collect!`s it there, without
//! changing `core`.
//!
//! Keep in mind that `inventory` only sees crates that are linked: a plugin
//! crate that is never referenced (`use my_plugin as _;`) registers nothing.

use crate::error::{Error, Result};
use crate::graph::{Graph, NodeId};
use crate::op::Op;
use std::any::TypeId;
use std::collections::HashMap;

/// An entry of a registry: something registered for one op type.
pub trait Registered: 'static {
    /// What this registry holds, for error messages: `"CPU kernel"`, `"jvp rule"`.
    const WHAT: &'static str;
    /// The `TypeId` of the op this entry is for.
    fn op_type(&self) -> TypeId;
    /// The op's name as written at the registration.
    fn op_name(&self) -> &'static str;
    /// `file:line` of the registration.
    fn location(&self) -> &'static str;
}

/// A lookup table from op type to registered entry, built from an iterator of entries.
#[derive(Debug)]
pub struct RuleTable<R: 'static> {
    map: HashMap<TypeId, &'static R>,
    duplicates: HashMap<TypeId, Error>,
}

impl<R: Registered> RuleTable<R> {
    /// Builds the table; duplicates are remembered, not fatal.
    pub fn build(entries: impl IntoIterator<Item = &'static R>) -> Self {
        let mut map: HashMap<TypeId, &'static R> = HashMap::new();
        let mut duplicates = HashMap::new();
        for e in entries {
            if let Some(first) = map.get(&e.op_type()) {
                duplicates.entry(e.op_type()).or_insert_with(|| Error::DuplicateRegistration {
                    what: R::WHAT.into(),
                    op: e.op_name().into(),
                    first: format!("{} ({})", first.location(), first.op_name()),
                    second: format!("{} ({})", e.location(), e.op_name()),
                });
            } else {
                map.insert(e.op_type(), e);
            }
        }
        RuleTable { map, duplicates }
    }

    /// The entry for `op`, `Ok(None)` when none is registered.
    ///
    /// # Errors
    /// [`Error::DuplicateRegistration`] when the op was registered twice.
    pub fn lookup(&self, op: &dyn Op) -> Result<Option<&'static R>> {
        self.lookup_type(op.op_type())
    }

    /// Like [`RuleTable::lookup`], by `TypeId`.
    pub fn lookup_type(&self, ty: TypeId) -> Result<Option<&'static R>> {
        match self.duplicates.get(&ty) {
            Some(e) => Err(e.clone()),
            None => Ok(self.map.get(&ty).copied()),
        }
    }

    /// The entry for `op`, or [`Error::MissingRule`] naming the op.
    pub fn get(&self, op: &dyn Op, hint: &str) -> Result<&'static R> {
        self.lookup(op)?.ok_or_else(|| Error::MissingRule {
            op: op.name().into(),
            what: R::WHAT.into(),
            hint: hint.into(),
        })
    }

    /// Every duplicate registration found.
    ///
    /// # Errors
    /// The first duplicate, naming both places.
    pub fn check(&self) -> Result<()> {
        match self.duplicates.values().next() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// All entries (one per op type).
    pub fn entries(&self) -> impl Iterator<Item = &'static R> + '_ {
        self.map.values().copied()
    }

    /// Runs the graph passes of this table on `g`: for each op type of
    /// `g`'s own nodes that has an entry (in the order the types first
    /// appear), the entry's pass (`pass(entry)`) on the graph so far and its
    /// nodes of that type. `None` when no pass changed anything.
    ///
    /// # Errors
    /// A pass's error; an op type registered twice.
    pub fn run_graph_passes(
        &self,
        g: &Graph,
        pass: impl Fn(&R) -> GraphPassFn,
    ) -> Result<Option<Graph>> {
        let mut types: Vec<TypeId> = Vec::new();
        for n in g.nodes() {
            if !types.contains(&n.op.op_type()) {
                types.push(n.op.op_type());
            }
        }
        let mut changed: Option<Graph> = None;
        for ty in types {
            let Some(entry) = self.lookup_type(ty)? else { continue };
            let now = changed.as_ref().unwrap_or(g);
            let ids: Vec<NodeId> =
                now.iter().filter(|(_, n)| n.op.op_type() == ty).map(|(id, _)| id).collect();
            if ids.is_empty() {
                continue;
            }
            if let Some(new) = pass(entry)(now, &ids)? {
                changed = Some(new);
            }
        }
        Ok(changed)
    }
}

/// A rewrite of a graph around its nodes of one op type, the type it is
/// registered for (a pass that looks beyond one node, at its siblings or
/// at how its results are used, and so cannot be a rewrite rule): given
/// the graph and those nodes, in order, the rewritten graph, or `None`
/// when nothing changed. It keeps the graph's signature. A registry of
/// them is declared with [`registry_entry!`](crate::registry_entry) and run
/// with [`RuleTable::run_graph_passes`].
pub type GraphPassFn = fn(&Graph, &[NodeId]) -> Result<Option<Graph>>;

/// Declares a registry: an entry type holding an op type, its name, the
/// registration's `file:line` and one payload field; its `inventory`
/// collection; its [`Registered`] impl; and a function returning its
/// [`RuleTable`], built once. Core's rule types and the CPU backend's kernel
/// registry are all declared with it, and so can a transform or backend in
/// another crate.
///
/// ```ignore
/// anvil_core::registry_entry! {
///     /// A registered CPU kernel.
///     pub struct CpuKernel { kernel: KernelFn }, "CPU kernel", kernels
/// }
/// ```
#[macro_export]
macro_rules! registry_entry {
    ($(#[$doc:meta])* pub struct $name:ident { $field:ident : $ty:ty }, $what:literal, $table:ident) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name {
            /// The op type (`TypeId::of::<MyOp>`).
            pub op_type: fn() -> ::std::any::TypeId,
            /// The op type's name as written at the registration.
            pub op_name: &'static str,
            /// `file:line` of the registration.
            pub location: &'static str,
            /// What is registered.
            pub $field: $ty,
        }

        $crate::inventory::collect!($name);

        impl $crate::Registered for $name {
            const WHAT: &'static str = $what;
            fn op_type(&self) -> ::std::any::TypeId {
                (self.op_type)()
            }
            fn op_name(&self) -> &'static str {
                self.op_name
            }
            fn location(&self) -> &'static str {
                self.location
            }
        }

        /// The table of every entry of this registry linked into the program.
        pub fn $table() -> &'static $crate::RuleTable<$name> {
            static TABLE: ::std::sync::OnceLock<$crate::RuleTable<$name>> = ::std::sync::OnceLock::new();
            TABLE.get_or_init(|| $crate::RuleTable::build($crate::inventory::iter::<$name>))
        }
    };
}

/// Submits an entry of a registry declared with [`registry_entry!`] for an
/// op type: `register_entry!(path::to::Entry, MyOp, field: value);`.
#[macro_export]
macro_rules! register_entry {
    ($entry:path, $op:ty, $field:ident : $value:expr) => {
        $crate::inventory::submit! {
            $entry {
                op_type: ::std::any::TypeId::of::<$op>,
                op_name: stringify!($op),
                location: concat!(file!(), ":", line!()),
                $field: $value,
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Entry(fn() -> TypeId, &'static str, &'static str);
    impl Registered for Entry {
        const WHAT: &'static str = "test rule";
        fn op_type(&self) -> TypeId {
            (self.0)()
        }
        fn op_name(&self) -> &'static str {
            self.1
        }
        fn location(&self) -> &'static str {
            self.2
        }
    }

    #[test]
    fn duplicates_name_both_places() {
        static A: Entry = Entry(TypeId::of::<crate::graph::Parameter>, "param", "a.rs:1");
        static B: Entry = Entry(TypeId::of::<crate::graph::Parameter>, "param_again", "b.rs:2");
        let t = RuleTable::build([&A, &B]);
        let e = t.check().unwrap_err().to_string();
        assert!(e.contains("a.rs:1") && e.contains("b.rs:2") && e.contains("test rule"), "{e}");
        assert!(t.lookup_type(TypeId::of::<crate::graph::Parameter>()).is_err());
    }
}
