//! Sparse Jacobians and Hessians: detection, coloring, compressed
//! evaluation.
//!
//! For a function `f` whose Jacobian `J` (`m × n`) is sparse, three steps
//! replace `n` JVPs by a few:
//!
//! 1. **Detection**: the sparsity interpreter ([`anvil_core::sparsity`])
//!    runs the traced graph with each input element as its own index; the
//!    index sets of the outputs are `J`'s pattern, `(out, in)` oriented:
//!    row `i` is output element `i` and column `j` input element `j`, each
//!    numbered row-major over its leaves, leaves concatenated in order
//!    (the outputs' for rows, the chosen arguments' for columns). A
//!    Hessian's pattern is the pattern of the Jacobian of the gradient
//!    (the same interpreter on the gradient's graph), symmetrized.
//! 2. **Coloring** (`anvil-sparse`): columns that share no row get one
//!    color (forward mode), rows that share no column one color (reverse
//!    mode), a star coloring for a symmetric Hessian, or a bidirectional
//!    coloring (some columns forward, some rows reverse; 3 passes on an
//!    arrowhead that needs `n` either one-sided way); by default in DSATUR
//!    order (3 colors on a tridiagonal pattern, 5 on a 5-point stencil).
//! 3. **Compressed evaluation**: `vmap` of `jvp` (of `vjp`, of `jvp` of the
//!    gradient) over the colored seeds ([`ColorSeed`], an op like the dense
//!    transforms' `Basis`), then [`Decompress`], a gather by a table fixed
//!    at this point, to the nonzeros in the pattern's CSC order.
//!
//! Steps 1 and 2 depend only on the arguments' structure and types: they
//! run once per signature, when the function is traced, and their result
//! ([`SparsePlan`]) is cached beside the compiled plan; a call runs the
//! colored products and the gather only. [`SparseValues`] is the
//! transform as a [`Function`] whose result is the nonzero values (shape
//! `[nnz]`), so it composes with `vmap` (a batch of values `[B, nnz]`
//! sharing one pattern), `jit` and the rest. The facade's `sparse_jacfwd`
//! calls [`SparseValues::products_fn`] instead (the products before the
//! gather) and pairs them with the plan: its matrix gathers the values
//! when asked for, or reads another layout (its diagonals) straight from
//! the products.

use crate::ad::{jvp_graph, vjp_graph_wrt};
use crate::diff::{
    chosen, dense_float, select, select_dtypes, types_of, with_captures, Argnum, Argnums, Selector,
};
use crate::vmap::vmap_graph;
use anvil_core::sparsity::{Detector, IndexSets, DEFAULT_MAX_ENTRIES};
use anvil_core::{
    trace_fn, trace_with, Batched, DType, Dyn, Error, Evaluator, Function, Graph, IntoFunction,
    PlanCache, Result, Tensor, TensorType, TreeDef, Var,
};
use anvil_ops::ad::dense;
use anvil_ops::batching::move_axis;
use anvil_ops::sparse::{ColorSeed, Decompress, Table};
use anvil_ops::{concatenate, VarExt};
use anvil_sparse::{BiColoring, ColumnColoring, Order, RowColoring, SparsityPattern, StarColoring};
use std::fmt::Debug;
use std::sync::Arc;

/// Which sparse derivative a [`SparseValues`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// The Jacobian by colored JVPs (column coloring).
    Forward,
    /// The Jacobian by colored VJPs (row coloring).
    Reverse,
    /// The Hessian of a scalar function by colored Hessian-vector products
    /// (forward over reverse, star coloring).
    Hessian,
    /// The Jacobian by colored JVPs and colored VJPs together (a
    /// bidirectional coloring: each nonzero is read from the forward or
    /// the reverse products). Never more passes than either one-sided
    /// coloring; far fewer on patterns with dense rows and dense columns
    /// (an arrowhead: 3 instead of `n`).
    Bidirectional,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Forward => "sparse_jacfwd",
            Mode::Reverse => "sparse_jacrev",
            Mode::Hessian => "sparse_hessian",
            Mode::Bidirectional => "sparse_jacobian",
        }
    }
}

