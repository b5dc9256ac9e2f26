//! Sparse Jacobians and Hessians: [`sparse_jacfwd`], [`sparse_jacrev`],
//! [`sparse_hessian`], returning a [`SparseMatrix`] (CSC over a pattern
//! shared with the cached plan, handed to faer without copying).
//!
//! The pattern is found by sparsity detection (a transform over the
//! traced graph with a rule per op, see [`crate::core::sparsity`]) and
//! colored ([`anvil_sparse`], re-exported here: [`Order`],
//! [`ColumnColoring`], [`StarColoring`]...) once per argument signature,
//! when the function is first traced; a call then runs only the colored
//! JVPs (VJPs, Hessian-vector products) and the decompression. How it
//! works is in [`crate::transforms::sparse`]; orientation and numbering:
//! the matrix is `(out, in)` — row `i` is output element `i`, column `j`
//! input element `j`, each numbered row-major within its leaf and leaves
//! concatenated (outputs in order; the chosen arguments' leaves in order).
//!
//! ```
//! use anvil::prelude::*;
//! use anvil::sparse::sparse_jacfwd;
//!
//! // A 1-D stencil: the Jacobian is tridiagonal, 3 JVPs whatever n.
//! let f = |u: &Var| {
//!     let up = u.pad(&[(1, 1)], 0.0);
//!     up.slice_axis(0, None, Some(-2), 1) - u * 2.0 + up.slice_axis(0, Some(2), None, 1) + u.sin()
//! };
//! let u = Tensor::linspace(0.0, 1.0, 100)?;
//! let jac = sparse_jacfwd(f);
//! let j = jac.eval(&u)?;
//! assert_eq!((j.nrows(), j.ncols(), j.nnz()), (100, 100, 298));
//! assert_eq!(jac.plan(&u)?.num_colors(), 3);
//! assert_eq!(j.get(1, 0), Some(1.0));
//! assert!((j.get(5, 5).unwrap() - (-2.0 + (5.0f64 / 99.0).cos())).abs() < 1e-15);
//! // faer's sparse matrix over the cached pattern, no copy:
//! let m = j.as_faer::<f64>()?;
//! assert_eq!(m.compute_nnz(), 298);
//! # Ok::<(), anvil::Error>(())
//! ```

use crate::core::function::{fit_args_named, Args};
use crate::core::tree::Flatten;
use crate::{cpu, Dyn, Element, Error, Function, IntoFunction, Parallelism, PlanCache, Result};
use crate::{Tensor, TreeDef, Var};
use anvil_transforms::diff::{Argnum, Argnums, Selector};
use faer::sparse::{SparseColMat, SparseColMatRef};
use std::sync::{Arc, OnceLock};

pub use anvil_sparse::{
    gallery, AcyclicColoring, BiColoring, Coloring, ColumnColoring, Order, RowColoring,
    SparseError, SparsityPattern, StarColoring,
};
pub use anvil_transforms::sparse::{detect, Mode, SparsePlan, SparseValues};

/// The CPU backend as detection's evaluator of integer values (indices).
static CPU: cpu::Cpu = cpu::Cpu;

/// A sparse Jacobian or Hessian transform; see [`sparse_jacfwd`].
pub struct SparseJacobian<F, S = Argnum<0>> {
    inner: SparseValues<F, S>,
    compiled: PlanCache,
}

impl<F: Clone, S: Clone> Clone for SparseJacobian<F, S> {
    fn clone(&self) -> Self {
        SparseJacobian { inner: self.inner.clone(), compiled: PlanCache::new() }
    }
}

impl<F, S: std::fmt::Debug> std::fmt::Debug for SparseJacobian<F, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SparseJacobian({:?})", self.inner)
    }
}

fn new<M, F: IntoFunction<M>>(f: F, mode: Mode) -> SparseJacobian<F::Func> {
    SparseJacobian { inner: SparseValues::new(f, mode).evaluator(&CPU), compiled: PlanCache::new() }
}

/// The Jacobian of `f` with respect to its first argument, as a sparse
/// matrix, by forward mode: one JVP per color of a column coloring of the
/// detected pattern (3 for a 1-D stencil, 5 for a 2-D 5-point stencil,
/// whatever the size). Best when columns are few or the coloring small.
///
/// See the [module docs](self) for an example and the orientation;
/// [`SparseJacobian::argnum`] and [`SparseJacobian::argnums`] choose other
/// arguments, [`SparseJacobian::with_pattern`] skips detection.
pub fn sparse_jacfwd<M, F: IntoFunction<M>>(f: F) -> SparseJacobian<F::Func> {
    new(f, Mode::Forward)
}

