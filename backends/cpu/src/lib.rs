//! anvil's CPU backend: compiles a graph into a [`Plan`] and runs it.
//!
//! Every op computed element by element (it has
//! [`anvil_core::Op::elementwise_math`]) runs inside a
//! fused program ([`fusion`]), chains of them in one pass over memory;
//! vectorised block math ([`vmath`]) replaces an op's own for the
//! transcendental functions ([`register_block_math!`]). Every other op has
//! a kernel registered per op type in a [`RuleTable`](anvil_core::RuleTable) of [`CpuKernel`]s
//! (through `inventory`, so a plugin crate registers kernels for its own
//! ops with [`register_kernel!`]), in one of three forms: one result,
//! several results, or prepared once per plan (the loop ops compile their
//! bodies then). A plan is the fused graph's nodes in order, each with its
//! kernel looked up once at compile time; running it keeps one slot per
//! value and frees a value right after its last consumer has run, its
//! buffer going back to the plan's pool ([`buffers`]).
//!
//! [`Cpu`] is the backend as the compile pipeline sees it (`anvil_core`'s
//! `Evaluator` and `Backend`); this crate also registers itself as the
//! backend of eager `Tensor` operations (`anvil_core::eager`).
//!
//! Parallelism is an explicit argument ([`Parallelism`]), never a global: large
//! elementwise and reduction loops are split across rayon's pool, small ones
//! run on the calling thread (thread overhead dominates tiny tensors), and
//! faer's GEMM gets `Par::Seq` below about 200³ multiply-adds, where the
//! second core costs more than it brings on this class of machine. Above
//! those sizes, a plan's fused loops and matrix products choose between one
//! thread and several by measured cost ([`Parallelism::adaptive`]), so that
//! a busy machine, where work split across cores waits for a descheduled
//! thread, does not make the parallel path slower than the serial one.

// Doctests are compiled with warnings as errors: an example that warns is a bad example.
#![doc(test(attr(deny(warnings))))]
#![warn(missing_docs)]

pub mod buffers;
pub mod contraction;
pub mod fusion;
pub mod kernels;
pub mod lane_prelude;
pub mod linalg;
pub mod lu_layout;
pub(crate) mod matvec;
pub mod micro;
mod pair;
pub mod placement;
mod plan;
pub mod strided;
mod threads;
mod views;
pub mod vmath;

pub use plan::{compile, Plan};

use anvil_core::{Op, Result, Tensor, TensorType};

/// Calls `f` with the `n` values `get(0), ..., get(n - 1)` in a slice: on
/// the stack when there are at most `N` (a kernel's usual few operands, read
/// with no allocation), else in a vector.
pub(crate) fn gathered<T: Copy, R, const N: usize>(
    n: usize,
    mut get: impl FnMut(usize) -> Result<T>,
    f: impl FnOnce(&[T]) -> Result<R>,
) -> Result<R> {
    if n == 0 {
        return f(&[]);
    }
    if n > N {
        let all = (0..n).map(get).collect::<Result<Vec<T>>>()?;
        return f(&all);
    }
    let mut inline = [get(0)?; N];
    for (k, slot) in inline.iter_mut().enumerate().take(n).skip(1) {
        *slot = get(k)?;
    }
    f(&inline[..n])
}

/// The execution settings of a call: how kernels may use threads (passed
/// to every kernel as an argument, as faer passes its `Par`, never read
/// from a global) and how much memory a plan may hold.
///
/// Settings are validated: the thread count is at least 1 and at most the
/// threads of rayon's pool (a larger request would oversubscribe or hang),
/// and the thresholds are at least 1.
///
/// A plan's large fused loops and matrix products choose between one
/// thread and several by measured cost unless told otherwise
/// ([`Parallelism::adaptive`]).
///
/// The memory budget bounds a plan's [peak](crate::Plan::peak_bytes),
/// known from its types when it is built: a call over budget is an
/// `Error::OutOfMemory` before anything runs, rather than an allocation
/// that Linux's overcommit grants and the OOM killer later punishes. The
/// default is the machine's physical memory (unbounded where it cannot be
/// read).
///
/// ```
/// use anvil_cpu::Parallelism;
/// let p = Parallelism::default().threads(usize::MAX).min_parallel_elems(0);
/// assert_eq!(p.thread_count(), rayon::current_num_threads());
/// assert!(!Parallelism::sequential().parallel(1 << 30));
/// assert_eq!(p.memory_budget(1 << 30).memory_budget_bytes(), 1 << 30);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parallelism {
    threads: usize,
    min_parallel_elems: usize,
    min_parallel_flops: usize,
    memory_budget: usize,
    adaptive: bool,
    /// Whether loops may share their products with the helper thread of
    /// [`pair`] (off in a plan whose loops sum products in the background,
    /// see [`contraction`]).
    pairing: bool,
}

