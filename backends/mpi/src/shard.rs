//! Sharded functions: [`shard_map`] (a function on every rank over its
//! slice of the batch), [`spmd`] (a function on every rank's own values),
//! [`vmap_named`] (a `vmap` whose axis collectives can name), sharded
//! Jacobians ([`jacfwd_sharded`], [`jacrev_sharded`]) and the data-parallel
//! loss ([`data_parallel`]).
//!
//! Each is an anvil function (it implements `Function`), so it composes
//! with `grad`, `vmap`, `jit` and the rest like any other: what it adds to
//! the trace are its function's graph, typed and rewritten by the
//! [replication](crate::replication) rules, and collectives, whose rules
//! do the rest.
//!
//! Every sharded function starts by an agreement between the ranks while
//! it is traced (one small all-gather): the ranks' argument shapes must
//! agree, and a batch that does not split evenly is an error on every rank
//! (pad it to a multiple of the number of ranks first). Both are `Err`s
//! on every rank, never a hang.

use crate::axis::{inside_mesh, resolving, with_axis, with_witness, Axis, AxisKind};
use crate::collectives::{AllReduce, GatherReplicated, Pvary, Replicated, TakeShard};
use crate::comm::{self, Reduce, HEADER};
use crate::kernels::{header, Kind};
use crate::replication::{rewrite, tile, trace_typed, Rep};
use anvil_core::function::{trace_fn, trace_with};
use anvil_core::replay::inline_graph;
use anvil_core::shape::normalize_axis;
use anvil_core::{
    Batched, DType, Dyn, Error, Function, IntoFunction, PlanCache, Result, TensorType, TreeDef, Var,
};
use anvil_ops::batching::{at_front, move_axis};
use anvil_ops::constant::Basis;
use anvil_ops::VarExt;
use anvil_transforms::{jvp_graph, vjp_graph, vmap_graph, InAxes};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};

fn pvary(x: &Var, axis: &Axis) -> Var {
    Var::apply_op(Box::new(Pvary { axis: axis.clone() }), &[x])
}

/// The agreement at the start of a sharded function: every rank's argument
/// types and batch lengths must be the same.
fn agree_on_entry(what: &str, def: &TreeDef, args: &[Var], lens: &[usize]) -> Result<()> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    def.describe().hash(&mut h);
    for a in args {
        (a.dtype().to_string(), a.shape()).hash(&mut h);
    }
    let mut shape = vec![h.finish() as usize % (1 << 62)];
    shape.extend(lens.iter().take(HEADER - 6));
    let mine = header(Kind::Enter, DType::I64, args.len() as i64, &shape);
    let all = comm::exchange_headers(what, &mine)?;
    if all.iter().all(|h| *h == mine) {
        return Ok(());
    }
    let each: Vec<String> = all
        .iter()
        .enumerate()
        .map(|(r, h)| {
            if h[1] != Kind::Enter as i64 {
                return format!("rank {r} is at another collective");
            }
            let n = (h[4] as usize).clamp(1, HEADER - 5);
            format!(
                "rank {r} has {} arguments, batch lengths {:?}, signature #{:x}",
                h[3],
                &h[6..5 + n],
                h[5]
            )
        })
        .collect();
    Err(Error::invalid(
        what,
        "arguments",
        format!(
            "the ranks disagree on the arguments' shapes: {}. Every rank must call a sharded \
             function with arguments of the same shapes and dtypes",
            each.join("; ")
        ),
    ))
}

/// Checks that `n` splits evenly over `p` ranks.
fn check_divisible(what: &str, arg: &str, n: usize, p: usize) -> Result<usize> {
    if n % p == 0 {
        return Ok(n / p);
    }
    Err(Error::invalid(
        what,
        arg,
        format!(
            "has {n} elements along the sharded axis, not divisible by the {p} ranks: pad it to a \
             multiple of {p} (or drop the remainder) before calling"
        ),
    ))
}