/// The Jacobian as [`sparse_jacfwd`] gives it, by reverse mode: one VJP
/// per color of a row coloring (few when rows are few or each input
/// reaches few outputs).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::sparse::sparse_jacrev;
/// // f(x) = [x0 x1, x1 x2, x2 x3]: row i reads columns i, i + 1.
/// let f = |x: &Var| x.slice_axis(0, None, Some(-1), 1) * x.slice_axis(0, Some(1), None, 1);
/// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[4])?;
/// let j = sparse_jacrev(f).eval(&x)?;
/// assert_eq!(j.to_dense()?.to_vec::<f64>()?, vec![2.0, 1.0, 0.0, 0.0, 0.0, 3.0, 2.0, 0.0, 0.0, 0.0, 4.0, 3.0]);
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn sparse_jacrev<M, F: IntoFunction<M>>(f: F) -> SparseJacobian<F::Func> {
    new(f, Mode::Reverse)
}

/// The Jacobian as [`sparse_jacfwd`] gives it, by both modes at once: a
/// bidirectional coloring gives some columns colors (one JVP each) and
/// some rows colors (one VJP each), and each nonzero is read from one of
/// the two products. It never needs more passes than the better of
/// [`sparse_jacfwd`] and [`sparse_jacrev`] (it tries both), and needs far
/// fewer when the pattern has dense rows and dense columns.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::sparse::{sparse_jacfwd, sparse_jacobian};
/// // An arrowhead: y = x · x0, and y0 also adds Σ x²: a dense row and a
/// // dense column, n colors either one-sided way.
/// let f = |x: &Var| {
///     let y = x * x.index_axis(0, 0);
///     let head = y.slice_axis(0, None, Some(1), 1) + x.square().sum(&[0]);
///     concatenate(&[&head, &y.slice_axis(0, Some(1), None, 1)], 0)
/// };
/// let x = Tensor::linspace(0.5, 1.5, 40)?;
/// let both = sparse_jacobian(f);
/// let plan = both.plan(&x)?;
/// assert!(plan.num_colors() <= 3, "{} passes", plan.num_colors());
/// assert_eq!(sparse_jacfwd(f).plan(&x)?.num_colors(), 40);
/// let dense = jacfwd(f).eval(&x)?;
/// assert!(both.eval(&x)?.to_dense()?.allclose(&dense, 1e-14, 1e-14));
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn sparse_jacobian<M, F: IntoFunction<M>>(f: F) -> SparseJacobian<F::Func> {
    new(f, Mode::Bidirectional)
}

/// The Hessian of a scalar function as a sparse (symmetric) matrix: the
/// pattern of the Jacobian of the gradient, star-colored, one
/// Hessian-vector product (forward over reverse) per color.
///
/// ```
/// use anvil::prelude::*;
/// use anvil::sparse::sparse_hessian;
/// // Σ (x[i+1] - x[i]²)²: a tridiagonal Hessian.
/// let f = |x: &Var| (x.slice_axis(0, Some(1), None, 1) - x.slice_axis(0, None, Some(-1), 1).square()).square().sum_all();
/// let x = Tensor::linspace(-1.0, 1.0, 50)?;
/// let h = sparse_hessian(f);
/// let hx = h.eval(&x)?;
/// assert_eq!(hx.nnz(), 3 * 50 - 2);
/// assert_eq!(h.plan(&x)?.num_colors(), 3);
/// let dense = hessian(f).eval(&x)?;
/// assert!(hx.to_dense()?.allclose(&dense, 1e-12, 1e-12));
/// # Ok::<(), anvil::Error>(())
/// ```
pub fn sparse_hessian<M, F: IntoFunction<M>>(f: F) -> SparseJacobian<F::Func> {
    new(f, Mode::Hessian)
}

impl<F, S> SparseJacobian<F, S> {
    fn map<T>(
        self,
        g: impl FnOnce(SparseValues<F, S>) -> SparseValues<F, T>,
    ) -> SparseJacobian<F, T> {
        SparseJacobian { inner: g(self.inner), compiled: PlanCache::new() }
    }

    /// With respect to argument `N` (default `0`).
    pub fn argnum<const N: usize>(self) -> SparseJacobian<F, Argnum<N>> {
        self.map(SparseValues::argnum::<N>)
    }

    /// With respect to several arguments: the columns are the elements of
    /// their leaves, concatenated in the order given.
    pub fn argnums(self, argnums: &[usize]) -> SparseJacobian<F, Argnums> {
        self.map(|v| v.argnums(argnums))
    }

