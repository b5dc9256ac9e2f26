//! anvil's CPU backend: compiles a graph into a [`Plan`] and runs it.
//!
//! Kernels are registered per op type in a [`RuleTable`] of [`CpuKernel`]s
//! (through `inventory`, so a plugin crate registers kernels for its own ops
//! with [`register_kernel!`]). A plan is the graph's nodes in order, each with
//! its kernel looked up once at compile time; running it keeps one slot per
//! node and frees a value right after its last consumer has run.
//!
//! Parallelism is an explicit argument ([`Ctx`]), never a global: large
//! elementwise and reduction loops are split across rayon's pool, small ones
//! run on the calling thread (thread overhead dominates tiny tensors), and
//! faer's GEMM gets `Par::Seq` below about 200³ multiply-adds, where the
//! second core costs more than it brings on this class of machine.

#![warn(missing_docs)]

pub mod buffers;
pub mod fusion;
pub mod kernels;
pub mod linalg;
mod plan;
pub mod strided;

pub use plan::{compile, Plan};

use anvil_core::{Op, Result, Tensor, TensorType};

/// How a kernel may use threads.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    /// Threads available (1 = run everything on the calling thread).
    pub threads: usize,
    /// Elementwise loops with at least this many elements run in parallel.
    pub min_parallel_elems: usize,
    /// GEMMs with at least this many multiply-adds use all threads.
    pub min_parallel_flops: usize,
}

impl Default for Ctx {
    fn default() -> Self {
        Ctx {
            threads: rayon::current_num_threads(),
            min_parallel_elems: 1 << 15,
            min_parallel_flops: 200 * 200 * 200,
        }
    }
}

impl Ctx {
    /// Everything on the calling thread.
    pub fn sequential() -> Ctx {
        Ctx { threads: 1, ..Ctx::default() }
    }

    /// Whether a loop over `n` elements should be split across threads.
    pub fn parallel(&self, n: usize) -> bool {
        self.threads > 1 && n >= self.min_parallel_elems
    }

    /// faer's parallelism for a GEMM of `flops` multiply-adds.
    pub fn gemm_par(&self, flops: usize) -> faer::Par {
        if self.threads > 1 && flops >= self.min_parallel_flops {
            faer::Par::rayon(self.threads)
        } else {
            faer::Par::Seq
        }
    }
}

/// A kernel: computes a node's value from its inputs' values.
///
/// `op` is always of the type the kernel was registered for; `out` is the
/// node's static type, already checked by the op's shape rule.
pub type KernelFn =
    fn(op: &dyn Op, inputs: &[&Tensor], out: &TensorType, ctx: &Ctx) -> Result<Tensor>;

anvil_core::registry_entry! {
    /// A CPU kernel registered for one op type.
    pub struct CpuKernel { kernel: KernelFn }, "CPU kernel", kernels
}

/// Registers a CPU kernel for an op type: `register_kernel!(MyOp, my_kernel);`.
///
/// The kernel has the signature of [`KernelFn`]; it may downcast `op` to
/// `MyOp` with `op.downcast_ref::<MyOp>()`.
#[macro_export]
macro_rules! register_kernel {
    ($op:ty, $kernel:expr) => {
        $crate::anvil_core::register_entry!($crate::CpuKernel, $op, kernel: $kernel);
    };
}

#[doc(hidden)]
pub use anvil_core;
