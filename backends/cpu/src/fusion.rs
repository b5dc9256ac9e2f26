//! Elementwise fusion: every op computed element by element (its op has
//! [`elementwise_math`](anvil_core::Op::elementwise_math): unary, binary,
//! comparisons, `select`, `cast`, generators such as `iota` and the
//! `jacfwd` seed, plugin ops declared with the same macros) runs inside a
//! [`Fused`] node: a small program over registers, evaluated block by block
//! in one pass over memory. A chain of such ops becomes one node; a lone one
//! is a program of one instruction, so one kernel runs every elementwise op.
//!
//! A node joins the group of its consumer when it has that consumer as its
//! only use and the consumer's shape (any dtype). Everything else a group
//! reads — smaller operands that broadcast, reductions, inputs — is a leaf,
//! read through broadcast strides. The kernel walks the output in blocks of
//! [`BLOCK`] to [`MAX_BLOCK`] elements (longer for programs with fewer
//! registers, [`Fused::block`]): it reads each leaf of the output's shape in place and
//! gathers each broadcast leaf's block into a small buffer, runs the
//! instructions over typed registers of one block, and writes the last one
//! straight into the output, so intermediates never leave the cache and are
//! never allocated at full size. Generators compute their block from its
//! position: a seed `I * v` never materialises `I`.
//!
//! A leaf that is a `reshape`, `slice` (a flip included) or `broadcast_to`
//! of another value, or a chain of them, is read from that value through
//! the composed offset and strides (`views.rs`): such movement ops
//! are no step of the plan and no copy.
//!
//! The grouping is a loop with an explicit stack, not a recursion, so a
//! chain of a hundred thousand ops compiles on a small thread stack.

use crate::buffers::Pooled;
use crate::strided::{broadcast_strides, fill_in_tasks, for_each_run, Strides};
use crate::views::{is_contiguous, View};
use crate::{register_kernel, Parallelism};
use anvil_core::{
    op::expect_arity, Block, BlockAt, BlockMut, DType, Error, Graph, Node, Op, Rebuilt, Result,
    Storage, Tensor, TensorType, ValueId,
};
use anvil_ops::reduce::{ReduceMax, ReduceMin, ReduceSum};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// Elements per block of the fused kernel, at least (and of the fused
/// reductions).
pub const BLOCK: usize = 512;

/// The most elements per block of the fused kernel: a program with few
/// registers takes longer blocks, up to this many (see [`Fused::block`]).
pub const MAX_BLOCK: usize = 4096;

/// Bytes of scratch registers per block that a program's block length
/// aims at (see [`Fused::block`]).
pub const SCRATCH_BYTES: usize = 256 << 10;

/// Operands read without an allocation per instruction.
const INLINE_ARGS: usize = 4;

/// One instruction of a fused program: an op applied to registers (the
/// leaves are registers `0..inputs`, instruction `j` writes `inputs + j`).
#[derive(Clone, Debug)]
pub struct Instr {
    /// The op (its block math and parameters).
    pub op: Box<dyn Op>,
    /// The registers it reads.
    pub args: Vec<usize>,
    /// The dtype of its result.
    pub dtype: DType,
    /// The backend's vectorised math for the op, if registered.
    fast: Option<crate::BlockMathFn>,
}

impl Instr {
    /// An instruction applying `op` to registers `args`, giving `dtype`.
    pub fn new(op: Box<dyn Op>, args: Vec<usize>, dtype: DType) -> Instr {
        let fast = crate::registered_math(op.as_ref());
        Instr { op, args, dtype, fast }
    }

    /// Runs the instruction on one block: the backend's vectorised math for
    /// the op if it handles these dtypes, else the op's own.
    pub(crate) fn eval(
        &self,
        args: &[Block<'_>],
        mut out: BlockMut<'_>,
        at: BlockAt<'_>,
    ) -> Result<()> {
        if let Some(fast) = self.fast {
            if fast(self.op.as_ref(), args, reborrow(&mut out), at)? {
                return Ok(());
            }
        }
        let math = self.op.elementwise_math().ok_or_else(|| {
            Error::invalid(self.op.name(), "fused", "an instruction without block math")
        })?;
        math.eval_block(args, out, at)
    }
}

/// The same block, borrowed again.
fn reborrow<'b>(out: &'b mut BlockMut<'_>) -> BlockMut<'b> {
    match out {
        BlockMut::F64(v) => BlockMut::F64(v),
        BlockMut::F32(v) => BlockMut::F32(v),
        BlockMut::I64(v) => BlockMut::I64(v),
        BlockMut::Bool(v) => BlockMut::Bool(v),
    }
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
    /// Where every register lives, worked out once from the static types.
    layout: Arc<Layout>,
}

/// The registers of a fused program laid out in scratch slots: gathered
/// leaves (those smaller than the output, read through broadcast strides),
/// then every instruction but the last.
#[derive(Debug)]
struct Layout {
    /// Per leaf: its broadcast strides and slot when it is gathered.
    leaves: Vec<Option<(Strides, Slot)>>,
    /// Per leaf: the offset of its first element (a leaf read through a
    /// [`View`]: a slice's start); 0 for the others.
    offsets: Vec<isize>,
    /// The leaves' types the layout was made for.
    types: Vec<TensorType>,
    /// Per gathered leaf of a small program (at most
    /// [`SMALL_GATHER_ELEMS`] elements): the source element of every
    /// output position, so a call gathers by index rather than walking
    /// the strides (computed once, when the program is built).
    indices: Vec<Option<Vec<usize>>>,
    /// Per instruction but the last: its slot.
    instrs: Vec<Slot>,
    /// Per instruction: where each of its operands is read (worked out
    /// once, so a block's dispatch looks nothing up).
    sources: Vec<Vec<Source>>,
    /// The gathered leaves of one element (spread once per task), and the
    /// others (gathered per block).
    scalar_leaves: Vec<usize>,
    block_leaves: Vec<usize>,
    /// Slots per dtype (f64, f32, i64, bool).
    counts: [usize; 4],
}

/// Where an instruction reads an operand: a scratch slot (a gathered leaf
/// or an earlier instruction's result), or a leaf of the output's shape
/// read in place.
#[derive(Clone, Copy, Debug)]
enum Source {
    Slot(Slot),
    InPlace(usize),
}

impl Fused {
    /// Elements per block: as many as keep the program's scratch registers
    /// within [`SCRATCH_BYTES`] (half of L2 here), a multiple of 64 from
    /// [`BLOCK`] to [`MAX_BLOCK`]. Each block pays a dispatch per
    /// instruction, a gather per broadcast leaf and a generator's setup; in
    /// blocks of 512, a program of one generator (W4's banded Jacobian, 4
    /// million elements) spent most of its time there. Runner A/B against
    /// blocks of 512 always: W4 0.43–0.53 ms a call against 0.92–1.04, W3
    /// 0.85–0.91 against 1.04–1.16 (fourteen registers: blocks of 2,304),
    /// W5 median 0.77 against 0.89 ms over eight rounds; the others within
    /// noise.
    pub fn block(&self) -> usize {
        let [f64s, f32s, i64s, bools] = self.layout.counts;
        let per_lane = 8 * (f64s + i64s) + 4 * f32s + bools;
        (SCRATCH_BYTES / per_lane.max(1) / 64 * 64).clamp(BLOCK, MAX_BLOCK)
    }

    /// A fused program over leaves of types `leaves`, with result `out`.
    pub fn new(program: Vec<Instr>, leaves: &[TensorType], out: TensorType) -> Fused {
        Fused::with_views(program, leaves, &vec![None; leaves.len()], out)
    }

    /// A fused program whose leaf `k` is read through `views[k]` when it is
    /// `Some` (strides over `out`'s shape; see [`crate::views`]): `leaves`
    /// are then the types of the views' sources.
    pub(crate) fn with_views(
        program: Vec<Instr>,
        leaves: &[TensorType],
        views: &[Option<View>],
        out: TensorType,
    ) -> Fused {
        let layout = Layout::new(&program, leaves, views, &out);
        Fused { inputs: leaves.len(), program: Arc::new(program), out, layout: Arc::new(layout) }
    }

