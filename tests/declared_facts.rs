//! Plugin ops get the built-in treatment by declaring facts, not by their
//! type: each op below is defined here (as a plugin crate would define it)
//! and declares one fact of `anvil::Op` (or registers one pass), and the
//! test shows the pass or backend that reads the fact treating it as it
//! treats the built-in op. Without the fact each test fails.

use anvil::core::{op::expect_arity, Arith, Movement, Op, TensorType};
use anvil::prelude::*;
use std::hash::{Hash, Hasher};

// ------------------------------------------------------------------ ops

/// The tests differentiate nothing.
fn no_jvp(_: &dyn Op, _: &[Var], _: &[Option<Var>], _: &Var) -> anvil::Result<Option<Var>> {
    Ok(None)
}

anvil::ops::binary_elementwise_op! {
    /// A plugin's `a + b`.
    pub struct PlugAdd = "plug.add";
    domain: Numeric;
    float: |a, b| a + b;
    linear_in: [0, 1];
    arith: Add;
    jvp: no_jvp;
}

anvil::ops::binary_elementwise_op! {
    /// A plugin's `a * b`.
    pub struct PlugMul = "plug.mul";
    domain: Numeric;
    float: |a, b| a * b;
    linear_in: [0, 1];
    arith: Mul;
    jvp: no_jvp;
}

/// A plugin's matrix product of two matrices (no CPU kernel: the loop pass
/// takes it out of the loop, into a built-in product).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PlugMatmul;

impl Op for PlugMatmul {
    fn name(&self) -> &'static str {
        "plug.matmul"
    }
    fn infer(&self, inputs: &[TensorType]) -> anvil::Result<TensorType> {
        expect_arity(self, inputs, 2)?;
        let (a, b) = (inputs[0].shape(), inputs[1].shape());
        Ok(inputs[0].with_shape(vec![a[0], b[1]]))
    }
    fn matmul_transposes(&self) -> Option<(bool, bool)> {
        Some((false, false))
    }
}

/// A plugin's captured constant (no CPU kernel: folding consumes it).
#[derive(Clone, Debug)]
struct PlugConst(Tensor);

impl PartialEq for PlugConst {
    fn eq(&self, other: &Self) -> bool {
        self.0.shape() == other.0.shape() && self.0.to_vec::<f64>().ok() == other.0.to_vec().ok()
    }
}
impl Eq for PlugConst {}
impl Hash for PlugConst {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.shape().hash(state);
    }
}

impl Op for PlugConst {
    fn name(&self) -> &'static str {
        "plug.const"
    }
    fn infer(&self, inputs: &[TensorType]) -> anvil::Result<TensorType> {
        expect_arity(self, inputs, 0)?;
        Ok(self.0.ty())
    }
    fn constant_value(&self) -> Option<&Tensor> {
        Some(&self.0)
    }
}

/// A plugin's movement op (no CPU kernel: it declares its movement, and
/// the backend moves the elements).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum PlugMove {
    /// The 2-d transpose.
    Transpose([usize; 2]),
    /// Two operands joined along axis 0.
    Join,
}

impl Op for PlugMove {
    fn name(&self) -> &'static str {
        "plug.move"
    }
    fn infer(&self, inputs: &[TensorType]) -> anvil::Result<TensorType> {
        match self {
            PlugMove::Transpose(_) => {
                expect_arity(self, inputs, 1)?;
                let s = inputs[0].shape();
                Ok(inputs[0].with_shape(vec![s[1], s[0]]))
            }
            PlugMove::Join => {
                expect_arity(self, inputs, 2)?;
                let mut s = inputs[0].shape().to_vec();
                s[0] += inputs[1].shape()[0];
                Ok(inputs[0].with_shape(s))
            }
        }
    }
    fn is_relayout(&self) -> bool {
        matches!(self, PlugMove::Transpose(_))
    }
    fn movement(&self) -> Option<Movement<'_>> {
        Some(match self {
            PlugMove::Transpose(perm) => Movement::Permute(perm),
            PlugMove::Join => Movement::Concatenate { axis: 0 },
        })
    }
}

/// A plugin's reversal of a vector (no CPU kernel): it declares itself a
/// slice with step −1, and fused programs read it as a view.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PlugFlip([anvil::core::shape::SliceSpec; 1]);