// ------------------------------------------------------------ shard_map

/// A function run on every rank over that rank's slice of the batch; see
/// [`shard_map`].
pub struct ShardMap<F> {
    f: F,
    name: String,
    in_axes: InAxes,
    out_axes: InAxes,
    cache: PlanCache,
}

impl<F> std::fmt::Debug for ShardMap<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ShardMap('{}', in_axes {:?}, out_axes {:?})",
            self.name, self.in_axes, self.out_axes
        )
    }
}

/// Runs `f` on every rank over that rank's slice of the batch, with the
/// mapped axis named `axis_name` for the collectives inside (JAX's
/// `shard_map` over a one-dimensional mesh of all the MPI processes).
///
/// Every rank calls it with the same, whole arguments. An argument mapped
/// by `in_axes` (default: axis 0 of every argument) is split along that
/// axis into equal slices, rank `r` getting slice `r`; an unmapped one
/// (`None`) is used whole on every rank (replicated). A result mapped by
/// `out_axes` (default: axis 0) is gathered from the ranks along that
/// axis, so every rank returns the whole result; an unmapped one (`None`)
/// must be the same on every rank (after an `all_reduce`, say) and is
/// returned as it is.
///
/// The values inside are typed replicated or varying (see
/// [`replication`](crate::replication)): replicated arguments, tensors `f`
/// captures and constants are replicated, so they must be the same on
/// every rank (per-rank data enters as a sharded argument, or through
/// [`axis_index`](crate::axis_index)). The cotangent of a replicated result
/// then costs no communication; a sharded argument's cotangent is gathered
/// from the ranks (one all-gather), and a replicated argument used with
/// per-rank values has its cotangent summed over the ranks (one all-reduce).
///
/// ```
/// use anvil::prelude::*;
/// let _mpi = anvil_mpi::init()?;
/// // Each rank squares its slice; the slices are gathered back.
/// let f = anvil_mpi::shard_map(|x: &Var| x.square(), "batch");
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[4])?;
/// assert_eq!(f.eval(&x)?.to_vec::<f64>()?, vec![1.0, 4.0, 9.0, 16.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
///
/// Calling it traces `f` at the slice's shape, after an agreement between
/// the ranks (see the [module docs](self)).
pub fn shard_map<M, F: IntoFunction<M>>(f: F, axis_name: &str) -> ShardMap<F::Func> {
    ShardMap {
        f: f.into_function(),
        name: axis_name.to_string(),
        in_axes: InAxes::all(Some(0)),
        out_axes: InAxes::all(Some(0)),
        cache: PlanCache::new(),
    }
}

impl<F> ShardMap<F> {
    /// Which axis of each argument is split over the ranks (`None`:
    /// replicated), a tree that is a prefix of the arguments' structure.
    pub fn in_axes(mut self, axes: impl Into<InAxes>) -> Self {
        self.in_axes = axes.into();
        self
    }

    /// Along which axis each result is gathered (`None`: a replicated
    /// result, returned as it is).
    pub fn out_axes(mut self, axes: impl Into<InAxes>) -> Self {
        self.out_axes = axes.into();
        self
    }
}

