//! Trees of values (JAX's pytrees): the structured arguments and results of
//! functions.
//!
//! A function may take and return tuples, `Vec`s, arrays, maps (flattened
//! in sorted key order), `Option`s and user structs (with
//! `#[derive(Tree)]`) of values, nested to any depth. [`Tree<L>`] is a
//! container of leaves of type `L`: `Var` while tracing, `Tensor` when
//! called. A tree flattens to its leaves in a fixed order and a
//! [`TreeDef`], its structure, from which the same type rebuilds it
//! ([`Tree::unflatten`]). Transforms work on the flat leaves; the trees are
//! their interface: `grad` of a function of a struct of parameters returns
//! that struct, `vmap`'s `in_axes` follow the arguments' structure.
//!
//! [`Traced`] links a tree of `Var`s to its concrete counterpart (the same
//! structure with `Tensor` leaves), which is what a call returns, and to
//! its nesting with another tree (the structure of a Jacobian). [`Dyn`] is
//! a tree whose structure is known only at run time.

use crate::error::{Error, Result};
use crate::tensor::Tensor;
use crate::trace::Var;
use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The structure of a tree, without its leaves.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TreeDef {
    /// One leaf.
    Leaf,
    /// A tuple or an array: a fixed number of children.
    Tuple(Vec<TreeDef>),
    /// A `Vec`: a number of children known at run time.
    List(Vec<TreeDef>),
    /// A map: its keys, in sorted order, and one child per key.
    Map(Vec<Key>, Vec<TreeDef>),
    /// A struct: its name and its fields.
    Struct(&'static str, Vec<(&'static str, TreeDef)>),
    /// `None`: no leaves.
    None,
    /// `Some`: its content.
    Some(Box<TreeDef>),
}

impl TreeDef {
    /// The number of leaves.
    pub fn num_leaves(&self) -> usize {
        match self {
            TreeDef::Leaf => 1,
            TreeDef::Tuple(c) | TreeDef::List(c) | TreeDef::Map(_, c) => {
                c.iter().map(TreeDef::num_leaves).sum()
            }
            TreeDef::Struct(_, f) => f.iter().map(|(_, d)| d.num_leaves()).sum(),
            TreeDef::None => 0,
            TreeDef::Some(d) => d.num_leaves(),
        }
    }

    /// The children (the content of `Some`, a struct's fields in order).
    pub fn children(&self) -> Vec<&TreeDef> {
        match self {
            TreeDef::Leaf | TreeDef::None => Vec::new(),
            TreeDef::Tuple(c) | TreeDef::List(c) | TreeDef::Map(_, c) => c.iter().collect(),
            TreeDef::Struct(_, f) => f.iter().map(|(_, d)| d).collect(),
            TreeDef::Some(d) => vec![d],
        }
    }

    /// The same structure with every leaf replaced by `inner` (the
    /// structure of a Jacobian: outputs outside, arguments inside).
    pub fn nest(&self, inner: &TreeDef) -> TreeDef {
        let each = |c: &[TreeDef]| c.iter().map(|d| d.nest(inner)).collect();
        match self {
            TreeDef::Leaf => inner.clone(),
            TreeDef::Tuple(c) => TreeDef::Tuple(each(c)),
            TreeDef::List(c) => TreeDef::List(each(c)),
            TreeDef::Map(k, c) => TreeDef::Map(k.clone(), each(c)),
            TreeDef::Struct(n, f) => {
                TreeDef::Struct(n, f.iter().map(|(k, d)| (*k, d.nest(inner))).collect())
            }
            TreeDef::None => TreeDef::None,
            TreeDef::Some(d) => TreeDef::Some(Box::new(d.nest(inner))),
        }
    }

    /// The path of every leaf, in order, for error messages: `0`, `1.w`,
    /// `2[3]`, `1.layers[0].b` (positions of tuples, `[i]` of lists,
    /// `[key]` of maps, `.field` of structs).
    pub fn leaf_paths(&self) -> Vec<String> {
        let mut out = Vec::with_capacity(self.num_leaves());
        self.paths_into(String::new(), &mut out);
        out
    }

