//! Symbolic dimensions: a dimension that is a named variable bound when a
//! compiled function is called, or a polynomial in such variables with
//! floor division and modulo by constants (JAX's shape polymorphism).
//!
//! **Representation.** A dimension is a `usize` everywhere in anvil (shapes
//! are `&[usize]`). Values below [`SYMBOLIC_BASE`] (2⁶²) are sizes; values
//! from it up are *handles* of expressions interned in a process-wide
//! table: the same expression always has the same handle, so two
//! dimensions are structurally equal exactly when they are equal as
//! `usize`, and every shape rule that copies or compares dimensions works
//! on symbolic ones unchanged. A handle carries a 24-bit check of its
//! index: a handle changed by raw arithmetic (`d + 1`, `d * 2`) is no
//! handle, and [`crate::Graph::push`] rejects the node whose shape rule
//! made it, naming the op. Arithmetic on dimensions goes through this
//! module ([`dim_add`], [`dim_mul`], [`dim_floordiv`], [`dim_mod`], and the
//! helpers of [`crate::shape`] built on them).
//!
//! **Binding.** A [`Binding`] maps variables to sizes; it is found from the
//! shapes of a call's arguments ([`Binding::from_shapes`]), checked against
//! each variable's declared range and against the constraints recorded
//! while tracing ([`Constraint`]), and evaluates every symbolic shape of a
//! compiled plan to sizes.
//!
//! ```
//! use anvil_core::shape::{dim_add, dim_mul, dim_var, fmt_dim, Binding};
//!
//! let n = dim_var("n", 1, Some(64))?;
//! let m = dim_add(dim_mul(n, 2)?, 3)?;           // 2n + 3
//! assert_eq!(fmt_dim(m), "2*n + 3");
//! let b = Binding::from_shapes(&[&[n][..]], &[&[10][..]])?;
//! assert_eq!(b.eval(m)?, 23);
//! # Ok::<(), anvil_core::Error>(())
//! ```

use crate::error::{Error, Result};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, OnceLock, RwLock};

/// Dimensions from this value up are handles of symbolic expressions.
pub const SYMBOLIC_BASE: usize = 1 << 62;

/// Bits of a handle holding its check.
const CHECK_BITS: u32 = 24;
const CHECK_MASK: usize = (1 << CHECK_BITS) - 1;
/// Bits for the index: below the tag bit 62.
const MAX_ID: usize = (1 << (62 - CHECK_BITS)) - 1;

/// Whether `d` is a symbolic dimension (a handle, valid or not).
pub fn is_symbolic(d: usize) -> bool {
    d >= SYMBOLIC_BASE
}

/// Whether any dimension of `shape` is symbolic.
pub fn is_symbolic_shape(shape: &[usize]) -> bool {
    shape.iter().any(|&d| is_symbolic(d))
}

// ------------------------------------------------------------ expressions

/// An indivisible factor of a monomial.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Atom {
    /// A dimension variable.
    Var(VarId),
    /// `floor(p / c)`, `c > 1`, `p` not a multiple of `c` term by term.
    FloorDiv(Poly, i64),
    /// `p mod c` (in `0..c`), `c > 1`.
    Mod(Poly, i64),
}

/// A declared dimension variable: its name and range. Two declarations
/// with the same name and range are the same variable.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct VarId {
    name: Arc<str>,
    min: usize,
    max: Option<usize>,
}

/// Atoms with their (positive) powers, sorted: a product.
type Mono = Vec<(Atom, u32)>;

/// A polynomial with integer coefficients over atoms; the empty monomial is
/// the constant term. Normal form: no zero coefficient.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Poly {
    terms: BTreeMap<Mono, i64>,
}

fn overflow(what: &str) -> Error {
    Error::invalid("dimension", "expression", format!("{what} overflows"))
}

impl Poly {
    fn constant(c: i64) -> Poly {
        let mut terms = BTreeMap::new();
        if c != 0 {
            terms.insert(Vec::new(), c);
        }
        Poly { terms }
    }

    fn atom(a: Atom) -> Poly {
        let mut terms = BTreeMap::new();
        terms.insert(vec![(a, 1)], 1);
        Poly { terms }
    }

    fn as_constant(&self) -> Option<i64> {
        match self.terms.len() {
            0 => Some(0),
            1 => self.terms.get(&Vec::new()).copied(),
            _ => None,
        }
    }

    fn constant_term(&self) -> i64 {
        self.terms.get(&Vec::new()).copied().unwrap_or(0)
    }

    fn add(&self, other: &Poly, sign: i64) -> Result<Poly> {
        let mut terms = self.terms.clone();
        for (m, &c) in &other.terms {
            let c = c.checked_mul(sign).ok_or_else(|| overflow("a coefficient"))?;
            let e = terms.entry(m.clone()).or_insert(0);
            *e = e.checked_add(c).ok_or_else(|| overflow("a coefficient"))?;
            if *e == 0 {
                terms.remove(m);
            }
        }
        Ok(Poly { terms })
    }