impl<F: Function> Function for ShardMap<F> {
    type Args = F::Args;
    type Output = F::Output;

    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        let what = "shard_map";
        let (_, p) = comm::rank_size(what)?;
        // Errors in the axes wait for the agreement: ranks whose arguments
        // differ must all learn it there, not leave the others waiting.
        let dims: Result<Vec<Option<usize>>> =
            self.in_axes.broadcast("shard_map in_axes", def).and_then(|axes| {
                args.iter()
                    .zip(&axes)
                    .enumerate()
                    .map(|(i, (a, ax))| {
                        ax.map(|d| normalize_axis(what, d, a.shape(), &format!("argument {i}")))
                            .transpose()
                    })
                    .collect()
            });
        let lens: Vec<usize> = match &dims {
            Ok(dims) => {
                args.iter().zip(dims).filter_map(|(a, d)| d.map(|d| a.shape()[d])).collect()
            }
            Err(_) => Vec::new(),
        };
        agree_on_entry(what, def, args, &lens)?;
        let dims = dims?;
        let mesh = Axis { name: self.name.clone(), size: p, kind: AxisKind::Mesh };
        // Replicated arguments and captures are the same on every rank, unless
        // this shard_map is inside another sharded function, whose values
        // may be per rank: then they are typed varying here, and the
        // enclosing function's rewrite types them again, knowing.
        let outer = if inside_mesh() { Rep::Varying } else { Rep::Replicated };
        let mut local = Vec::with_capacity(args.len());
        let mut reps = Vec::with_capacity(args.len());
        for (i, (a, d)) in args.iter().zip(&dims).enumerate() {
            match *d {
                Some(d) => {
                    check_divisible(what, &format!("argument {i}"), a.shape()[d], p)?;
                    let op = TakeShard { axis: mesh.clone(), dim: d };
                    local.push(Var::apply_op(Box::new(op), &[a]));
                    reps.push(Rep::Varying);
                }
                None => {
                    local.push(a.clone());
                    reps.push(outer);
                }
            }
        }
        let types: Vec<TensorType> = local.iter().map(|v| v.ty().clone()).collect();
        let t = with_axis(what, mesh.clone(), || {
            trace_typed(&self.f, def, &types, &mesh, &reps, Rep::Replicated, outer)
        })?;
        reps.extend(t.captures.iter().map(|_| outer));
        let (graph, out_reps) = rewrite(&t.graph, &mesh, &reps, Rep::Replicated)?;
        local.extend(t.captures.iter().cloned());
        let outs = inline_graph(&graph, &local)?;
        let out_axes = self.out_axes.broadcast("shard_map out_axes", &t.output)?;
        let leaves = outs
            .iter()
            .zip(out_axes)
            .zip(out_reps)
            .enumerate()
            .map(|(i, ((o, ax), rep))| {
                Ok(match (ax, rep) {
                    (Some(d), rep) => {
                        let dim = normalize_axis(what, d, o.shape(), &format!("output {i}"))?;
                        match rep {
                            Rep::Varying => {
                                let op = GatherReplicated { axis: mesh.clone(), dim };
                                Var::apply_op(Box::new(op), &[o])
                            }
                            Rep::Replicated => tile(o, dim, p),
                        }
                    }
                    (None, Rep::Replicated) => o.clone(),
                    (None, Rep::Varying) => {
                        let op = Replicated { axis: mesh.clone(), transposed: false };
                        Var::apply_op(Box::new(op), &[o])
                    }
                })
            })
            .collect::<Result<_>>()?;
        Ok(Dyn { def: t.output, leaves })
    }

    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.cache)
    }

    fn name(&self) -> String {
        format!("shard_map({})", self.f.name())
    }
}

// ----------------------------------------------------------------- spmd

/// A function run on every rank's own values; see [`spmd`].
pub struct Spmd<F> {
    f: F,
    name: String,
    cache: PlanCache,
}

impl<F> std::fmt::Debug for Spmd<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Spmd('{}')", self.name)
    }
}

/// Runs `f` on every rank on that rank's own arguments (data each rank
/// loaded itself), with the ranks forming the axis `axis_name`. Nothing
/// is split or gathered, and every value is per rank: this is the view in
/// which the collectives' transposes are stated (see
/// [`collectives`](crate::collectives)).
///
/// ```
/// use anvil::prelude::*;
/// let mpi = anvil_mpi::init()?;
/// let x = Tensor::full(&[2], mpi.rank() as f64)?;
/// let total = anvil_mpi::spmd(|x: &Var| anvil_mpi::all_reduce_sum(x, "ranks"), "ranks");
/// let expected = (0..mpi.size()).sum::<usize>() as f64;
/// assert_eq!(total.eval(&x)?.to_vec::<f64>()?, vec![expected; 2]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn spmd<M, F: IntoFunction<M>>(f: F, axis_name: &str) -> Spmd<F::Func> {
    Spmd { f: f.into_function(), name: axis_name.to_string(), cache: PlanCache::new() }
}