    /// The same program laid out for other types of the same ranks (a
    /// program of symbolic shapes, run with one binding's sizes).
    fn for_types(&self, leaves: &[TensorType], out: &TensorType) -> Fused {
        Fused {
            inputs: self.inputs,
            program: self.program.clone(),
            out: out.clone(),
            layout: Arc::new(Layout::new(&self.program, leaves, &vec![None; leaves.len()], out)),
        }
    }
}

impl Layout {
    fn new(
        program: &[Instr],
        leaves: &[TensorType],
        views: &[Option<View>],
        out: &TensorType,
    ) -> Layout {
        let mut counts = [0usize; 4];
        let mut slot = |dtype: DType| {
            let k = dtype_index(dtype);
            counts[k] += 1;
            Slot { dtype, index: counts[k] - 1 }
        };
        // Symbolic shapes have no strides: such a layout only records the
        // types; every call lays the program out for its sizes.
        let symbolic = out.is_symbolic() || leaves.iter().any(TensorType::is_symbolic);
        let leaf_slots: Vec<Option<(Strides, Slot)>> = leaves
            .iter()
            .zip(views)
            .map(|(t, view)| match view {
                // A view of the output's order from the first element is read in place.
                Some(v)
                    if symbolic || (v.offset == 0 && is_contiguous(out.shape(), &v.strides)) =>
                {
                    None
                }
                Some(v) => Some((v.strides.clone(), slot(t.dtype()))),
                None => (t.shape() != out.shape() && !symbolic)
                    .then(|| (broadcast_strides(t.shape(), out.shape()), slot(t.dtype()))),
            })
            .collect();
        let offsets: Vec<isize> =
            views.iter().map(|v| v.as_ref().map_or(0, |v| v.offset)).collect();
        let small = !symbolic && out.numel() <= SMALL_GATHER_ELEMS;
        let indices = leaf_slots
            .iter()
            .zip(&offsets)
            .map(|(leaf, &offset)| match leaf {
                Some((strides, _)) if small => Some(gather_indices(out.shape(), strides, offset)),
                _ => None,
            })
            .collect();
        let last = program.len().saturating_sub(1);
        let instrs: Vec<Slot> = program[..last].iter().map(|i| slot(i.dtype)).collect();
        let inputs = leaves.len();
        let sources = program
            .iter()
            .map(|i| {
                i.args
                    .iter()
                    .map(|&a| match a.checked_sub(inputs) {
                        Some(r) => Source::Slot(instrs[r]),
                        None => match &leaf_slots[a] {
                            Some((_, slot)) => Source::Slot(*slot),
                            None => Source::InPlace(a),
                        },
                    })
                    .collect()
            })
            .collect();
        let gathered = |scalar: bool| -> Vec<usize> {
            (0..inputs)
                .filter(|&k| {
                    leaf_slots[k]
                        .as_ref()
                        .is_some_and(|(strides, _)| strides.iter().all(|&s| s == 0) == scalar)
                })
                .collect()
        };
        let (scalar_leaves, block_leaves) = (gathered(true), gathered(false));
        Layout {
            leaves: leaf_slots,
            offsets,
            types: leaves.to_vec(),
            indices,
            instrs,
            sources,
            scalar_leaves,
            block_leaves,
            counts,
        }
    }
}

/// Programs of at most this many output elements gather their broadcast
/// and viewed leaves through a table of indices (see [`Layout`]).
const SMALL_GATHER_ELEMS: usize = 256;

/// The source element `offset + Σ i_k strides[k]` of every position of
/// `shape`, in row-major order.
fn gather_indices(shape: &[usize], strides: &[isize], offset: isize) -> Vec<usize> {
    let n: usize = shape.iter().product();
    let mut out = Vec::with_capacity(n);
    for_each_run(shape, [strides], [offset], 0, n, |_, [o], [s], run| {
        out.extend((0..run as isize).map(|j| (o + j * s) as usize));
    });
    out
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

/// Whether a node is computed element by element.
fn is_elementwise(n: &Node) -> bool {
    n.num_results() == 1 && n.op.elementwise_math().is_some()
}

/// Replaces every elementwise node by a [`Fused`] node, merging chains of
/// them (see the module docs). Values, types and the signature are
/// unchanged.
///
/// # Errors
/// An invalid graph.
pub fn fuse(g: &Graph) -> Result<Graph> {
    // Movement ops moved before the pointwise ops they read, so those
    // join their reader's group (a few rounds: a chain of movement ops).
    let mut sunk: Option<Graph> = None;
    for _ in 0..4 {
        match crate::views::sink_views(sunk.as_ref().unwrap_or(g))? {
            Some(next) => sunk = Some(next),
            None => break,
        }
    }
    let fused = fuse_groups(sunk.as_ref().unwrap_or(g))?;
    // The movement ops now read as views by every reader are dropped.
    Ok(crate::views::drop_unread_views(&fused)?.unwrap_or(fused))
}

/// [`fuse`] before the movement ops read as views are dropped.
fn fuse_groups(g: &Graph) -> Result<Graph> {
    let elem: Vec<bool> = g.nodes().iter().map(is_elementwise).collect();
    let absorbed = absorbed(g, &elem);
    let (mut ends, merged) = chain_ends(g, &elem, &absorbed);
    // The reductions computed with their chain: their result in the new graph.
    let mut reduced: std::collections::HashMap<usize, ValueId> = Default::default();
    g.rebuild(|out, map, id, n, _| {
        if let Some(&v) = reduced.get(&id.index()) {
            return Ok(Rebuilt::Replace(vec![v]));
        }
        if let Some(end) = ends[id.index()].take() {
            // The chains end with reductions: one node computes them all
            // (emitted here, before any reader of the first chain; every
            // other chain's operands are computed before it).
            let inputs = end.leaves.iter().map(|&l| map.get(l)).collect::<Result<Vec<_>>>()?;
            let leaf_types: Vec<TensorType> = end.leaves.iter().map(|&l| g.ty(l).clone()).collect();
            let mut types: Vec<TensorType> = end.reductions.iter().map(|r| r.out.clone()).collect();
            if end.kept.is_some() {
                types.push(end.ty.clone());
            }
            let nodes: Vec<usize> = end.nodes.clone();
            let fr = FusedReduce {
                chain: Fused::new(end.program, &leaf_types, end.ty),
                reductions: end.reductions,
                dims: end.dims,
                kept: end.kept,
            };
            let node = out.push_node(Box::new(fr), inputs, types)?;
            let results: Vec<ValueId> = out.node(node).results().collect();
            for (k, &r) in nodes.iter().enumerate() {
                reduced.insert(r, results[k]);
            }
            return Ok(match results.get(nodes.len()) {
                // A merged chain's value, kept: that chain's node reads it.
                Some(&chain) if end.kept_node != id.index() => {
                    reduced.insert(end.kept_node, chain);
                    Rebuilt::Drop
                }
                Some(&chain) => Rebuilt::Replace(vec![chain]),
                None => Rebuilt::Drop,
            });
        }
        if !elem[id.index()] {
            return Ok(Rebuilt::Copy);
        }
        if absorbed[id.index()] || merged[id.index()] {
            return Ok(Rebuilt::Drop);
        }
        let (mut leaves, program) = group(g, n, &absorbed);
        let ty = g.ty(n.out()).clone();
        // Leaves that are movement ops of other values are read through
        // views of those (a chain ending in a reduction, emitted above,
        // reads its leaves as they are).
        let mut views = vec![None; leaves.len()];
        if !ty.is_symbolic() {
            for (leaf, view) in leaves.iter_mut().zip(&mut views) {
                if let Some((source, v)) = crate::views::leaf_view(g, *leaf, ty.shape()) {
                    (*leaf, *view) = (source, Some(v));
                }
            }
        }
        let inputs = leaves.iter().map(|&l| map.get(l)).collect::<Result<Vec<_>>>()?;
        let leaf_types: Vec<TensorType> = leaves.iter().map(|&l| g.ty(l).clone()).collect();
        let op = Fused::with_views(program, &leaf_types, &views, ty.clone());
        let node = out.push_node(Box::new(op), inputs, vec![ty])?;
        Ok(Rebuilt::Replace(vec![out.node(node).out()]))
    })
}

/// Which nodes are computed inside their consumer's group: an elementwise
/// node whose one value has one reader, an elementwise node of its shape,
/// and is not an output. A generator (an elementwise op without operands:
/// a seed, an iota) is cheap to recompute, so it is absorbed into every
/// group that reads it, however many there are; so is a cheap op over
/// materialised values read by at most [`MAX_RECOMPUTE`] such groups.
fn absorbed(g: &Graph, elem: &[bool]) -> Vec<bool> {
    // The one node reading each value, if exactly one does (an operand read
    // twice by the same node, as in `x * x`, still has one reader).
    let mut consumer: Vec<Option<usize>> = vec![None; g.num_values()];
    let mut shared = vec![false; g.num_values()];
    let mut same_shape_readers = vec![true; g.num_values()];
    // Whether a node and every elementwise node it reads, back to the
    // materialised values, compute each element from the operands'
    // elements at its position only (no generator that reads its
    // position): such a chain gives the same values computed at the
    // positions of a larger reader.
    // (One that reads no argument is left to be computed once, when the
    // plan is built.)
    let live = crate::views::reads_arguments(g);
    let mut pure = vec![false; g.len()];
    for (id, n) in g.iter() {
        pure[id.index()] = elem[id.index()]
            && n.results().all(|v| live[v.index()])
            && !n.inputs.is_empty()
            && n.op.is_elementwise()
            && n.inputs.iter().all(|&i| {
                let p = g.producer(i).0.index();
                !elem[p] || pure[p]
            });
    }
    for (id, n) in g.iter() {
        for &i in &n.inputs {
            match consumer[i.index()] {
                Some(c) if c != id.index() => shared[i.index()] = true,
                _ => consumer[i.index()] = Some(id.index()),
            }
            same_shape_readers[i.index()] &= elem[id.index()]
                && (g.ty(n.out()).shape() == g.ty(i).shape()
                    || (pure[g.producer(i).0.index()] && small_broadcast(g.ty(i), g.ty(n.out()))));
        }
    }
    for o in g.outputs() {
        shared[o.index()] = true;
    }
    let readers = reader_counts(g);
    let single: Vec<bool> = g
        .iter()
        .map(|(id, n)| {
            if !elem[id.index()] {
                return false;
            }
            let v = n.out().index();
            if n.inputs.is_empty() && consumer[v].is_some() {
                !g.outputs().contains(&n.out()) && same_shape_readers[v]
            } else {
                !shared[v] && consumer[v].is_some_and(|c| elem[c] && same_shape_readers[v])
            }
        })
        .collect();
    // A cheap op over values that are materialised anyway (one instruction,
    // no vectorised transcendental math), read by a few elementwise groups
    // of its shape, is recomputed in each of them rather than written out
    // and read back when that reads and writes less: `p = e / s` read by
    // three groups costs three divisions, not a pass over memory.
    g.iter()
        .map(|(id, n)| {
            if single[id.index()] {
                return true;
            }
            let v = n.out();
            // Written once and read by each group, against each group
            // reading the operands of the value's size: recompute when the
            // latter moves fewer bytes.
            let k = readers[v.index()];
            let full = n.inputs.iter().filter(|&&i| g.ty(i).shape() == g.ty(v).shape()).count();
            elem[id.index()]
                && !n.inputs.is_empty()
                && (2..=MAX_RECOMPUTE).contains(&k)
                && k * full < 1 + k + full
                && same_shape_readers[v.index()]
                && !g.outputs().contains(&v)
                && n.inputs.iter().all(|&i| !single[g.producer(i).0.index()])
                && crate::registered_math(n.op.as_ref()).is_none()
        })
        .collect()
}

/// Whether a pointwise value of type `ty` (a chain of ops with
/// [`Op::is_elementwise`], see `pure` in [`absorbed`]) read through a
/// broadcast by a group of type `out` is computed again at every position
/// of the group rather than as a step of its own: `out` holds at most
/// [`SMALL_BROADCAST_ELEMS`](crate::views::SMALL_BROADCAST_ELEMS)
/// elements (a step costs more than recomputing so few) and `ty`
/// broadcasts to it.
fn small_broadcast(ty: &TensorType, out: &TensorType) -> bool {
    !ty.is_symbolic()
        && !out.is_symbolic()
        && out.numel() <= crate::views::SMALL_BROADCAST_ELEMS
        && ty.rank() <= out.rank()
        && ty.shape().iter().rev().zip(out.shape().iter().rev()).all(|(&a, &b)| a == b || a == 1)
}

/// How many nodes read each value (a node reading it twice counts once).
fn reader_counts(g: &Graph) -> Vec<usize> {
    let mut readers = vec![0usize; g.num_values()];
    for (_, n) in g.iter() {
        for (k, &i) in n.inputs.iter().enumerate() {
            if !n.inputs[..k].contains(&i) {
                readers[i.index()] += 1;
            }
        }
    }
    readers
}

/// The most groups a cheap shared op is recomputed in (see [`absorbed`]).
const MAX_RECOMPUTE: usize = 4;

/// The leaves and the program of the group whose result is `root`'s:
/// absorbed producers first (post-order, each once), with an explicit
/// stack.
fn group(g: &Graph, root: &Node, absorbed: &[bool]) -> (Vec<ValueId>, Vec<Instr>) {
    let p = group_many(g, &[root.out()], &[], absorbed);
    (p.leaves, p.program)
}

/// One program computing several groups (see [`group_many`]).
struct Program {
    /// The values read (registers `0..leaves.len()`).
    leaves: Vec<ValueId>,
    /// The instructions (instruction `j` writes register `leaves.len() + j`).
    program: Vec<Instr>,
    /// The register of each root, then of each extra value.
    regs: Vec<usize>,
    /// The nodes the program computes.
    members: Vec<usize>,
}

/// The program computing the groups whose results are `roots` (values of
/// elementwise nodes that are not absorbed) in turn: each group's absorbed
/// producers first (post-order, each once, shared between the groups), then
/// its root, so the last instruction is the last root's. A root read by a
/// later group is its register there, not a leaf. Each of `extra` is a leaf
/// (or the register of an instruction computing it). An explicit stack.
fn group_many(g: &Graph, roots: &[ValueId], extra: &[ValueId], absorbed: &[bool]) -> Program {
    let mut leaves: Vec<ValueId> = Vec::new();
    // Registers of emitted instructions, by value; leaves are tagged until
    // their count is known.
    let mut reg: std::collections::HashMap<ValueId, usize> = std::collections::HashMap::new();
    let mut program: Vec<Instr> = Vec::new();
    let mut members: Vec<usize> = Vec::new();
    let absorbed_value = |v: ValueId| absorbed[g.producer(v).0.index()];
    let leaf = |leaves: &mut Vec<ValueId>, i: ValueId| {
        LEAF_TAG
            + leaves.iter().position(|&l| l == i).unwrap_or_else(|| {
                leaves.push(i);
                leaves.len() - 1
            })
    };
    for &root in roots {
        // (value, whether its operands are done)
        let mut stack: Vec<(ValueId, bool)> = vec![(root, false)];
        while let Some((v, ready)) = stack.pop() {
            if reg.contains_key(&v) {
                continue;
            }
            let n = g.producer_node(v);
            if !ready {
                stack.push((v, true));
                for &i in n.inputs.iter().rev() {
                    if absorbed_value(i) && !reg.contains_key(&i) {
                        stack.push((i, false));
                    }
                }
                continue;
            }
            let args = n
                .inputs
                .iter()
                .map(|&i| match reg.get(&i) {
                    Some(&r) => r,
                    None => leaf(&mut leaves, i),
                })
                .collect();
            program.push(Instr::new(n.op.clone(), args, g.ty(v).dtype()));
            reg.insert(v, program.len() - 1);
            members.push(g.producer(v).0.index());
        }
    }
    let mut regs: Vec<usize> = roots.iter().map(|r| reg[r]).collect();
    for &e in extra {
        let r = match reg.get(&e) {
            Some(&r) => r,
            None => leaf(&mut leaves, e),
        };
        regs.push(r);
    }
    // Registers: leaves first, then instructions.
    let shift = leaves.len();
    let renumber = |a: &mut usize| *a = if *a >= LEAF_TAG { *a - LEAF_TAG } else { *a + shift };
    for instr in &mut program {
        instr.args.iter_mut().for_each(renumber);
    }
    regs.iter_mut().for_each(renumber);
    Program { leaves, program, regs, members }
}

/// Leaf registers are tagged while the program is built (their final
/// numbers are known only at the end).
const LEAF_TAG: usize = usize::MAX / 2;

/// The scratch of one chunk: every register of the program (gathered
/// leaves first, then every instruction but the last) as a slot of `width`
/// elements in one buffer per dtype, so a chunk allocates at most four
/// times whatever the program's length.
#[derive(Default)]
struct Scratch {
    f64: Vec<f64>,
    f32: Vec<f32>,
    i64: Vec<i64>,
    bool: Vec<bool>,
    width: usize,
}

/// Where a register lives: its dtype's buffer and its slot there.
#[derive(Clone, Copy, Debug)]
struct Slot {
    dtype: DType,
    index: usize,
}

/// Read access to the slots before a point (see [`Scratch::split`]).
struct Readers<'a> {
    f64: &'a [f64],
    f32: &'a [f32],
    i64: &'a [i64],
    bool: &'a [bool],
    width: usize,
}

impl<'a> Readers<'a> {
    fn block(&self, s: Slot, len: usize) -> Block<'a> {
        let at = s.index * self.width;
        match s.dtype {
            DType::F64 => Block::F64(&self.f64[at..at + len]),
            DType::F32 => Block::F32(&self.f32[at..at + len]),
            DType::I64 => Block::I64(&self.i64[at..at + len]),
            DType::Bool => Block::Bool(&self.bool[at..at + len]),
        }
    }
}