    fn paths_into(&self, at: String, out: &mut Vec<String>) {
        match self {
            TreeDef::Leaf => out.push(at),
            TreeDef::None => {}
            TreeDef::Some(d) => d.paths_into(at, out),
            TreeDef::Tuple(c) => {
                for (i, d) in c.iter().enumerate() {
                    let sep = if at.is_empty() { "" } else { "." };
                    d.paths_into(format!("{at}{sep}{i}"), out);
                }
            }
            TreeDef::List(c) => {
                for (i, d) in c.iter().enumerate() {
                    d.paths_into(format!("{at}[{i}]"), out);
                }
            }
            TreeDef::Map(k, c) => {
                for (k, d) in k.iter().zip(c) {
                    d.paths_into(format!("{at}[{}]", k.text), out);
                }
            }
            TreeDef::Struct(_, f) => {
                for (name, d) in f {
                    let sep = if at.is_empty() { "" } else { "." };
                    d.paths_into(format!("{at}{sep}{name}"), out);
                }
            }
        }
    }

    /// A short description (`(leaf, [leaf, leaf])`) for error messages.
    pub fn describe(&self) -> String {
        let list = |c: &[TreeDef]| c.iter().map(TreeDef::describe).collect::<Vec<_>>().join(", ");
        match self {
            TreeDef::Leaf => "leaf".into(),
            TreeDef::Tuple(c) => format!("({})", list(c)),
            TreeDef::List(c) => format!("[{}]", list(c)),
            TreeDef::Map(k, c) => {
                let e: Vec<String> =
                    k.iter().zip(c).map(|(k, d)| format!("{}: {}", k.text, d.describe())).collect();
                format!("{{{}}}", e.join(", "))
            }
            TreeDef::Struct(n, f) => {
                let e: Vec<String> =
                    f.iter().map(|(k, d)| format!("{k}: {}", d.describe())).collect();
                format!("{n} {{ {} }}", e.join(", "))
            }
            TreeDef::None => "None".into(),
            TreeDef::Some(d) => format!("Some({})", d.describe()),
        }
    }

    fn mismatch(&self, what: &str) -> Error {
        // `at_element` extends the argument's name into a path.
        Error::invalid(
            "tree",
            "structure",
            format!("expected {what}, the value is {}", self.describe()),
        )
    }
}

/// A structure mismatch inside element `i` of a tuple (argument `i` of a
/// function): its path, JAX's key path, gets `[i]` in front.
fn at_element(e: Error, i: usize) -> Error {
    match e {
        Error::InvalidArgument { op, arg, msg } if op == "tree" && arg.starts_with("structure") => {
            let path = arg.strip_prefix("structure at ").unwrap_or("");
            Error::InvalidArgument { op, arg: format!("structure at [{i}]{path}"), msg }
        }
        e => e,
    }
}

/// A map key in a [`TreeDef`]: compared and hashed by its `Debug` text,
/// kept as a value to rebuild the map.
#[derive(Clone)]
pub struct Key {
    /// The key's `Debug` text.
    pub text: String,
    value: Arc<dyn Any + Send + Sync>,
}

impl Key {
    fn new<K: fmt::Debug + Clone + Send + Sync + 'static>(k: &K) -> Key {
        Key { text: format!("{k:?}"), value: Arc::new(k.clone()) }
    }

    fn get<K: Clone + 'static>(&self) -> Option<K> {
        self.value.downcast_ref::<K>().cloned()
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}
impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.text == other.text
    }
}
impl Eq for Key {}
impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.text.hash(state);
    }
}

/// Something that flattens to leaves of type `L` and a [`TreeDef`]: every
/// [`Tree`], and references to trees (so `(&x, &params)` flattens without
/// cloning the tensors into a new tuple).
pub trait Flatten<L> {
    /// The structure.
    fn def(&self) -> TreeDef;

    /// Calls `f` on every leaf, in order.
    fn for_each_leaf(&self, f: &mut dyn FnMut(&L));