impl<F: Function> Function for Spmd<F> {
    type Args = F::Args;
    type Output = F::Output;

    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        let (_, p) = comm::rank_size("spmd")?;
        agree_on_entry("spmd", def, args, &[])?;
        let mesh = Axis { name: self.name.clone(), size: p, kind: AxisKind::Mesh };
        let types: Vec<TensorType> = args.iter().map(|v| v.ty().clone()).collect();
        // Every value of its own is per rank; only collectives replicate.
        let reps = vec![Rep::Varying; args.len()];
        let t = with_axis("spmd", mesh.clone(), || {
            trace_typed(&self.f, def, &types, &mesh, &reps, Rep::Varying, Rep::Varying)
        })?;
        let reps = vec![Rep::Varying; args.len() + t.captures.len()];
        let (graph, _) = rewrite(&t.graph, &mesh, &reps, Rep::Varying)?;
        let mut inputs = args.to_vec();
        inputs.extend(t.captures.iter().cloned());
        Ok(Dyn { def: t.output, leaves: inline_graph(&graph, &inputs)? })
    }

    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.cache)
    }

    fn name(&self) -> String {
        format!("spmd({})", self.f.name())
    }
}

// ----------------------------------------------------------- vmap_named

/// A `vmap` whose batch axis has a name; see [`vmap_named`].
pub struct VmapNamed<F> {
    f: Barrier<F>,
    name: String,
    in_axes: InAxes,
    out_axes: InAxes,
    cache: PlanCache,
}

impl<F> std::fmt::Debug for VmapNamed<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VmapNamed('{}')", self.name)
    }
}

/// `f` traced with no name being resolved, so that a `vmap` inside it
/// never resolves a collective of the named `vmap` around it; and with a
/// zero that depends on the batch (from a mapped argument) as the axis's
/// witness, so that a collective of an operand that does not is resolved
/// too (see [`vmap_named`]).
struct Barrier<F> {
    f: F,
    name: String,
    in_axes: InAxes,
}

impl<F: Function> Function for Barrier<F> {
    type Args = F::Args;
    type Output = F::Output;
    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        let axes = self.in_axes.broadcast("vmap_named in_axes", def)?;
        let mapped = args.iter().zip(&axes).find(|(_, ax)| ax.is_some()).map(|(a, _)| a);
        let body = || resolving("", || self.f.inline(def, args));
        match mapped {
            Some(a) => {
                // The sum of no elements of a mapped argument: exactly 0.
                let zero = a.reshape(&[-1]).slice_axis(0, Some(0), Some(0), 1).cast(DType::F64);
                with_witness(&self.name, zero.sum(&[0]), body)
            }
            None => body(),
        }
    }
    fn name(&self) -> String {
        self.f.name()
    }
}