impl Default for Parallelism {
    fn default() -> Self {
        Parallelism {
            threads: rayon::current_num_threads().max(1),
            min_parallel_elems: 1 << 15,
            min_parallel_flops: 200 * 200 * 200,
            memory_budget: physical_memory(),
            adaptive: true,
            pairing: true,
        }
    }
}

/// The machine's physical memory in bytes (`MemTotal` of `/proc/meminfo`),
/// read once; `usize::MAX` where it cannot be read.
fn physical_memory() -> usize {
    static TOTAL: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *TOTAL.get_or_init(|| {
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|s| {
                let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
                let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
                kib.checked_mul(1024)
            })
            .unwrap_or(usize::MAX)
    })
}

impl Parallelism {
    /// Everything on the calling thread.
    pub fn sequential() -> Parallelism {
        Parallelism { threads: 1, ..Parallelism::default() }
    }

    /// At most `n` threads (clamped to `1..=` rayon's pool size).
    pub fn threads(mut self, n: usize) -> Parallelism {
        self.threads = n.clamp(1, rayon::current_num_threads().max(1));
        self
    }

    /// Elementwise and reduction loops over at least `n` elements run in
    /// parallel (at least 1).
    pub fn min_parallel_elems(mut self, n: usize) -> Parallelism {
        self.min_parallel_elems = n.max(1);
        self
    }

    /// Matrix products of at least `n` multiply-adds use every thread (at
    /// least 1).
    pub fn min_parallel_flops(mut self, n: usize) -> Parallelism {
        self.min_parallel_flops = n.max(1);
        self
    }

    /// Plans whose values need more than `bytes` at once are refused
    /// (see [`Parallelism`]); `usize::MAX` for no bound.
    pub fn memory_budget(mut self, bytes: usize) -> Parallelism {
        self.memory_budget = bytes;
        self
    }

    /// Whether a plan's large steps that can use several threads choose
    /// between one thread and several by measured cost (`true`, the
    /// default) or always follow the fixed rule: every thread for loops of
    /// at least [`parallel_elems`](Parallelism::parallel_elems) elements
    /// and products of at least
    /// [`min_parallel_flops`](Parallelism::min_parallel_flops) multiply-adds
    /// (`false`).
    ///
    /// With `true`, a plan's fused elementwise steps and matrix products
    /// (of at least `parallel_elems` elements in all) run all on one thread
    /// or all with these settings, as a call chooses: the plan keeps the
    /// recent call times of each path and a call takes the faster one; the
    /// other is tried again now and then (at most every 128 calls once
    /// settled). On
    /// an idle machine that is the parallel path but for about one call in
    /// 128; when other processes hold the cores, where work split evenly
    /// across threads waits for a descheduled one, it becomes the serial
    /// path within a few calls, and goes back when the machine is idle
    /// again. The times are measurements kept by the plan, not settings:
    /// only steps whose results are the same bits on any number of threads
    /// are eligible, so the choice never changes a result.
    ///
    /// ```
    /// use anvil_cpu::Parallelism;
    /// assert!(Parallelism::default().is_adaptive());
    /// assert!(!Parallelism::default().adaptive(false).is_adaptive());
    /// ```
    pub fn adaptive(mut self, on: bool) -> Parallelism {
        self.adaptive = on;
        self
    }

    /// Whether matrix products choose their thread count by measured cost
    /// (see [`Parallelism::adaptive`]).
    pub fn is_adaptive(&self) -> bool {
        self.adaptive
    }