    /// Whether the structure is `def` (`self.def() == *def`), decided
    /// without building the structure where the type allows (leaves,
    /// references, tuples): the per-call path of a cached function
    /// compares its arguments' structure with its plans' keys.
    ///
    /// ```
    /// use anvil_core::{Tensor, tree::{Flatten, TreeDef}};
    /// let x = Tensor::scalar(1.0);
    /// assert!((&x, &x).def_is(&TreeDef::Tuple(vec![TreeDef::Leaf, TreeDef::Leaf])));
    /// assert!(!(&x, &x).def_is(&TreeDef::Leaf));
    /// ```
    fn def_is(&self, def: &TreeDef) -> bool {
        self.def() == *def
    }

    /// The leaves, in order.
    fn leaves(&self) -> Vec<L>
    where
        L: Clone,
    {
        let mut out = Vec::new();
        self.for_each_leaf(&mut |l| out.push(l.clone()));
        out
    }
}

impl<L, T: Flatten<L> + ?Sized> Flatten<L> for &T {
    fn def(&self) -> TreeDef {
        (**self).def()
    }
    fn for_each_leaf(&self, f: &mut dyn FnMut(&L)) {
        (**self).for_each_leaf(f);
    }
    fn def_is(&self, def: &TreeDef) -> bool {
        (**self).def_is(def)
    }
}

impl<L, T: Flatten<L>> Flatten<L> for [T] {
    fn def(&self) -> TreeDef {
        TreeDef::List(self.iter().map(Flatten::def).collect())
    }
    fn for_each_leaf(&self, f: &mut dyn FnMut(&L)) {
        self.iter().for_each(|t| t.for_each_leaf(f));
    }
}

/// A container of leaves of type `L`, nested to any depth: flattens to its
/// leaves (in a fixed order) and its structure, and rebuilds from them.
///
/// Implemented for the leaves (`Var`, `Tensor`), `()`, tuples up to 12,
/// arrays, `Vec`, `Option`, `Box`, `BTreeMap` and `HashMap` (in sorted key
/// order), and user structs with `#[derive(Tree)]`.
///
/// ```
/// use anvil_core::{Tensor, tree::{Flatten, Tree, TreeDef}};
/// let t = (Tensor::scalar(1.0), vec![Tensor::scalar(2.0), Tensor::scalar(3.0)]);
/// let def: TreeDef = t.def();
/// assert_eq!(def.num_leaves(), 3);
/// let back = <(Tensor, Vec<Tensor>)>::unflatten(&def, &mut t.leaves().into_iter())?;
/// assert_eq!(back.1.len(), 2);
/// # Ok::<(), anvil_core::Error>(())
/// ```
pub trait Tree<L>: Flatten<L> + Sized {
    /// Rebuilds a tree of this type from its structure and its leaves (in
    /// the order [`Flatten::for_each_leaf`] gives them).
    ///
    /// # Errors
    /// A structure that does not fit this type, or too few leaves.
    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = L>) -> Result<Self>;
}

/// Rebuilds a `T` from `def` and exactly the leaves of `leaves` (a `Vec`,
/// or a `drain` of one that its owner keeps for reuse).
///
/// # Errors
/// A structure that does not fit `T`; a number of leaves that differs.
pub fn unflatten_all<L, T: Tree<L>>(
    def: &TreeDef,
    leaves: impl IntoIterator<Item = L, IntoIter: ExactSizeIterator>,
) -> Result<T> {
    let mut leaves = leaves.into_iter();
    let n = leaves.len();
    if n != def.num_leaves() {
        return Err(Error::Arity {
            what: format!("tree {}", def.describe()),
            kind: "leaves".into(),
            expected: def.num_leaves(),
            got: n,
        });
    }
    T::unflatten(def, &mut leaves)
}

/// The fields' structures of a struct `name` with fields `fields`, from
/// its [`TreeDef`] (for `#[derive(Tree)]`).
///
/// # Errors
/// A structure of another struct, or of other fields.
pub fn struct_fields<'a>(
    def: &'a TreeDef,
    name: &str,
    fields: &[&str],
) -> Result<Vec<&'a TreeDef>> {
    match def {
        TreeDef::Struct(n, f)
            if *n == name
                && f.len() == fields.len()
                && f.iter().zip(fields).all(|(a, b)| a.0 == *b) =>
        {
            Ok(f.iter().map(|(_, d)| d).collect())
        }
        d => Err(d.mismatch(&format!("struct {name} {{ {} }}", fields.join(", ")))),
    }
}