/// What detection and coloring found for one signature: the pattern, the
/// coloring and the decompression table.
#[derive(Debug)]
pub struct SparsePlan {
    pattern: Arc<SparsityPattern>,
    colors: Vec<u32>,
    num_colors: usize,
    row_colors: Vec<u32>,
    num_row_colors: usize,
    map: Table,
    len: usize,
}

impl SparsePlan {
    /// The pattern (`m × n`; `n × n` and symmetric for a Hessian).
    pub fn pattern(&self) -> &Arc<SparsityPattern> {
        &self.pattern
    }

    /// The color of each column (forward, Hessian, and the JVPs of
    /// bidirectional mode) or row (reverse); `u32::MAX` for one in no seed.
    pub fn colors(&self) -> &[u32] {
        &self.colors
    }

    /// The number of colors: of JVPs, VJPs or Hessian-vector products a
    /// call runs (bidirectional: JVPs and VJPs together).
    pub fn num_colors(&self) -> usize {
        self.num_colors
    }

    /// Bidirectional mode: the color of each row (one VJP per color;
    /// `u32::MAX` for a row in no seed); empty in the other modes.
    pub fn row_colors(&self) -> &[u32] {
        &self.row_colors
    }

    /// Bidirectional mode: how many of the [`num_colors`](Self::num_colors)
    /// passes are VJPs (the others are JVPs); 0 in the other modes.
    pub fn num_row_colors(&self) -> usize {
        self.num_row_colors
    }

    /// The decompression: entry `p` of the values (in the pattern's CSC
    /// order) is entry `map[p]` of the compressed products, which have
    /// [`products_len`](Self::products_len) entries (see
    /// [`SparseValues::products_fn`]).
    pub fn map(&self) -> &[u32] {
        self.map.as_slice()
    }

    /// The number of compressed products a call computes (every entry of
    /// [`map`](Self::map) is below it).
    pub fn products_len(&self) -> usize {
        self.len
    }
}

/// The nonzero values of a sparse Jacobian or Hessian, as a function: see
/// the [module docs](self), and the facade's `sparse_jacfwd`,
/// `sparse_jacrev` and `sparse_hessian` for the user-facing forms.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::transforms::sparse::{Mode, SparseValues};
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3])?;
/// let values = SparseValues::new(|x: &Var| x.square(), Mode::Forward);
/// // The diagonal Jacobian 2x: three nonzeros, one JVP.
/// assert_eq!(values.eval(&x)?.to_vec::<f64>()?, vec![2.0, 4.0, 6.0]);
/// let plan = values.plan(&x)?;
/// assert_eq!((plan.pattern().nnz(), plan.num_colors()), (3, 1));
/// # Ok::<(), anvil::Error>(())
/// ```
pub struct SparseValues<F, S = Argnum<0>> {
    f: F,
    sel: S,
    mode: Mode,
    known: Option<Arc<SparsityPattern>>,
    order: Order,
    evaluator: Option<&'static dyn Evaluator>,
    max_entries: usize,
    plans: PlanCache,
    cache: PlanCache,
}

impl<F: Clone, S: Clone> Clone for SparseValues<F, S> {
    fn clone(&self) -> Self {
        SparseValues {
            f: self.f.clone(),
            sel: self.sel.clone(),
            plans: PlanCache::new(),
            cache: PlanCache::new(),
            known: self.known.clone(),
            ..*self
        }
    }
}

impl<F, S: Debug> Debug for SparseValues<F, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SparseValues")
            .field("mode", &self.mode)
            .field("argnums", &self.sel)
            .field("order", &self.order)
            .field("known_pattern", &self.known.is_some())
            .finish_non_exhaustive()
    }
}

impl<F> SparseValues<F> {
    /// The sparse derivative of `f` of kind `mode`, with respect to its
    /// first argument.
    pub fn new<M>(f: impl IntoFunction<M, Func = F>, mode: Mode) -> SparseValues<F> {
        SparseValues {
            f: f.into_function(),
            sel: Argnum,
            mode,
            known: None,
            order: Order::default(),
            evaluator: None,
            max_entries: DEFAULT_MAX_ENTRIES,
            plans: PlanCache::new(),
            cache: PlanCache::new(),
        }
    }
}

impl<F, S> SparseValues<F, S> {
    fn with_sel<T>(self, sel: T) -> SparseValues<F, T> {
        SparseValues {
            f: self.f,
            sel,
            mode: self.mode,
            known: self.known,
            order: self.order,
            evaluator: self.evaluator,
            max_entries: self.max_entries,
            plans: PlanCache::new(),
            cache: PlanCache::new(),
        }
    }