/// Scratch kept for the thread's next fused call (at most this many
/// bytes): a small program's call then allocates only its result.
const SPARE_BYTES: usize = 256 * 1024;

thread_local! {
    static SPARE: std::cell::RefCell<Option<Scratch>> = const { std::cell::RefCell::new(None) };
}

impl Scratch {
    /// [`Scratch::new`], reusing the buffers the thread's previous call
    /// gave back ([`Scratch::give_back`]); their contents are unspecified
    /// (every slot is written before it is read).
    fn reuse(counts: [usize; 4], width: usize) -> Scratch {
        match SPARE.with(|s| s.borrow_mut().take()) {
            Some(mut s) => {
                // Grown to the size asked, not doubled: the block lengths
                // aim at SCRATCH_BYTES, and a buffer over SPARE_BYTES
                // would not be kept for the next call. Never shortened:
                // slots are addressed from the start, so a longer buffer
                // serves, and programs of other sizes taking turns on a
                // thread (W8's Newton step) then zero nothing.
                fn fit<T: Clone>(v: &mut Vec<T>, n: usize, zero: T) {
                    if v.capacity() < n {
                        v.clear();
                        v.reserve_exact(n);
                    }
                    if v.len() < n {
                        v.resize(n, zero);
                    }
                }
                fit(&mut s.f64, counts[0] * width, 0.0);
                fit(&mut s.f32, counts[1] * width, 0.0);
                fit(&mut s.i64, counts[2] * width, 0);
                fit(&mut s.bool, counts[3] * width, false);
                s.width = width;
                s
            }
            None => Scratch::new(counts, width),
        }
    }