fn next_leaf<L>(leaves: &mut dyn Iterator<Item = L>) -> Result<L> {
    leaves
        .next()
        .ok_or_else(|| Error::invalid("tree", "leaves", "fewer leaves than the structure has"))
}

macro_rules! leaf {
    ($t:ty) => {
        impl Flatten<$t> for $t {
            fn def(&self) -> TreeDef {
                TreeDef::Leaf
            }
            fn for_each_leaf(&self, f: &mut dyn FnMut(&$t)) {
                f(self)
            }
            fn def_is(&self, def: &TreeDef) -> bool {
                matches!(def, TreeDef::Leaf)
            }
        }
        impl Tree<$t> for $t {
            fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = $t>) -> Result<Self> {
                match def {
                    TreeDef::Leaf => next_leaf(leaves),
                    d => Err(d.mismatch("a leaf")),
                }
            }
        }
    };
}
leaf!(Var);
leaf!(Tensor);
leaf!(Option<i64>);
// The types of a function's arguments and results (`eval_shape`).
leaf!(crate::shape::TensorType);

impl<L> Flatten<L> for () {
    fn def(&self) -> TreeDef {
        TreeDef::Tuple(Vec::new())
    }
    fn for_each_leaf(&self, _: &mut dyn FnMut(&L)) {}
}
impl<L> Tree<L> for () {
    fn unflatten(def: &TreeDef, _: &mut dyn Iterator<Item = L>) -> Result<Self> {
        match def {
            TreeDef::Tuple(c) if c.is_empty() => Ok(()),
            d => Err(d.mismatch("()")),
        }
    }
}