impl Op for PlugFlip {
    fn name(&self) -> &'static str {
        "plug.flip"
    }
    fn infer(&self, inputs: &[TensorType]) -> anvil::Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        Ok(inputs[0].clone())
    }
    fn is_relayout(&self) -> bool {
        true
    }
    fn movement(&self) -> Option<Movement<'_>> {
        Some(Movement::Slice(&self.0))
    }
}

fn apply(op: impl Op, args: &[&Var]) -> Var {
    Var::apply_op(Box::new(op), args)
}

fn carry_shapes(g: &anvil::Graph) -> Vec<Vec<usize>> {
    g.iter()
        .filter(|(_, n)| n.op.name() == "scan")
        .flat_map(|(_, n)| n.results().map(|v| g.ty(v).shape().to_vec()).collect::<Vec<_>>())
        .collect()
}

fn data(n: usize, m: usize, seed: f64) -> Tensor {
    let v = (0..n * m).map(|k| ((k as f64 + seed) * 0.61).sin()).collect();
    Tensor::from_vec(v, &[n, m]).unwrap()
}

/// `c0 + Σ_t u_t v_tᵀ`, computed directly.
fn outer_sum(c0: &Tensor, us: &Tensor, vs: &Tensor) -> Vec<f64> {
    let (u, v, c) = (us.to_vec::<f64>().unwrap(), vs.to_vec::<f64>().unwrap(), c0.to_vec::<f64>());
    let mut c = c.unwrap();
    let (steps, n, m) = (us.shape()[0], us.shape()[1], vs.shape()[1]);
    for t in 0..steps {
        for i in 0..n {
            for j in 0..m {
                c[i * m + j] += u[t * n + i] * v[t * m + j];
            }
        }
    }
    c
}

/// The loop pass takes an accumulated outer product out of a scan when
/// the update is `carry + u vᵀ` written with `product`, `+` being a plugin
/// op declaring `Arith::Add`.
fn check_outer_product_leaves_the_loop(product: fn(&Var, &Var) -> Var) {
    let f = move |c0: &Var, us: &Var, vs: &Var| {
        let step = |c: &Var, (u, v): &(Var, Var)| {
            let term = product(&u.reshape(&[3, 1]), &v.reshape(&[1, 4]));
            (apply(PlugAdd, &[c, &term]), u.sum_all())
        };
        scan(step, c0, (us, vs)).map(|(c, _): (Var, Var)| c)
    };
    let (c0, us, vs) = (data(3, 4, 0.0), data(5, 3, 1.0), data(5, 4, 2.0));
    let g = anvil::lower(&f, (&c0, &us, &vs)).unwrap();
    // The carry leaves the loop and its sum is one product after it. Here
    // the loop goes altogether: its stacked terms are its own scanned
    // slices (forwarded, not copied) and its other result is unused.
    assert!(!carry_shapes(&g).contains(&vec![3, 4]), "a [3, 4] carry left in the loop:\n{g}");
    let product_after = g.iter().any(|(_, n)| {
        n.op.name().starts_with("matmul") && n.results().any(|v| g.ty(v).shape() == [3, 4])
    });
    assert!(product_after, "no [3, 4] product after the loop:\n{g}");
    let got = jit(f).eval((&c0, &us, &vs)).unwrap();
    let want = outer_sum(&c0, &us, &vs);
    for (g, w) in got.to_vec::<f64>().unwrap().iter().zip(&want) {
        assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "{got} vs {want:?}");
    }
}

#[test]
fn a_plugin_sum_and_product_declaring_arith_are_taken_out_of_a_loop() {
    check_outer_product_leaves_the_loop(|u, v| apply(PlugMul, &[u, v]));
}

#[test]
fn a_plugin_matrix_product_declaring_its_transposes_is_taken_out_of_a_loop() {
    check_outer_product_leaves_the_loop(|u, v| apply(PlugMatmul, &[u, v]));
}

#[test]
fn a_plugin_constant_is_folded() {
    let f = |x: &Var| {
        let c = apply(PlugConst(Tensor::from_vec(vec![1.0, 2.0], &[2]).unwrap()), &[]);
        x * &(&c + &c)
    };
    let x = Tensor::from_vec(vec![3.0, 5.0], &[2]).unwrap();
    let g = anvil::lower(&f, &x).unwrap();
    let names: Vec<&str> = g.iter().map(|(_, n)| n.op.name()).collect();
    assert!(!names.contains(&"add") && !names.contains(&"plug.const"), "not folded:\n{g}");
    assert_eq!(jit(f).eval(&x).unwrap().to_vec::<f64>().unwrap(), [6.0, 20.0]);
}

