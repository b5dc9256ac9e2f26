//! A CPU plan rewrite: an LU factorisation whose packed factor only feeds
//! solves is factored in the layout this backend's own loops write.
//!
//! The graph asks for [`LuTransposed`] (the factor stored column-major, as
//! faer and LAPACK write it), and [`LuSolve`] reads it with
//! `factor_transposed`: for a matrix faer factors, that is the layout that
//! costs nothing. Small matrices and `f64` ones up to 320 rows are factored
//! by this crate's row-major loops instead
//! ([`factors_row_major`](crate::linalg::factors_row_major)), and the
//! column-major factor is then a transpose of the whole factor on every call
//! (W8's Newton step at n = 200: about 4% of its main thread). When every reader of
//! the factor is such a solve, the node becomes [`Lu`] and its solves read
//! the row-major factor (`factor_transposed: false`): the same pivots, the
//! same factor entries, read where they are.

use anvil_core::{Graph, NodeId, Op, Rebuilt, Result};
use anvil_ops::linalg::{Lu, LuSolve, LuTransposed};
use std::collections::HashSet;

crate::register_plan_rewrite!(LuTransposed, row_major_factors);

/// The rewrite (see the module documentation) of the [`LuTransposed`]
/// nodes `ids` of `g`; `None` when none qualifies.
///
/// ```
/// use anvil_core::{DType, Graph, TensorType};
/// use anvil_cpu::lu_layout::row_major_factors;
/// use anvil_ops::linalg::{Lu, LuSolve, LuTransposed};
///
/// // A 4 × 4 system (the small loop's size for either float type).
/// let mut g = Graph::new();
/// let a = g.add_input(TensorType::new(DType::F64, vec![4, 4]))?;
/// let b = g.add_input(TensorType::new(DType::F64, vec![4, 1]))?;
/// let lu = Box::new(LuTransposed);
/// let types = anvil_core::Op::infer_results(lu.as_ref(), &[g.ty(a).clone()])?;
/// let f = g.push_node(lu, vec![a], types)?;
/// let (factor, perm) = (g.node(f).out(), g.node(f).results().nth(2).unwrap());
/// let solve = LuSolve { factor_transposed: true, ..LuSolve::default() };
/// let x = g.push_node(Box::new(solve), vec![factor, perm, b], vec![g.ty(b).clone()])?;
/// let out = g.node(x).out();
/// g.set_outputs(vec![out]);
///
/// let r = row_major_factors(&g, &[f])?.expect("a factor read by solves only");
/// assert_eq!((r.count::<Lu>(), r.count::<LuTransposed>()), (1, 0));
/// # Ok::<(), anvil_core::Error>(())
/// ```
///
/// # Errors
/// A node the rebuilt graph cannot hold (not expected: the new nodes have
/// the old ones' operands and result types).
pub fn row_major_factors(g: &Graph, ids: &[NodeId]) -> Result<Option<Graph>> {
    let readers = crate::placement::readers(g);
    let mut lus: HashSet<NodeId> = HashSet::new();
    let mut solves: HashSet<NodeId> = HashSet::new();
    for &id in ids {
        let node = g.node(id);
        let Some(&a) = node.inputs.first() else { continue };
        let ty = g.ty(a);
        let Some(&[m, n]) = ty.shape().get(ty.rank().saturating_sub(2)..) else { continue };
        let Some(factor) = node.results().next() else { continue };
        let solved_only = !readers[factor.index()].is_empty()
            && readers[factor.index()].iter().all(|&(r, k)| {
                let op = g.node(r).op.downcast_ref::<LuSolve>();
                k == 0 && op.is_some_and(|s| s.factor_transposed)
            });
        let fits = !ty.is_symbolic() && crate::linalg::factors_row_major(ty.dtype(), m, n);
        if fits && solved_only && !g.outputs().contains(&factor) {
            lus.insert(id);
            solves.extend(readers[factor.index()].iter().map(|&(r, _)| r));
        }
    }
    if lus.is_empty() {
        return Ok(None);
    }
    let rebuilt = g.rebuild(|out, _, id, n, ins| {
        let op: Box<dyn Op> = if lus.contains(&id) {
            Box::new(Lu)
        } else if let Some(s) = n.op.downcast_ref::<LuSolve>().filter(|_| solves.contains(&id)) {
            Box::new(LuSolve { factor_transposed: false, ..*s })
        } else {
            return Ok(Rebuilt::Copy);
        };
        let types =
            op.infer_results(&ins.iter().map(|&v| out.ty(v).clone()).collect::<Vec<_>>())?;
        let new = out.push_node(op, ins.to_vec(), types)?;
        Ok(Rebuilt::Replace(out.node(new).results().collect()))
    })?;
    Ok(Some(rebuilt))
}