    /// How many plan calls the adaptive choice (see
    /// [`Parallelism::adaptive`]) has run on one thread and on several, in
    /// this process so far: `[one, several]`. A diagnostic.
    ///
    /// ```
    /// use anvil_cpu::Parallelism;
    /// let [one, several] = Parallelism::adaptive_counts();
    /// assert!(Parallelism::adaptive_counts()[0] >= one);
    /// # let _ = several;
    /// ```
    pub fn adaptive_counts() -> [u64; 2] {
        threads::counts()
    }

    /// The same, with no products shared with the pair helper.
    pub(crate) fn without_pairing(mut self) -> Parallelism {
        self.pairing = false;
        self
    }

    /// Whether products may be shared with the pair helper (with more than
    /// one thread).
    pub(crate) fn pairs(&self) -> bool {
        self.pairing && self.threads > 1
    }

    /// The memory budget in bytes.
    pub fn memory_budget_bytes(&self) -> usize {
        self.memory_budget
    }

    /// The number of threads.
    pub fn thread_count(&self) -> usize {
        self.threads
    }

    /// The element count from which loops run in parallel.
    pub fn parallel_elems(&self) -> usize {
        self.min_parallel_elems
    }

    /// Whether a loop over `n` elements should be split across threads.
    pub fn parallel(&self, n: usize) -> bool {
        self.threads > 1 && n >= self.min_parallel_elems
    }

    /// faer's parallelism for a GEMM of `flops` multiply-adds, by the fixed
    /// rule (every thread from [`Parallelism::min_parallel_flops`] on).
    pub fn gemm_par(&self, flops: usize) -> faer::Par {
        if self.threads > 1 && flops >= self.min_parallel_flops {
            faer::Par::rayon(self.threads)
        } else {
            faer::Par::Seq
        }
    }
}

/// A kernel for an op with one result: computes the node's value from its
/// inputs' values. `op` is always of the type the kernel was registered for;
/// `out` is the node's static type, already checked by the op's shape rule.
pub type KernelFn =
    fn(op: &dyn Op, inputs: &[&Tensor], out: &TensorType, ctx: &Parallelism) -> Result<Tensor>;

/// A kernel for an op with several results: one tensor per result.
pub type KernelManyFn = fn(
    op: &dyn Op,
    inputs: &[&Tensor],
    outs: &[TensorType],
    ctx: &Parallelism,
) -> Result<Vec<Tensor>>;

/// A kernel that does work once, when the plan is built, for every call:
/// the loop ops compile their bodies into plans here.
pub type PrepareFn =
    fn(op: &dyn Op, inputs: &[TensorType], outs: &[TensorType]) -> Result<Box<dyn Prepared>>;

/// A kernel prepared for one node of one plan (see [`PrepareFn`]).
pub trait Prepared: Send + Sync + std::fmt::Debug {
    /// Computes the node's results.
    ///
    /// # Errors
    /// A run-time error of the op (an index out of bounds, a singular matrix).
    fn run(
        &self,
        inputs: &[&Tensor],
        outs: &[TensorType],
        ctx: &Parallelism,
    ) -> Result<Vec<Tensor>>;

    /// Whether the kernel gives the same bits on any number of threads
    /// and gains from several, so that a plan may choose its thread count
    /// by measured cost (see [`Parallelism::adaptive`]); `false` by
    /// default. A loop whose matrix–vector products pair with a helper
    /// thread, or whose products over its steps are summed in the
    /// background (see [`contraction`]), says `true` when its body gives
    /// the same bits on any number of threads.
    fn thread_invariant(&self) -> bool {
        false
    }

    /// Which results the plan reads (`read[k]` for result `k`), told once
    /// when the plan is built. A kernel may then return any tensor of the
    /// right type for a result nobody reads, and skip computing or writing
    /// it (a loop's step counter that the caller drops). By default every
    /// result is computed.
    fn results_read(&mut self, read: &[bool]) {
        let _ = read;
    }
}

/// A registered CPU kernel in one of its three forms.
#[derive(Clone, Copy, Debug)]
pub enum Kernel {
    /// For an op with one result.
    One(KernelFn),
    /// For an op with any number of results.
    Many(KernelManyFn),
    /// Prepared once per plan.
    Prepare(PrepareFn),
}

