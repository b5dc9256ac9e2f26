//! Axis specifications that follow the structure of arguments and results:
//! `vmap`'s and `map`'s `in_axes`, `vmap`'s `out_axes`.
//!
//! As in JAX, a specification is a tree whose leaves are an axis or `None`
//! (not mapped) and which is a *prefix* of the arguments' structure: a
//! leaf where the arguments have a subtree applies to every leaf of that
//! subtree. `0` maps every argument along axis 0; `[Some(0), None]` maps the
//! first argument and shares the second, whatever their structure;
//! `InAxes::tree(&Mlp { w: None, b: Some(0) })` reaches into a struct.

use anvil_core::tree::{Flatten, TreeDef};
use anvil_core::{Error, Result};

/// Which axis of each argument (or result) is mapped, as a tree whose
/// leaves are `Option<i64>`; see the module documentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InAxes {
    def: TreeDef,
    leaves: Vec<Option<i64>>,
}

impl InAxes {
    /// The same axis (or `None`) for every leaf.
    pub fn all(axis: Option<i64>) -> InAxes {
        InAxes { def: TreeDef::Leaf, leaves: vec![axis] }
    }

    /// A specification with the structure of `tree` (a tuple, an array, a
    /// `Vec`, a map or a `#[derive(Tree)]` struct of `Option<i64>`).
    ///
    /// ```
    /// use anvil::transforms::InAxes;
    /// // First argument: a pair mapped along axes 0 and 1; second: shared.
    /// let axes = InAxes::tree(&((Some(0), Some(1)), None::<i64>));
    /// # let _ = axes;
    /// ```
    pub fn tree(tree: &impl Flatten<Option<i64>>) -> InAxes {
        InAxes { def: tree.def(), leaves: tree.leaves() }
    }

    /// The specification with a one-entry list read as that entry for
    /// every leaf (`out_axes(&[1])` for any number of results).
    pub(crate) fn one_for_all(&self) -> InAxes {
        match &self.def {
            TreeDef::Tuple(c) | TreeDef::List(c) if c.len() == 1 && c[0] == TreeDef::Leaf => {
                InAxes::all(self.leaves[0])
            }
            _ => self.clone(),
        }
    }

    /// One entry per leaf of `def`, the structure of arguments (or
    /// results), this specification being a prefix of it.
    ///
    /// # Errors
    /// A specification that is not a prefix of `def` (naming `what`).
    pub fn broadcast(&self, what: &str, def: &TreeDef) -> Result<Vec<Option<i64>>> {
        let mut out = Vec::with_capacity(def.num_leaves());
        let mut leaves = self.leaves.iter().copied();
        spread(what, &self.def, def, &mut leaves, &mut out)?;
        Ok(out)
    }
}

fn is_sequence(t: &TreeDef) -> bool {
    matches!(t, TreeDef::Tuple(_) | TreeDef::List(_))
}

/// `spec` over `def`: a leaf of `spec` covers the subtree of `def` under it.
fn spread(
    what: &str,
    spec: &TreeDef,
    def: &TreeDef,
    leaves: &mut dyn Iterator<Item = Option<i64>>,
    out: &mut Vec<Option<i64>>,
) -> Result<()> {
    match spec {
        TreeDef::Leaf => {
            let a = leaves.next().flatten();
            out.extend(std::iter::repeat_n(a, def.num_leaves()));
            return Ok(());
        }
        // An empty `Option` in the spec: the subtree is not mapped.
        TreeDef::None => {
            out.extend(std::iter::repeat_n(None, def.num_leaves()));
            return Ok(());
        }
        _ => {}
    }
    let (s, d) = (spec.children(), def.children());
    if is_sequence(spec) && s.len() == 1 && !is_sequence(def) {
        // One entry for a single argument (or result) given as a list.
        return spread(what, s[0], def, leaves, out);
    }
    if is_sequence(spec) && is_sequence(def) && s.len() != d.len() {
        return Err(Error::Arity {
            what: what.into(),
            kind: "entries (one per argument or result)".into(),
            expected: d.len(),
            got: s.len(),
        });
    }
    let same_kind = matches!(
        (spec, def),
        (TreeDef::Tuple(_) | TreeDef::List(_), TreeDef::Tuple(_) | TreeDef::List(_))
            | (TreeDef::Map(..), TreeDef::Map(..))
            | (TreeDef::Struct(..), TreeDef::Struct(..))
            | (TreeDef::Some(_), TreeDef::Some(_))
    );
    if !same_kind || s.len() != d.len() {
        return Err(Error::invalid(
            what,
            "structure",
            format!(
                "the axes {} are not a prefix of the structure {}",
                spec.describe(),
                def.describe()
            ),
        ));
    }
    for (s, d) in s.into_iter().zip(d) {
        spread(what, s, d, leaves, out)?;
    }
    Ok(())
}