    /// Uses a known pattern instead of detecting one; it must hold every
    /// nonzero (entries outside it are not computed), and is colored once
    /// per signature like a detected one.
    pub fn with_pattern(self, pattern: impl Into<Arc<SparsityPattern>>) -> Self {
        self.map(|v| v.with_pattern(pattern))
    }

    /// The vertex order of the coloring (default [`Order::Saturation`]).
    pub fn order(self, order: Order) -> Self {
        self.map(|v| v.order(order))
    }

    /// The limit on the entries of one value's index sets during
    /// detection (a function too dense for sparse differentiation is an
    /// error naming the op).
    pub fn max_entries(self, n: usize) -> Self {
        self.map(|v| v.max_entries(n))
    }

    /// The transform as a function of its values (see [`SparseValues`]).
    pub fn values(&self) -> &SparseValues<F, S> {
        &self.inner
    }
}

/// A compiled call (of the compressed products) and the decompression of
/// its signature.
struct SparseCompiled {
    compiled: crate::Compiled,
    dec: Arc<Decompression>,
}

impl<F: Function, S: Selector<F::Args>> SparseJacobian<F, S> {
    /// The derivative at `args` (given as to [`crate::Eval::eval`]), as a
    /// sparse matrix over the pattern cached for their signature.
    ///
    /// # Errors
    /// As [`crate::Eval::eval`]; a function too dense for detection's
    /// limit; for a Hessian, a function without one scalar float output.
    pub fn eval(&self, args: impl Flatten<Tensor>) -> Result<SparseMatrix> {
        self.eval_with(args, &Parallelism::default())
    }

    /// [`SparseJacobian::eval`] with an explicit parallelism policy.
    ///
    /// # Errors
    /// As [`SparseJacobian::eval`].
    pub fn eval_with(&self, args: impl Flatten<Tensor>, par: &Parallelism) -> Result<SparseMatrix> {
        let given = args.def();
        let mut leaves = args.leaves();
        let hit = match self.compiled.get_for(&given, &leaves) {
            Some(hit) => hit,
            None => {
                let types: Vec<_> = leaves.iter().map(Tensor::ty).collect();
                self.compiled.get_or_try_insert(&given, &types, || {
                    let arity = <F::Args as Args>::ARITY;
                    let def = fit_args_named(|| self.inner.name(), given.clone(), arity)?;
                    // A call computes the compressed products; the matrix
                    // gathers its values from them when they are asked for
                    // (`diagonals` reads them straight from the products).
                    let compiled = crate::compile(&self.inner.products_fn(), &def, &types)?;
                    let plan = self.inner.plan_for(&def, &types)?;
                    Ok(Arc::new(SparseCompiled { compiled, dec: Decompression::new(plan) }))
                })?
            }
        };
        let c = hit
            .downcast::<SparseCompiled>()
            .map_err(|_| Error::invalid(self.inner.name(), "cache", "holds another type"))?;
        leaves.extend(c.compiled.lifted.iter().cloned());
        let mut out = c.compiled.plan.run(&leaves, par)?;
        let products = out.swap_remove(0);
        if products.shape() != [c.dec.plan.products_len()] {
            return Err(Error::shape(
                self.inner.name(),
                &[products.shape()],
                format!(
                    "computed products of this shape, its plan reads {}",
                    c.dec.plan.products_len()
                ),
            ));
        }
        Ok(SparseMatrix::compressed_by(c.dec.clone(), products))
    }

    /// The pattern, coloring and decompression for arguments like `args`
    /// (detected and colored once per signature; nothing is evaluated).
    ///
    /// # Errors
    /// As [`SparseJacobian::eval`].
    pub fn plan(&self, args: impl Flatten<Tensor>) -> Result<Arc<SparsePlan>> {
        self.inner.plan(args)
    }

    /// The pattern for arguments like `args` (see [`SparseJacobian::plan`]).
    ///
    /// # Errors
    /// As [`SparseJacobian::eval`].
    pub fn pattern(&self, args: impl Flatten<Tensor>) -> Result<Arc<SparsityPattern>> {
        Ok(self.plan(args)?.pattern().clone())
    }
}

/// As a function (inside a trace, under `vmap` or `jit`), a sparse
/// Jacobian is its nonzero values, `[nnz]` in the pattern's CSC order.
impl<F: Function, S: Selector<F::Args>> Function for SparseJacobian<F, S> {
    type Args = F::Args;
    type Output = Var;
    fn inline(&self, def: &TreeDef, args: &[Var]) -> Result<Dyn<Var>> {
        self.inner.inline(def, args)
    }
    fn cache(&self) -> Option<&PlanCache> {
        self.inner.cache()
    }
    fn name(&self) -> String {
        self.inner.name()
    }
}

