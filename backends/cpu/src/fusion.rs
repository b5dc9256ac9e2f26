//! Elementwise fusion: chains of f64 elementwise ops of one shape become one
//! [`Fused`] node, run in a single pass over memory.
//!
//! A node joins the group of its consumer when it is an elementwise op with
//! fusable math ([`FusableMath`], registered for every standard unary and
//! binary op), has that consumer as its only use, and has the consumer's
//! shape. Everything else a group reads — smaller operands that broadcast,
//! reductions, inputs — is a leaf, read through broadcast strides. The
//! kernel walks the output in blocks of [`BLOCK`] elements: it reads each
//! leaf of the output's shape in place and gathers each broadcast leaf's
//! block into a small buffer, runs the group's instructions over registers
//! of one block, and writes the last one straight into the output, so
//! intermediates never leave the cache and are never allocated at full size.

use crate::strided::{broadcast_strides, fill_chunks, for_each_run, Strides};
use crate::{register_kernel, Ctx};
use anvil_core::{
    op::expect_arity, DType, Error, Graph, Node, NodeId, Op, Parameter, Result, Tensor, TensorType,
};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Elements per block of the fused kernel.
pub const BLOCK: usize = 512;

/// The math of a fusable elementwise op over a block of `f64`s.
#[derive(Clone, Copy, Debug)]
pub enum ChunkMath {
    /// `out[i] = f(a[i])`.
    Unary(fn(&dyn Op, &[f64], &mut [f64])),
    /// `out[i] = f(a[i], b[i])`.
    Binary(fn(&dyn Op, &[f64], &[f64], &mut [f64])),
}

anvil_core::registry_entry! {
    /// The block math of an elementwise op that fusion may inline.
    pub struct FusableMath { math: ChunkMath }, "fusable math", fusable
}

/// One instruction of a fused program: an op applied to registers (the
/// inputs are registers `0..inputs`, instruction `j` writes `inputs + j`).
#[derive(Clone, Debug)]
pub struct Instr {
    /// The op (for printing and for its math's parameters).
    pub op: Box<dyn Op>,
    /// Its block math.
    pub math: ChunkMath,
    /// The registers it reads.
    pub args: Vec<usize>,
}

/// A group of fused elementwise ops; the last instruction is the result.
#[derive(Clone, Debug)]
pub struct Fused {
    /// The instructions, in order.
    pub program: Arc<Vec<Instr>>,
    /// The number of inputs (leaves).
    pub inputs: usize,
    /// The result type.
    pub out: TensorType,
}

impl PartialEq for Fused {
    fn eq(&self, other: &Fused) -> bool {
        Arc::ptr_eq(&self.program, &other.program)
    }
}
impl Eq for Fused {}
impl Hash for Fused {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::ptr::hash(Arc::as_ptr(&self.program), state);
    }
}

impl Op for Fused {
    fn name(&self) -> &'static str {
        "fused"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, self.inputs)?;
        Ok(self.out.clone())
    }
    fn params(&self) -> String {
        let ops: Vec<String> = self
            .program
            .iter()
            .map(|i| {
                let args: Vec<String> = i.args.iter().map(|a| format!("r{a}")).collect();
                format!("{}({})", i.op.display(), args.join(","))
            })
            .collect();
        ops.join("; ")
    }
}

/// The math of `op` if it can be fused on these types.
fn fusable_math(g: &Graph, node: &Node) -> Option<ChunkMath> {
    if node.ty.dtype != DType::F64 || node.inputs.iter().any(|&i| g.ty(i).dtype != DType::F64) {
        return None;
    }
    let math = fusable().lookup(node.op.as_ref()).ok()??.math;
    let arity = match math {
        ChunkMath::Unary(_) => 1,
        ChunkMath::Binary(_) => 2,
    };
    (node.inputs.len() == arity).then_some(math)
}