macro_rules! tuple {
    ($n:literal: $($t:ident $i:tt),+) => {
        impl<L, $($t: Flatten<L>),+> Flatten<L> for ($($t,)+) {
            fn def(&self) -> TreeDef {
                TreeDef::Tuple(vec![$(self.$i.def()),+])
            }
            fn for_each_leaf(&self, f: &mut dyn FnMut(&L)) {
                $(self.$i.for_each_leaf(f);)+
            }
            fn def_is(&self, def: &TreeDef) -> bool {
                matches!(def, TreeDef::Tuple(c) if c.len() == $n $(&& self.$i.def_is(&c[$i]))+)
            }
        }
        impl<L, $($t: Tree<L>),+> Tree<L> for ($($t,)+) {
            fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = L>) -> Result<Self> {
                match def {
                    TreeDef::Tuple(c) if c.len() == $n => {
                        Ok(($($t::unflatten(&c[$i], leaves).map_err(|e| at_element(e, $i))?,)+))
                    }
                    d => Err(d.mismatch(concat!("a tuple of ", $n))),
                }
            }
        }
    };
}
tuple!(1: A 0);
tuple!(2: A 0, B 1);
tuple!(3: A 0, B 1, C 2);
tuple!(4: A 0, B 1, C 2, D 3);
tuple!(5: A 0, B 1, C 2, D 3, E 4);
tuple!(6: A 0, B 1, C 2, D 3, E 4, F 5);
tuple!(7: A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple!(8: A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
tuple!(9: A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
tuple!(10: A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
tuple!(11: A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
tuple!(12: A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, M 11);

impl<L, T: Flatten<L>> Flatten<L> for Vec<T> {
    fn def(&self) -> TreeDef {
        self.as_slice().def()
    }
    fn for_each_leaf(&self, f: &mut dyn FnMut(&L)) {
        self.as_slice().for_each_leaf(f);
    }
}
impl<L, T: Tree<L>> Tree<L> for Vec<T> {
    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = L>) -> Result<Self> {
        match def {
            TreeDef::List(c) => c.iter().map(|d| T::unflatten(d, leaves)).collect(),
            d => Err(d.mismatch("a list")),
        }
    }
}

impl<L, T: Flatten<L>, const N: usize> Flatten<L> for [T; N] {
    fn def(&self) -> TreeDef {
        TreeDef::Tuple(self.iter().map(Flatten::def).collect())
    }
    fn for_each_leaf(&self, f: &mut dyn FnMut(&L)) {
        self.iter().for_each(|t| t.for_each_leaf(f));
    }
}
impl<L, T: Tree<L>, const N: usize> Tree<L> for [T; N] {
    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = L>) -> Result<Self> {
        match def {
            TreeDef::Tuple(c) if c.len() == N => {
                let items =
                    c.iter().map(|d| T::unflatten(d, leaves)).collect::<Result<Vec<T>>>()?;
                items.try_into().map_err(|_| def.mismatch("an array"))
            }
            d => Err(d.mismatch(&format!("an array of {N}"))),
        }
    }
}

impl<L, T: Flatten<L>> Flatten<L> for Option<T> {
    fn def(&self) -> TreeDef {
        match self {
            None => TreeDef::None,
            Some(t) => TreeDef::Some(Box::new(t.def())),
        }
    }
    fn for_each_leaf(&self, f: &mut dyn FnMut(&L)) {
        if let Some(t) = self {
            t.for_each_leaf(f);
        }
    }
}
/// An `Option` rebuilds from `None`, `Some(..)`, or the structure of its
/// content (read as `Some`): a tangent may be given as `&v` where
/// `Option<Tensor>` is expected.
impl<L, T: Tree<L>> Tree<L> for Option<T> {
    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = L>) -> Result<Self> {
        match def {
            TreeDef::None => Ok(None),
            TreeDef::Some(d) => Ok(Some(T::unflatten(d, leaves)?)),
            d => Ok(Some(T::unflatten(d, leaves)?)),
        }
    }
}

impl<L, T: Flatten<L>> Flatten<L> for Box<T> {
    fn def(&self) -> TreeDef {
        (**self).def()
    }
    fn for_each_leaf(&self, f: &mut dyn FnMut(&L)) {
        (**self).for_each_leaf(f);
    }
}
impl<L, T: Tree<L>> Tree<L> for Box<T> {
    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = L>) -> Result<Self> {
        Ok(Box::new(T::unflatten(def, leaves)?))
    }
}

/// A map key type: ordered (maps flatten in sorted key order), printable
/// (keys compare in a [`TreeDef`] by their text).
pub trait MapKey: Ord + Clone + fmt::Debug + Send + Sync + 'static {}
impl<K: Ord + Clone + fmt::Debug + Send + Sync + 'static> MapKey for K {}

fn map_unflatten<L, K: MapKey, T: Tree<L>>(
    def: &TreeDef,
    leaves: &mut dyn Iterator<Item = L>,
) -> Result<Vec<(K, T)>> {
    match def {
        TreeDef::Map(keys, c) => keys
            .iter()
            .zip(c)
            .map(|(k, d)| {
                let key = k.get::<K>().ok_or_else(|| def.mismatch("a map of this key type"))?;
                Ok((key, T::unflatten(d, leaves)?))
            })
            .collect(),
        d => Err(d.mismatch("a map")),
    }
}

impl<L, K: MapKey, T: Flatten<L>> Flatten<L> for BTreeMap<K, T> {
    fn def(&self) -> TreeDef {
        TreeDef::Map(self.keys().map(Key::new).collect(), self.values().map(Flatten::def).collect())
    }
    fn for_each_leaf(&self, f: &mut dyn FnMut(&L)) {
        self.values().for_each(|t| t.for_each_leaf(f));
    }
}
impl<L, K: MapKey, T: Tree<L>> Tree<L> for BTreeMap<K, T> {
    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = L>) -> Result<Self> {
        Ok(map_unflatten(def, leaves)?.into_iter().collect())
    }
}

fn sorted<K: Ord, T, S>(map: &HashMap<K, T, S>) -> Vec<(&K, &T)> {
    let mut entries: Vec<(&K, &T)> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries
}