    /// With respect to argument `N` (default `0`).
    pub fn argnum<const N: usize>(self) -> SparseValues<F, Argnum<N>> {
        self.with_sel(Argnum::<N>)
    }

    /// With respect to several arguments: the columns are their leaves'
    /// elements, concatenated in the order given.
    pub fn argnums(self, argnums: &[usize]) -> SparseValues<F, Argnums> {
        self.with_sel(Argnums::new(argnums))
    }

    /// Uses `pattern` instead of detecting one (it must hold every
    /// nonzero: an entry outside it is lost; for a Hessian it is
    /// symmetrized).
    pub fn with_pattern(mut self, pattern: impl Into<Arc<SparsityPattern>>) -> Self {
        self.known = Some(pattern.into());
        self.plans = PlanCache::new();
        self.cache = PlanCache::new();
        self
    }

    /// The vertex order of the coloring (default [`Order::Saturation`]).
    pub fn order(mut self, order: Order) -> Self {
        self.order = order;
        self.plans = PlanCache::new();
        self.cache = PlanCache::new();
        self
    }

    /// Lets detection compute integer values (indices) from constants
    /// with `eval`, so that indexing by computed indices is exact (see
    /// [`Detector::evaluator`]).
    pub fn evaluator(mut self, eval: &'static dyn Evaluator) -> Self {
        self.evaluator = Some(eval);
        self
    }

    /// The largest number of entries one value's index sets may hold
    /// during detection (default [`DEFAULT_MAX_ENTRIES`]).
    pub fn max_entries(mut self, n: usize) -> Self {
        self.max_entries = n;
        self
    }

    /// Which derivative this is.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    fn detector(&self) -> Detector<'static> {
        let d = Detector::new().max_entries(self.max_entries);
        match self.evaluator {
            Some(e) => d.evaluator(e),
            None => d,
        }
    }
}

impl<F: Function, S: Selector<F::Args>> SparseValues<F, S> {
    /// The pattern, coloring and decompression for arguments like `args`
    /// (detected and colored on the first request for their signature,
    /// then cached; a call that traces the function fills the same cache).
    ///
    /// # Errors
    /// As a call.
    pub fn plan(&self, args: impl anvil_core::Flatten<Tensor>) -> Result<Arc<SparsePlan>> {
        let arity = <F::Args as anvil_core::function::Args>::ARITY;
        let def = anvil_core::function::fit_args(self.mode.name(), args.def(), arity)?;
        let mut types = Vec::new();
        args.for_each_leaf(&mut |t| types.push(t.ty()));
        self.plan_for(&def, &types)
    }

    /// [`SparseValues::plan`] for arguments of structure `def` (fitted to
    /// the function's arity) and leaf types `types`.
    ///
    /// # Errors
    /// As a call.
    pub fn plan_for(&self, def: &TreeDef, types: &[TensorType]) -> Result<Arc<SparsePlan>> {
        self.cached_plan(def, types, || {
            let (graph, _) = anvil_core::function::trace_types(&self.f, def, types)?;
            Ok(graph)
        })
    }

    /// The plan for a signature, built from the graph `traced` gives on a miss.
    fn cached_plan(
        &self,
        def: &TreeDef,
        types: &[TensorType],
        traced: impl FnOnce() -> Result<Graph>,
    ) -> Result<Arc<SparsePlan>> {
        let what = self.mode.name();
        let entry = self.plans.get_or_try_insert(def, types, || {
            let dtypes: Vec<DType> = types.iter().map(TensorType::dtype).collect();
            let sel = select_dtypes(what, self.sel.indices(), self.sel.single(), def, &dtypes)?;
            Ok(Arc::new(self.build_plan(&traced()?, &sel.leaves)?))
        })?;
        entry
            .downcast::<SparsePlan>()
            .map_err(|_| Error::invalid(what, "cache", "holds another type"))
    }