/// The sparsity pattern of `f`'s Jacobian with respect to its first
/// argument at arguments like `args` (only their shapes and dtypes
/// matter): `(out, in)`, see the [module docs](self).
///
/// ```
/// use anvil::prelude::*;
/// // y = [x0 x1, x1 + x2]: row 0 reads columns 0, 1; row 1 columns 1, 2.
/// let f = |x: &Var| stack(&[&(x.index_axis(0, 0) * x.index_axis(0, 1)), &(x.index_axis(0, 1) + x.index_axis(0, 2))], 0);
/// let p = anvil::sparse::jacobian_sparsity(&f, &Tensor::zeros(&[3])?)?;
/// assert_eq!(p.to_string(), "xx.\n.xx\n");
/// # Ok::<(), anvil::Error>(())
/// ```
///
/// # Errors
/// As [`SparseJacobian::plan`].
pub fn jacobian_sparsity<M, F: IntoFunction<M> + Clone>(
    f: &F,
    args: impl Flatten<Tensor>,
) -> Result<Arc<SparsityPattern>>
where
    Argnum<0>: Selector<F::Args>,
{
    sparse_jacfwd(f.clone()).pattern(args)
}

/// The sparsity pattern of the Hessian of a scalar function at arguments
/// like `args` (symmetric).
///
/// # Errors
/// As [`SparseJacobian::plan`]; a function without one scalar float output.
pub fn hessian_sparsity<M, F: IntoFunction<M> + Clone>(
    f: &F,
    args: impl Flatten<Tensor>,
) -> Result<Arc<SparsityPattern>>
where
    Argnum<0>: Selector<F::Args>,
{
    sparse_hessian(f.clone()).pattern(args)
}

// ----------------------------------------------------------------- matrices

/// A sparse matrix in CSC form: a pattern (shared, `u32` indices) and one
/// value per entry, in the pattern's order (column by column, rows
/// increasing).
///
/// A sparse Jacobian's matrix holds the compressed products its call
/// computed and gathers the values from them on the first request
/// ([`values`](SparseMatrix::values), [`as_faer`](SparseMatrix::as_faer),
/// ...); [`get`](SparseMatrix::get) and
/// [`diagonals`](SparseMatrix::diagonals) read the products directly.
#[derive(Clone, Debug)]
pub struct SparseMatrix {
    pattern: Arc<SparsityPattern>,
    values: Values,
}

/// A matrix's values: given, or still compressed.
#[derive(Clone)]
enum Values {
    Given(Tensor),
    /// The products of a sparse derivative's call (`[plan.products_len()]`)
    /// and the values gathered from them by `plan.map()`, once asked for.
    Compressed {
        products: Tensor,
        dec: Arc<Decompression>,
        values: OnceLock<Tensor>,
    },
}

/// How a sparse derivative's values are read from its compressed
/// products: the plan's map, and the maps of the diagonals asked for so
/// far, composed with it (shared by every call of one signature).
struct Decompression {
    plan: Arc<SparsePlan>,
    /// Per set of offsets, for each diagonal element, the index of its
    /// product (`u32::MAX` where the pattern has no entry); the last few
    /// sets asked for.
    diagonals: std::sync::Mutex<Vec<(Vec<i64>, DiagonalMaps)>>,
}

/// For each diagonal asked for, the index of each element's product
/// (`u32::MAX` where the pattern has no entry).
type DiagonalMaps = Arc<Vec<Vec<u32>>>;

/// How many sets of offsets a [`Decompression`] keeps the maps of.
const DIAGONAL_MAPS: usize = 4;

impl Decompression {
    fn new(plan: Arc<SparsePlan>) -> Arc<Decompression> {
        Arc::new(Decompression { plan, diagonals: Default::default() })
    }

    /// The diagonals' maps for `offsets` of `a` (whose pattern is the
    /// plan's), made on the first request.
    fn diagonal_maps(&self, a: &SparseMatrix, offsets: &[i64]) -> DiagonalMaps {
        let mut cached = self.diagonals.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, maps)) = cached.iter().find(|(k, _)| k == offsets) {
            return maps.clone();
        }
        let map = self.plan.map();
        let maps = Arc::new(a.diagonals_by(offsets, |p| map[p], u32::MAX));
        if cached.len() == DIAGONAL_MAPS {
            cached.remove(0);
        }
        cached.push((offsets.to_vec(), maps.clone()));
        maps
    }
}

impl std::fmt::Debug for Values {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Values::Given(v) => v.fmt(f),
            Values::Compressed { products, values, .. } => f
                .debug_struct("Compressed")
                .field("products", products)
                .field("values", values)
                .finish_non_exhaustive(),
        }
    }
}