/// `vmap(f)` with its batch axis named `axis_name` (JAX's
/// `vmap(f, axis_name=...)`): a collective inside `f` naming it acts over
/// the batch (`all_reduce_sum` sums the batch elements), while one naming
/// a `shard_map`'s axis acts over the ranks for every batch element.
///
/// A collective over the named axis of an operand that does not vary along
/// the batch (a constant, an unmapped argument) acts on it as on a batch of
/// equal elements, as in JAX: `all_reduce_sum(c, "i")` is `c * size`,
/// `all_gather` gives `size` copies, `reduce_scatter` gives element `i`
/// block `i` of `c * size`. (Inside a control-flow body of `f`, such a
/// collective is an `Err` when run: make its operand depend on the batch.)
///
/// ```
/// use anvil::prelude::*;
/// // Each element minus the batch mean.
/// let centre = anvil_mpi::vmap_named(
///     |x: &Var| x - anvil_mpi::all_reduce_sum(x, "i") / 3.0,
///     "i",
/// );
/// let x = Tensor::from_vec(vec![1.0, 2.0, 6.0], &[3])?;
/// assert_eq!(centre.eval(&x)?.to_vec::<f64>()?, vec![-2.0, -1.0, 3.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn vmap_named<M, F: IntoFunction<M>>(f: F, axis_name: &str) -> VmapNamed<F::Func> {
    VmapNamed {
        f: Barrier {
            f: f.into_function(),
            name: axis_name.to_string(),
            in_axes: InAxes::all(Some(0)),
        },
        name: axis_name.to_string(),
        in_axes: InAxes::all(Some(0)),
        out_axes: InAxes::all(Some(0)),
        cache: PlanCache::new(),
    }
}

impl<F> VmapNamed<F> {
    /// As `Vmap::in_axes`.
    pub fn in_axes(mut self, axes: impl Into<InAxes>) -> Self {
        self.in_axes = axes.into();
        self.f.in_axes = self.in_axes.clone();
        self
    }

    /// As `Vmap::out_axes`.
    pub fn out_axes(mut self, axes: impl Into<InAxes>) -> Self {
        self.out_axes = axes.into();
        self
    }
}

impl<F: Function> Function for VmapNamed<F> {
    type Args = F::Args;
    type Output = F::Output;

    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        let what = "vmap_named";
        let axes = self.in_axes.broadcast("vmap_named in_axes", def)?;
        let size = args
            .iter()
            .zip(&axes)
            .enumerate()
            .find_map(|(i, (a, ax))| {
                ax.map(|d| {
                    normalize_axis(what, d, a.shape(), &format!("argument {i}"))
                        .map(|d| a.shape()[d])
                })
            })
            .transpose()?
            .ok_or_else(|| Error::invalid(what, "in_axes", "map no argument"))?;
        let axis = Axis { name: self.name.clone(), size, kind: AxisKind::Vmap };
        let v = anvil_transforms::vmap(&self.f)
            .in_axes(self.in_axes.clone())
            .out_axes(self.out_axes.clone());
        with_axis(what, axis, || resolving(&self.name, || v.inline(def, args)))
    }

    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.cache)
    }

    fn name(&self) -> String {
        format!("vmap_named({})", self.f.f.name())
    }
}

// ------------------------------------------------------ data parallelism

/// A function whose results are summed over the ranks; see
/// [`data_parallel`].
pub struct SumOverRanks<F> {
    f: F,
    name: String,
}

impl<F> std::fmt::Debug for SumOverRanks<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SumOverRanks('{}')", self.name)
    }
}

impl<F: Function> Function for SumOverRanks<F> {
    type Args = F::Args;
    type Output = F::Output;
    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        let out = self.f.inline(def, args)?;
        let axis = crate::axis::bound("data_parallel", &self.name)?;
        let leaves = out
            .leaves
            .iter()
            .map(|l| {
                let op = AllReduce { axis: axis.clone(), reduce: Reduce::Sum };
                Var::apply_op(Box::new(op), &[l])
            })
            .collect();
        Ok(Dyn { def: out.def, leaves })
    }
    fn name(&self) -> String {
        self.f.name()
    }
}