    /// Detects (unless given) and colors the pattern of `graph`'s
    /// derivative with respect to the leaves `cols`.
    fn build_plan(&self, graph: &Graph, cols: &[usize]) -> Result<SparsePlan> {
        let what = self.mode.name();
        let types = graph.input_types();
        concrete_sizes(what, types.iter().chain(&graph.output_types()))?;
        let n: usize = cols.iter().map(|&a| types[a].numel()).sum();
        let pattern = match (&self.known, self.mode) {
            (Some(p), Mode::Hessian) => {
                Arc::new(check_shape(what, p, n, n)?.symmetrize().map_err(sparse_error(what))?)
            }
            (Some(p), _) => {
                let m = graph.output_types().iter().map(TensorType::numel).sum();
                check_shape(what, p, m, n)?;
                p.clone()
            }
            (None, Mode::Hessian) => {
                let g = gradient_graph(graph, &types, cols)?;
                let p = detect(&g, &types, cols, &self.detector())?;
                Arc::new(p.symmetrize().map_err(sparse_error(what))?)
            }
            (None, _) => Arc::new(detect(graph, &types, cols, &self.detector())?),
        };
        color(what, pattern, self.mode, self.order)
    }

    /// The compressed products and their decompression, in the current trace.
    fn values(&self, graph: &Graph, all: &[Var], cols: &[usize], plan: &SparsePlan) -> Result<Var> {
        let comp = self.products(graph, all, cols, plan)?;
        if plan.pattern.nnz() == 0 {
            // No entries: the products are the empty values.
            return Ok(comp);
        }
        let op = Decompress { map: plan.map.clone(), len: plan.len };
        Ok(Var::apply_op(Box::new(op), &[&comp]))
    }

    /// The compressed products (`[len]`, see [`SparsePlan::map`]), in the
    /// current trace.
    fn products(
        &self,
        graph: &Graph,
        all: &[Var],
        cols: &[usize],
        plan: &SparsePlan,
    ) -> Result<Var> {
        let like = &all[cols[0]];
        let dtype = like.dtype();
        if plan.pattern.nnz() == 0 {
            return Ok(like.constant_like(Tensor::zeros_of(&[0], dtype)?));
        }
        let k = plan.num_colors;
        let comp = match self.mode {
            Mode::Forward => compressed_forward(graph, all, cols, &plan.colors, k, dtype)?,
            Mode::Reverse => compressed_reverse(graph, all, cols, &plan.colors, k, dtype)?,
            Mode::Hessian => {
                let types = types_of(all);
                let g = gradient_graph(graph, &types, cols)?;
                compressed_forward(&g, all, cols, &plan.colors, k, dtype)?
            }
            Mode::Bidirectional => {
                let (kr, colors) = (plan.num_row_colors, &plan.row_colors);
                let kf = k - kr;
                let mut parts = Vec::new();
                if kf > 0 {
                    parts.push(compressed_forward(graph, all, cols, &plan.colors, kf, dtype)?);
                }
                if kr > 0 {
                    parts.push(compressed_reverse(graph, all, cols, colors, kr, dtype)?);
                }
                match &parts[..] {
                    [one] => one.clone(),
                    _ => concatenate(&parts.iter().collect::<Vec<_>>(), 0),
                }
            }
        };
        Ok(comp)
    }

    /// The transform as a function of its compressed products rather than
    /// its values: what a call computes before the decompression (a
    /// `[len]` vector; the values are `products[map[p]]`, see
    /// [`SparsePlan::map`]). A caller that reads the values once (in
    /// another layout, say) gathers them itself and skips writing them.
    ///
    /// ```
    /// use anvil::prelude::*;
    /// use anvil::transforms::sparse::{Mode, SparseValues};
    /// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[4])?;
    /// // A tridiagonal Jacobian: 3 colors, 3 JVPs of 4 elements each.
    /// let stencil = |x: &Var| {
    ///     let p = x.pad(&[(1, 1)], 0.0);
    ///     p.slice_axis(0, None, Some(-2), 1) + p.slice_axis(0, Some(2), None, 1) - x.square()
    /// };
    /// let values = SparseValues::new(stencil, Mode::Forward);
    /// let plan = values.plan(&x)?;
    /// let products = values.products_fn().eval(&x)?.to_vec::<f64>()?;
    /// assert_eq!(products.len(), plan.products_len());
    /// let gathered: Vec<f64> = plan.map().iter().map(|&m| products[m as usize]).collect();
    /// assert_eq!(gathered, values.eval(&x)?.to_vec::<f64>()?);
    /// # Ok::<(), anvil::Error>(())
    /// ```
    pub fn products_fn(&self) -> SparseProducts<'_, F, S> {
        SparseProducts(self)
    }

    /// Traces `f` on `args`, with the plan of their signature.
    fn traced(&self, def: &TreeDef, args: &[Var]) -> Result<Traced> {
        let what = self.mode.name();
        let sel = select(what, self.sel.indices(), self.sel.single(), def, args)?;
        let t = trace_fn(&self.f, def, &types_of(args))?;
        let plan = self.cached_plan(def, &types_of(args), || Ok(t.graph.clone()))?;
        let all = with_captures(args, &t.captures);
        Ok(Traced { graph: t.graph, plan, all, cols: sel.leaves })
    }
}