    fn mul(&self, other: &Poly) -> Result<Poly> {
        let mut out = Poly::default();
        for (ma, &ca) in &self.terms {
            for (mb, &cb) in &other.terms {
                let mut m: BTreeMap<Atom, u32> = BTreeMap::new();
                for (a, p) in ma.iter().chain(mb) {
                    *m.entry(a.clone()).or_insert(0) += p;
                }
                let c = ca.checked_mul(cb).ok_or_else(|| overflow("a coefficient"))?;
                let term = Poly { terms: BTreeMap::from([(m.into_iter().collect(), c)]) };
                out = out.add(&term, 1)?;
            }
        }
        Ok(out)
    }

    /// `floor(self / c)` for `c > 0`.
    fn floordiv(&self, c: i64) -> Result<Poly> {
        if c == 1 {
            return Ok(self.clone());
        }
        let k = self.constant_term();
        let rest = self.add(&Poly::constant(k), -1)?;
        if rest.terms.values().all(|v| v % c == 0) {
            // floor((c q + k) / c) = q + floor(k / c), q an integer.
            let terms = rest.terms.into_iter().map(|(m, v)| (m, v / c)).collect();
            return Poly { terms }.add(&Poly::constant(k.div_euclid(c)), 1);
        }
        Ok(Poly::atom(Atom::FloorDiv(self.clone(), c)))
    }

    /// `self mod c` for `c > 0`, in `0..c`.
    fn modulo(&self, c: i64) -> Result<Poly> {
        if c == 1 {
            return Ok(Poly::default());
        }
        let k = self.constant_term();
        let rest = self.add(&Poly::constant(k), -1)?;
        if rest.terms.values().all(|v| v % c == 0) {
            return Ok(Poly::constant(k.rem_euclid(c)));
        }
        Ok(Poly::atom(Atom::Mod(self.clone(), c)))
    }

    /// `self / other` when it divides term by term (`3n / 3`, `n m / n`).
    fn exact_div(&self, other: &Poly) -> Option<Poly> {
        if let Some(c) = other.as_constant() {
            if c == 0 || self.terms.values().any(|v| v % c != 0) {
                return None;
            }
            let terms = self.terms.iter().map(|(m, v)| (m.clone(), v / c)).collect();
            return Some(Poly { terms });
        }
        // A single monomial divisor `c * atoms`.
        if other.terms.len() != 1 {
            return None;
        }
        let (dm, &dc) = other.terms.iter().next()?;
        let mut terms = BTreeMap::new();
        for (m, &v) in &self.terms {
            if v % dc != 0 {
                return None;
            }
            let mut rest: BTreeMap<Atom, u32> = m.iter().cloned().collect();
            for (a, p) in dm {
                let have = rest.get_mut(a)?;
                if *have < *p {
                    return None;
                }
                *have -= p;
                if *have == 0 {
                    rest.remove(a);
                }
            }
            terms.insert(rest.into_iter().collect(), v / dc);
        }
        Some(Poly { terms })
    }

    fn eval(&self, b: &Binding) -> Result<i64> {
        let mut sum: i64 = 0;
        for (m, &c) in &self.terms {
            let mut t = c;
            for (a, p) in m {
                let v = a.eval(b)?;
                for _ in 0..*p {
                    t = t.checked_mul(v).ok_or_else(|| overflow("a dimension"))?;
                }
            }
            sum = sum.checked_add(t).ok_or_else(|| overflow("a dimension"))?;
        }
        Ok(sum)
    }

    /// The variables it mentions.
    fn vars(&self, out: &mut Vec<VarId>) {
        for m in self.terms.keys() {
            for (a, _) in m {
                match a {
                    Atom::Var(v) => {
                        if !out.contains(v) {
                            out.push(v.clone());
                        }
                    }
                    Atom::FloorDiv(p, _) | Atom::Mod(p, _) => p.vars(out),
                }
            }
        }
    }

    /// `Some((a, v, b))` when the polynomial is `a * v + b` with `v` a
    /// variable and `a != 0`.
    fn as_linear(&self) -> Option<(i64, VarId, i64)> {
        let mut lin = None;
        for (m, &c) in &self.terms {
            match m.as_slice() {
                [] => {}
                [(Atom::Var(v), 1)] if lin.is_none() => lin = Some((c, v.clone())),
                _ => return None,
            }
        }
        lin.map(|(a, v)| (a, v, self.constant_term()))
    }
}

impl Atom {
    fn eval(&self, b: &Binding) -> Result<i64> {
        match self {
            Atom::Var(v) => b.value(v).map(|n| n as i64).ok_or_else(|| {
                Error::invalid(
                    "dimension",
                    &*v.name,
                    format!("the dimension variable `{}` is not bound", v.name),
                )
            }),
            Atom::FloorDiv(p, c) => Ok(p.eval(b)?.div_euclid(*c)),
            Atom::Mod(p, c) => Ok(p.eval(b)?.rem_euclid(*c)),
        }
    }
}