/// A loss summed over the examples of every rank: `loss(params, batch)`
/// (a sum over the examples of `batch`) run by [`shard_map`] with `params`
/// replicated and `batch` split along axis 0, the ranks' sums added. Its
/// `grad` with respect to `params` is the full-batch gradient, on every
/// rank: `grad(data_parallel(loss, "batch")).eval((&w, &xs))`.
///
/// ```
/// use anvil::prelude::*;
/// let _mpi = anvil_mpi::init()?;
/// let loss = |w: &Var, x: &Var| (x * w).sin().sum(&[0]);
/// let w = Tensor::scalar(0.5);
/// let xs = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[4])?;
/// let g = grad(anvil_mpi::data_parallel(loss, "batch")).eval((&w, &xs))?;
/// let expected: f64 = [1.0f64, 2.0, 3.0, 4.0].iter().map(|x| x * (0.5 * x).cos()).sum();
/// assert!((g.item()? - expected).abs() < 1e-12);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn data_parallel<M, F: IntoFunction<M>>(
    loss: F,
    axis_name: &str,
) -> ShardMap<SumOverRanks<F::Func>> {
    let summed = SumOverRanks { f: loss.into_function(), name: axis_name.to_string() };
    shard_map(summed, axis_name).in_axes((None, Some(0))).out_axes(None)
}

// ------------------------------------------------------ sharded Jacobians

/// The Jacobian with its basis split over the ranks; see
/// [`jacfwd_sharded`] and [`jacrev_sharded`].
pub struct ShardedJacobian<F> {
    f: F,
    name: String,
    forward: bool,
    directions: AtomicUsize,
    cache: PlanCache,
}

impl<F> std::fmt::Debug for ShardedJacobian<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ShardedJacobian(forward {}, '{}')", self.forward, self.name)
    }
}

/// The Jacobian of `f` (one argument, one result) by forward mode, its
/// basis split over the ranks: rank `r` pushes the `n / p` tangents
/// `e_{r n/p} .. e_{(r+1) n/p - 1}` through `f`'s jvp, and the column
/// blocks are gathered, so every rank returns the whole Jacobian (shape
/// `out ++ in`, as `jacfwd`). `n`, the argument's size, must be a
/// multiple of the number of ranks.
///
/// ```
/// use anvil::prelude::*;
/// let _mpi = anvil_mpi::init()?;
/// let jac = anvil_mpi::jacfwd_sharded(|x: &Var| x.sin() * x.sum(&[0]), "basis");
/// let x = Tensor::from_vec(vec![0.1, 0.2, 0.3, 0.4], &[4])?;
/// let want = jacfwd(|x: &Var| x.sin() * x.sum(&[0])).eval(&x)?;
/// let got = jac.eval(&x)?;
/// for (a, b) in got.to_vec::<f64>()?.iter().zip(want.to_vec::<f64>()?) {
///     assert!((a - b).abs() < 1e-12);
/// }
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn jacfwd_sharded<M, F: IntoFunction<M>>(f: F, axis_name: &str) -> ShardedJacobian<F::Func> {
    ShardedJacobian {
        f: f.into_function(),
        name: axis_name.to_string(),
        forward: true,
        directions: AtomicUsize::new(0),
        cache: PlanCache::new(),
    }
}

/// The Jacobian of `f` (one argument, one result) by reverse mode, the
/// output basis split over the ranks: rank `r` pulls back the `m / p`
/// cotangents of its block of rows, and the row blocks are gathered
/// (shape `out ++ in`, as `jacrev`). `m`, the result's size, must be a
/// multiple of the number of ranks.
pub fn jacrev_sharded<M, F: IntoFunction<M>>(f: F, axis_name: &str) -> ShardedJacobian<F::Func> {
    ShardedJacobian { forward: false, ..jacfwd_sharded(f, axis_name) }
}

impl<F> ShardedJacobian<F> {
    /// The number of basis directions this rank pushed through (or pulled
    /// back) when the function was last traced: `n / p`.
    pub fn local_directions(&self) -> usize {
        self.directions.load(Ordering::SeqCst)
    }
}

/// A tangent or cotangent, or zeros of `like`'s type.
fn dense(t: &Option<Var>, like: &Var) -> Var {
    t.clone().unwrap_or_else(|| like.zeros_like())
}