/// `f` traced on a call's arguments (see [`SparseValues::traced`]).
struct Traced {
    graph: Graph,
    plan: Arc<SparsePlan>,
    /// The arguments, the captured values appended.
    all: Vec<Var>,
    /// The chosen leaves (the columns).
    cols: Vec<usize>,
}

/// A [`SparseValues`] as a function of its compressed products (see
/// [`SparseValues::products_fn`]).
pub struct SparseProducts<'a, F, S>(&'a SparseValues<F, S>);

impl<F, S: Debug> Debug for SparseProducts<'_, F, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SparseProducts").field(self.0).finish()
    }
}

impl<F: Function, S: Selector<F::Args>> Function for SparseProducts<'_, F, S> {
    type Args = F::Args;
    type Output = Var;
    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        let t = self.0.traced(def, args)?;
        let products = self.0.products(&t.graph, &t.all, &t.cols, &t.plan)?;
        Ok(Dyn { def: TreeDef::Leaf, leaves: vec![products] })
    }
    fn name(&self) -> String {
        format!("{}_products({})", self.0.mode.name(), self.0.f.name())
    }
}

impl<F: Function, S: Selector<F::Args>> Function for SparseValues<F, S> {
    type Args = F::Args;
    type Output = Var;
    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        let t = self.traced(def, args)?;
        let values = self.values(&t.graph, &t.all, &t.cols, &t.plan)?;
        Ok(Dyn { def: TreeDef::Leaf, leaves: vec![values] })
    }
    fn cache(&self) -> Option<&PlanCache> {
        Some(&self.cache)
    }
    fn name(&self) -> String {
        format!("{}({})", self.mode.name(), self.f.name())
    }
}

fn sparse_error(what: &'static str) -> impl Fn(anvil_sparse::SparseError) -> Error {
    move |e| Error::invalid(what, "pattern", e.to_string())
}

/// `p`, checked to be `m × n`.
fn check_shape<'a>(
    what: &str,
    p: &'a Arc<SparsityPattern>,
    m: usize,
    n: usize,
) -> Result<&'a Arc<SparsityPattern>> {
    if p.shape() != (m, n) {
        return Err(Error::invalid(
            what,
            "pattern",
            format!("is {} × {}, the derivative is {m} × {n}", p.nrows(), p.ncols()),
        ));
    }
    Ok(p)
}

// -------------------------------------------------------------- detection

/// The pattern of the Jacobian of `graph`'s outputs (rows, concatenated)
/// with respect to the elements of its inputs `cols` (columns,
/// concatenated), by the sparsity interpreter.
///
/// # Errors
/// The interpreter's error; a symbolic dimension in `types`; more than
/// `u32::MAX` columns or rows.
pub fn detect(
    graph: &Graph,
    types: &[TensorType],
    cols: &[usize],
    cx: &Detector<'_>,
) -> Result<SparsityPattern> {
    concrete_sizes("sparsity", types)?;
    let mut inputs: Vec<Arc<IndexSets>> =
        types.iter().map(|t| Arc::new(IndexSets::empty(t.numel()))).collect();
    let mut next = 0usize;
    for &a in cols {
        inputs[a] = Arc::new(IndexSets::identity(types[a].numel(), next)?);
        next += types[a].numel();
    }
    let outs = cx.propagate(graph, &inputs, &vec![None; types.len()])?;
    rows_to_pattern(&outs, next)
}