impl fmt::Display for Poly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.terms.is_empty() {
            return f.write_str("0");
        }
        // Non-constant terms first (as JAX prints `2*n + 3`).
        let mut first = true;
        let ordered = self
            .terms
            .iter()
            .filter(|(m, _)| !m.is_empty())
            .chain(self.terms.iter().filter(|(m, _)| m.is_empty()));
        for (m, &c) in ordered {
            let (sign, mag) = if c < 0 { ("-", c.unsigned_abs()) } else { ("+", c as u64) };
            if first {
                if c < 0 {
                    f.write_str("-")?;
                }
            } else {
                write!(f, " {sign} ")?;
            }
            first = false;
            if m.is_empty() {
                write!(f, "{mag}")?;
                continue;
            }
            if mag != 1 {
                write!(f, "{mag}*")?;
            }
            for (i, (a, p)) in m.iter().enumerate() {
                if i > 0 {
                    f.write_str("*")?;
                }
                match a {
                    Atom::Var(v) => f.write_str(&v.name)?,
                    Atom::FloorDiv(q, c) => write!(f, "floordiv({q}, {c})")?,
                    Atom::Mod(q, c) => write!(f, "mod({q}, {c})")?,
                }
                if *p > 1 {
                    write!(f, "^{p}")?;
                }
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- interning

#[derive(Default)]
struct Table {
    exprs: Vec<Poly>,
    ids: HashMap<Poly, usize>,
}

fn table() -> &'static RwLock<Table> {
    static TABLE: OnceLock<RwLock<Table>> = OnceLock::new();
    TABLE.get_or_init(RwLock::default)
}

fn check_of(id: usize) -> usize {
    (id.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) & CHECK_MASK
}

fn handle_of(id: usize) -> usize {
    SYMBOLIC_BASE | (id << CHECK_BITS) | check_of(id)
}

fn id_of(d: usize) -> Option<usize> {
    if d >> 62 != 1 {
        return None;
    }
    let id = (d & (SYMBOLIC_BASE - 1)) >> CHECK_BITS;
    (d & CHECK_MASK == check_of(id)).then_some(id)
}

/// The dimension of a polynomial: a size when it is constant, a handle
/// otherwise.
fn to_dim(p: Poly) -> Result<usize> {
    if let Some(c) = p.as_constant() {
        return match usize::try_from(c) {
            Ok(n) if n < SYMBOLIC_BASE => Ok(n),
            _ => Err(Error::invalid("dimension", "expression", format!("{c} is not a size"))),
        };
    }
    {
        let t = table().read().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(&id) = t.ids.get(&p) {
            return Ok(handle_of(id));
        }
    }
    let mut t = table().write().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(&id) = t.ids.get(&p) {
        return Ok(handle_of(id));
    }
    let id = t.exprs.len();
    if id > MAX_ID {
        return Err(Error::invalid("dimension", "expression", "too many symbolic dimensions"));
    }
    t.exprs.push(p.clone());
    t.ids.insert(p, id);
    Ok(handle_of(id))
}

/// The polynomial of a dimension; `None` for a value at or above
/// [`SYMBOLIC_BASE`] that is no handle (made by raw arithmetic).
fn poly_of(d: usize) -> Option<Poly> {
    if !is_symbolic(d) {
        return i64::try_from(d).ok().map(Poly::constant);
    }
    let id = id_of(d)?;
    let t = table().read().unwrap_or_else(std::sync::PoisonError::into_inner);
    t.exprs.get(id).cloned()
}

/// The symbolic dimension that the number `v` is, converted with `as`
/// (`x.shape()[0] as f64` of a symbolic axis gives the handle's value, not a
/// size): `v` rounds the handle of an expression in the table. `None` for
/// every other number (anything below 2^62, which no size reaches).
pub fn dim_of_number(v: f64) -> Option<usize> {
    if !(v >= SYMBOLIC_BASE as f64 && v < (2.0 * SYMBOLIC_BASE as f64)) {
        return None;
    }
    let id = ((v as usize) & (SYMBOLIC_BASE - 1)) >> CHECK_BITS;
    let h = handle_of(id);
    (h as f64 == v && poly_of(h).is_some()).then_some(h)
}

/// Whether `d` is a size or a valid handle.
pub fn is_valid_dim(d: usize) -> bool {
    !is_symbolic(d) || poly_of(d).is_some()
}

fn poly(d: usize) -> Result<Poly> {
    poly_of(d).ok_or_else(|| {
        Error::invalid(
            "dimension",
            "expression",
            format!(
                "{d} is neither a size nor a symbolic dimension (a symbolic dimension changed by \
                 arithmetic outside anvil_core::shape)"
            ),
        )
    })
}

// -------------------------------------------------------------- public API

/// Declares the dimension variable `name`, with sizes in `min..=max`
/// (`max: None` for no upper bound), and returns it as a dimension
/// (`tinygrad`'s `Variable('n', 4, 8)`, JAX's `symbolic_shape("n")`).
///
/// A variable is its name with its range: declaring the same name and
/// range again gives the same dimension.
///
/// ```
/// use anvil_core::shape::{dim_var, fmt_dim, is_symbolic};
/// let n = dim_var("n", 4, Some(8))?;
/// assert!(is_symbolic(n));
/// assert_eq!(fmt_dim(n), "n");
/// assert_eq!(dim_var("n", 4, Some(8))?, n);
/// assert!(dim_var("2n", 1, None).is_err());
/// # Ok::<(), anvil_core::Error>(())
/// ```
///
/// # Errors
/// An empty or invalid name, `min > max`.
pub fn dim_var(name: &str, min: usize, max: Option<usize>) -> Result<usize> {
    let valid = !name.is_empty()
        && name.chars().all(|c| c.is_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if !valid {
        return Err(Error::invalid(
            "dim_var",
            "name",
            format!("{name:?} is not a name (letters, digits and _, not starting with a digit)"),
        ));
    }
    if max.is_some_and(|m| m < min) || min >= SYMBOLIC_BASE {
        return Err(Error::invalid(
            "dim_var",
            "range",
            format!("{name}: {} is empty or too large", fmt_range((min, max))),
        ));
    }
    to_dim(Poly::atom(Atom::Var(VarId { name: name.into(), min, max })))
}

fn fmt_range((min, max): (usize, Option<usize>)) -> String {
    match max {
        Some(m) => format!("{min}..={m}"),
        None => format!("{min}.."),
    }
}

/// `a + b`.
///
/// # Errors
/// A coefficient overflowing, a negative constant result, or an operand
/// that is no dimension.
pub fn dim_add(a: usize, b: usize) -> Result<usize> {
    if !is_symbolic(a) && !is_symbolic(b) {
        return a.checked_add(b).filter(|&n| n < SYMBOLIC_BASE).ok_or_else(|| overflow("a + b"));
    }
    to_dim(poly(a)?.add(&poly(b)?, 1)?)
}

/// `a - b` (a dimension: the caller knows `a >= b`, or records it as a
/// [`Constraint`]).
///
/// # Errors
/// As [`dim_add`]; a negative constant result.
pub fn dim_sub(a: usize, b: usize) -> Result<usize> {
    if !is_symbolic(a) && !is_symbolic(b) {
        return a.checked_sub(b).ok_or_else(|| {
            Error::invalid("dimension", "expression", format!("{a} - {b} is negative"))
        });
    }
    to_dim(poly(a)?.add(&poly(b)?, -1)?)
}

/// `a * b`.
///
/// # Errors
/// As [`dim_add`].
pub fn dim_mul(a: usize, b: usize) -> Result<usize> {
    if !is_symbolic(a) && !is_symbolic(b) {
        return a.checked_mul(b).filter(|&n| n < SYMBOLIC_BASE).ok_or_else(|| overflow("a * b"));
    }
    to_dim(poly(a)?.mul(&poly(b)?)?)
}

/// `floor(a / c)` for a size `c > 0`.
///
/// # Errors
/// `c` zero or symbolic; as [`dim_add`].
pub fn dim_floordiv(a: usize, c: usize) -> Result<usize> {
    let c = divisor(c)?;
    if !is_symbolic(a) {
        return Ok(a / c as usize);
    }
    to_dim(poly(a)?.floordiv(c)?)
}

/// `a mod c` for a size `c > 0`.
///
/// # Errors
/// As [`dim_floordiv`].
pub fn dim_mod(a: usize, c: usize) -> Result<usize> {
    let c = divisor(c)?;
    if !is_symbolic(a) {
        return Ok(a % c as usize);
    }
    to_dim(poly(a)?.modulo(c)?)
}

fn divisor(c: usize) -> Result<i64> {
    match i64::try_from(c) {
        Ok(c) if c > 0 && !is_symbolic(c as usize) => Ok(c),
        _ => Err(Error::invalid(
            "dimension",
            "divisor",
            format!("a dimension divided by {} (must be a positive size)", fmt_dim(c)),
        )),
    }
}

/// `a / b` when it is exact as polynomials (`3n / 3 = n`, `n m / n = m`,
/// `12 / 4 = 3`); `None` otherwise.
pub fn dim_exact_div(a: usize, b: usize) -> Option<usize> {
    if !is_symbolic(a) && !is_symbolic(b) {
        return (b != 0 && a % b == 0).then(|| a / b);
    }
    to_dim(poly_of(a)?.exact_div(&poly_of(b)?)?).ok()
}

/// Product of the dimensions of a shape, as a dimension (symbolic when a
/// factor is).
///
/// # Errors
/// As [`dim_mul`].
pub fn dim_numel(shape: &[usize]) -> Result<usize> {
    shape.iter().try_fold(1usize, |n, &d| dim_mul(n, d))
}

/// A dimension as people write it: `5`, `n`, `2*n + 3`, `floordiv(n, 2)`.
pub fn fmt_dim(d: usize) -> String {
    if !is_symbolic(d) {
        return d.to_string();
    }
    match poly_of(d) {
        Some(p) => p.to_string(),
        None => format!("<invalid dimension {d:#x}>"),
    }
}

/// A shape as people write it: `[n, 3]`.
pub fn fmt_dims(shape: &[usize]) -> String {
    if !is_symbolic_shape(shape) {
        return format!("{shape:?}");
    }
    let dims: Vec<String> = shape.iter().map(|&d| fmt_dim(d)).collect();
    format!("[{}]", dims.join(", "))
}

/// The names of the variables a dimension mentions.
pub fn dim_vars(d: usize) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(p) = poly_of(d) {
        p.vars(&mut out);
    }
    out.iter().map(|v| v.name.to_string()).collect()
}

// ---------------------------------------------------------- constraints

/// A condition on dimension variables that a shape rule could not decide
/// while tracing (it depends on the binding), checked when a call binds
/// the variables.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Constraint {
    /// The op whose rule recorded it.
    pub op: String,
    /// Left side.
    pub lhs: usize,
    /// Right side.
    pub rhs: usize,
    /// `true` for `lhs >= rhs`, `false` for `lhs == rhs`.
    pub at_least: bool,
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rel = if self.at_least { ">=" } else { "==" };
        write!(f, "{}: {} {rel} {}", self.op, fmt_dim(self.lhs), fmt_dim(self.rhs))
    }
}