#[test]
fn a_plugin_permutation_of_scan_results_is_written_in_place() {
    // ys [4, 2, 3] -> reshape [8, 3] -> plugin transpose [3, 8].
    let f = |x: &Var| {
        let (_, ys): (Var, Var) =
            scan(|c: &Var, x: &Var| (c + x, &(c * x) + x), x.index_axis(0, 0), x)?;
        Ok::<_, anvil::Error>(apply(PlugMove::Transpose([1, 0]), &[&ys.reshape(&[8, 3])]))
    };
    let x = Tensor::from_vec(data(8, 3, 0.5).to_vec::<f64>().unwrap(), &[4, 2, 3]).unwrap();
    let plan = anvil::cpu::compile(&anvil::lower(&f, &x).unwrap()).unwrap();
    let text = plan.graph().to_string();
    assert!(text.contains("placed_scan") && !text.contains("plug.move"), "{text}");
    // The values of the same chain with the built-in permute.
    let g = |x: &Var| {
        let (_, ys): (Var, Var) =
            scan(|c: &Var, x: &Var| (c + x, &(c * x) + x), x.index_axis(0, 0), x)?;
        Ok::<_, anvil::Error>(ys.reshape(&[8, 3]).transpose())
    };
    let (got, want) = (jit(f).eval(&x).unwrap(), jit(g).eval(&x).unwrap());
    assert_eq!(got.shape(), [3, 8]);
    assert!(got.allclose(&want, 0.0, 0.0), "{got} vs {want}");
}

#[test]
fn a_plugin_concatenation_in_a_loop_body_runs_without_a_kernel() {
    // The body's values are small: the loop runs as a micro program,
    // which builds the index map of the declared movement.
    let f = |x: &Var| {
        let (c, _): (Var, Var) = scan_n(
            |c: &Var, _: &()| {
                let head = c.slice_axis(0, Some(1), None, 1);
                let tail = c.slice_axis(0, Some(0), Some(1), 1) * 2.0;
                (apply(PlugMove::Join, &[&head, &tail]), c.sum_all())
            },
            x,
            3,
        )?;
        Ok::<_, anvil::Error>(c)
    };
    let x = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3]).unwrap();
    // [1, 2, 3] -> [2, 3, 2] -> [3, 2, 4] -> [2, 4, 6]
    assert_eq!(jit(f).eval(&x).unwrap().to_vec::<f64>().unwrap(), [2.0, 4.0, 6.0]);
}

#[test]
fn the_sum_declares_its_addition() {
    use anvil::ops::reduce::{ReduceMax, ReduceProd, ReduceSum};
    let is_sum = |op: &dyn Op| op.reduction_math().is_some_and(|r| r.is_sum());
    assert!(is_sum(&ReduceSum { axes: vec![0], keepdims: false }));
    assert!(!is_sum(&ReduceMax { axes: vec![0], keepdims: false }));
    assert!(!is_sum(&ReduceProd { axes: vec![0], keepdims: false }));
    assert_eq!(PlugAdd.arith(), Some(Arith::Add));
}

/// A plugin's marker (the identity), removed by its own loop pass: it
/// needs no kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PlugMarker;

impl Op for PlugMarker {
    fn name(&self) -> &'static str {
        "plug.marker"
    }
    fn infer(&self, inputs: &[TensorType]) -> anvil::Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        Ok(inputs[0].clone())
    }
}

/// The loop pass of [`PlugMarker`]: each marker replaced by its operand.
fn drop_markers(
    g: &anvil::Graph,
    markers: &[anvil::core::NodeId],
) -> anvil::Result<Option<anvil::Graph>> {
    use anvil::core::Rebuilt;
    let out = g.rebuild(|_, _, id, _, ins| {
        Ok(if markers.contains(&id) { Rebuilt::Replace(vec![ins[0]]) } else { Rebuilt::Copy })
    })?;
    Ok(Some(out))
}

anvil::core::register_entry!(anvil::transforms::loops::LoopPass, PlugMarker, pass: drop_markers);