/// An error naming the first of `types` with a symbolic dimension: a
/// pattern and its coloring are of concrete sizes, which a symbolic length
/// (`jit(...).symbolic`) does not have.
fn concrete_sizes<'t>(what: &str, types: impl IntoIterator<Item = &'t TensorType>) -> Result<()> {
    match types.into_iter().find(|t| t.is_symbolic()) {
        None => Ok(()),
        Some(t) => Err(Error::invalid(
            what,
            "shapes",
            format!(
                "{t} has a symbolic dimension: a sparsity pattern and its coloring need \
                 concrete sizes (trace at concrete shapes, or batch over the symbolic axis \
                 with vmap)"
            ),
        )),
    }
}

/// The rows' index sets (outputs concatenated) as a CSC pattern.
fn rows_to_pattern(rows: &[Arc<IndexSets>], ncols: usize) -> Result<SparsityPattern> {
    let m: usize = rows.iter().map(|r| r.len()).sum();
    let nnz: usize = rows.iter().map(|r| r.nnz()).sum();
    let too_large = |what: &str, v: usize| {
        Error::invalid("sparsity", "pattern", format!("{v} {what} exceed the u32 index type"))
    };
    for (what, v) in [("rows", m), ("columns", ncols), ("nonzeros", nnz)] {
        if v > anvil_sparse::pattern::MAX_DIM {
            return Err(too_large(what, v));
        }
    }
    // A counting-sort transpose: rows visited in order keep columns sorted.
    let mut col_ptr = vec![0u32; ncols + 1];
    for r in rows {
        for &c in r.as_csr().1 {
            col_ptr[c as usize + 1] += 1;
        }
    }
    for j in 0..ncols {
        col_ptr[j + 1] += col_ptr[j];
    }
    let mut next: Vec<u32> = col_ptr[..ncols].to_vec();
    let mut row_idx = vec![0u32; nnz];
    let mut i = 0u32;
    for r in rows {
        for e in 0..r.len() {
            for &c in r.row(e) {
                row_idx[next[c as usize] as usize] = i;
                next[c as usize] += 1;
            }
            i += 1;
        }
    }
    SparsityPattern::from_csc(m, ncols, col_ptr, row_idx).map_err(sparse_error("sparsity"))
}

/// A graph of `graph`'s inputs returning the gradient of its one scalar
/// output with respect to the inputs `cols`.
fn gradient_graph(graph: &Graph, types: &[TensorType], cols: &[usize]) -> Result<Graph> {
    let outs = graph.output_types();
    let out = crate::diff::scalar_output("sparse_hessian", &outs)?.clone();
    trace_with(types, |vars| {
        let one = vars[cols[0]].scalar_like(1.0).cast(out.dtype());
        let (_, in_cts) = vjp_graph_wrt(graph, vars, &[Some(one)], &chosen(cols, types.len()))?;
        Ok(cols.iter().map(|&a| dense(&in_cts[a], &vars[a])).collect())
    })
}

// --------------------------------------------------------------- coloring

/// Colors `pattern` for `mode` and builds the decompression table.
fn color(
    what: &'static str,
    pattern: Arc<SparsityPattern>,
    mode: Mode,
    order: Order,
) -> Result<SparsePlan> {
    let (m, n) = pattern.shape();
    let (colors, k, map, len) = match mode {
        Mode::Forward => {
            let c = quick_first(order, max_per_row(&pattern), |o| {
                ColumnColoring::new(pattern.clone(), o)
            });
            let k = c.num_colors();
            let (pos, len) = positions(what, m, k)?;
            // The JVPs give B = J S (m × k) as [k, m]: entry (i, c) at c m + i.
            let map = c.decompress(faer::MatRef::from_column_major_slice(&pos, m, k));
            (c.coloring().colors().to_vec(), k, map, len)
        }
        Mode::Reverse => {
            let per_col = pattern.col_ptr().windows(2).map(|w| (w[1] - w[0]) as usize).max();
            let c =
                quick_first(order, per_col.unwrap_or(0), |o| RowColoring::new(pattern.clone(), o));
            let k = c.num_colors();
            let (pos, len) = positions(what, n, k)?;
            // The VJPs give C = Sᵀ J (k × n) as [k, n]: entry (c, j) at c n + j.
            let map = c.decompress(faer::MatRef::from_row_major_slice(&pos, k, n));
            (c.coloring().colors().to_vec(), k, map, len)
        }
        Mode::Hessian => {
            let c = StarColoring::new(pattern.clone(), order).map_err(sparse_error(what))?;
            let k = c.num_colors();
            let (pos, len) = positions(what, n, k)?;
            let map = c.decompress(faer::MatRef::from_column_major_slice(&pos, n, k));
            (c.coloring().colors().to_vec(), k, map, len)
        }
        Mode::Bidirectional => return color_bidirectional(what, pattern, order),
    };
    let map = Table::new(map.map_err(sparse_error(what))?);
    Ok(SparsePlan {
        pattern,
        colors,
        num_colors: k,
        row_colors: Vec::new(),
        num_row_colors: 0,
        map,
        len,
    })
}