thread_local! {
    static COLLECTOR: std::cell::RefCell<Option<Vec<Constraint>>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with constraint recording on (for this thread) and returns its
/// result with the constraints recorded. Outside such a scope, a rule that
/// cannot decide an equality fails instead.
pub fn collect_constraints<R>(f: impl FnOnce() -> R) -> (R, Vec<Constraint>) {
    let outer = COLLECTOR.with(|c| c.borrow_mut().replace(Vec::new()));
    let r = f();
    let mine = COLLECTOR.with(|c| {
        let mut c = c.borrow_mut();
        let mine = c.take().unwrap_or_default();
        *c = outer;
        mine
    });
    // Constraints of an inner scope also hold for the outer one.
    COLLECTOR.with(|c| {
        if let Some(outer) = c.borrow_mut().as_mut() {
            outer.extend(mine.iter().cloned());
        }
    });
    (r, mine)
}

fn record(c: Constraint) -> bool {
    COLLECTOR.with(|col| match col.borrow_mut().as_mut() {
        Some(v) => {
            if !v.contains(&c) {
                v.push(c);
            }
            true
        }
        None => false,
    })
}

/// Requires `a == b` for `op`: true when they are the same dimension; for
/// dimensions that may be equal depending on the binding (`n` and `m`, `n`
/// and `4`), a [`Constraint`] is recorded when recording is on
/// ([`collect_constraints`]).
///
/// # Errors
/// Two different sizes; an undecidable equality with recording off.
pub fn require_equal(op: &str, a: usize, b: usize, what: &str) -> Result<()> {
    if a == b {
        return Ok(());
    }
    if (is_symbolic(a) || is_symbolic(b))
        && record(Constraint { op: op.into(), lhs: a, rhs: b, at_least: false })
    {
        return Ok(());
    }
    Err(Error::invalid(op, what, format!("dimensions {} and {} differ", fmt_dim(a), fmt_dim(b))))
}

/// Requires `a >= b` for `op` (recorded as a [`Constraint`] when it depends
/// on the binding and recording is on).
///
/// # Errors
/// A violated or (with recording off) undecidable inequality.
pub fn require_at_least(op: &str, a: usize, b: usize, what: &str) -> Result<()> {
    if dim_provably_at_least(a, b)
        || ((is_symbolic(a) || is_symbolic(b))
            && record(Constraint { op: op.into(), lhs: a, rhs: b, at_least: true }))
    {
        return Ok(());
    }
    Err(Error::invalid(op, what, format!("needs {} >= {}", fmt_dim(a), fmt_dim(b))))
}

/// Whether `a >= b` for every binding of the variables: decided for sizes,
/// and for dimensions whose difference is a constant or has a lower bound
/// from the variables' ranges (`n + 2 >= n`, `n >= 1` for `n` in `1..`).
pub fn dim_provably_at_least(a: usize, b: usize) -> bool {
    if !is_symbolic(a) && !is_symbolic(b) {
        return a >= b;
    }
    let (Some(pa), Some(pb)) = (poly_of(a), poly_of(b)) else { return false };
    pa.add(&pb, -1).is_ok_and(|diff| {
        diff.as_constant().is_some_and(|c| c >= 0) || lower_bound(&diff) >= Some(0)
    })
}

/// `min(a, b)` when it is decided for every binding (see
/// [`dim_provably_at_least`]).
///
/// # Errors
/// Two dimensions whose order depends on the binding (`n` and `m`, `n`
/// and `3` for `n` in `1..=8`), naming `op`.
pub fn dim_min(op: &str, a: usize, b: usize) -> Result<usize> {
    if dim_provably_at_least(b, a) {
        Ok(a)
    } else if dim_provably_at_least(a, b) {
        Ok(b)
    } else {
        Err(Error::invalid(
            op,
            "shape",
            format!(
                "min({}, {}) depends on the sizes bound at the call: a symbolic dimension's \
                 order against the other is not known",
                fmt_dim(a),
                fmt_dim(b)
            ),
        ))
    }
}

/// A lower bound of a polynomial from its variables' ranges, when every
/// non-constant term is a variable with a non-negative coefficient.
fn lower_bound(p: &Poly) -> Option<i64> {
    let mut lo = p.constant_term();
    for (m, &c) in &p.terms {
        match m.as_slice() {
            [] => {}
            [(Atom::Var(v), 1)] if c > 0 => {
                lo = lo.checked_add(c.checked_mul(i64::try_from(v.min).ok()?)?)?;
            }
            _ => return None,
        }
    }
    Some(lo)
}

// ---------------------------------------------------------------- binding

/// Sizes bound to dimension variables for one call.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Binding {
    /// Sorted by variable; few entries.
    vars: Vec<(VarId, usize)>,
}