impl From<i64> for InAxes {
    fn from(a: i64) -> Self {
        InAxes::all(Some(a))
    }
}
impl From<Option<i64>> for InAxes {
    fn from(a: Option<i64>) -> Self {
        InAxes::all(a)
    }
}
impl From<Vec<Option<i64>>> for InAxes {
    fn from(v: Vec<Option<i64>>) -> Self {
        InAxes::tree(&v)
    }
}
impl From<&[Option<i64>]> for InAxes {
    fn from(v: &[Option<i64>]) -> Self {
        InAxes::tree(&v)
    }
}
impl<const N: usize> From<[Option<i64>; N]> for InAxes {
    fn from(v: [Option<i64>; N]) -> Self {
        InAxes::tree(&v)
    }
}
impl From<(Option<i64>, Option<i64>)> for InAxes {
    fn from(v: (Option<i64>, Option<i64>)) -> Self {
        InAxes::tree(&v)
    }
}
impl From<(Option<i64>, Option<i64>, Option<i64>)> for InAxes {
    fn from(v: (Option<i64>, Option<i64>, Option<i64>)) -> Self {
        InAxes::tree(&v)
    }
}
impl From<(Option<i64>, Option<i64>, Option<i64>, Option<i64>)> for InAxes {
    fn from(v: (Option<i64>, Option<i64>, Option<i64>, Option<i64>)) -> Self {
        InAxes::tree(&v)
    }
}

/// Axes given as plain integers, one per argument (or result), all mapped.
impl From<&[i64]> for InAxes {
    fn from(v: &[i64]) -> Self {
        InAxes::tree(&v.iter().map(|&a| Some(a)).collect::<Vec<_>>())
    }
}
impl<const N: usize> From<&[i64; N]> for InAxes {
    fn from(v: &[i64; N]) -> Self {
        InAxes::from(&v[..])
    }
}
impl<const N: usize> From<[i64; N]> for InAxes {
    fn from(v: [i64; N]) -> Self {
        InAxes::from(&v[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf() -> TreeDef {
        TreeDef::Leaf
    }

    #[test]
    fn a_leaf_covers_the_subtree_below_it() {
        let args = TreeDef::Tuple(vec![TreeDef::List(vec![leaf(), leaf()]), leaf()]);
        assert_eq!(InAxes::from(0).broadcast("t", &args).unwrap(), vec![Some(0); 3]);
        let spec = InAxes::from([None, Some(1)]);
        assert_eq!(spec.broadcast("t", &args).unwrap(), vec![None, None, Some(1)]);
        let spec = InAxes::tree(&(vec![Some(0), Some(1)], None::<i64>));
        assert_eq!(spec.broadcast("t", &args).unwrap(), vec![Some(0), Some(1), None]);
    }

    #[test]
    fn a_spec_that_is_not_a_prefix_is_an_error() {
        let args = TreeDef::Tuple(vec![leaf(), leaf()]);
        let err = InAxes::from([Some(0), None, None]).broadcast("vmap in_axes", &args);
        assert!(err.unwrap_err().to_string().contains("expected 2"));
        let nested = TreeDef::Tuple(vec![leaf(), TreeDef::List(vec![leaf(); 2])]);
        let spec = InAxes::tree(&(None::<i64>, (Some(0), Some(1))));
        assert!(spec.broadcast("t", &nested).is_ok(), "a tuple spec fits a list");
        let spec = InAxes::tree(&(None::<i64>, [Some(0); 3]));
        let err = spec.broadcast("vmap in_axes", &nested).unwrap_err().to_string();
        assert!(err.contains("expected 2") && err.contains("got 3"), "{err}");
        let map = TreeDef::Tuple(vec![leaf(), TreeDef::Struct("S", vec![("w", leaf())])]);
        let err = spec.broadcast("vmap in_axes", &map).unwrap_err().to_string();
        assert!(err.contains("not a prefix"), "{err}");
    }
}