impl<L, K: MapKey + Hash, T: Flatten<L>, S> Flatten<L> for HashMap<K, T, S> {
    fn def(&self) -> TreeDef {
        let entries = sorted(self);
        TreeDef::Map(
            entries.iter().map(|(k, _)| Key::new(*k)).collect(),
            entries.iter().map(|(_, t)| t.def()).collect(),
        )
    }
    fn for_each_leaf(&self, f: &mut dyn FnMut(&L)) {
        sorted(self).iter().for_each(|(_, t)| t.for_each_leaf(f));
    }
}
impl<L, K: MapKey + Hash, T: Tree<L>, S: std::hash::BuildHasher + Default> Tree<L>
    for HashMap<K, T, S>
{
    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = L>) -> Result<Self> {
        Ok(map_unflatten(def, leaves)?.into_iter().collect())
    }
}

/// A tree of `Var`s with its concrete counterpart: the same structure with
/// `Tensor` leaves (what a call returns), and its nesting with another tree
/// (every leaf replaced by that tree: the structure of a Jacobian).
pub trait Traced: Tree<Var> + 'static {
    /// The same structure with `Tensor` leaves.
    type Concrete: Tree<Tensor>;
    /// The same structure with every leaf replaced by `A`.
    type Nest<A: Traced>: Traced;
}

impl Traced for Var {
    type Concrete = Tensor;
    type Nest<A: Traced> = A;
}

impl Traced for () {
    type Concrete = ();
    type Nest<A: Traced> = ();
}

macro_rules! traced_tuple {
    ($($t:ident),+) => {
        impl<$($t: Traced),+> Traced for ($($t,)+) {
            type Concrete = ($($t::Concrete,)+);
            type Nest<X: Traced> = ($($t::Nest<X>,)+);
        }
    };
}
traced_tuple!(A);
traced_tuple!(A, B);
traced_tuple!(A, B, C);
traced_tuple!(A, B, C, D);
traced_tuple!(A, B, C, D, E);
traced_tuple!(A, B, C, D, E, F);
traced_tuple!(A, B, C, D, E, F, G);
traced_tuple!(A, B, C, D, E, F, G, H);
traced_tuple!(A, B, C, D, E, F, G, H, I);
traced_tuple!(A, B, C, D, E, F, G, H, I, J);
traced_tuple!(A, B, C, D, E, F, G, H, I, J, K);
traced_tuple!(A, B, C, D, E, F, G, H, I, J, K, M);

impl<T: Traced> Traced for Vec<T> {
    type Concrete = Vec<T::Concrete>;
    type Nest<X: Traced> = Vec<T::Nest<X>>;
}

impl<T: Traced, const N: usize> Traced for [T; N] {
    type Concrete = [T::Concrete; N];
    type Nest<X: Traced> = [T::Nest<X>; N];
}

impl<T: Traced> Traced for Option<T> {
    type Concrete = Option<T::Concrete>;
    type Nest<X: Traced> = Option<T::Nest<X>>;
}

impl<T: Traced> Traced for Box<T> {
    type Concrete = Box<T::Concrete>;
    type Nest<X: Traced> = Box<T::Nest<X>>;
}

impl<K: MapKey, T: Traced> Traced for BTreeMap<K, T> {
    type Concrete = BTreeMap<K, T::Concrete>;
    type Nest<X: Traced> = BTreeMap<K, T::Nest<X>>;
}

impl<K: MapKey + Hash, T: Traced> Traced for HashMap<K, T> {
    type Concrete = HashMap<K, T::Concrete>;
    type Nest<X: Traced> = HashMap<K, T::Nest<X>>;
}

/// A tree whose structure is known only at run time: its [`TreeDef`] and
/// its leaves. What a transform returns when its result's structure
/// depends on run-time choices (several `argnums`); take it apart with
/// [`Dyn::into_tree`] and [`Dyn::part`].
#[derive(Clone, Debug)]
pub struct Dyn<L> {
    /// The structure.
    pub def: TreeDef,
    /// The leaves, in order.
    pub leaves: Vec<L>,
}

impl<L: Clone> Dyn<L> {
    /// The structure and leaves of `tree`.
    pub fn of<T: Flatten<L> + ?Sized>(tree: &T) -> Dyn<L> {
        Dyn { def: tree.def(), leaves: tree.leaves() }
    }