impl Binding {
    /// The empty binding.
    pub fn new() -> Binding {
        Binding::default()
    }

    /// Whether nothing is bound.
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// The size bound to the variable called `name`.
    pub fn get(&self, name: &str) -> Option<usize> {
        self.vars.iter().find(|(v, _)| &*v.name == name).map(|&(_, n)| n)
    }

    fn value(&self, v: &VarId) -> Option<usize> {
        self.vars.binary_search_by(|(w, _)| w.cmp(v)).ok().map(|i| self.vars[i].1)
    }

    /// The variables' names and their sizes.
    pub fn iter(&self) -> impl Iterator<Item = (&str, usize)> {
        self.vars.iter().map(|(v, n)| (&*v.name, *n))
    }

    /// Binds the variable `var` (a dimension made by [`dim_var`]) to `size`.
    ///
    /// # Errors
    /// `var` not a variable; as [`Binding::from_shapes`].
    pub fn bind_var(&mut self, var: usize, size: usize) -> Result<()> {
        match poly(var)?.as_linear() {
            Some((1, v, 0)) => self.bind(&v, size, "var"),
            _ => Err(Error::invalid(
                "bind",
                "var",
                format!("{} is not a dimension variable", fmt_dim(var)),
            )),
        }
    }

    fn bind(&mut self, var: &VarId, size: usize, arg: &str) -> Result<()> {
        match self.vars.binary_search_by(|(v, _)| v.cmp(var)) {
            Ok(i) if self.vars[i].1 == size => Ok(()),
            Ok(i) => Err(Error::invalid(
                "bind",
                arg,
                format!(
                    "the dimension variable `{}` is {size} here but {} in an earlier argument",
                    var.name, self.vars[i].1
                ),
            )),
            Err(i) => {
                if size < var.min || var.max.is_some_and(|m| size > m) || size >= SYMBOLIC_BASE {
                    return Err(Error::invalid(
                        "bind",
                        arg,
                        format!(
                            "the dimension variable `{}` = {size} is outside its range {}",
                            var.name,
                            fmt_range((var.min, var.max))
                        ),
                    ));
                }
                self.vars.insert(i, (var.clone(), size));
                Ok(())
            }
        }
    }