anvil_core::registry_entry! {
    /// A CPU kernel registered for one op type.
    pub struct CpuKernel { kernel: Kernel }, "CPU kernel", kernels
}

/// Registers a CPU kernel for an op type: `register_kernel!(MyOp,
/// my_kernel);` for a [`KernelFn`], `register_kernel!(MyOp, many: f);` for
/// a [`KernelManyFn`], `register_kernel!(MyOp, prepare: f);` for a
/// [`PrepareFn`].
///
/// The kernel may downcast `op` to `MyOp` with `op.try_downcast::<MyOp>()`.
/// Ops computed element by element (declared with
/// `anvil_ops::unary_elementwise_op!` and friends) need no kernel: the
/// backend runs their block math.
#[macro_export]
macro_rules! register_kernel {
    ($op:ty, many: $kernel:expr) => {
        $crate::anvil_core::register_entry!($crate::CpuKernel, $op, kernel: $crate::Kernel::Many($kernel));
    };
    ($op:ty, prepare: $kernel:expr) => {
        $crate::anvil_core::register_entry!($crate::CpuKernel, $op, kernel: $crate::Kernel::Prepare($kernel));
    };
    ($op:ty, $kernel:expr) => {
        $crate::anvil_core::register_entry!($crate::CpuKernel, $op, kernel: $crate::Kernel::One($kernel));
    };
}

anvil_core::registry_entry! {
    /// A declaration that an op's CPU kernel gives the same bits on any
    /// number of threads (a fused elementwise program, a matrix product):
    /// a plan may then run a large node of the op on one thread or several,
    /// as measured cost decides ([`Parallelism::adaptive`]). Registered with
    /// [`register_thread_invariant!`].
    pub struct ThreadInvariant { same_bits: bool }, "thread-count declaration", thread_invariant
}

/// Declares that the CPU kernel of an op type gives the same bits on any
/// number of threads (see [`ThreadInvariant`]):
/// `register_thread_invariant!(MyOp);` beside `register_kernel!(MyOp, ..)`.
///
/// ```
/// use anvil_core::{Op, Result, TensorType};
///
/// #[derive(Clone, Debug, PartialEq, Eq, Hash)]
/// struct Copy2;
/// impl Op for Copy2 {
///     fn name(&self) -> &'static str { "myplugin.copy" }
///     fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> { Ok(inputs[0].clone()) }
/// }
/// anvil_cpu::register_thread_invariant!(Copy2);
///
/// assert!(anvil_cpu::thread_invariant().lookup(&Copy2)?.is_some());
/// # Ok::<(), anvil_core::Error>(())
/// ```
#[macro_export]
macro_rules! register_thread_invariant {
    ($op:ty) => {
        $crate::anvil_core::register_entry!($crate::ThreadInvariant, $op, same_bits: true);
    };
}

anvil_core::registry_entry! {
    /// A rewrite the CPU plan applies, before fusion, around the nodes of
    /// one op type (see [`anvil_core::GraphPassFn`]), such as the scan's,
    /// which writes its stacked results in their final place. Registered with
    /// [`register_plan_rewrite!`].
    pub struct PlanRewrite { rewrite: anvil_core::GraphPassFn }, "CPU plan rewrite", plan_rewrites
}

/// Registers a CPU plan rewrite for an op type (see [`PlanRewrite`]):
/// `register_plan_rewrite!(MyOp, my_rewrite);`.
///
/// ```
/// use anvil_core::{Graph, NodeId, Op, Result, TensorType};
///
/// #[derive(Clone, Debug, PartialEq, Eq, Hash)]
/// struct Hint;
/// impl Op for Hint {
///     fn name(&self) -> &'static str { "myplugin.hint" }
///     fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> { Ok(inputs[0].clone()) }
/// }
/// /// Leaves the graph as it is (a real rewrite returns `Some(new_graph)`).
/// fn keep(_: &Graph, _: &[NodeId]) -> Result<Option<Graph>> {
///     Ok(None)
/// }
/// anvil_cpu::register_plan_rewrite!(Hint, keep);
///
/// assert!(anvil_cpu::plan_rewrites().lookup(&Hint)?.is_some());
/// # Ok::<(), anvil_core::Error>(())
/// ```
#[macro_export]
macro_rules! register_plan_rewrite {
    ($op:ty, $rewrite:expr) => {
        $crate::anvil_core::register_entry!($crate::PlanRewrite, $op, rewrite: $rewrite);
    };
}

