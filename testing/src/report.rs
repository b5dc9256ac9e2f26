//! [`rule_report`]: which op types have which registered kernel and rules.

use anvil::core::{jvp_rules, rewrite_rules, transpose_rules, vmap_rules, Registered, RuleTable};
use std::any::TypeId;
use std::collections::BTreeMap;
use std::fmt;

/// One op type and what is registered for it: a row of [`rule_report`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleReport {
    /// The op type's name as written at its registration (`"Sin"`); the
    /// CPU kernel's registration when there is one.
    pub op: &'static str,
    /// The op's `TypeId`, to match the row with an op
    /// ([`Op::op_type`](anvil::Op)) or a sample.
    pub op_type: TypeId,
    /// `file:line` of the first registration found (kernel, then vmap,
    /// jvp and transpose rule).
    pub location: &'static str,
    /// Whether a CPU kernel is registered. (Ops computed element by
    /// element, with [`Op::elementwise_math`](anvil::Op::elementwise_math),
    /// need none: the backend runs their block math.)
    pub kernel: bool,
    /// Whether a batching (vmap) rule is registered.
    pub vmap: bool,
    /// Whether a forward-mode (jvp) rule is registered.
    pub jvp: bool,
    /// Whether a transpose rule is registered (needed only by ops that jvp
    /// rules emit on tangents).
    pub transpose: bool,
    /// Whether a rewrite rule is registered.
    pub rewrite: bool,
}

/// Every op type registered in any of the registries linked into the
/// program — CPU kernels ([`anvil::cpu::kernels()`]), [`vmap_rules`],
/// [`jvp_rules`], [`transpose_rules`] and [`rewrite_rules`] — one row per op type (by
/// `TypeId`), sorted by name, saying what each has. [`RuleReportTable`]
/// displays it as a table.
///
/// ```
/// use anvil_testing::rule_report;
/// let report = rule_report();
/// let sin = report.iter().find(|r| r.op == "Sin").expect("Sin is registered");
/// assert!(sin.vmap && sin.jvp);
/// assert!(!sin.kernel); // elementwise: the backend runs its block math
/// assert!(!sin.transpose); // sin is not linear: jvp rules never emit it on tangents
/// println!("{}", anvil_testing::RuleReportTable(&report));
/// ```
pub fn rule_report() -> Vec<RuleReport> {
    let mut rows: BTreeMap<TypeId, RuleReport> = BTreeMap::new();
    for r in registrations() {
        let row = rows.entry(r.op_type).or_insert(RuleReport {
            op: r.op,
            op_type: r.op_type,
            location: r.location,
            kernel: false,
            vmap: false,
            jvp: false,
            transpose: false,
            rewrite: false,
        });
        *row.column(r.registry) = true;
    }
    let mut out: Vec<RuleReport> = rows.into_values().collect();
    out.sort_by(|a, b| a.op.cmp(b.op).then(a.location.cmp(b.location)));
    out
}

impl RuleReport {
    /// The column that says whether `registry` has a registration.
    fn column(&mut self, registry: Registry) -> &mut bool {
        match registry {
            Registry::Kernel => &mut self.kernel,
            Registry::Vmap => &mut self.vmap,
            Registry::Jvp => &mut self.jvp,
            Registry::Transpose => &mut self.transpose,
            Registry::Rewrite => &mut self.rewrite,
        }
    }
}

/// The registries an op type can have an entry in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Registry {
    Kernel,
    Vmap,
    Jvp,
    Transpose,
    Rewrite,
}

/// One entry of a registry: the op type, with its name and `file:line` as
/// written at the registration.
#[derive(Clone, Copy, Debug)]
pub(super) struct Registration {
    pub(super) op_type: TypeId,
    pub(super) op: &'static str,
    pub(super) location: &'static str,
    pub(super) registry: Registry,
}

/// Every entry of every registry linked into the program: CPU kernels,
/// then vmap, jvp, transpose and rewrite rules, each in its table's order.
pub(super) fn registrations() -> Vec<Registration> {
    let mut out = Vec::new();
    entries(anvil::cpu::kernels(), Registry::Kernel, &mut out);
    entries(vmap_rules(), Registry::Vmap, &mut out);
    entries(jvp_rules(), Registry::Jvp, &mut out);
    entries(transpose_rules(), Registry::Transpose, &mut out);
    entries(rewrite_rules(), Registry::Rewrite, &mut out);
    out
}

fn entries<R: Registered>(table: &RuleTable<R>, registry: Registry, out: &mut Vec<Registration>) {
    out.extend(table.entries().map(|e| Registration {
        op_type: e.op_type(),
        op: e.op_name(),
        location: e.location(),
        registry,
    }));
}

/// A [`rule_report`] displayed as a table, one op per line, with `x` where
/// something is registered.
#[derive(Clone, Copy, Debug)]
pub struct RuleReportTable<'a>(pub &'a [RuleReport]);

impl fmt::Display for RuleReportTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self.0.iter().map(|r| r.op.len()).max().unwrap_or(2).max(2);
        writeln!(f, "{:<width$}  kernel  vmap  jvp  transpose  rewrite", "op")?;
        let mark = |b: bool| if b { "x" } else { "-" };
        for r in self.0 {
            writeln!(
                f,
                "{:<width$}  {:^6}  {:^4}  {:^3}  {:^9}  {:^7}",
                r.op,
                mark(r.kernel),
                mark(r.vmap),
                mark(r.jvp),
                mark(r.transpose),
                mark(r.rewrite)
            )?;
        }
        Ok(())
    }
}

impl fmt::Display for RuleReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let has: Vec<&str> = [
            (self.kernel, "kernel"),
            (self.vmap, "vmap"),
            (self.jvp, "jvp"),
            (self.transpose, "transpose"),
            (self.rewrite, "rewrite"),
        ]
        .iter()
        .filter_map(|&(b, n)| b.then_some(n))
        .collect();
        write!(f, "{}: {} ({})", self.op, has.join(", "), self.location)
    }
}