    /// Keeps the buffers for the thread's next call, if they are small.
    fn give_back(self) {
        let bytes = self.f64.capacity() * 8
            + self.f32.capacity() * 4
            + self.i64.capacity() * 8
            + self.bool.capacity();
        if bytes <= SPARE_BYTES {
            SPARE.with(|s| *s.borrow_mut() = Some(self));
        }
    }

    /// Slots of `width` elements, `counts` of each dtype.
    fn new(counts: [usize; 4], width: usize) -> Scratch {
        Scratch {
            f64: crate::buffers::small(counts[0] * width, 0.0),
            f32: crate::buffers::small(counts[1] * width, 0.0),
            i64: crate::buffers::small(counts[2] * width, 0),
            bool: crate::buffers::small(counts[3] * width, false),
            width,
        }
    }

    /// The block of `len` elements of slot `s`, to write, and read access to
    /// every slot before it of its dtype (and to every slot of the others).
    fn split(&mut self, s: Slot, len: usize) -> (Readers<'_>, BlockMut<'_>) {
        let at = s.index * self.width;
        let w = self.width;
        match s.dtype {
            DType::F64 => {
                let (r, w_) = self.f64.split_at_mut(at);
                let rd =
                    Readers { f64: r, f32: &self.f32, i64: &self.i64, bool: &self.bool, width: w };
                (rd, BlockMut::F64(&mut w_[..len]))
            }
            DType::F32 => {
                let (r, w_) = self.f32.split_at_mut(at);
                let rd =
                    Readers { f64: &self.f64, f32: r, i64: &self.i64, bool: &self.bool, width: w };
                (rd, BlockMut::F32(&mut w_[..len]))
            }
            DType::I64 => {
                let (r, w_) = self.i64.split_at_mut(at);
                let rd =
                    Readers { f64: &self.f64, f32: &self.f32, i64: r, bool: &self.bool, width: w };
                (rd, BlockMut::I64(&mut w_[..len]))
            }
            DType::Bool => {
                let (r, w_) = self.bool.split_at_mut(at);
                let rd =
                    Readers { f64: &self.f64, f32: &self.f32, i64: &self.i64, bool: r, width: w };
                (rd, BlockMut::Bool(&mut w_[..len]))
            }
        }
    }

    /// Read access to every slot.
    fn readers(&self) -> Readers<'_> {
        Readers {
            f64: &self.f64,
            f32: &self.f32,
            i64: &self.i64,
            bool: &self.bool,
            width: self.width,
        }
    }
}

fn dtype_index(d: DType) -> usize {
    match d {
        DType::F64 => 0,
        DType::F32 => 1,
        DType::I64 => 2,
        DType::Bool => 3,
    }
}

/// Copies `dst.len()` elements of `data` read from `o` with stride `s`.
fn copy_run<T: Copy>(data: &[T], o: isize, s: isize, dst: &mut [T]) {
    if s == 1 {
        dst.copy_from_slice(&data[o as usize..o as usize + dst.len()]);
    } else if s == 0 {
        dst.fill(data[o as usize]);
    } else {
        for (j, d) in dst.iter_mut().enumerate() {
            *d = data[(o + j as isize * s) as usize];
        }
    }
}

/// Gathers the block `from..from + len` of a broadcast leaf into `dst`.
fn gather_block(
    storage: &Storage,
    offset: isize,
    strides: &Strides,
    shape: &[usize],
    from: usize,
    dst: BlockMut<'_>,
) {
    let len = dst.len();
    macro_rules! run {
        ($data:expr, $buf:expr) => {
            for_each_run(shape, [strides], [offset], from, from + len, |pos, [o], [s], run| {
                copy_run($data, o, s, &mut $buf[pos - from..pos - from + run]);
            })
        };
    }
    match (storage, dst) {
        (Storage::F64(d), BlockMut::F64(b)) => run!(d, b),
        (Storage::F32(d), BlockMut::F32(b)) => run!(d, b),
        (Storage::I64(d), BlockMut::I64(b)) => run!(d, b),
        (Storage::Bool(d), BlockMut::Bool(b)) => run!(d, b),
        _ => {}
    }
}

/// Gathers the elements `idx` of a leaf into `dst`.
fn gather_indexed(storage: &Storage, idx: &[usize], dst: BlockMut<'_>) {
    fn copy<T: Copy>(data: &[T], idx: &[usize], dst: &mut [T]) {
        for (d, &i) in dst.iter_mut().zip(idx) {
            *d = data[i];
        }
    }
    match (storage, dst) {
        (Storage::F64(d), BlockMut::F64(b)) => copy(d, idx, b),
        (Storage::F32(d), BlockMut::F32(b)) => copy(d, idx, b),
        (Storage::I64(d), BlockMut::I64(b)) => copy(d, idx, b),
        (Storage::Bool(d), BlockMut::Bool(b)) => copy(d, idx, b),
        _ => {}
    }
}

/// A block of a leaf of the output's shape, read in place.
pub(crate) fn in_place(storage: &Storage, from: usize, len: usize) -> Block<'_> {
    match storage {
        Storage::F64(v) => Block::F64(&v[from..from + len]),
        Storage::F32(v) => Block::F32(&v[from..from + len]),
        Storage::I64(v) => Block::I64(&v[from..from + len]),
        Storage::Bool(v) => Block::Bool(&v[from..from + len]),
    }
}

/// The kernel of [`Fused`]: every elementwise op runs through it.
///
/// # Errors
/// Wrong operands (a bug in fusion), or an op's block math rejecting its
/// dtypes.
pub fn fused(
    op: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    ctx: &Parallelism,
) -> Result<Tensor> {
    let f = op.try_downcast::<Fused>()?;
    expect_arity(op, inputs, f.inputs)?;
    if f.program.is_empty() {
        return Err(Error::invalid("fused", "program", "a fused group without instructions"));
    }
    let storage = match out.dtype() {
        DType::F64 => run_program::<f64>(f, inputs, out, ctx)?,
        DType::F32 => run_program::<f32>(f, inputs, out, ctx)?,
        DType::I64 => run_program::<i64>(f, inputs, out, ctx)?,
        DType::Bool => run_program::<bool>(f, inputs, out, ctx)?,
    };
    Tensor::from_storage(storage, out.shape())
}

/// Runs the program into a fresh (pooled) buffer of the output's dtype `T`.
fn run_program<T: Pooled + Send>(
    f: &Fused,
    inputs: &[&Tensor],
    out: &TensorType,
    ctx: &Parallelism,
) -> Result<Storage> {
    // The layout was made for these types; other ones would read out of bounds.
    let fits = out.shape() == f.out.shape()
        && inputs
            .iter()
            .zip(&f.layout.types)
            .all(|(t, ty)| t.dtype() == ty.dtype() && t.shape() == ty.shape());
    if !fits && (f.out.is_symbolic() || f.layout.types.iter().any(TensorType::is_symbolic)) {
        // Laid out for symbolic shapes: lay it out for this call's sizes.
        let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
        let bound = f.for_types(&types, out);
        if types.iter().zip(&f.layout.types).all(|(t, s)| t.rank() == s.rank())
            && out.rank() == f.out.rank()
        {
            return run_program::<T>(&bound, inputs, out, ctx);
        }
    }
    if !fits {
        return Err(Error::invalid(
            "fused",
            "inputs",
            "operands of other types than the program was built for",
        ));
    }
    let mut result: Vec<T> = crate::buffers::take(out.numel());
    if !ctx.parallel(result.len()) {
        // One task on this thread (every small call): no error slot to share.
        run_task(f, inputs, out.shape(), &mut result, 0)?;
        return Ok(T::into_storage(result));
    }
    let error: std::sync::Mutex<Option<Error>> = std::sync::Mutex::new(None);
    fill_in_tasks(&mut result, ctx, |task, start| {
        if let Err(e) = run_task(f, inputs, out.shape(), task, start) {
            if let Ok(mut slot) = error.lock() {
                slot.get_or_insert(e);
            }
        }
    });
    if let Some(e) = error.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner) {
        return Err(e);
    }
    Ok(T::into_storage(result))
}

/// Evaluates the program over `task` (which starts at flat index `start`),
/// block by block.
fn run_task<T: Pooled>(
    f: &Fused,
    inputs: &[&Tensor],
    shape: &[usize],
    task: &mut [T],
    start: usize,
) -> Result<()> {
    let block = f.block();
    let width = block.min(task.len());
    let mut scratch = Scratch::reuse(f.layout.counts, width);
    // A leaf of one element (all strides 0) is the same in every block:
    // spread once per task.
    gather_leaves(f, inputs, shape, &mut scratch, start, width, true);
    let mut at = 0;
    while at < task.len() {
        let len = block.min(task.len() - at);
        gather_leaves(f, inputs, shape, &mut scratch, start + at, len, false);
        run_block(
            f,
            inputs,
            shape,
            &mut scratch,
            start + at,
            T::block_mut(&mut task[at..at + len]),
        )?;
        at += len;
    }
    scratch.give_back();
    Ok(())
}