/// Replaces every group of two or more fusable elementwise nodes by one
/// [`Fused`] node. Values, types and the signature are unchanged.
///
/// # Errors
/// An invalid graph.
pub fn fuse(g: &Graph) -> Result<Graph> {
    let math: Vec<Option<ChunkMath>> = g.iter().map(|(_, n)| fusable_math(g, n)).collect();
    // The one node reading each value, if exactly one does (an operand read
    // twice by the same node, as in `x * x`, still has one consumer).
    let mut consumer: Vec<Option<NodeId>> = vec![None; g.len()];
    let mut shared = vec![false; g.len()];
    for (id, n) in g.iter() {
        for &i in &n.inputs {
            match consumer[i.index()] {
                Some(c) if c != id => shared[i.index()] = true,
                _ => consumer[i.index()] = Some(id),
            }
        }
    }
    for o in g.outputs() {
        shared[o.index()] = true;
    }
    // `absorbed[v]`: v is computed inside its consumer's group.
    let absorbed: Vec<bool> = g
        .iter()
        .map(|(id, n)| {
            math[id.index()].is_some()
                && !shared[id.index()]
                && consumer[id.index()]
                    .is_some_and(|c| math[c.index()].is_some() && g.node(c).ty.shape == n.ty.shape)
        })
        .collect();
    let mut out = Graph::new();
    let mut map: Vec<Option<NodeId>> = vec![None; g.len()];
    for (id, n) in g.iter() {
        if n.op.is::<Parameter>() {
            map[id.index()] = Some(out.add_input(n.ty.clone())?);
            continue;
        }
        if absorbed[id.index()] {
            continue;
        }
        let has_group = math[id.index()].is_some() && n.inputs.iter().any(|i| absorbed[i.index()]);
        let new = if has_group {
            let mut leaves: Vec<NodeId> = Vec::new();
            let mut program: Vec<Instr> = Vec::new();
            let mut done = std::collections::HashMap::new();
            emit(g, id, &absorbed, &math, &mut leaves, &mut program, &mut done)?;
            // Registers: leaves first, then instructions.
            let shift = leaves.len();
            for instr in &mut program {
                for a in &mut instr.args {
                    if *a >= LEAF_TAG {
                        *a -= LEAF_TAG;
                    } else {
                        *a += shift;
                    }
                }
            }
            let inputs = leaves.iter().map(|&l| get(&map, l)).collect::<Result<Vec<_>>>()?;
            let op = Fused { program: Arc::new(program), inputs: inputs.len(), out: n.ty.clone() };
            out.push_node(Node { op: Box::new(op), inputs, ty: n.ty.clone() })?
        } else {
            let inputs = n.inputs.iter().map(|&i| get(&map, i)).collect::<Result<Vec<_>>>()?;
            out.push_node(Node { op: n.op.clone(), inputs, ty: n.ty.clone() })?
        };
        map[id.index()] = Some(new);
    }
    let outputs = g.outputs().iter().map(|&o| get(&map, o)).collect::<Result<Vec<_>>>()?;
    out.set_outputs(outputs);
    Ok(out)
}

/// The node a rewriting pass emitted for `i` of the old graph (an error if
/// the pass visited a use before its definition).
fn get(map: &[Option<NodeId>], i: NodeId) -> Result<NodeId> {
    map[i.index()]
        .ok_or_else(|| Error::InvalidGraph { node: i.index(), msg: "operand not emitted".into() })
}

/// Leaf registers are tagged while the program is built (their final
/// numbers are known only at the end).
const LEAF_TAG: usize = usize::MAX / 2;