/// `x[map[p]]` for every `p`, `gap` where `map[p]` is `u32::MAX`.
fn gather<T: Copy + Send + Sync>(x: &[T], map: &[u32], gap: T) -> Vec<T> {
    gather_by(map, |&m| if m == u32::MAX { gap } else { x[m as usize] })
}

/// `at(map[p])` for every `p` (in parallel when long; the result is not
/// zeroed first).
fn gather_by<T: Send>(map: &[u32], at: impl Fn(&u32) -> T + Sync + Send) -> Vec<T> {
    use rayon::prelude::*;
    if map.len() >= 1 << 16 {
        map.par_iter().with_min_len(1 << 14).map(at).collect()
    } else {
        map.iter().map(at).collect()
    }
}

impl SparseMatrix {
    /// Pairs a pattern with its values (`[nnz]`).
    ///
    /// # Errors
    /// Values that are not one per entry.
    pub fn new(pattern: Arc<SparsityPattern>, values: Tensor) -> Result<SparseMatrix> {
        if values.shape() != [pattern.nnz()] {
            return Err(Error::shape(
                "sparse matrix",
                &[values.shape()],
                format!("needs one value per entry of the pattern ({})", pattern.nnz()),
            ));
        }
        Ok(SparseMatrix { pattern, values: Values::Given(values) })
    }

    /// The matrix of a sparse derivative's call: its compressed products
    /// (`[plan.products_len()]`, see [`SparseValues::products_fn`]) over
    /// the plan's pattern; the values are gathered when first asked for.
    ///
    /// ```
    /// use anvil::prelude::*;
    /// use anvil::sparse::{sparse_jacfwd, SparseMatrix};
    /// // The products under jit, paired with the plan afterwards.
    /// let f = |x: &Var| x.square();
    /// let jac = sparse_jacfwd(f);
    /// let x = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3])?;
    /// let products = jit(jac.values().products_fn()).eval(&x)?;
    /// let a = SparseMatrix::from_products(jac.plan(&x)?, products)?;
    /// assert_eq!(a.diagonal(0)?.to_vec::<f64>()?, vec![2.0, 4.0, 6.0]);
    /// # Ok::<(), anvil::Error>(())
    /// ```
    ///
    /// # Errors
    /// Products of another length, or not of a float dtype.
    pub fn from_products(plan: Arc<SparsePlan>, products: Tensor) -> Result<SparseMatrix> {
        if products.shape() != [plan.products_len()] || !products.dtype().is_float() {
            return Err(Error::shape(
                "sparse matrix",
                &[products.shape()],
                format!(
                    "needs {} compressed products of a float dtype, got {:?}",
                    plan.products_len(),
                    products.dtype()
                ),
            ));
        }
        Ok(SparseMatrix::compressed_by(Decompression::new(plan), products))
    }

    /// [`SparseMatrix::from_products`] of products already checked.
    fn compressed_by(dec: Arc<Decompression>, products: Tensor) -> SparseMatrix {
        let pattern = dec.plan.pattern().clone();
        SparseMatrix {
            pattern,
            values: Values::Compressed { products, dec, values: OnceLock::new() },
        }
    }

    /// The pattern.
    pub fn pattern(&self) -> &Arc<SparsityPattern> {
        &self.pattern
    }

    /// The values, `[nnz]`, in the pattern's order.
    pub fn values(&self) -> &Tensor {
        match &self.values {
            Values::Given(v) => v,
            Values::Compressed { products, dec, values } => values.get_or_init(|| {
                let map = dec.plan.map();
                Tensor::from_flat_storage(crate::core::with_storage!(products.storage(), x => {
                    crate::core::Element::into_storage(gather_by(map, |&m| x[m as usize]))
                }))
            }),
        }
    }