/// Gathers the broadcast leaves of one dimension kind (`scalar`: of one
/// element) into their slots, for the block `from..from + len`.
fn gather_leaves(
    f: &Fused,
    inputs: &[&Tensor],
    shape: &[usize],
    scratch: &mut Scratch,
    from: usize,
    len: usize,
    scalar: bool,
) {
    let layout = &f.layout;
    let which = if scalar { &layout.scalar_leaves } else { &layout.block_leaves };
    for &k in which {
        let Some((strides, slot)) = &layout.leaves[k] else { continue };
        let (_, dst) = scratch.split(*slot, len);
        let storage = inputs[k].storage();
        match layout.indices.get(k).and_then(Option::as_ref) {
            Some(idx) => gather_indexed(storage, &idx[from..from + len], dst),
            None => gather_block(storage, layout.offsets[k], strides, shape, from, dst),
        }
    }
}

/// Runs every instruction on the block starting at `from`; the last one
/// writes `out`.
fn run_block(
    f: &Fused,
    inputs: &[&Tensor],
    shape: &[usize],
    scratch: &mut Scratch,
    from: usize,
    mut out: BlockMut<'_>,
) -> Result<()> {
    let (last, len, layout) = (f.program.len() - 1, out.len(), &f.layout);
    let place = BlockAt { start: from, shape };
    for (j, (instr, sources)) in f.program.iter().zip(&layout.sources).enumerate() {
        let (readers, dst) = if j == last {
            (scratch.readers(), reborrow(&mut out))
        } else {
            scratch.split(layout.instrs[j], len)
        };
        let src = |s: &Source| -> Block<'_> {
            match *s {
                Source::Slot(slot) => readers.block(slot, len),
                Source::InPlace(a) => in_place(inputs[a].storage(), from, len),
            }
        };
        crate::gathered::<_, _, INLINE_ARGS>(
            sources.len(),
            |k| Ok(src(&sources[k])),
            |args| instr.eval(args, dst, place),
        )?;
    }
    Ok(())
}

register_kernel!(Fused, fused);
crate::register_thread_invariant!(Fused);

/// Whether an op type is one the CPU compiler makes itself ([`Fused`],
/// [`FusedReduce`], [`crate::placement::PlacedScan`],
/// [`crate::lane_prelude::LaneWhile`]):
/// such ops never appear in a user's or a transform's graph, so they need
/// no rules and no conformance samples.
pub fn is_internal(op_type: std::any::TypeId) -> bool {
    op_type == std::any::TypeId::of::<Fused>()
        || op_type == std::any::TypeId::of::<FusedReduce>()
        || crate::placement::is_placed_scan(op_type)
        || op_type == std::any::TypeId::of::<crate::lane_prelude::LaneWhile>()
}

/// Fused elementwise chains ended by reductions over the same consecutive
/// axes of one shape, evaluated in one pass: the program runs block by
/// block as in [`Fused`] and each reduction folds its own register of every
/// block into its result at once, so the chains' values are never
/// materialised — except the first chain's when it is read elsewhere too:
/// it is then the last result, written in the same pass.
///
/// One reduction ending one chain is the common case (`sum(exp(x - m))`);
/// several are sibling reductions whose chains read the same values
/// (`Σ e` and `Σ w·e` in softmax's value and gradient), merged by
/// [`fuse`] so their operands are read once. A reduced register may also
/// be a leaf of the chain's shape (`Σ w` beside `Σ exp(x - m)`).
///
/// Each reduction folds its elements in the order of the unfused
/// `sum`/`reduce_max`/`reduce_min` kernels, so results are bit-identical to
/// the unfused graph's.
#[derive(Clone, Debug)]
pub struct FusedReduce {
    /// The program (every reduced register has the shape of `chain.out`
    /// and its dtype).
    pub chain: Fused,
    /// The reductions, in the order of their results.
    pub reductions: Vec<ChainReduction>,
    /// The chain's shape as `[outer, reduced, inner]`.
    pub dims: (usize, usize, usize),
    /// The register whose value is the last result, if any.
    pub kept: Option<usize>,
}

/// One reduction of a [`FusedReduce`].
#[derive(Clone, Debug)]
pub struct ChainReduction {
    /// The reduction: its [`Op::reduction_math`] combines the register's
    /// elements.
    pub op: Box<dyn Op>,
    /// The register of the program it folds.
    pub register: usize,
    /// The type of its result.
    pub out: TensorType,
}

impl PartialEq for ChainReduction {
    fn eq(&self, other: &ChainReduction) -> bool {
        self.register == other.register
            && self.out == other.out
            && self.op.dyn_eq(other.op.as_any())
    }
}
impl Eq for ChainReduction {}
impl Hash for ChainReduction {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.register.hash(state);
        self.op.dyn_hash(state);
    }
}

impl PartialEq for FusedReduce {
    fn eq(&self, other: &FusedReduce) -> bool {
        self.chain == other.chain
            && self.kept == other.kept
            && self.dims == other.dims
            && self.reductions == other.reductions
    }
}
impl Eq for FusedReduce {}
impl Hash for FusedReduce {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.chain.hash(state);
        self.kept.hash(state);
        self.dims.hash(state);
        self.reductions.hash(state);
    }
}

impl Op for FusedReduce {
    fn name(&self) -> &'static str {
        "fused_reduce"
    }
    fn infer_results(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_arity(self, inputs, self.chain.inputs)?;
        let mut types: Vec<TensorType> = self.reductions.iter().map(|r| r.out.clone()).collect();
        if self.kept.is_some() {
            types.push(self.chain.out.clone());
        }
        Ok(types)
    }
    fn params(&self) -> String {
        let (o, r, i) = self.dims;
        let reds: Vec<String> = self
            .reductions
            .iter()
            .map(|c| format!("{} over [{o}, {r}, {i}] of r{}", c.op.name(), c.register))
            .collect();
        let kept = self.kept.map_or_else(|| "none".to_string(), |k| format!("r{k}"));
        format!("{}, kept={kept}; {}", reds.join(", "), self.chain.params())
    }
}

/// The reductions computed in one pass with the chains they end (see
/// [`chain_ends`]), by the first chain's root node.
struct ChainEnd {
    /// The program's leaves and instructions.
    leaves: Vec<ValueId>,
    program: Vec<Instr>,
    /// The reductions, and their nodes in the graph (in the same order).
    reductions: Vec<ChainReduction>,
    nodes: Vec<usize>,
    dims: (usize, usize, usize),
    /// The register of the chain value read elsewhere, if one is.
    kept: Option<usize>,
    /// The node whose value the kept register is (the host's, or a merged
    /// chain's).
    kept_node: usize,
    /// The chains' type.
    ty: TensorType,
}

/// A reduction that may be computed in the pass of a fused chain: an op
/// with [`Op::reduction_math`], of a float dtype, over consecutive axes of
/// a static shape.
struct Candidate {
    node: usize,
    operand: ValueId,
    dims: (usize, usize, usize),
    /// Whether its operand is the root of a fused group with operands.
    chain: bool,
}

/// A fused group whose value is reduced, and its reductions of the first
/// one's axes.
struct EndGroup {
    root: usize,
    value: ValueId,
    reductions: Vec<usize>,
    merged: bool,
}