/// Appends the instructions computing `id` (its absorbed operands first)
/// and returns its register.
fn emit(
    g: &Graph,
    id: NodeId,
    absorbed: &[bool],
    math: &[Option<ChunkMath>],
    leaves: &mut Vec<NodeId>,
    program: &mut Vec<Instr>,
    done: &mut std::collections::HashMap<NodeId, usize>,
) -> Result<usize> {
    if let Some(&reg) = done.get(&id) {
        return Ok(reg);
    }
    let n = g.node(id);
    let mut args = Vec::with_capacity(n.inputs.len());
    for &i in &n.inputs {
        let reg = if absorbed[i.index()] {
            emit(g, i, absorbed, math, leaves, program, done)?
        } else {
            let k = leaves.iter().position(|&l| l == i).unwrap_or_else(|| {
                leaves.push(i);
                leaves.len() - 1
            });
            LEAF_TAG + k
        };
        args.push(reg);
    }
    let m = math[id.index()]
        .ok_or_else(|| Error::InvalidGraph { node: id.index(), msg: "not fusable".into() })?;
    program.push(Instr { op: n.op.clone(), math: m, args });
    done.insert(id, program.len() - 1);
    Ok(program.len() - 1)
}

/// How a broadcast leaf is gathered: its strides and its scratch slot.
type Gather = (Strides, usize);

/// The kernel of [`Fused`].
pub fn fused(op: &dyn Op, inputs: &[&Tensor], out: &TensorType, ctx: &Ctx) -> Result<Tensor> {
    let f = op.try_downcast::<Fused>()?;
    expect_arity(op, inputs, f.inputs)?;
    let Some(last) = f.program.len().checked_sub(1) else {
        return Err(Error::invalid("fused", "program", "a fused group without instructions"));
    };
    let shape = &out.shape;
    // Leaves of the output's own shape are read in place; the others
    // (broadcast operands) are gathered block by block into a scratch slot.
    let mut slots = 0;
    let leaves: Vec<(&[f64], Option<Gather>)> = inputs
        .iter()
        .map(|t| {
            let gather = (t.shape() != &shape[..]).then(|| {
                slots += 1;
                (broadcast_strides(t.shape(), shape), slots - 1)
            });
            Ok((t.as_slice::<f64>()?, gather))
        })
        .collect::<Result<_>>()?;
    let mut result = crate::buffers::take(out.numel());
    fill_chunks(&mut result, ctx, |chunk, start| {
        let width = BLOCK.min(chunk.len());
        // The gathered leaves' blocks, then a register for every instruction
        // but the last (which writes the output), in one allocation.
        let mut scratch = crate::buffers::small((slots + last) * width, 0.0);
        let (gathered, regs) = scratch.split_at_mut(slots * width);
        let mut at = 0;
        while at < chunk.len() {
            let len = BLOCK.min(chunk.len() - at);
            let from = start + at;
            for (data, gather) in &leaves {
                let Some((strides, slot)) = gather else { continue };
                let buf = &mut gathered[slot * width..][..len];
                for_each_run(shape, [strides], [0], from, from + len, |pos, [o], [s], run| {
                    let dst = &mut buf[pos - from..pos - from + run];
                    if s == 1 {
                        dst.copy_from_slice(&data[o as usize..o as usize + run]);
                    } else if s == 0 {
                        dst.fill(data[o as usize]);
                    } else {
                        for (j, d) in dst.iter_mut().enumerate() {
                            *d = data[(o + j as isize * s) as usize];
                        }
                    }
                });
            }
            let gathered = &*gathered;
            for (j, instr) in f.program.iter().enumerate() {
                let (done, rest) = regs.split_at_mut(j.min(last) * width);
                let src = |a: usize| -> &[f64] {
                    match a.checked_sub(f.inputs) {
                        Some(r) => &done[r * width..][..len],
                        None => match &leaves[a] {
                            (_, Some((_, slot))) => &gathered[slot * width..][..len],
                            (data, None) => &data[from..from + len],
                        },
                    }
                };
                let dst = if j == last { &mut chunk[at..at + len] } else { &mut rest[..len] };
                match instr.math {
                    ChunkMath::Unary(m) => m(instr.op.as_ref(), src(instr.args[0]), dst),
                    ChunkMath::Binary(m) => {
                        m(instr.op.as_ref(), src(instr.args[0]), src(instr.args[1]), dst)
                    }
                }
            }
            at += len;
        }
    });
    Tensor::from_vec(result, shape)
}