/// Block math this backend runs instead of an elementwise op's own
/// ([`Op::elementwise_math`]): vectorised code for the same function.
/// Returns `Ok(false)` for blocks it does not handle (another dtype), and
/// the op's own math runs. Registered with [`register_block_math!`].
pub type BlockMathFn = fn(
    op: &dyn Op,
    args: &[anvil_core::Block<'_>],
    out: anvil_core::BlockMut<'_>,
    at: anvil_core::BlockAt<'_>,
) -> Result<bool>;

anvil_core::registry_entry! {
    /// Faster block math for one elementwise op type on the CPU.
    pub struct CpuBlockMath { math: BlockMathFn }, "CPU block math", block_maths
}

/// The block math registered for `op`'s type, if any: what every path of
/// this backend runs for the op (fused groups, straight-line code, lane
/// loops), so that they all give it the same bits.
pub(crate) fn registered_math(op: &dyn Op) -> Option<BlockMathFn> {
    block_maths().lookup(op).ok().flatten().map(|e| e.math)
}

/// Registers vectorised block math for an elementwise op type:
/// `register_block_math!(Exp, exp_block);` (see [`BlockMathFn`]).
#[macro_export]
macro_rules! register_block_math {
    ($op:ty, $math:expr) => {
        $crate::anvil_core::register_entry!($crate::CpuBlockMath, $op, math: $math);
    };
}

/// The CPU backend, as the compile pipeline sees it: it evaluates single
/// ops (constant folding) and compiles graphs into [`Plan`]s.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cpu;

impl anvil_core::Evaluator for Cpu {
    fn evaluate(
        &self,
        op: &dyn Op,
        inputs: &[&Tensor],
        outs: &[TensorType],
    ) -> Option<Result<Vec<Tensor>>> {
        // A one-node plan: the same kernels, fusion and checks as any call.
        let mut g = anvil_core::Graph::new();
        let ids = inputs.iter().map(|t| g.add_input(t.ty())).collect::<Result<Vec<_>>>().ok()?;
        let node = g.push(op.boxed(), &ids).ok()?;
        let results: Vec<_> = g.node(node).results().collect();
        if results.len() != outs.len() {
            return None;
        }
        g.set_outputs(results);
        let plan = compile(&g).ok()?;
        let args: Vec<Tensor> = inputs.iter().map(|t| (*t).clone()).collect();
        Some(plan.run(&args, &Parallelism::sequential()))
    }
}

/// Eager `Tensor` operations (`&a + &b`, `a.exp()?`) run here: a one-op
/// graph compiled into a [`Plan`] like any call (see [`anvil_core::eager`]).
impl anvil_core::eager::EagerPlan for Plan {
    fn run(&self, args: &[Tensor]) -> Result<Vec<Tensor>> {
        Plan::run(self, args, &Parallelism::default())
    }
}

anvil_core::inventory::submit! {
    anvil_core::eager::EagerBackend {
        name: "cpu",
        compile: |g| Ok(Box::new(compile(g)?)),
    }
}

impl anvil_core::Backend for Cpu {
    type Plan = Plan;
    fn plan(&self, graph: &anvil_core::Graph) -> Result<Plan> {
        compile(graph)
    }
}

#[doc(hidden)]
pub use anvil_core;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathered_passes_every_value_in_order_and_the_first_error() {
        for n in [0usize, 1, 3, 4, 5, 9] {
            let got = gathered::<usize, Vec<usize>, 4>(n, |k| Ok(k * 10), |v| Ok(v.to_vec()));
            assert_eq!(got.unwrap(), (0..n).map(|k| k * 10).collect::<Vec<_>>(), "n = {n}");
            let bad = gathered::<usize, (), 4>(
                n,
                |k| if k == 2 { Err(anvil_core::Error::invalid("t", "x", "k = 2")) } else { Ok(k) },
                |_| Ok(()),
            );
            assert_eq!(bad.is_err(), n > 2, "n = {n}");
        }
    }
}