    /// The products and their decompression, while the values have not
    /// been gathered.
    fn compressed(&self) -> Option<(&Tensor, &Arc<Decompression>)> {
        match &self.values {
            Values::Compressed { products, dec, values } if values.get().is_none() => {
                Some((products, dec))
            }
            _ => None,
        }
    }

    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.pattern.nrows()
    }

    /// Number of columns.
    pub fn ncols(&self) -> usize {
        self.pattern.ncols()
    }

    /// Number of entries.
    pub fn nnz(&self) -> usize {
        self.pattern.nnz()
    }

    /// The matrix as faer's `SparseColMatRef` over this pattern and these
    /// values, without copying (`T` is the values' dtype, `f64` unless the
    /// function computes in `f32`).
    ///
    /// # Errors
    /// `T` is not the values' dtype.
    pub fn as_faer<T: Element>(&self) -> Result<SparseColMatRef<'_, u32, T>> {
        Ok(SparseColMatRef::new(self.pattern.as_faer(), self.values().as_slice::<T>()?))
    }

    /// The matrix as faer's owned `SparseColMat` (a copy).
    ///
    /// # Errors
    /// `T` is not the values' dtype.
    pub fn to_faer<T: Element>(&self) -> Result<SparseColMat<u32, T>> {
        let symbolic = self.pattern.as_faer().to_owned().map_err(|e| {
            Error::invalid("sparse matrix", "to_faer", format!("faer could not allocate: {e:?}"))
        })?;
        Ok(SparseColMat::new(symbolic, self.values().to_vec::<T>()?))
    }

    /// The entry at `(row, col)`: `None` outside the pattern or the matrix.
    pub fn get(&self, row: usize, col: usize) -> Option<f64> {
        if col >= self.ncols() {
            return None;
        }
        let r = self.pattern.col_range(col);
        let rows = &self.pattern.row_idx()[r.clone()];
        let k = rows.binary_search(&u32::try_from(row).ok()?).ok()?;
        match self.compressed() {
            Some((products, dec)) => {
                products.storage().get(*dec.plan.map().get(r.start + k)? as usize)
            }
            None => self.values().storage().get(r.start + k),
        }
        .map(|s| s.to_f64())
    }

    /// The `k`-th diagonal, `A[i, i + k]` for every `i` where it exists
    /// (`k < 0`: below the main diagonal), zeros where the pattern has no
    /// entry, in the values' dtype (as `numpy.diagonal(A, k)`).
    ///
    /// # Errors
    /// None in practice (the values' dtype is a float type).
    pub fn diagonal(&self, k: i64) -> Result<Tensor> {
        Ok(self.diagonals(&[k])?.swap_remove(0))
    }

    /// Several diagonals at once (see [`SparseMatrix::diagonal`]), in one
    /// pass over the entries: the DIA form of a banded matrix.
    ///
    /// ```
    /// use anvil::sparse::{gallery, SparseMatrix};
    /// use anvil::Tensor;
    /// let p = std::sync::Arc::new(gallery::tridiagonal(4).unwrap());
    /// let values: Vec<f64> = (0..p.nnz()).map(|v| v as f64).collect();
    /// let a = SparseMatrix::new(p, Tensor::from_vec(values, &[10])?)?;
    /// let d = a.diagonals(&[-1, 0, 1])?;
    /// assert_eq!(d[0].to_vec::<f64>()?, vec![1.0, 4.0, 7.0]); // below
    /// assert_eq!(d[1].to_vec::<f64>()?, vec![0.0, 3.0, 6.0, 9.0]);
    /// assert_eq!(d[2].to_vec::<f64>()?, vec![2.0, 5.0, 8.0]); // above
    /// # Ok::<(), anvil::Error>(())
    /// ```
    ///
    /// # Errors
    /// None in practice (the values' dtype is a float type).
    pub fn diagonals(&self, offsets: &[i64]) -> Result<Vec<Tensor>> {
        match self.values_dtype() {
            crate::DType::F32 => self.diagonals_of::<f32>(offsets),
            _ => self.diagonals_of::<f64>(offsets),
        }
    }

    /// The values' dtype (the products' while they are compressed).
    fn values_dtype(&self) -> crate::DType {
        match &self.values {
            Values::Given(v) => v.dtype(),
            Values::Compressed { products, .. } => products.dtype(),
        }
    }

    fn diagonals_of<T: Element + Default + Send + Sync>(
        &self,
        offsets: &[i64],
    ) -> Result<Vec<Tensor>> {
        let outs = match self.compressed() {
            // Straight from the products while the values are not
            // gathered, by maps made once per signature and set of
            // offsets: one gather instead of one to the values and a pass
            // over them and the pattern.
            Some((products, dec)) => {
                let x = products.as_slice::<T>()?;
                let maps = dec.diagonal_maps(self, offsets);
                maps.iter().map(|map| gather(x, map, T::default())).collect()
            }
            None => {
                let v = self.values().as_slice::<T>()?;
                self.diagonals_by(offsets, |p| v[p], T::default())
            }
        };
        outs.into_iter()
            .map(|o| {
                let n = o.len();
                Tensor::from_vec(o, &[n])
            })
            .collect()
    }

    /// The diagonals at `offsets` (as [`SparseMatrix::diagonals`]) with the
    /// element of entry `p` (in the pattern's order) `value(p)`, and `gap`
    /// where the pattern has no entry.
    fn diagonals_by<T: Copy + Send + Sync>(
        &self,
        offsets: &[i64],
        value: impl Fn(usize) -> T + Sync,
        gap: T,
    ) -> Vec<Vec<T>> {
        let (m, n) = (self.nrows() as i64, self.ncols() as i64);
        // Offsets beyond the matrix give empty diagonals, as at its edge:
        // clamped there, they keep the table over the offsets' range below
        // within `m + n + 1` entries (`i64::MIN` and `i64::MAX` included).
        let offsets: Vec<i64> = offsets.iter().map(|&k| k.clamp(-m, n)).collect();
        let offsets = &offsets[..];
        let len = |k: i64| (if k >= 0 { m.min(n - k) } else { (m + k).min(n) }).max(0) as usize;
        let (Some(&lo), Some(&hi)) = (offsets.iter().min(), offsets.iter().max()) else {
            return Vec::new();
        };
        // The outputs start uninitialised: each element is written once,
        // by the run of the chunk of columns it belongs to (a value, or a
        // zero where the pattern has no entry), so no pass zeroes them
        // first (a quarter of the memory traffic of a tridiagonal matrix).
        let mut outs: Vec<Vec<T>> = offsets.iter().map(|&k| Vec::with_capacity(len(k))).collect();
        // Which output an offset goes to, by a table over the offsets' range
        // (a repeated offset goes to its first output; the others are
        // filled from it below).
        let mut slot = vec![usize::MAX; (hi - lo + 1) as usize];
        for (s, &k) in offsets.iter().enumerate().rev() {
            slot[(k - lo) as usize] = s;
        }
        // Columns in chunks, one per task: entry (r, c) of diagonal k = c - r
        // lands at min(r, c), so a chunk of columns writes its own run of
        // each diagonal, in increasing positions.
        let tasks = if self.nnz() >= 1 << 16 { rayon::current_num_threads().max(1) * 4 } else { 1 };
        let step = (n as usize).div_ceil(tasks).max(1);
        let bounds: Vec<usize> = (0..=n as usize).step_by(step).chain([n as usize]).collect();
        let at = |k: i64, c: usize| (c as i64 - k.max(0)).clamp(0, len(k) as i64) as usize;
        let mut chunks: Vec<Vec<Run<'_, T>>> = (1..bounds.len()).map(|_| Vec::new()).collect();
        for (s, (out, &k)) in outs.iter_mut().zip(offsets).enumerate() {
            if slot[(k - lo) as usize] != s {
                continue;
            }
            let mut rest = &mut out.spare_capacity_mut()[..len(k)];
            let mut first = 0;
            for (t, w) in bounds.windows(2).enumerate() {
                let end = at(k, w[1]).max(first);
                let (head, tail) = std::mem::take(&mut rest).split_at_mut(end - first);
                chunks[t].push(Run { first, next: first, part: head, gap });
                rest = tail;
                first = end;
            }
        }
        let (ptr, rows) = (self.pattern.col_ptr(), self.pattern.row_idx());
        let fill = |(t, mut runs): (usize, Vec<Run<'_, T>>)| {
            // Runs are in the order of the distinct offsets' first outputs.
            let mut run_of = vec![usize::MAX; slot.len()];
            let mut r = 0;
            for (s, &k) in offsets.iter().enumerate() {
                if slot[(k - lo) as usize] == s {
                    run_of[(k - lo) as usize] = r;
                    r += 1;
                }
            }
            for c in bounds[t]..bounds[t + 1] {
                let first = ptr[c] as usize;
                for (p, &r) in (first..).zip(&rows[first..ptr[c + 1] as usize]) {
                    let r = r as usize;
                    let d = (c as i64 - r as i64 - lo) as usize;
                    if let Some(run) = run_of.get(d).and_then(|&x| runs.get_mut(x)) {
                        run.put(r.min(c), value(p));
                    }
                }
            }
            for run in &mut runs {
                run.finish();
            }
        };
        {
            use rayon::prelude::*;
            chunks.into_par_iter().enumerate().for_each(fill);
        }
        for (s, &k) in offsets.iter().enumerate() {
            let first = slot[(k - lo) as usize];
            if first == s {
                // SAFETY: the runs of this output tile `0..len(k)` (the
                // chunks' bounds are increasing and clamped to it), and
                // each run wrote every element of its part once: `put` at
                // increasing positions, zeros for the gaps, `finish` for the
                // rest.
                unsafe { outs[s].set_len(len(k)) };
            } else {
                let copy = outs[first].clone();
                outs[s] = copy;
            }
        }
        outs
    }

    /// The dense matrix (for checks and small problems).
    ///
    /// # Errors
    /// A matrix too large to allocate densely.
    pub fn to_dense(&self) -> Result<Tensor> {
        let (m, n) = (self.nrows(), self.ncols());
        let mut out = vec![
            0.0;
            m.checked_mul(n).ok_or_else(|| {
                Error::invalid("sparse matrix", "to_dense", format!("{m} × {n} is too large"))
            })?
        ];
        let v = self.values().to_f64_vec();
        for (p, (i, j)) in self.pattern.entries().enumerate() {
            out[i * n + j] = v[p];
        }
        Tensor::from_vec(out, &[m, n]).map(|t| t.cast(self.values_dtype()))
    }
}

