//! The error type of anvil.
//!
//! One enum for every crate boundary: tracing, shape rules, transforms,
//! compilation and execution all return [`Error`](enum@Error). Every variant that comes
//! from user input names the op, the shapes and the argument, because that is
//! what a user needs to find the mistake in their own program.

use crate::dtype::DType;
use thiserror::Error;

/// `Result` with anvil's [`Error`](enum@Error).
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Formats a shape the way errors and printed graphs show it: `[3, 4]`.
pub fn fmt_shape(shape: &[usize]) -> String {
    crate::shape::fmt_dims(shape)
}

/// Everything that can go wrong in anvil.
#[derive(Clone, Debug, PartialEq, Error)]
#[non_exhaustive]
pub enum Error {
    /// Two shapes that must broadcast together do not.
    #[error("{op}: cannot broadcast {lhs} with {rhs} (argument {arg})", lhs = fmt_shape(.lhs), rhs = fmt_shape(.rhs))]
    Broadcast {
        /// The op being applied.
        op: String,
        /// Left shape.
        lhs: Vec<usize>,
        /// Right shape.
        rhs: Vec<usize>,
        /// Which argument did not fit (`"1"`, `"on_true"`...).
        arg: String,
    },
    /// An axis outside `-rank..rank`.
    #[error("{op}: axis {axis} is out of range for argument {arg} of shape {shape} (rank {rank})", shape = fmt_shape(.shape), rank = .shape.len())]
    AxisOutOfRange {
        /// The op being applied.
        op: String,
        /// The axis as given.
        axis: i64,
        /// The shape it indexes.
        shape: Vec<usize>,
        /// Which argument.
        arg: String,
    },
    /// Shapes that are incompatible in an op-specific way.
    #[error("{op}: {msg} (shapes {shapes})", shapes = .shapes.iter().map(|s| fmt_shape(s)).collect::<Vec<_>>().join(", "))]
    Shape {
        /// The op being applied.
        op: String,
        /// The shapes of the arguments involved.
        shapes: Vec<Vec<usize>>,
        /// What is wrong, naming the argument.
        msg: String,
    },
    /// An argument of the wrong dtype.
    #[error("{op}: argument {arg} has dtype {got}, expected {expected}")]
    DType {
        /// The op or function being applied.
        op: String,
        /// Which argument.
        arg: String,
        /// The dtype given.
        got: DType,
        /// What was expected (`"f64"`, `"a float type"`, `"the dtype of argument 0 (f32)"`).
        expected: String,
    },
    /// A function called with the wrong number of arguments or of results.
    #[error("{what}: expected {expected} {kind}, got {got}")]
    Arity {
        /// The function or op.
        what: String,
        /// `"arguments"`, `"inputs"`, `"outputs"`...
        kind: String,
        /// How many were expected.
        expected: usize,
        /// How many were given.
        got: usize,
    },
    /// An index outside the bounds of the axis it indexes (found at run time).
    #[error("{op}: index {index} is out of bounds for axis {axis} of size {size} (argument {arg}, shape {shape})", shape = fmt_shape(.shape))]
    IndexOutOfBounds {
        /// The op.
        op: String,
        /// The offending index.
        index: i64,
        /// The axis indexed.
        axis: usize,
        /// The size of that axis.
        size: usize,
        /// Which argument holds the indices.
        arg: String,
        /// The shape of the indexed operand.
        shape: Vec<usize>,
    },
    /// A linear-algebra kernel met a matrix it cannot factor or solve with
    /// (found at run time): Cholesky of a matrix that is not positive
    /// definite, a solve or an inverse with a singular one.
    #[error("{op}: {which} {msg}", which = linalg_which(.batch_index, .batch_shape))]
    Linalg {
        /// The function the user called (`"cholesky"`, `"solve"`...).
        op: String,
        /// The failing matrix's index in the batch (empty for one matrix).
        batch_index: Vec<usize>,
        /// The batch shape (the leading axes of the argument).
        batch_shape: Vec<usize>,
        /// What is wrong with it.
        msg: String,
    },
    /// A tensor constructed from data whose length does not match its shape.
    #[error("{what}: {len} elements cannot have shape {shape} ({numel} elements)", shape = fmt_shape(.shape))]
    DataLength {
        /// The constructor.
        what: String,
        /// Number of elements given.
        len: usize,
        /// The shape asked for.
        shape: Vec<usize>,
        /// Number of elements the shape holds.
        numel: usize,
    },
    /// An invalid op parameter (a negative step, two `-1`s in a reshape...).
    #[error("{op}: invalid argument {arg}: {msg}")]
    InvalidArgument {
        /// The op.
        op: String,
        /// The parameter.
        arg: String,
        /// What is wrong with it.
        msg: String,
    },
    /// An op with no rule registered for a transform or backend.
    #[error("{op}: no {what} is registered for this op{hint}")]
    MissingRule {
        /// The op's display name.
        op: String,
        /// `"CPU kernel"`, `"jvp rule"`, `"vmap rule"`, `"transpose rule"`.
        what: String,
        /// Extra advice (for example, which crate to link).
        hint: String,
    },
    /// Two registrations for the same op in the same registry.
    #[error("duplicate {what} for op {op}: registered at {first} and at {second}")]
    DuplicateRegistration {
        /// The registry (`"CPU kernel"`, `"jvp rule"`...).
        what: String,
        /// The op's display name.
        op: String,
        /// Where the first registration was made.
        first: String,
        /// Where the second was made.
        second: String,
    },
    /// A `Var` was used in a trace it does not belong to.
    #[error("{op}: argument {arg} belongs to another trace; pass values into a traced function as its arguments")]
    ForeignVar {
        /// The op being applied.
        op: String,
        /// Which argument.
        arg: String,
    },
    /// A broken graph invariant, found by [`Graph::verify`](crate::Graph::verify).
    #[error("invalid graph at node {node}: {msg}")]
    InvalidGraph {
        /// The node index.
        node: usize,
        /// What is wrong.
        msg: String,
    },
    /// Memory that could not be had: an allocation the system refused, or a
    /// plan whose peak exceeds the memory budget of the call.
    #[error("{what}: {bytes} bytes requested, {msg}")]
    OutOfMemory {
        /// What asked for the memory (`Tensor::zeros`, a plan).
        what: String,
        /// The bytes asked for (`usize::MAX` when the count overflows).
        bytes: usize,
        /// Why it could not be had.
        msg: String,
    },
    /// Reading or writing a file or stream failed (`.npy` files).
    #[error("{what}: {msg}")]
    Io {
        /// What was being read or written, and where.
        what: String,
        /// The underlying error.
        msg: String,
    },
    /// A kernel, a rule (vmap, jvp, transpose, rewrite) or an op's shape
    /// rule panicked: a bug in the op's implementation, caught where the
    /// backend, the transform or the trace called it, so that the caller
    /// gets an error naming the op instead of an unwinding panic.
    #[error("{what} of `{op}` panicked: {msg}")]
    Panicked {
        /// The op.
        op: String,
        /// What panicked (`"CPU kernel"`, `"jvp rule"`, `"shape rule"`).
        what: String,
        /// The panic's message.
        msg: String,
    },
    /// A graph larger than `u32::MAX` nodes.
    #[error("graph too large: more than {max} nodes")]
    GraphTooLarge {
        /// The limit.
        max: u64,
    },
}