register_kernel!(Fused, fused);

// ------------------------------------------------------------ transposes

/// `matmul` of operands read transposed (`op(a) @ op(b)`), for matrices and
/// vectors only: what a `permute` feeding a `matmul` becomes, so that faer
/// reads the transposed view instead of a copy being made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatmulT {
    /// Read the left operand (a matrix) transposed.
    pub ta: bool,
    /// Read the right operand (a matrix) transposed.
    pub tb: bool,
}

fn transposed(t: &TensorType, yes: bool) -> TensorType {
    let mut t = t.clone();
    if yes {
        t.shape.reverse();
    }
    t
}

impl Op for MatmulT {
    fn name(&self) -> &'static str {
        "matmul_t"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        expect_arity(self, inputs, 2)?;
        let (a, b) = (transposed(&inputs[0], self.ta), transposed(&inputs[1], self.tb));
        let ok = a.rank() <= 2
            && b.rank() <= 2
            && (!self.ta || a.rank() == 2)
            && (!self.tb || b.rank() == 2);
        if !ok {
            return Err(Error::shape(
                "matmul_t",
                &[&a.shape, &b.shape],
                "matrices or vectors only",
            ));
        }
        anvil_ops::matmul::Matmul.infer(&[a, b])
    }
    fn params(&self) -> String {
        format!("ta={}, tb={}", self.ta, self.tb)
    }
}

/// Replaces `matmul(permute[1, 0](x), y)` (either side) by a [`MatmulT`]
/// reading `x` transposed, when the permute has no other use.
///
/// # Errors
/// An invalid graph.
pub fn fold_transposes(g: &Graph) -> Result<Graph> {
    use anvil_ops::matmul::Matmul;
    use anvil_ops::movement::Permute;
    let mut uses = vec![0usize; g.len()];
    for (_, n) in g.iter() {
        for i in &n.inputs {
            uses[i.index()] += 1;
        }
    }
    for o in g.outputs() {
        uses[o.index()] += 1;
    }
    let is_t = |i: NodeId| {
        let n = g.node(i);
        uses[i.index()] == 1 && n.op.downcast_ref::<Permute>().is_some_and(|p| p.perm == [1, 0])
    };
    let small = |i: NodeId| g.ty(i).rank() <= 2;
    // Which permutes are read through a transposed view.
    let mut folded = vec![false; g.len()];
    let mut plan: Vec<Option<(MatmulT, [NodeId; 2])>> = vec![None; g.len()];
    for (id, n) in g.iter() {
        if !n.op.is::<Matmul>() || !small(n.inputs[0]) || !small(n.inputs[1]) {
            continue;
        }
        let (a, b) = (n.inputs[0], n.inputs[1]);
        let (ta, tb) = (is_t(a), is_t(b));
        if !(ta || tb) {
            continue;
        }
        let src = |i: NodeId, t: bool| if t { g.node(i).inputs[0] } else { i };
        folded[a.index()] |= ta;
        folded[b.index()] |= tb;
        plan[id.index()] = Some((MatmulT { ta, tb }, [src(a, ta), src(b, tb)]));
    }
    if plan.iter().all(Option::is_none) {
        return Ok(g.clone());
    }
    let mut out = Graph::new();
    let mut map: Vec<Option<NodeId>> = vec![None; g.len()];
    for (id, n) in g.iter() {
        if n.op.is::<Parameter>() {
            map[id.index()] = Some(out.add_input(n.ty.clone())?);
            continue;
        }
        if folded[id.index()] {
            continue;
        }
        let node = match &plan[id.index()] {
            Some((op, [a, b])) => Node {
                op: Box::new(*op),
                inputs: vec![get(&map, *a)?, get(&map, *b)?],
                ty: n.ty.clone(),
            },
            None => {
                let inputs = n.inputs.iter().map(|&i| get(&map, i)).collect::<Result<Vec<_>>>()?;
                Node { op: n.op.clone(), inputs, ty: n.ty.clone() }
            }
        };
        map[id.index()] = Some(out.push_node(node)?);
    }
    let outputs = g.outputs().iter().map(|&o| get(&map, o)).collect::<Result<Vec<_>>>()?;
    out.set_outputs(outputs);
    Ok(out)
}