    /// Binds the variables of symbolic shapes `specs` from the sizes of the
    /// actual shapes `given`: a dimension that is a variable binds it; one
    /// that is linear in one unbound variable (`2*n + 1`) solves for it;
    /// every other dimension is evaluated and compared.
    ///
    /// # Errors
    /// A rank or size that differs, a variable bound to two sizes, a size
    /// outside a range, a dimension that determines no variable.
    pub fn from_shapes(specs: &[&[usize]], given: &[&[usize]]) -> Result<Binding> {
        let mut b = Binding::new();
        b.extend_from_shapes(specs, given)?;
        Ok(b)
    }

    /// Like [`Binding::from_shapes`], adding to this binding.
    ///
    /// # Errors
    /// As [`Binding::from_shapes`].
    pub fn extend_from_shapes(&mut self, specs: &[&[usize]], given: &[&[usize]]) -> Result<()> {
        self.extend_with(specs, given, &poly)
    }

    fn extend_with(
        &mut self,
        specs: &[&[usize]],
        given: &[&[usize]],
        poly: &dyn Fn(usize) -> Result<Poly>,
    ) -> Result<()> {
        if specs.len() != given.len() {
            return Err(Error::Arity {
                what: "bind".into(),
                kind: "arguments".into(),
                expected: specs.len(),
                got: given.len(),
            });
        }
        let arg = |i: usize| format!("argument {i}");
        let mismatch = |i: usize, spec: &[usize], got: &[usize]| {
            Error::shape(
                "bind",
                &[got],
                format!("argument {i} has shape {got:?}, expected {}", fmt_dims(spec)),
            )
        };
        // Pass 1: ranks, sizes, bare and linear variables; pass 2: the rest.
        let mut later = Vec::new();
        for (i, (spec, got)) in specs.iter().zip(given).enumerate() {
            if spec.len() != got.len() {
                return Err(mismatch(i, spec, got));
            }
            for (&d, &n) in spec.iter().zip(got.iter()) {
                if !is_symbolic(d) {
                    if d != n {
                        return Err(mismatch(i, spec, got));
                    }
                    continue;
                }
                let p = poly(d)?;
                match p.as_linear() {
                    Some((a, v, c)) if self.value(&v).is_none() => {
                        let rhs = i64::try_from(n).map_err(|_| overflow("a size"))? - c;
                        if a == 0 || rhs % a != 0 || rhs / a < 0 {
                            return Err(Error::shape(
                                "bind",
                                &[got],
                                format!(
                                    "argument {i}: no size of `{}` makes {} equal {n}",
                                    v.name,
                                    fmt_dim(d)
                                ),
                            ));
                        }
                        self.bind(&v, (rhs / a) as usize, &arg(i))?;
                    }
                    _ => later.push((i, d, n, spec, got)),
                }
            }
        }
        for (i, d, n, spec, got) in later {
            let v = poly(d)?.eval(self).map_err(|_| {
                Error::shape(
                    "bind",
                    &[got],
                    format!(
                        "argument {i}: the dimension {} of {} determines no variable; give it as \
                         a variable in some argument",
                        fmt_dim(d),
                        fmt_dims(spec)
                    ),
                )
            })?;
            if usize::try_from(v).ok() != Some(n) {
                return Err(Error::shape(
                    "bind",
                    &[got],
                    format!(
                        "argument {i} has shape {got:?}, expected {}: {} is {v} with {self}",
                        fmt_dims(spec),
                        fmt_dim(d),
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The size of dimension `d` under this binding.
    ///
    /// # Errors
    /// An unbound variable; a negative or overflowing value.
    pub fn eval(&self, d: usize) -> Result<usize> {
        if !is_symbolic(d) {
            return Ok(d);
        }
        let v = poly(d)?.eval(self)?;
        usize::try_from(v).ok().filter(|&n| n < SYMBOLIC_BASE).ok_or_else(|| {
            Error::invalid(
                "bind",
                "dimension",
                format!("the dimension {} is {v} with {self}", fmt_dim(d)),
            )
        })
    }

    /// A shape's sizes under this binding.
    ///
    /// # Errors
    /// As [`Binding::eval`].
    pub fn shape(&self, shape: &[usize]) -> Result<Vec<usize>> {
        shape.iter().map(|&d| self.eval(d)).collect()
    }

    /// Checks recorded constraints.
    ///
    /// # Errors
    /// The first violated constraint, naming its op, the dimensions and
    /// their values.
    pub fn check(&self, constraints: &[Constraint]) -> Result<()> {
        for c in constraints {
            let (l, r) = (poly(c.lhs)?.eval(self)?, poly(c.rhs)?.eval(self)?);
            let ok = if c.at_least { l >= r } else { l == r };
            if !ok {
                // The values of the sides that are expressions (a variable's
                // is in the binding, a size is itself).
                let compound = |d: usize, v: i64| {
                    let plain = !is_symbolic(d) || dim_vars(d) == [fmt_dim(d)];
                    (!plain).then(|| format!("{} = {v}", fmt_dim(d)))
                };
                let sides: Vec<String> =
                    [compound(c.lhs, l), compound(c.rhs, r)].into_iter().flatten().collect();
                let sides = if sides.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", sides.join(", "))
                };
                return Err(Error::invalid(
                    &c.op,
                    "shapes",
                    format!(
                        "the traced program needs {} {} {}, which fails with {self}{sides}",
                        fmt_dim(c.lhs),
                        if c.at_least { ">=" } else { "==" },
                        fmt_dim(c.rhs)
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The symbolic dimensions of a compiled program, their expressions
/// looked up once: a plan binds and evaluates them on every call without
/// the process-wide table.
#[derive(Clone, Debug, Default)]
pub struct DimTable {
    /// Sorted handles.
    handles: Vec<usize>,
    polys: Vec<Poly>,
}

impl DimTable {
    /// The table of the symbolic dimensions among `dims` (sizes are
    /// ignored).
    ///
    /// # Errors
    /// A value that is no dimension.
    pub fn new(dims: impl IntoIterator<Item = usize>) -> Result<DimTable> {
        let mut handles: Vec<usize> = dims.into_iter().filter(|&d| is_symbolic(d)).collect();
        handles.sort_unstable();
        handles.dedup();
        let polys = handles.iter().map(|&d| poly(d)).collect::<Result<_>>()?;
        Ok(DimTable { handles, polys })
    }

    /// Whether the program has no symbolic dimension.
    pub fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }

    fn lookup(&self, d: usize) -> Result<Poly> {
        if !is_symbolic(d) {
            return Ok(Poly::constant(d as i64));
        }
        match self.handles.binary_search(&d) {
            Ok(i) => Ok(self.polys[i].clone()),
            Err(_) => poly(d),
        }
    }

    /// [`Binding::from_shapes`] for this program.
    ///
    /// # Errors
    /// As [`Binding::from_shapes`].
    pub fn bind(&self, specs: &[&[usize]], given: &[&[usize]]) -> Result<Binding> {
        let mut b = Binding::new();
        b.extend_with(specs, given, &|d| self.lookup(d))?;
        Ok(b)
    }

    /// The value of every dimension of the table under `binding`, in the
    /// table's order (see [`DimTable::resolve`]).
    ///
    /// # Errors
    /// As [`Binding::eval`].
    pub fn eval(&self, binding: &Binding) -> Result<Vec<usize>> {
        self.handles
            .iter()
            .zip(&self.polys)
            .map(|(&d, p)| {
                let v = p.eval(binding)?;
                usize::try_from(v).ok().filter(|&n| n < SYMBOLIC_BASE).ok_or_else(|| {
                    Error::invalid(
                        "bind",
                        "dimension",
                        format!("the dimension {} is {v} with {binding}", fmt_dim(d)),
                    )
                })
            })
            .collect()
    }

    /// A shape's sizes, from the values [`DimTable::eval`] computed.
    ///
    /// # Errors
    /// A symbolic dimension not in the table.
    pub fn resolve(&self, values: &[usize], shape: &[usize]) -> Result<Vec<usize>> {
        shape
            .iter()
            .map(|&d| {
                if !is_symbolic(d) {
                    return Ok(d);
                }
                self.handles.binary_search(&d).ok().and_then(|i| values.get(i).copied()).ok_or_else(
                    || Error::invalid("bind", "dimension", format!("{} is not bound", fmt_dim(d))),
                )
            })
            .collect()
    }
}

impl fmt::Display for Binding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> =
            self.vars.iter().map(|(v, n)| format!("{} = {n}", v.name)).collect();
        write!(f, "{}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_normalises() {
        let n = dim_var("t_n", 1, None).unwrap();
        let m = dim_var("t_m", 1, None).unwrap();
        assert_eq!(dim_add(n, m).unwrap(), dim_add(m, n).unwrap());
        assert_eq!(dim_sub(dim_add(n, 3).unwrap(), 3).unwrap(), n);
        assert_eq!(dim_sub(n, n).unwrap(), 0);
        let two_n = dim_mul(n, 2).unwrap();
        assert_eq!(dim_add(n, n).unwrap(), two_n);
        assert_eq!(dim_floordiv(two_n, 2).unwrap(), n);
        assert_eq!(dim_mod(two_n, 2).unwrap(), 0);
        assert_eq!(fmt_dim(dim_floordiv(n, 2).unwrap()), "floordiv(t_n, 2)");
        assert_eq!(fmt_dim(dim_add(dim_mul(n, m).unwrap(), 1).unwrap()), "t_m*t_n + 1");
        assert_eq!(dim_exact_div(dim_mul(n, m).unwrap(), n), Some(m));
        assert_eq!(dim_exact_div(dim_mul(n, 6).unwrap(), 3), Some(two_n));
        assert_eq!(dim_exact_div(n, 2), None);
        assert_eq!(dim_numel(&[n, 3]).unwrap(), dim_mul(n, 3).unwrap());
        // Raw arithmetic does not make a handle.
        assert!(!is_valid_dim(n + 1) && !is_valid_dim(n - 1) && is_valid_dim(n));
        assert!(dim_add(n + 1, 1).is_err());
        assert!(dim_floordiv(n, 0).is_err() && dim_floordiv(n, m).is_err());
    }

    #[test]
    fn bindings_solve_check_and_evaluate() {
        let n = dim_var("b_n", 2, Some(8)).unwrap();
        let k = dim_var("b_k", 0, None).unwrap();
        let spec_a = [n, 3];
        let spec_b = [dim_add(dim_mul(n, 2).unwrap(), 1).unwrap(), k];
        let b = Binding::from_shapes(&[&spec_a, &spec_b], &[&[5, 3], &[11, 0]]).unwrap();
        assert_eq!((b.get("b_n"), b.get("b_k")), (Some(5), Some(0)));
        assert_eq!(b.eval(dim_floordiv(n, 2).unwrap()).unwrap(), 2);
        assert_eq!(b.eval(dim_mod(n, 3).unwrap()).unwrap(), 2);
        assert_eq!(b.to_string(), "b_k = 0, b_n = 5");
        // Out of range, conflicting, wrong fixed size, unsolvable.
        let e = Binding::from_shapes(&[&spec_a], &[&[9, 3]]).unwrap_err().to_string();
        assert!(e.contains("b_n") && e.contains("9") && e.contains("2..=8"), "{e}");
        let e = Binding::from_shapes(&[&spec_a, &spec_a], &[&[4, 3], &[5, 3]]).unwrap_err();
        assert!(e.to_string().contains("b_n"), "{e}");
        assert!(Binding::from_shapes(&[&spec_a], &[&[4, 2]]).is_err());
        assert!(Binding::from_shapes(&[&spec_b], &[&[10, 1]]).is_err());
        let sq = dim_mul(n, n).unwrap();
        let e = Binding::from_shapes(&[&[sq][..]], &[&[16][..]]).unwrap_err().to_string();
        assert!(e.contains("determines no variable"), "{e}");
    }

    #[test]
    fn constraints_are_recorded_and_checked() {
        let n = dim_var("c_n", 1, None).unwrap();
        let m = dim_var("c_m", 1, None).unwrap();
        assert!(require_equal("add", n, m, "1").is_err());
        let (r, cs) = collect_constraints(|| require_equal("add", n, m, "1"));
        assert!(r.is_ok() && cs.len() == 1);
        let ok = Binding::from_shapes(&[&[n, m][..]], &[&[3, 3][..]]).unwrap();
        ok.check(&cs).unwrap();
        let bad = Binding::from_shapes(&[&[n, m][..]], &[&[3, 4][..]]).unwrap();
        let e = bad.check(&cs).unwrap_err().to_string();
        assert!(e.contains("add") && e.contains("c_n = 3") && e.contains("c_m = 4"), "{e}");
        // Decided from ranges: n + 1 >= 1 always.
        require_at_least("slice", dim_add(n, 1).unwrap(), 1, "x").unwrap();
        assert!(require_at_least("slice", n, 5, "x").is_err());
    }
}