/// The part of one diagonal that one chunk of columns writes (positions
/// `first..first + part.len()`), written in increasing positions: each
/// element once, a value or a zero.
struct Run<'a, T> {
    first: usize,
    /// The first position not written yet.
    next: usize,
    part: &'a mut [std::mem::MaybeUninit<T>],
    /// What positions without an entry hold.
    gap: T,
}

impl<T: Copy> Run<'_, T> {
    /// Writes `x` at position `at`, gaps before it from the last write.
    /// Positions at or before the last write, or past the part, are not
    /// written (a pattern has one entry per position of a diagonal, in
    /// increasing positions down a chunk's columns).
    #[inline]
    fn put(&mut self, at: usize, x: T) {
        let end = self.first + self.part.len();
        if at < self.next || at >= end {
            return;
        }
        for z in &mut self.part[self.next - self.first..at - self.first] {
            z.write(self.gap);
        }
        self.part[at - self.first].write(x);
        self.next = at + 1;
    }

    /// Gaps for the positions after the last write.
    fn finish(&mut self) {
        for z in &mut self.part[self.next - self.first..] {
            z.write(self.gap);
        }
        self.next = self.first + self.part.len();
    }
}

/// A batch of sparse matrices with one shared pattern: what `vmap` of a
/// sparse Jacobian computes (values `[B, nnz]`).
///
/// ```
/// use anvil::prelude::*;
/// use anvil::sparse::{sparse_jacfwd, SparseBatch};
/// let jac = sparse_jacfwd(|x: &Var| x.sin());
/// let xs = Tensor::from_vec(vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0], &[2, 3])?;
/// let values = vmap(&jac).eval(&xs)?; // [2, 3]: two diagonal Jacobians
/// let batch = SparseBatch::new(jac.pattern(&xs.select_axis(0, 0)?)?, values)?;
/// assert_eq!(batch.len(), 2);
/// assert_eq!(batch.get(1)?.get(2, 2), Some(5f64.cos()));
/// # Ok::<(), anvil::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct SparseBatch {
    pattern: Arc<SparsityPattern>,
    values: Tensor,
}

