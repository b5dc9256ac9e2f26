//! Sparsity patterns and graph colorings for anvil's sparse Jacobians and
//! Hessians.
//!
//! A sparse Jacobian `J` (`m × n`) costs far fewer than `n` JVPs when
//! columns that never share a row are pushed through one JVP together: with
//! a coloring of the columns and the 0/1 seed matrix `S` (`n × colors`), the
//! JVPs give `B = J·S`, from which every nonzero of `J` is read back. This
//! crate owns the parts that need no IR:
//!
//! * [`SparsityPattern`]: the pattern of a matrix, compressed by column,
//!   with `u32` indices (see [`pattern`] for why), convertible to faer's
//!   symbolic CSC without copying;
//! * [`coloring`]: greedy [`ColumnColoring`] (forward mode),
//!   [`RowColoring`] (reverse mode), [`StarColoring`] (Hessians) and
//!   [`BiColoring`] (forward and reverse together), in any of the vertex
//!   [`Order`]s (by default DSATUR, [`Order::Saturation`]), with their seeds
//!   as index lists and their exact (copy-only) decompression; and
//!   [`AcyclicColoring`] (Hessians, fewer colors, decompression by
//!   substitution, exact up to rounding);
//! * [`gallery`]: structured patterns with known color counts.
//!
//! Sparsity *detection* (tracing a function's graph to find the pattern of
//! its Jacobian or Hessian) is not here yet: it needs anvil's IR and will be
//! added to this crate by the core's maintainers. It is meant to produce a
//! [`SparsityPattern`] (for instance through [`SparsityPattern::from_csc`]),
//! which the colorings here turn into seeds and a decompression.
//!
//! ```
//! use anvil_sparse::{gallery, ColumnColoring, Order};
//! use faer::{Mat, sparse::SparseColMatRef};
//! // The Jacobian of a 1-D stencil at 10^4 points: 3 JVPs suffice
//! // (the natural order is optimal on banded patterns).
//! let coloring = ColumnColoring::new(gallery::tridiagonal(10_000)?, Order::Natural);
//! assert_eq!(coloring.num_colors(), 3);
//! // Each seed is the list of inputs whose tangent is 1 in that JVP.
//! let seeds = coloring.seeds();
//! assert_eq!(&seeds.get(1)[..3], &[1, 4, 7]);
//! // With B = J·S from the JVPs (here: all entries of J equal to 2),
//! let mut b = Mat::<f64>::zeros(10_000, 3);
//! for (i, j) in coloring.pattern().entries() {
//!     b[(i, coloring.coloring().colors()[j] as usize)] += 2.0;
//! }
//! // decompression gives J's values, and faer a sparse matrix over them.
//! let values = coloring.decompress(b.as_ref())?;
//! let jac = SparseColMatRef::new(coloring.pattern().as_faer(), &values);
//! assert_eq!(jac.compute_nnz(), 3 * 10_000 - 2);
//! assert!(values.iter().all(|&v| v == 2.0));
//! # Ok::<(), anvil_sparse::SparseError>(())
//! ```
// Doctests are compiled with warnings as errors: an example that warns is a bad example.
#![doc(test(attr(deny(warnings))))]
#![warn(missing_docs)]

pub mod coloring;
pub mod error;
pub mod gallery;
pub mod pattern;

pub use coloring::{
    AcyclicColoring, BiColoring, Coloring, ColumnColoring, Order, RowColoring, Seeds, StarColoring,
};
pub use error::{Result, SparseError};
pub use pattern::{Idx, SparsityPattern};