/// A bidirectional coloring's plan: the JVPs' colors, then the VJPs'.
fn color_bidirectional(
    what: &'static str,
    pattern: Arc<SparsityPattern>,
    order: Order,
) -> Result<SparsePlan> {
    let (m, n) = pattern.shape();
    let c = BiColoring::new(pattern.clone(), order);
    let (kf, kr) = (c.column_coloring().num_colors(), c.row_coloring().num_colors());
    // The JVPs' [kf, m] first, then the VJPs' [kr, n].
    let (pos, len) = positions(what, 1, m.saturating_mul(kf).saturating_add(kr.saturating_mul(n)))?;
    let (b, r) = pos.split_at(m * kf);
    let b = faer::MatRef::from_column_major_slice(b, m, kf);
    let r = faer::MatRef::from_row_major_slice(r, kr, n);
    let map = Table::new(c.decompress(b, r).map_err(sparse_error(what))?);
    Ok(SparsePlan {
        pattern,
        colors: c.column_coloring().colors().to_vec(),
        num_colors: kf + kr,
        row_colors: c.row_coloring().colors().to_vec(),
        num_row_colors: kr,
        map,
        len,
    })
}

/// A coloring in `order`; for the default order, the natural order's
/// first when it meets `lower` (a lower bound on the colors: the most
/// nonzeros of a row, whose columns all need colors of their own), since
/// it is then optimal and the natural order is the fastest (a banded
/// pattern: 3 colors either way, in a third of the time).
fn quick_first<C: Colored>(order: Order, lower: usize, color: impl Fn(Order) -> C) -> C {
    if order == Order::Saturation {
        let quick = color(Order::Natural);
        if quick.colors() <= lower {
            return quick;
        }
    }
    color(order)
}

/// The number of colors of a coloring.
trait Colored {
    fn colors(&self) -> usize;
}
impl Colored for ColumnColoring {
    fn colors(&self) -> usize {
        self.num_colors()
    }
}
impl Colored for RowColoring {
    fn colors(&self) -> usize {
        self.num_colors()
    }
}

/// The most nonzeros in one row of `p`.
fn max_per_row(p: &SparsityPattern) -> usize {
    let mut count = vec![0u32; p.nrows()];
    for &r in p.row_idx() {
        count[r as usize] += 1;
    }
    count.into_iter().max().unwrap_or(0) as usize
}

/// `0, 1, ..., rows·k - 1` (the positions of the compressed products), checked to fit `u32`.
fn positions(what: &str, rows: usize, k: usize) -> Result<(Vec<u32>, usize)> {
    let len = rows.checked_mul(k).filter(|&l| l <= u32::MAX as usize).ok_or_else(|| {
        Error::invalid(
            what,
            "size",
            format!("{rows} × {k} compressed products exceed u32 positions"),
        )
    })?;
    Ok(((0..len as u32).collect(), len))
}

// ------------------------------------------------- compressed evaluation

/// The seeds of the leaves `leaves` (of types `types`), colored by
/// consecutive runs of `colors`, batched along a new first axis of `k`.
/// In front, the batch axis leaves the space's axes last: operands that do
/// not depend on the seed broadcast against it in long contiguous runs,
/// and a seed's block is one comparison per element.
fn seeds(
    like: &Var,
    types: &[TensorType],
    leaves: &[usize],
    colors: &[u32],
    k: usize,
) -> Vec<Batched> {
    let mut start = 0;
    leaves
        .iter()
        .map(|&a| {
            let n = types[a].numel();
            let table = Table::new(colors[start..start + n].to_vec());
            start += n;
            let seed = ColorSeed::new(&types[a], table, k, true);
            Batched::new(like.tracer().apply(Box::new(seed), &[]), Some(0))
        })
        .collect()
}