    /// The tree as a `T` of this structure.
    ///
    /// # Errors
    /// A structure that does not fit `T`.
    pub fn into_tree<T: Tree<L>>(self) -> Result<T> {
        unflatten_all(&self.def, self.leaves)
    }

    /// Child `i` of a tuple, list or struct (in order), as a `T`.
    ///
    /// # Errors
    /// No child `i`; a structure that does not fit `T`.
    pub fn part<T: Tree<L>>(&self, i: usize) -> Result<T> {
        let children = self.def.children();
        let child = children.get(i).ok_or_else(|| {
            Error::invalid("tree", "index", format!("no part {i} in {}", self.def.describe()))
        })?;
        let skip: usize = children[..i].iter().map(|d| d.num_leaves()).sum();
        let leaves = self.leaves[skip..skip + child.num_leaves()].to_vec();
        unflatten_all(child, leaves)
    }

    /// The number of children.
    pub fn len(&self) -> usize {
        self.def.children().len()
    }

    /// Whether the tree has no children.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `d[i]`: part `i` of a tuple whose parts are leaves (the gradients of
/// `grad(f).argnums(&[0, 1])` for tensor arguments).
///
/// # Panics
/// When there is no part `i`, or it is not a single leaf (use
/// [`Dyn::part`], which returns an error, for trees of unknown shape).
impl<L> std::ops::Index<usize> for Dyn<L> {
    type Output = L;
    fn index(&self, i: usize) -> &L {
        let children = self.def.children();
        match children.get(i) {
            Some(TreeDef::Leaf) => {
                let skip: usize = children[..i].iter().map(|d| d.num_leaves()).sum();
                &self.leaves[skip]
            }
            _ => panic!("part {i} of {} is not a leaf", self.def.describe()),
        }
    }
}

impl<L> Flatten<L> for Dyn<L> {
    fn def(&self) -> TreeDef {
        self.def.clone()
    }
    fn for_each_leaf(&self, f: &mut dyn FnMut(&L)) {
        self.leaves.iter().for_each(f);
    }
}
impl<L: Clone> Tree<L> for Dyn<L> {
    fn unflatten(def: &TreeDef, leaves: &mut dyn Iterator<Item = L>) -> Result<Self> {
        let leaves = (0..def.num_leaves()).map(|_| next_leaf(leaves)).collect::<Result<_>>()?;
        Ok(Dyn { def: def.clone(), leaves })
    }
}

impl Traced for Dyn<Var> {
    type Concrete = Dyn<Tensor>;
    type Nest<X: Traced> = Dyn<Var>;
}

/// Element `N` of a tuple of trees (the argument `argnums` selects).
pub trait Nth<const N: usize> {
    /// Its type.
    type Out: Traced;
}

/// Element `N` of the arguments of a function of any number of arguments.
impl<const N: usize> Nth<N> for Vec<Var> {
    type Out = Var;
}

macro_rules! nth {
    ($n:literal of $($t:ident),+ => $o:ident) => {
        impl<$($t: Traced),+> Nth<$n> for ($($t,)+) {
            type Out = $o;
        }
    };
}
nth!(0 of A => A);
nth!(0 of A, B => A);
nth!(1 of A, B => B);
nth!(0 of A, B, C => A);
nth!(1 of A, B, C => B);
nth!(2 of A, B, C => C);
nth!(0 of A, B, C, D => A);
nth!(1 of A, B, C, D => B);
nth!(2 of A, B, C, D => C);
nth!(3 of A, B, C, D => D);
nth!(0 of A, B, C, D, E => A);
nth!(1 of A, B, C, D, E => B);
nth!(2 of A, B, C, D, E => C);
nth!(3 of A, B, C, D, E => D);
nth!(4 of A, B, C, D, E => E);
nth!(0 of A, B, C, D, E, F => A);
nth!(1 of A, B, C, D, E, F => B);
nth!(2 of A, B, C, D, E, F => C);
nth!(3 of A, B, C, D, E, F => D);
nth!(4 of A, B, C, D, E, F => E);
nth!(5 of A, B, C, D, E, F => F);
nth!(0 of A, B, C, D, E, F, G => A);
nth!(1 of A, B, C, D, E, F, G => B);
nth!(2 of A, B, C, D, E, F, G => C);
nth!(3 of A, B, C, D, E, F, G => D);
nth!(4 of A, B, C, D, E, F, G => E);
nth!(5 of A, B, C, D, E, F, G => F);
nth!(6 of A, B, C, D, E, F, G => G);
nth!(0 of A, B, C, D, E, F, G, H => A);
nth!(1 of A, B, C, D, E, F, G, H => B);
nth!(2 of A, B, C, D, E, F, G, H => C);
nth!(3 of A, B, C, D, E, F, G, H => D);
nth!(4 of A, B, C, D, E, F, G, H => E);
nth!(5 of A, B, C, D, E, F, G, H => F);
nth!(6 of A, B, C, D, E, F, G, H => G);
nth!(7 of A, B, C, D, E, F, G, H => H);

#[cfg(test)]
mod tests {
    use super::*;
    use anvil_macros::Tree;

