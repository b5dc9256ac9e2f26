//! [`rule_report`]: which op types have which registered kernel and rules.

use crate::core::{jvp_rules, rewrite_rules, transpose_rules, vmap_rules, Registered, RuleTable};
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
    /// ([`Op::op_type`](crate::Op)) or a sample.
    pub op_type: TypeId,
    /// `file:line` of the first registration found (kernel, then vmap,
    /// jvp and transpose rule).
    pub location: &'static str,
    /// Whether a CPU kernel is registered. (Ops computed element by
    /// element, with [`Op::elementwise_math`](crate::Op::elementwise_math),
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
/// program — CPU kernels ([`crate::cpu::kernels()`]), [`vmap_rules`],
/// [`jvp_rules`], [`transpose_rules`] and [`rewrite_rules`] — one row per op type (by
/// `TypeId`), sorted by name, saying what each has. [`RuleReportTable`]
/// displays it as a table.
///
/// ```
/// use anvil::testing::rule_report;
/// let report = rule_report();
/// let sin = report.iter().find(|r| r.op == "Sin").expect("Sin is registered");
/// assert!(sin.vmap && sin.jvp);
/// assert!(!sin.kernel); // elementwise: the backend runs its block math
/// assert!(!sin.transpose); // sin is not linear: jvp rules never emit it on tangents
/// println!("{}", anvil::testing::RuleReportTable(&report));
/// ```
pub fn rule_report() -> Vec<RuleReport> {
    let mut rows: BTreeMap<TypeId, RuleReport> = BTreeMap::new();
    let mut add = |op_type: TypeId, op: &'static str, location: &'static str, col: usize| {
        let row = rows.entry(op_type).or_insert(RuleReport {
            op,
            op_type,
            location,
            kernel: false,
            vmap: false,
            jvp: false,
            transpose: false,
            rewrite: false,
        });
        *[&mut row.kernel, &mut row.vmap, &mut row.jvp, &mut row.transpose, &mut row.rewrite]
            [col] = true;
    };
    fn each<R: Registered>(
        table: &RuleTable<R>,
        add: &mut dyn FnMut(TypeId, &'static str, &'static str),
    ) {
        for e in table.entries() {
            add(e.op_type(), e.op_name(), e.location());
        }
    }
    each(crate::cpu::kernels(), &mut |t, n, l| add(t, n, l, 0));
    each(vmap_rules(), &mut |t, n, l| add(t, n, l, 1));
    each(jvp_rules(), &mut |t, n, l| add(t, n, l, 2));
    each(transpose_rules(), &mut |t, n, l| add(t, n, l, 3));
    each(rewrite_rules(), &mut |t, n, l| add(t, n, l, 4));
    let mut out: Vec<RuleReport> = rows.into_values().collect();
    out.sort_by(|a, b| a.op.cmp(b.op).then(a.location.cmp(b.location)));
    out
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