impl Error {
    /// Shorthand for [`Error::Shape`].
    pub fn shape(op: impl Into<String>, shapes: &[&[usize]], msg: impl Into<String>) -> Self {
        Error::Shape {
            op: op.into(),
            shapes: shapes.iter().map(|s| s.to_vec()).collect(),
            msg: msg.into(),
        }
    }

    /// Shorthand for [`Error::InvalidArgument`].
    pub fn invalid(op: impl Into<String>, arg: impl Into<String>, msg: impl Into<String>) -> Self {
        Error::InvalidArgument { op: op.into(), arg: arg.into(), msg: msg.into() }
    }

    /// The op this error names, for the errors that name one.
    pub fn op(&self) -> Option<&str> {
        match self {
            Error::Broadcast { op, .. }
            | Error::AxisOutOfRange { op, .. }
            | Error::Shape { op, .. }
            | Error::DType { op, .. }
            | Error::IndexOutOfBounds { op, .. }
            | Error::InvalidArgument { op, .. }
            | Error::Panicked { op, .. } => Some(op),
            _ => None,
        }
    }

    /// The same error naming `name` as its op: what the user called (a
    /// composite such as `stack` or `logsumexp`) rather than the primitive
    /// inside it that failed. Errors that name no op are returned as they are.
    pub fn with_op(mut self, name: &str) -> Self {
        match &mut self {
            Error::Broadcast { op, .. }
            | Error::AxisOutOfRange { op, .. }
            | Error::Shape { op, .. }
            | Error::DType { op, .. }
            | Error::IndexOutOfBounds { op, .. }
            | Error::InvalidArgument { op, .. } => *op = name.to_string(),
            _ => {}
        }
        self
    }

    /// Runs `f`, a kernel or rule of `op` (`what`: `"CPU kernel"`, `"jvp
    /// rule"`, ...): its panic, a bug in the op's implementation, is
    /// returned as [`Error::Panicked`] instead of unwinding through the
    /// caller's program. Every place that calls an op's code catches
    /// through here.
    ///
    /// ```
    /// use anvil_core::Error;
    /// let r: Result<(), Error> = Error::catching("my_op", "jvp rule", || panic!("oops"));
    /// assert_eq!(r.unwrap_err().to_string(), "jvp rule of `my_op` panicked: oops");
    /// assert_eq!(Error::catching("my_op", "jvp rule", || Ok(3)).unwrap(), 3);
    /// ```
    pub fn catching<R>(op: &str, what: &str, f: impl FnOnce() -> Result<R>) -> Result<R> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .unwrap_or_else(|p| Err(Error::panicked(op, what, p.as_ref())))
    }

    /// [`Error::Panicked`] from a caught panic's payload (its message
    /// when it is a string).
    ///
    /// ```
    /// use anvil_core::Error;
    /// let payload = std::panic::catch_unwind(|| panic!("index 3 out of range")).unwrap_err();
    /// let e = Error::panicked("my_op", "CPU kernel", payload.as_ref());
    /// assert_eq!(e.to_string(), "CPU kernel of `my_op` panicked: index 3 out of range");
    /// ```
    pub fn panicked(
        op: impl Into<String>,
        what: impl Into<String>,
        payload: &(dyn std::any::Any + Send),
    ) -> Self {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(a panic without a message)".into());
        Error::Panicked { op: op.into(), what: what.into(), msg }
    }

    /// Shorthand for [`Error::DType`].
    pub fn dtype(
        op: impl Into<String>,
        arg: impl Into<String>,
        got: DType,
        expected: impl Into<String>,
    ) -> Self {
        Error::DType { op: op.into(), arg: arg.into(), got, expected: expected.into() }
    }
}

/// "the matrix" for an unbatched argument, "matrix [1, 0] of the batch
/// (batch shape [2, 3])" for a batched one.
fn linalg_which(index: &[usize], shape: &[usize]) -> String {
    if shape.is_empty() {
        "the matrix".into()
    } else {
        format!("matrix {index:?} of the batch (batch shape {shape:?})")
    }
}