/// Finds the reductions computed in the pass of the fused chain they end,
/// by that chain's root node, and the roots of the chains merged into
/// another's pass (their nodes emit nothing).
///
/// Every reduction whose operand is the root of a fused group (with
/// operands) ends that group. The groups' reductions of the same axes of
/// the same shape and dtype are then merged into the earliest group's pass
/// — sibling reductions such as `Σ e` and `Σ w·e` — when the later group's
/// value is read only by its reductions and every value it reads is
/// computed before the earliest group's root (or is that root's value,
/// then a register); so is a reduction of such a value read as it is (`Σ
/// w` of an input `w`), when it comes after that root.
fn chain_ends(g: &Graph, elem: &[bool], absorbed: &[bool]) -> (Vec<Option<ChainEnd>>, Vec<bool>) {
    let readers = reader_counts(g);
    let mut cands: Vec<Candidate> = Vec::new();
    for (id, n) in g.iter() {
        let Some(math) = n.op.reduction_math() else { continue };
        let [v] = n.inputs[..] else { continue };
        let (ty, out) = (g.ty(v), g.ty(n.out()));
        let ok = matches!(ty.dtype(), DType::F64 | DType::F32)
            && !ty.is_symbolic()
            && !out.is_symbolic()
            && out.dtype() == ty.dtype();
        if !ok {
            continue;
        }
        let Some(dims) = consecutive(ty.shape(), math.axes()) else { continue };
        let p = g.producer(v).0.index();
        let chain = elem[p] && !absorbed[p] && !g.producer_node(v).inputs.is_empty();
        cands.push(Candidate { node: id.index(), operand: v, dims, chain });
    }
    // The groups, by their root's position (a group's reductions over other
    // axes than its first one's read its value as it is).
    let mut groups: Vec<EndGroup> = Vec::new();
    let mut by_root: std::collections::HashMap<usize, usize> = Default::default();
    let mut loose: Vec<usize> = Vec::new();
    for (k, c) in cands.iter().enumerate() {
        let root = g.producer(c.operand).0.index();
        if !c.chain {
            loose.push(k);
        } else if let Some(&gi) = by_root.get(&root) {
            if cands[groups[gi].reductions[0]].dims == c.dims {
                groups[gi].reductions.push(k);
            } else {
                loose.push(k);
            }
        } else {
            by_root.insert(root, groups.len());
            groups.push(EndGroup { root, value: c.operand, reductions: vec![k], merged: false });
        }
    }
    groups.sort_by_key(|e| e.root);
    let mut loose_used = vec![false; loose.len()];
    let mut ends: Vec<Option<ChainEnd>> = (0..g.len()).map(|_| None).collect();
    let mut merged = vec![false; g.len()];
    for a in 0..groups.len() {
        if groups[a].merged {
            continue;
        }
        let host = groups[a].root;
        let ty = g.ty(groups[a].value).clone();
        let dims = cands[groups[a].reductions[0]].dims;
        let fits = |c: &Candidate| c.dims == dims && g.ty(c.operand) == &ty;
        let mut roots = vec![groups[a].value];
        let mut reds = groups[a].reductions.clone();
        let (_, later) = groups.split_at_mut(a + 1);
        let joins = |e: &EndGroup, roots: &[ValueId]| {
            !e.merged && fits(&cands[e.reductions[0]]) && {
                let leaves = group_many(g, &[e.value], &[], absorbed).leaves;
                leaves.iter().all(|&l| g.producer(l).0.index() < host || roots.contains(&l))
            }
        };
        let mut joined: Vec<usize> = Vec::new();
        for (j, e) in later.iter().enumerate() {
            let alone =
                !g.outputs().contains(&e.value) && readers[e.value.index()] == e.reductions.len();
            if alone && joins(e, &roots) {
                roots.push(e.value);
                reds.extend_from_slice(&e.reductions);
                joined.push(j);
            }
        }
        // One more chain read elsewhere too (`exp(y)` beside `Σ y`, read by
        // a gradient) joins when the pass keeps its value instead of the
        // host's, which nothing else then reads.
        let mut kept_by: Option<(usize, usize)> = None;
        for (j, e) in later.iter().enumerate() {
            if joined.contains(&j) || !joins(e, &roots) {
                continue;
            }
            let mut with = roots.clone();
            with.push(e.value);
            let mut nodes: Vec<usize> = reds.iter().map(|&k| cands[k].node).collect();
            nodes.extend(e.reductions.iter().map(|&k| cands[k].node));
            let members = group_many(g, &with, &[], absorbed).members;
            if read_only_inside(g, &members, &nodes, e.root) {
                roots.push(e.value);
                reds.extend_from_slice(&e.reductions);
                joined.push(j);
                kept_by = Some((e.root, roots.len() - 1));
                break;
            }
        }
        for &j in &joined {
            merged[later[j].root] = true;
            later[j].merged = true;
        }
        let mut extra = Vec::new();
        for (k, &c) in loose.iter().enumerate() {
            let c = &cands[c];
            if !loose_used[k] && fits(c) && c.node > host && g.producer(c.operand).0.index() < host
            {
                loose_used[k] = true;
                extra.push(loose[k]);
            }
        }
        let values: Vec<ValueId> = extra.iter().map(|&k| cands[k].operand).collect();
        let prog = group_many(g, &roots, &values, absorbed);
        let mut reductions = Vec::new();
        let mut nodes = Vec::new();
        for &k in &reds {
            let c = &cands[k];
            let root = roots.iter().position(|&r| r == c.operand).unwrap_or(0);
            reductions.push(reduction(g, c, prog.regs[root]));
            nodes.push(c.node);
        }
        for (j, &k) in extra.iter().enumerate() {
            reductions.push(reduction(g, &cands[k], prog.regs[roots.len() + j]));
            nodes.push(cands[k].node);
        }
        let (kept, kept_node) = match kept_by {
            Some((node, root)) => (Some(prog.regs[root]), node),
            None => (read_elsewhere(g, &prog.members, &nodes, host).then_some(prog.regs[0]), host),
        };
        let Program { leaves, program, .. } = prog;
        ends[host] =
            Some(ChainEnd { leaves, program, reductions, nodes, dims, kept, kept_node, ty });
    }
    (ends, merged)
}

/// The [`ChainReduction`] of candidate `c` folding register `register`.
fn reduction(g: &Graph, c: &Candidate, register: usize) -> ChainReduction {
    let n = &g.nodes()[c.node];
    ChainReduction { op: n.op.clone(), register, out: g.ty(n.out()).clone() }
}

/// Whether the value of node `host` is read outside a program computing the
/// nodes `members` and the reductions `reductions`: by another node, or by
/// a member whose value is itself read outside (a cheap op recomputed in
/// other groups too), or as an output.
fn read_elsewhere(g: &Graph, members: &[usize], reductions: &[usize], host: usize) -> bool {
    let mut users: std::collections::HashMap<usize, Vec<usize>> = Default::default();
    let inside: std::collections::HashSet<usize> = members.iter().copied().collect();
    for (id, n) in g.iter().skip(host) {
        for &i in &n.inputs {
            let p = g.producer(i).0.index();
            if inside.contains(&p) {
                users.entry(p).or_default().push(id.index());
            }
        }
    }
    // Whether each member's value is only read inside, latest first (a
    // node's readers come after it).
    let mut only_inside: std::collections::HashMap<usize, bool> = Default::default();
    let mut sorted: Vec<usize> = members.to_vec();
    sorted.sort_unstable();
    for &m in sorted.iter().rev() {
        let v = g.nodes()[m].out();
        let ok =
            !g.outputs().contains(&v)
                && users.get(&m).into_iter().flatten().all(|r| {
                    reductions.contains(r) || only_inside.get(r).copied().unwrap_or(false)
                });
        only_inside.insert(m, ok);
    }
    !only_inside.get(&host).copied().unwrap_or(false)
}

/// Whether every value computed by `members` but the one of node `except`
/// is read only by members and by the nodes `reductions` (and is no
/// output): a pass computing them all may then keep `except`'s value only.
fn read_only_inside(g: &Graph, members: &[usize], reductions: &[usize], except: usize) -> bool {
    let inside: std::collections::HashSet<usize> = members.iter().copied().collect();
    let first = members.iter().copied().min().unwrap_or(0);
    for m in members.iter().filter(|&&m| m != except) {
        if g.outputs().contains(&g.nodes()[*m].out()) {
            return false;
        }
    }
    g.iter().skip(first).all(|(id, n)| {
        let reads_inside = n.inputs.iter().any(|&i| {
            let p = g.producer(i).0.index();
            p != except && inside.contains(&p)
        });
        !reads_inside || inside.contains(&id.index()) || reductions.contains(&id.index())
    })
}

/// `shape` as `[outer, reduced, inner]` when `axes` are consecutive.
fn consecutive(shape: &[usize], axes: &[usize]) -> Option<(usize, usize, usize)> {
    let (&first, &last) = (axes.first()?, axes.last()?);
    let ok = axes.windows(2).all(|w| w[1] == w[0] + 1) && last < shape.len();
    let p = |s: &[usize]| s.iter().product::<usize>();
    ok.then(|| (p(&shape[..first]), p(&shape[first..=last]), p(&shape[last + 1..])))
}

/// A float element of a fused reduction, folded in an `f64` accumulator
/// (an `f32` widened, and its result rounded once, as the unfused `f32`
/// reduction kernels do).
trait Widen: Pooled + Send + Sync {
    fn widen(self) -> f64;
    /// The results, from their accumulators.
    fn narrowed(acc: Vec<f64>) -> Storage;
}

impl Widen for f64 {
    #[inline(always)]
    fn widen(self) -> f64 {
        self
    }
    fn narrowed(acc: Vec<f64>) -> Storage {
        anvil_core::Element::into_storage(acc)
    }
}

impl Widen for f32 {
    #[inline(always)]
    fn widen(self) -> f64 {
        f64::from(self)
    }
    fn narrowed(acc: Vec<f64>) -> Storage {
        let mut out: Vec<f32> = crate::buffers::take(acc.len());
        for (o, a) in out.iter_mut().zip(&acc) {
            *o = *a as f32;
        }
        anvil_core::Element::into_storage(out)
    }
}

/// How a reduction combines elements into its `f64` accumulator: a sum's
/// `+` written out (so that the loops inline, as the unfused sum kernel
/// does), or the op's function.
#[derive(Clone, Copy)]
struct Fold {
    id: f64,
    f: fn(f64, f64) -> f64,
    sum: bool,
}