macro_rules! typed_matmul_t {
    ($name:ident, $t:ty) => {
        fn $name(
            a: &[$t],
            sa: &[usize],
            b: &[$t],
            sb: &[usize],
            op: MatmulT,
            ctx: &Ctx,
        ) -> Vec<$t> {
            use faer::linalg::matmul::matmul;
            use faer::{Accum, MatMut, MatRef};
            // Views of op(a) as [m, k] and op(b) as [k, n].
            let av = match (sa, op.ta) {
                ([k], _) => MatRef::from_row_major_slice(a, 1, *k),
                ([r, c], false) => MatRef::from_row_major_slice(a, *r, *c),
                ([r, c], true) => MatRef::from_row_major_slice(a, *r, *c).transpose(),
                _ => return Vec::new(),
            };
            let bv = match (sb, op.tb) {
                ([k], _) => MatRef::from_row_major_slice(b, *k, 1),
                ([r, c], false) => MatRef::from_row_major_slice(b, *r, *c),
                ([r, c], true) => MatRef::from_row_major_slice(b, *r, *c).transpose(),
                _ => return Vec::new(),
            };
            let (m, k, n) = (av.nrows(), av.ncols(), bv.ncols());
            if m * n == 0 || k == 0 {
                return vec![0.0 as $t; m * n];
            }
            let mut out = crate::buffers::take(m * n);
            {
                let c = MatMut::from_row_major_slice_mut(&mut out, m, n);
                matmul(c, Accum::Replace, av, bv, 1.0 as $t, ctx.gemm_par(m * k * n));
            }
            out
        }
    };
}

typed_matmul_t!(matmul_t_f64, f64);
typed_matmul_t!(matmul_t_f32, f32);

/// The kernel of [`MatmulT`].
pub fn matmul_t(op: &dyn Op, inputs: &[&Tensor], out: &TensorType, ctx: &Ctx) -> Result<Tensor> {
    let t = *op.try_downcast::<MatmulT>()?;
    expect_arity(op, inputs, 2)?;
    let (a, b) = (inputs[0], inputs[1]);
    let v = match (a.storage(), b.storage()) {
        (anvil_core::Storage::F64(x), anvil_core::Storage::F64(y)) => {
            anvil_core::Element::into_storage(matmul_t_f64(x, a.shape(), y, b.shape(), t, ctx))
        }
        (anvil_core::Storage::F32(x), anvil_core::Storage::F32(y)) => {
            anvil_core::Element::into_storage(matmul_t_f32(x, a.shape(), y, b.shape(), t, ctx))
        }
        _ => {
            return Err(Error::dtype(
                "matmul_t",
                "0",
                a.dtype(),
                "f64 or f32 (both operands alike)",
            ))
        }
    };
    Tensor::from_storage(v, &out.shape)
}

register_kernel!(MatmulT, matmul_t);

/// Whether an op type is one the CPU compiler makes itself ([`Fused`],
/// [`MatmulT`]): such ops never appear in a user's or a transform's graph,
/// so they need no rules and no conformance samples.
pub fn is_internal(op_type: std::any::TypeId) -> bool {
    op_type == std::any::TypeId::of::<Fused>() || op_type == std::any::TypeId::of::<MatmulT>()
}