    #[derive(Clone, Debug, PartialEq, Tree)]
    #[tree(crate = "crate")]
    struct Layer<T> {
        w: T,
        b: Option<T>,
    }

    #[derive(Clone, Debug, PartialEq, Tree)]
    #[tree(crate = "crate")]
    struct Mlp<T> {
        layers: Vec<Layer<T>>,
        scale: T,
    }

    #[derive(Clone, Debug, PartialEq, Tree)]
    #[tree(crate = "crate")]
    struct Pair<T>(T, T);

    fn t(v: f64) -> Tensor {
        Tensor::scalar(v)
    }

    #[test]
    fn derived_structs_flatten_in_field_order_and_rebuild() {
        let m = Mlp {
            layers: vec![Layer { w: t(1.0), b: Some(t(2.0)) }, Layer { w: t(3.0), b: None }],
            scale: t(4.0),
        };
        let leaves: Vec<f64> = m.leaves().iter().map(|l| l.item().unwrap()).collect();
        assert_eq!(leaves, vec![1.0, 2.0, 3.0, 4.0]);
        let back: Mlp<Tensor> = unflatten_all(&m.def(), m.leaves()).unwrap();
        assert_eq!(back.leaves().len(), 4);
        assert!(back.layers[1].b.is_none());
        let p = Pair(t(1.0), t(2.0));
        assert_eq!(p.def().describe(), "Pair { 0: leaf, 1: leaf }");
        let wrong = Pair::<Tensor>::unflatten(&m.def(), &mut m.leaves().into_iter());
        assert!(wrong.is_err());
    }

    #[test]
    fn nesting_replaces_every_leaf() {
        let inner = (TreeDef::Leaf, TreeDef::List(vec![TreeDef::Leaf; 2]));
        let inner = TreeDef::Tuple(vec![inner.0, inner.1]);
        let outer = TreeDef::Tuple(vec![TreeDef::Leaf, TreeDef::None]);
        assert_eq!(outer.nest(&inner).num_leaves(), 3);
        fn same<A: Traced, B: Traced>() {}
        same::<<Mlp<Var> as Traced>::Nest<(Var, Var)>, Mlp<(Var, Var)>>();
        let _: <Mlp<Var> as Traced>::Concrete = Mlp { layers: vec![], scale: t(0.0) };
    }

    #[test]
    fn maps_flatten_in_sorted_key_order() {
        let mut h = HashMap::new();
        h.insert("b", t(2.0));
        h.insert("a", t(1.0));
        let leaves: Vec<f64> = h.leaves().iter().map(|l| l.item().unwrap()).collect();
        assert_eq!(leaves, vec![1.0, 2.0]);
        let b: BTreeMap<&str, Tensor> = unflatten_all(&h.def(), h.leaves()).unwrap();
        assert_eq!(b["b"].item().unwrap(), 2.0);
        // Another key type does not fit.
        assert!(unflatten_all::<_, BTreeMap<String, Tensor>>(&h.def(), h.leaves()).is_err());
    }
}