impl Fold {
    /// Folds `blk`, rows of `dst.len()` elements, into `dst` row by row.
    fn fold<T: Widen>(&self, blk: &[T], dst: &mut [f64]) {
        if let [d] = dst {
            let mut acc = *d;
            if self.sum {
                for &v in blk {
                    acc += v.widen();
                }
            } else {
                for &v in blk {
                    acc = (self.f)(acc, v.widen());
                }
            }
            *d = acc;
            return;
        }
        for row in blk.chunks(dst.len()) {
            if self.sum {
                for (d, &v) in dst.iter_mut().zip(row) {
                    *d += v.widen();
                }
            } else {
                for (d, &v) in dst.iter_mut().zip(row) {
                    *d = (self.f)(*d, v.widen());
                }
            }
        }
    }
}

/// The fold of each reduction of `r`.
fn folds(r: &FusedReduce) -> Result<Vec<Fold>> {
    r.reductions
        .iter()
        .map(|c| {
            let m = c.op.reduction_math().ok_or_else(|| {
                Error::invalid(
                    "fused_reduce",
                    "reduce",
                    format!("{} is not a reduction", c.op.name()),
                )
            })?;
            let (id, f) = m.f64();
            Ok(Fold { id, f, sum: m.is_sum() })
        })
        .collect()
}

/// The kernel of [`FusedReduce`].
///
/// # Errors
/// Wrong operands (a bug in fusion), or an op's block math rejecting its
/// dtypes.
pub fn fused_reduce(
    op: &dyn Op,
    inputs: &[&Tensor],
    outs: &[TensorType],
    ctx: &Parallelism,
) -> Result<Vec<Tensor>> {
    let r = op.try_downcast::<FusedReduce>()?;
    expect_arity(op, inputs, r.chain.inputs)?;
    let fits = inputs
        .iter()
        .zip(&r.chain.layout.types)
        .all(|(t, ty)| t.dtype() == ty.dtype() && t.shape() == ty.shape());
    let registers = r.chain.inputs + r.chain.program.len();
    let reduced_fit = r.reductions.iter().all(|c| {
        c.register < registers
            && match c.register.checked_sub(r.chain.inputs) {
                Some(j) => r.chain.program[j].dtype == r.chain.out.dtype(),
                None => r.chain.layout.types[c.register] == r.chain.out,
            }
    }) && r.kept.is_none_or(|k| {
        k >= r.chain.inputs
            && k < registers
            && r.chain.program[k - r.chain.inputs].dtype == r.chain.out.dtype()
    });
    if !fits
        || !reduced_fit
        || r.chain.program.is_empty()
        || r.reductions.is_empty()
        || outs.len() < r.reductions.len()
    {
        return Err(Error::invalid(
            "fused_reduce",
            "inputs",
            "operands of other types than the program was built for",
        ));
    }
    if let Some(results) = reduce_constant_rows(r, inputs, ctx)? {
        return Ok(results);
    }
    let (outer, red, inner) = r.dims;
    let chain_bytes =
        (outer * red).saturating_mul(inner).saturating_mul(r.chain.out.dtype().size_of());
    if outer < 2 * ctx.thread_count()
        && ctx.thread_count() > 1
        && ctx.parallel(outer * red * inner)
        && chain_bytes <= ctx.memory_budget_bytes()
    {
        // Too few rows to share among the threads: the chains in parallel,
        // then the reductions' own kernels, as unfused (same values, same
        // order of the fold).
        return unfused(r, inputs, ctx);
    }
    let (reds, chain) = match r.chain.out.dtype() {
        DType::F64 => typed_reduce::<f64>(r, inputs, ctx, &folds(r)?)?,
        DType::F32 => typed_reduce::<f32>(r, inputs, ctx, &folds(r)?)?,
        d => return Err(Error::invalid("fused_reduce", "dtype", format!("{d:?} is not a float"))),
    };
    let mut results = Vec::with_capacity(reds.len() + 1);
    for (s, c) in reds.into_iter().zip(&r.reductions) {
        results.push(Tensor::from_storage(s, c.out.shape())?);
    }
    if let Some(c) = chain {
        results.push(Tensor::from_storage(c, r.chain.out.shape())?);
    }
    Ok(results)
}

/// Reductions of this many elements or more whose chain is constant along
/// the reduced axes are computed on one slice ([`reduce_constant_rows`]).
/// Below it the fold runs as written, so small results keep the bits of
/// the sequential sum.
const CONSTANT_ROWS_ELEMS: usize = 1 << 24;

/// A [`FusedReduce`] whose chain does not vary along the reduced axes
/// (every leaf is read through strides that are 0 there: broadcasts) and
/// whose reductions are sums, maxima or minima: the chain computed on one
/// slice, the sums scaled by the number of reduced elements. `None` when
/// it does not apply. The gradient of a function of a huge broadcast sums
/// such a chain; folded element by element, 2^44 elements took hours.
fn reduce_constant_rows(
    r: &FusedReduce,
    inputs: &[&Tensor],
    ctx: &Parallelism,
) -> Result<Option<Vec<Tensor>>> {
    let (outer, red, inner) = r.dims;
    let shape = r.chain.out.shape();
    let total = outer.saturating_mul(red).saturating_mul(inner);
    // By type, not by name: a plugin's op may be called "sum".
    let kinds_fit = r
        .reductions
        .iter()
        .all(|c| c.op.is::<ReduceSum>() || c.op.is::<ReduceMax>() || c.op.is::<ReduceMin>());
    if red <= 1
        || total < CONSTANT_ROWS_ELEMS
        || r.kept.is_some()
        || r.chain.out.is_symbolic()
        || !kinds_fit
    {
        return Ok(None);
    }
    // The reduced axes: after those whose sizes multiply to `outer`.
    let mut start = 0;
    let mut prod = 1usize;
    while prod != outer && start < shape.len() {
        prod = prod.saturating_mul(shape[start]);
        start += 1;
    }
    let mut end = start;
    let mut prod = 1usize;
    while prod != red && end < shape.len() {
        prod = prod.saturating_mul(shape[end]);
        end += 1;
    }
    if prod != red || shape[end..].iter().product::<usize>() != inner {
        return Ok(None);
    }
    let layout = &r.chain.layout;
    let constant = layout.leaves.iter().all(|leaf| {
        leaf.as_ref()
            .is_some_and(|(strides, _)| (start..end).all(|a| shape[a] == 1 || strides[a] == 0))
    });
    if !constant {
        return Ok(None);
    }
    // The same program over the shape with the reduced axes of size 1,
    // each leaf read through its strides as before.
    let views: Vec<Option<View>> = layout
        .leaves
        .iter()
        .zip(&layout.offsets)
        .map(|(leaf, &offset)| {
            leaf.as_ref().map(|(strides, _)| View { offset, strides: strides.clone() })
        })
        .collect();
    let mut one = shape.to_vec();
    for d in &mut one[start..end] {
        *d = 1;
    }
    let out = TensorType::new(r.chain.out.dtype(), one);
    let chain = Fused::with_views((*r.chain.program).clone(), &layout.types, &views, out);
    let slice = FusedReduce {
        chain,
        reductions: r.reductions.clone(),
        dims: (outer, 1, inner),
        kept: None,
    };
    let outs: Vec<TensorType> = r.reductions.iter().map(|c| c.out.clone()).collect();
    let mut results = fused_reduce(&slice, inputs, &outs, ctx)?;
    for (t, c) in results.iter_mut().zip(&r.reductions) {
        if c.op.is::<ReduceSum>() {
            *t = match t.dtype() {
                DType::F64 => {
                    let v: Vec<f64> = t.to_vec::<f64>()?.iter().map(|x| x * red as f64).collect();
                    Tensor::from_vec(v, t.shape())?
                }
                DType::F32 => {
                    let v: Vec<f32> = t.to_vec::<f32>()?.iter().map(|x| x * red as f32).collect();
                    Tensor::from_vec(v, t.shape())?
                }
                _ => return Ok(None),
            };
        }
    }
    Ok(Some(results))
}

/// The program of `f` computing only register `reg` (an instruction's), as
/// its result.
fn sub_program(f: &Fused, reg: usize) -> Fused {
    let last = reg - f.inputs;
    let mut need = vec![false; last + 1];
    need[last] = true;
    for j in (0..=last).rev() {
        if need[j] {
            for &a in &f.program[j].args {
                if let Some(k) = a.checked_sub(f.inputs) {
                    need[k] = true;
                }
            }
        }
    }
    let mut at = vec![0; last + 1];
    let mut program = Vec::new();
    for j in (0..=last).filter(|&j| need[j]) {
        let mut instr = f.program[j].clone();
        for a in &mut instr.args {
            if let Some(k) = a.checked_sub(f.inputs) {
                *a = f.inputs + at[k];
            }
        }
        at[j] = program.len();
        program.push(instr);
    }
    Fused::new(program, &f.layout.types, f.out.clone())
}