impl SparseBatch {
    /// Pairs a pattern with a batch of values `[B, nnz]`.
    ///
    /// # Errors
    /// Values that are not `[B, nnz]`.
    pub fn new(pattern: Arc<SparsityPattern>, values: Tensor) -> Result<SparseBatch> {
        if values.rank() != 2 || values.shape()[1] != pattern.nnz() {
            return Err(Error::shape(
                "sparse batch",
                &[values.shape()],
                format!("needs values [B, {}] (one row per matrix)", pattern.nnz()),
            ));
        }
        Ok(SparseBatch { pattern, values })
    }

    /// The shared pattern.
    pub fn pattern(&self) -> &Arc<SparsityPattern> {
        &self.pattern
    }

    /// The values, `[B, nnz]`.
    pub fn values(&self) -> &Tensor {
        &self.values
    }

    /// The number of matrices.
    pub fn len(&self) -> usize {
        self.values.shape()[0]
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Matrix `b` (its values copied out of the batch).
    ///
    /// # Errors
    /// `b` out of range.
    pub fn get(&self, b: usize) -> Result<SparseMatrix> {
        SparseMatrix::new(self.pattern.clone(), self.values.select_axis(0, b)?)
    }

    /// Matrix `b` as faer's `SparseColMatRef`, without copying.
    ///
    /// # Errors
    /// `b` out of range; `T` is not the values' dtype.
    pub fn as_faer<T: Element>(&self, b: usize) -> Result<SparseColMatRef<'_, u32, T>> {
        let nnz = self.pattern.nnz();
        let all = self.values.as_slice::<T>()?;
        let v = all.get(b * nnz..(b + 1) * nnz).ok_or_else(|| {
            Error::invalid("sparse batch", "index", format!("{b} is not below {}", self.len()))
        })?;
        Ok(SparseColMatRef::new(self.pattern.as_faer(), v))
    }
}