#[test]
fn a_loop_pass_registered_for_a_plugin_op_runs() {
    let f = |x: &Var| apply(PlugMarker, &[&x.sin()]) * 2.0;
    let x = Tensor::from_vec(vec![0.5, 1.0], &[2]).unwrap();
    let g = anvil::lower(&f, &x).unwrap();
    assert!(!g.to_string().contains("plug.marker"), "{g}");
    let got = jit(f).eval(&x).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(got, [2.0 * 0.5f64.sin(), 2.0 * 1.0f64.sin()]);
}

#[test]
fn a_plugin_slice_is_read_as_a_view_without_a_kernel() {
    // `sin(x) * flip(x)`: the fused product reads the flip as a view of
    // `x` (offset at the end, stride −1), so the flip needs no kernel.
    let spec = anvil::core::shape::SliceSpec { start: None, stop: None, step: -1 };
    let f = move |x: &Var| x.sin() * apply(PlugFlip([spec]), &[x]);
    let xs: Vec<f64> = vec![0.5, -1.0, 2.0, 0.25, 3.0];
    let x = Tensor::from_vec(xs.clone(), &[5]).unwrap();
    let got = jit(f).eval(&x).unwrap().to_vec::<f64>().unwrap();
    let want: Vec<f64> = (0..5).map(|i| xs[i].sin() * xs[4 - i]).collect();
    assert_eq!(got, want);
}

/// A plugin's reduction that happens to be called "sum" (its math is a
/// maximum).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PlugMaxCalledSum;

/// The math of [`PlugMaxCalledSum`]: a maximum over axis 0.
struct MaxOverAxis0;

impl anvil::core::ReductionMath for MaxOverAxis0 {
    fn axes(&self) -> &[usize] {
        &[0]
    }
    fn keepdims(&self) -> bool {
        false
    }
    fn f64(&self) -> (f64, fn(f64, f64) -> f64) {
        (f64::NEG_INFINITY, f64::max)
    }
    fn f32(&self) -> (f32, fn(f32, f32) -> f32) {
        (f32::NEG_INFINITY, f32::max)
    }
    fn i64(&self) -> (i64, fn(i64, i64) -> i64) {
        (i64::MIN, i64::max)
    }
}

impl Op for PlugMaxCalledSum {
    fn name(&self) -> &'static str {
        "sum"
    }
    fn infer(&self, inputs: &[TensorType]) -> anvil::Result<TensorType> {
        expect_arity(self, inputs, 1)?;
        Ok(inputs[0].with_shape(vec![inputs[0].shape()[1]]))
    }
    fn reduction_math(&self) -> Option<&dyn anvil::core::ReductionMath> {
        Some(&MaxOverAxis0)
    }
}

/// The kernel of [`PlugMaxCalledSum`] (for a fused chain it ends, the
/// backend folds by the declared math instead).
fn max_over_axis_0(
    _: &dyn Op,
    inputs: &[&Tensor],
    out: &TensorType,
    _: &anvil::Parallelism,
) -> anvil::Result<Tensor> {
    let c = out.shape()[0];
    let mut m = vec![f64::NEG_INFINITY; c];
    for row in inputs[0].to_vec::<f64>()?.chunks(c) {
        for (m, &v) in m.iter_mut().zip(row) {
            *m = m.max(v);
        }
    }
    Tensor::from_vec(m, &[c])
}
anvil::cpu::register_kernel!(PlugMaxCalledSum, max_over_axis_0);

/// A plugin op is never taken for a built-in one by its name: a reduction
/// called "sum" whose math is a maximum, ending a fused chain over a huge
/// broadcast (where the built-in sum is computed on one row and scaled by
/// the row count), gives the maximum.
#[test]
fn a_plugin_op_called_like_a_built_in_one_keeps_its_own_math() {
    let x = Tensor::from_vec(vec![1.0, -2.0, 3.5, 0.25], &[4]).unwrap();
    // 2^22 equal rows of 4: 2^24 elements in all, where the constant-row
    // path starts.
    let f = |x: &Var| {
        let rows = x.broadcast_to(&[1 << 22, 4]).exp();
        Var::apply_op(Box::new(PlugMaxCalledSum), &[&rows])
    };
    let got = jit(f).eval(&x).unwrap().to_vec::<f64>().unwrap();
    let want: Vec<f64> = [1.0f64, -2.0, 3.5, 0.25].iter().map(|v| v.exp()).collect();
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 4.0 * f64::EPSILON * w, "{got:?} against {want:?}");
    }
}