/// A [`FusedReduce`] run as its parts: each reduced register written out
/// (the [`Fused`] kernel, parallel over blocks; a leaf is its operand),
/// then each reduction's kernel.
fn unfused(r: &FusedReduce, inputs: &[&Tensor], ctx: &Parallelism) -> Result<Vec<Tensor>> {
    // The registers in order of use: each reduction's, then the kept one.
    let uses: Vec<usize> = r.reductions.iter().map(|c| c.register).chain(r.kept).collect();
    let mut held: Option<(usize, Tensor)> = None;
    let mut results = Vec::with_capacity(uses.len());
    for (i, &reg) in uses.iter().enumerate() {
        let operand = match held.take() {
            Some((h, t)) if h == reg => t,
            other => {
                if let Some((_, t)) = other {
                    crate::buffers::recycle(t);
                }
                match inputs.get(reg) {
                    Some(&t) if reg < r.chain.inputs => t.clone(),
                    _ => {
                        let f = sub_program(&r.chain, reg);
                        fused(&f, inputs, &f.out, ctx)?
                    }
                }
            }
        };
        match r.reductions.get(i) {
            Some(c) => {
                results.push(reduce_kernel(c, &operand, ctx)?);
                // Kept while the next use reads the same register (`Σ e`
                // and `max e`); otherwise its buffer goes back to the pool.
                held = Some((reg, operand));
            }
            None => results.push(operand), // the kept value, a result
        }
    }
    if let Some((_, t)) = held {
        crate::buffers::recycle(t);
    }
    Ok(results)
}

/// Runs the kernel of reduction `c` on `operand`.
fn reduce_kernel(c: &ChainReduction, operand: &Tensor, ctx: &Parallelism) -> Result<Tensor> {
    let hint = " (the reduction ending a fused chain has no CPU kernel)";
    let op = c.op.as_ref();
    let mut v = match crate::kernels().get(op, hint)?.kernel {
        crate::Kernel::One(f) => return f(op, &[operand], &c.out, ctx),
        crate::Kernel::Many(f) => f(op, &[operand], std::slice::from_ref(&c.out), ctx)?,
        crate::Kernel::Prepare(f) => {
            let outs = [c.out.clone()];
            f(op, &[operand.ty()], &outs)?.run(&[operand], &outs, ctx)?
        }
    };
    if v.is_empty() {
        return Err(Error::invalid("fused_reduce", "reduce", "a kernel without result"));
    }
    Ok(v.swap_remove(0))
}

/// Runs a [`FusedReduce`] of dtype `T`: its reductions and, if kept, the
/// first chain's value.
fn typed_reduce<T: Widen>(
    r: &FusedReduce,
    inputs: &[&Tensor],
    ctx: &Parallelism,
    folds: &[Fold],
) -> Result<(Vec<Storage>, Option<Storage>)> {
    let (outer, red, inner) = r.dims;
    let total = outer * red * inner;
    let k = folds.len();
    let inner1 = inner.max(1);
    // Per outer row, each reduction's `inner` results in turn.
    let mut acc: Vec<f64> = if k == 1 {
        crate::buffers::filled(outer * inner, folds[0].id)
    } else {
        let mut acc: Vec<f64> = crate::buffers::take(outer * k * inner);
        for row in acc.chunks_mut(k * inner1) {
            for (part, fold) in row.chunks_mut(inner1).zip(folds) {
                part.fill(fold.id);
            }
        }
        acc
    };
    let keep = r.kept.is_some();
    let mut chain: Vec<T> = if keep { crate::buffers::take(total) } else { Vec::new() };
    let error: std::sync::Mutex<Option<Error>> = std::sync::Mutex::new(None);
    // Rows `o0..` of the results (`k * inner` each) and of the chain (`red * inner`).
    let task = |o0: usize, acc: &mut [f64], chain: &mut [T]| {
        let result = reduce_rows(r, inputs, o0, acc, chain, folds);
        if let Err(e) = result {
            if let Ok(mut slot) = error.lock() {
                slot.get_or_insert(e);
            }
        }
    };
    let (row_out, row_chain) = (k * inner1, if keep { (red * inner).max(1) } else { 0 });
    if ctx.parallel(total) && outer > 1 && total > 0 {
        use rayon::prelude::*;
        let rows = outer.div_ceil(4 * ctx.thread_count()).max(1);
        let outs = acc.par_chunks_mut(rows * row_out);
        if keep {
            outs.zip(chain.par_chunks_mut(rows * row_chain))
                .enumerate()
                .for_each(|(j, (o, c))| task(j * rows, o, c));
        } else {
            outs.enumerate().for_each(|(j, o)| task(j * rows, o, &mut []));
        }
    } else if total > 0 {
        task(0, &mut acc, &mut chain);
    }
    if let Some(e) = error.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner) {
        return Err(e);
    }
    let reds = if k == 1 {
        vec![T::narrowed(acc)]
    } else {
        (0..k)
            .map(|i| {
                let mut v: Vec<f64> = crate::buffers::take(outer * inner);
                if inner > 0 {
                    for (d, row) in v.chunks_mut(inner).zip(acc.chunks(k * inner)) {
                        d.copy_from_slice(&row[i * inner..(i + 1) * inner]);
                    }
                }
                T::narrowed(v)
            })
            .collect()
    };
    Ok((reds, keep.then(|| T::into_storage(chain))))
}

/// The block `from..from + len` of register `reg` of `c` (not its last
/// instruction's): a leaf read in place or gathered, or an instruction's
/// slot.
fn register_block<'a, T: Pooled>(
    c: &Fused,
    scratch: &'a Scratch,
    inputs: &[&'a Tensor],
    reg: usize,
    from: usize,
    len: usize,
) -> Result<&'a [T]> {
    let readers = scratch.readers();
    let b = match reg.checked_sub(c.inputs) {
        Some(j) => readers.block(c.layout.instrs[j], len),
        None => match &c.layout.leaves[reg] {
            Some((_, slot)) => readers.block(*slot, len),
            None => in_place(inputs[reg].storage(), from, len),
        },
    };
    T::from_block(b)
        .ok_or_else(|| Error::invalid("fused_reduce", "register", "a register of another dtype"))
}

/// Folds the chains of outer rows `o0..o0 + acc.len() / (k * inner)` into
/// `acc` (per row, each of the `k` reductions' `inner` results), writing
/// the kept register's value into `chain` (else empty). Each result folds
/// its elements in increasing order of the reduced index, as the unfused
/// kernels do.
fn reduce_rows<T: Widen>(
    r: &FusedReduce,
    inputs: &[&Tensor],
    o0: usize,
    acc: &mut [f64],
    chain: &mut [T],
    folds: &[Fold],
) -> Result<()> {
    let (_, red, inner) = r.dims;
    let c = &r.chain;
    let shape = c.out.shape();
    let inner1 = inner.max(1);
    let last = c.inputs + c.program.len() - 1;
    // The last instruction writes straight into the kept chain, or into `buf`.
    let direct = r.kept == Some(last);
    let width = BLOCK.min(red * inner).max(1);
    let mut scratch = Scratch::new(c.layout.counts, width);
    gather_leaves(c, inputs, shape, &mut scratch, 0, width, true);
    let mut buf: Vec<T> = if direct { Vec::new() } else { vec![T::default(); width] };
    // Evaluates the program at flat indices `from..from + len` (at `at` in
    // the kept chain) and folds every reduction's block into elements
    // `lo..hi` of its results in `row`.
    let mut eval = |scratch: &mut Scratch,
                    chain: &mut [T],
                    row: &mut [f64],
                    (at, from, len): (usize, usize, usize),
                    (lo, hi): (usize, usize)|
     -> Result<()> {
        gather_leaves(c, inputs, shape, scratch, from, len, false);
        let dst: &mut [T] = if direct { &mut chain[at..at + len] } else { &mut buf[..len] };
        run_block(c, inputs, shape, scratch, from, T::block_mut(dst))?;
        for ((red, fold), part) in r.reductions.iter().zip(folds).zip(row.chunks_mut(inner1)) {
            let blk = if red.register == last {
                &*dst
            } else {
                register_block::<T>(c, &*scratch, inputs, red.register, from, len)?
            };
            fold.fold(blk, &mut part[lo..hi]);
        }
        if let (Some(k), false) = (r.kept, direct) {
            let src = register_block::<T>(c, &*scratch, inputs, k, from, len)?;
            chain[at..at + len].copy_from_slice(src);
        }
        Ok(())
    };
    let row_len = red * inner;
    for (k, row) in acc.chunks_mut(folds.len() * inner1).enumerate() {
        let base = (o0 + k) * row_len;
        let at0 = k * row_len;
        if inner == 1 {
            let mut b = 0;
            while b < red {
                let len = BLOCK.min(red - b);
                eval(&mut scratch, chain, row, (at0 + b, base + b, len), (0, 1))?;
                b += len;
            }
        } else if inner < BLOCK {
            // Blocks of whole reduced rows, folded row by row.
            let per = (BLOCK / inner).max(1);
            let mut rr = 0;
            while rr < red {
                let rows = per.min(red - rr);
                let at = rr * inner;
                eval(&mut scratch, chain, row, (at0 + at, base + at, rows * inner), (0, inner))?;
                rr += rows;
            }
        } else {
            // Blocks of columns, each folded over the reduced rows.
            let mut c0 = 0;
            while c0 < inner {
                let w = BLOCK.min(inner - c0);
                for rr in 0..red {
                    let off = rr * inner + c0;
                    eval(&mut scratch, chain, row, (at0 + off, base + off, w), (c0, c0 + w))?;
                }
                c0 += w;
            }
        }
    }
    Ok(())
}

register_kernel!(FusedReduce, many: fused_reduce);