/// A batched value of `k` elements as a `[k, numel]` matrix of `dtype`.
fn as_rows(b: &Batched, k: usize, dtype: DType) -> Var {
    let elem = b.logical_shape();
    let numel = elem.iter().product::<usize>() as i64;
    let v = match b.axis {
        Some(a) => move_axis(&b.var, a, 0),
        None => {
            let mut shape = vec![k];
            shape.extend_from_slice(&elem);
            b.var.unsqueeze(0).broadcast_to(&shape)
        }
    };
    let v = v.reshape(&[k as i64, numel]);
    if v.dtype() == dtype {
        v
    } else {
        v.cast(dtype)
    }
}

/// Blocks `[k, numel_i]` joined into `[k, Σ numel_i]`, flattened.
fn flat_rows(blocks: &[Batched], k: usize, dtype: DType) -> Var {
    let rows: Vec<Var> = blocks.iter().map(|b| as_rows(b, k, dtype)).collect();
    let all = match &rows[..] {
        [one] => one.clone(),
        _ => concatenate(&rows.iter().collect::<Vec<_>>(), 1),
    };
    all.reshape(&[-1])
}

/// `J S` as `[k · m]` (row-major `[k, m]`): `k` JVPs of `graph` under
/// `vmap`, the tangent of input `cols[i]` the colored seed of its columns.
fn compressed_forward(
    graph: &Graph,
    all: &[Var],
    cols: &[usize],
    colors: &[u32],
    k: usize,
    dtype: DType,
) -> Result<Var> {
    let types = types_of(all);
    let n = types.len();
    let mut with_tangents = types.clone();
    with_tangents.extend(cols.iter().map(|&a| types[a].clone()));
    let tangent_fn = trace_with(&with_tangents, |vars| {
        let mut ts: Vec<Option<Var>> = vec![None; n];
        for (j, &a) in cols.iter().enumerate() {
            ts[a] = Some(vars[n + j].clone());
        }
        let (outs, touts) = jvp_graph(graph, &vars[..n], &ts)?;
        Ok(touts.iter().zip(&outs).map(|(t, o)| dense_float(t, o)).collect())
    })?;
    let mut args: Vec<Batched> = all.iter().map(|a| Batched::new(a.clone(), None)).collect();
    args.extend(seeds(&all[cols[0]], &types, cols, colors, k));
    let outs = vmap_graph(&tangent_fn, &args, k)?;
    Ok(flat_rows(&outs, k, dtype))
}

/// `Sᵀ J` as `[k · n]` (row-major `[k, n]`): `k` VJPs of
/// `graph` under `vmap`, the cotangent of each output the colored seed of
/// its rows.
fn compressed_reverse(
    graph: &Graph,
    all: &[Var],
    cols: &[usize],
    colors: &[u32],
    k: usize,
    dtype: DType,
) -> Result<Var> {
    let types = types_of(all);
    let n = types.len();
    let outs = graph.output_types();
    if let Some((o, t)) = outs.iter().enumerate().find(|(_, t)| !t.dtype().is_float()) {
        return Err(Error::dtype(
            "sparse_jacrev",
            format!("output {o}"),
            t.dtype(),
            "a float type",
        ));
    }
    let mut with_cts = types.clone();
    with_cts.extend(outs.iter().cloned());
    let ct_fn = trace_with(&with_cts, |vars| {
        let cts: Vec<Option<Var>> = (0..outs.len()).map(|j| Some(vars[n + j].clone())).collect();
        let (_, in_cts) = vjp_graph_wrt(graph, &vars[..n], &cts, &chosen(cols, n))?;
        Ok(cols.iter().map(|&a| dense(&in_cts[a], &vars[a])).collect())
    })?;
    let out_leaves: Vec<usize> = (0..outs.len()).collect();
    let mut args: Vec<Batched> = all.iter().map(|a| Batched::new(a.clone(), None)).collect();
    args.extend(seeds(&all[cols[0]], &outs, &out_leaves, colors, k));
    let res = vmap_graph(&ct_fn, &args, k)?;
    Ok(flat_rows(&res, k, dtype))
}