impl<F: Function> Function for ShardedJacobian<F> {
    type Args = F::Args;
    type Output = F::Output;

    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        let what = if self.forward { "jacfwd_sharded" } else { "jacrev_sharded" };
        let [x] = args else {
            return Err(Error::invalid(what, "arguments", "take one argument (a tensor)"));
        };
        let (rank, p) = comm::rank_size(what)?;
        // Before tracing: a trace that fails on one rank only must not
        // leave the others waiting here.
        agree_on_entry(what, def, args, &[])?;
        let t = trace_fn(&self.f, def, &[x.ty().clone()])?;
        let y_ty = match &t.graph.output_types()[..] {
            [y] if y.dtype().is_float() && x.dtype().is_float() => y.clone(),
            _ => return Err(Error::invalid(what, "function", "must map one float tensor to one")),
        };
        let basis_ty = if self.forward { x.ty().clone() } else { y_ty.clone() };
        let n = basis_ty.numel();
        let m = check_divisible(what, "the basis", n, p)?;
        self.directions.store(m, Ordering::SeqCst);
        let mesh = Axis { name: self.name.clone(), size: p, kind: AxisKind::Mesh };
        // Every value below is per rank (each rank its block of directions):
        // the argument and captures enter through Pvary, the seed is varying.
        let mut prim = vec![pvary(x, &mesh)];
        prim.extend(t.captures.iter().map(|c| pvary(c, &mesh)));
        let dir = self.direction_graph(&t.graph, &prim, &basis_ty)?;
        let seed_axis = if self.forward { basis_ty.rank() } else { 0 };
        let op = Basis::seed(&basis_ty, rank * m, m, !self.forward);
        let seed = pvary(&x.tracer().apply(Box::new(op), &[]), &mesh);
        let mut batched: Vec<Batched> =
            prim.iter().map(|v| Batched::new(v.clone(), None)).collect();
        batched.push(Batched::new(seed, Some(seed_axis)));
        let out = vmap_graph(&dir, &batched, m)?.pop().ok_or_else(|| {
            Error::invalid(what, "direction", "the derivative graph has no output")
        })?;
        let block = at_front(&out, m);
        let op = GatherReplicated { axis: mesh.clone(), dim: 0 };
        let whole = Var::apply_op(Box::new(op), &[&block]);
        let oriented = if self.forward { move_axis(&whole, 0, whole.rank() - 1) } else { whole };
        let shape: Vec<i64> = y_ty.shape().iter().chain(x.shape()).map(|&d| d as i64).collect();
        Ok(Dyn { def: t.output, leaves: vec![oriented.reshape(&shape)] })
    }

    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.cache)
    }

    fn name(&self) -> String {
        let kind = if self.forward { "jacfwd_sharded" } else { "jacrev_sharded" };
        format!("{kind}({})", self.f.name())
    }
}

impl<F> ShardedJacobian<F> {
    /// A graph of `(x, captures..., direction)` returning the derivative
    /// along the direction: `f`'s jvp (forward) or vjp (reverse).
    fn direction_graph(
        &self,
        graph: &anvil_core::Graph,
        prim: &[Var],
        basis: &TensorType,
    ) -> Result<anvil_core::Graph> {
        let k = prim.len();
        let mut types: Vec<TensorType> = prim.iter().map(|v| v.ty().clone()).collect();
        types.push(basis.clone());
        let forward = self.forward;
        trace_with(&types, |v| {
            if forward {
                let ts: Vec<Option<Var>> = (0..k).map(|i| (i == 0).then(|| v[k].clone())).collect();
                let (outs, tangents) = jvp_graph(graph, &v[..k], &ts)?;
                Ok(vec![dense(&tangents[0], &outs[0])])
            } else {
                let (_, cts) = vjp_graph(graph, &v[..k], &[Some(v[k].clone())])?;
                Ok(vec![dense(&cts[0], &v[0])])
            }
        })
    }
}
