//! The graph IR as users see it: printing, Graphviz output, verification,
//! plan caching and the DCE/CSE passes.

use anvil::prelude::*;
use anvil::transforms::{cse, dce};
use anvil::{run_graph, DType, Tensor};

#[test]
fn graphs_print_like_a_jaxpr() {
    let x = Tensor::zeros(&[3]).unwrap();
    let g = trace(&|x: &Var| (x.sin() * x).sum(&[0]), &x).unwrap();
    let expected = "\
graph(%0: f64[3]) {
  %1: f64[3] = sin %0
  %2: f64[3] = mul %1, %0
  %3: f64[] = sum[axes=[0], keepdims=false] %2
  return %3
}";
    assert_eq!(g.to_string(), expected);
}

#[test]
fn constants_and_parameters_print_with_their_values() {
    let g = trace(
        &|a: &Var, b: &Var| (a * 2.0).reshape(&[1, -1]).matmul(b),
        (&Tensor::zeros(&[2]).unwrap(), &Tensor::zeros(&[2, 4]).unwrap()),
    )
    .unwrap();
    let text = g.to_string();
    assert!(text.starts_with("graph(%0: f64[2], %1: f64[2,4]) {"), "{text}");
    assert!(text.contains("f64[] = const[2.]"), "{text}");
    assert!(text.contains("f64[1,2] = reshape[shape=[1, 2]]"), "{text}");
    assert!(text.contains("f64[1,4] = matmul"), "{text}");
}

#[test]
fn dot_output_renders_with_graphviz() {
    let g = trace(&|x: &Var| x.exp().sum(&[0]) / 3.0, Tensor::zeros(&[3]).unwrap()).unwrap();
    let dot = g.to_dot();
    assert!(
        dot.starts_with("digraph anvil {")
            && dot.contains("g_1 -> g_2")
            && dot.contains("output 0"),
        "{dot}"
    );
    let Ok(mut child) = std::process::Command::new("dot")
        .arg("-Tsvg")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    else {
        eprintln!(
            "skipping the Graphviz render check: `dot` is not installed (apt-get install graphviz)"
        );
        return;
    };
    use std::io::Write;
    child.stdin.take().unwrap().write_all(dot.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "dot failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("<svg"));
}

#[test]
fn traced_graphs_verify_and_bad_graphs_do_not() {
    let g = trace(&|x: &Var| x.tanh().softmax(0), Tensor::zeros(&[4]).unwrap()).unwrap();
    g.verify().unwrap();
    // A node whose recorded type disagrees with its op's shape rule.
    let mut bad = anvil::Graph::new();
    let x = bad.add_input(anvil::TensorType::new(DType::F64, vec![3])).unwrap();
    bad.push_node(
        Box::new(anvil::ops::elementwise::Sin),
        vec![x],
        vec![anvil::TensorType::new(DType::F64, vec![4])],
    )
    .unwrap();
    let e = bad.verify().unwrap_err().to_string();
    assert!(
        e.contains("node 1") && e.contains("sin") && e.contains("f64[4]") && e.contains("f64[3]"),
        "{e}"
    );
    // A node that uses a later one.
    let mut bad = anvil::Graph::new();
    let e = bad.push(Box::new(anvil::ops::elementwise::Sin), &[x]).unwrap_err().to_string();
    assert!(e.contains("not in the graph"), "{e}");
}

#[test]
fn jit_caches_one_plan_per_signature() {
    let f = jit(|x: &Var| x * 3.0);
    for _ in 0..3 {
        f.eval(Tensor::ones(&[2]).unwrap()).unwrap();
    }
    assert_eq!(f.cache_len(), 1);
    f.eval(Tensor::ones(&[5]).unwrap()).unwrap();
    f.eval(Tensor::ones(&[5]).unwrap().cast(DType::F32)).unwrap();
    assert_eq!(f.cache_len(), 3);
    let out = f.eval(Tensor::ones(&[2]).unwrap().cast(DType::F32)).unwrap();
    assert_eq!((out.dtype(), out.to_vec::<f32>().unwrap()), (DType::F32, vec![3.0, 3.0]));
}

#[test]
fn dce_removes_dead_nodes_and_cse_merges_equal_ones() {
    let x = Tensor::from_vec(vec![0.5, 1.5], &[2]).unwrap();
    let g = trace(
        &|x: &Var| {
            let _dead = x.exp().log();
            x.sin() + x.sin()
        },
        &x,
    )
    .unwrap();
    assert_eq!(g.count::<anvil::ops::elementwise::Sin>(), 2);
    let d = dce(&g).unwrap();
    assert_eq!(d.count::<anvil::ops::elementwise::Exp>(), 0);
    let c = cse(&d).unwrap();
    assert_eq!(c.count::<anvil::ops::elementwise::Sin>(), 1);
    c.verify().unwrap();
    let want = run_graph(&g, std::slice::from_ref(&x)).unwrap();
    let got = run_graph(&c, &[x]).unwrap();
    assert_eq!(want, got);
}

#[test]
fn values_and_inputs_pass_through() {
    // An output that is an input, and the same node returned twice.
    let f = jit(|xs: &[Var]| vec![xs[0].clone(), xs[1].exp(), xs[1].exp()]);
    let a = Tensor::from_vec(vec![1.0, 2.0], &[2]).unwrap();
    let out = f.eval(vec![a.clone(), Tensor::zeros(&[1]).unwrap()]).unwrap();
    assert_eq!(out[0], a);
    assert_eq!(out[1].to_vec::<f64>().unwrap(), vec![1.0]);
    assert_eq!(out[1], out[2]);
}

/// The rewrite rules fold the identity product of a jacfwd seed and chains
/// of movement ops, without changing values.
#[test]
fn rewrites_remove_identity_products_and_movement_chains() {
    use anvil::transforms::{dce, rewrite};
    let w = Tensor::from_vec((0..16).map(|i| (i as f64).sin()).collect(), &[4, 4]).unwrap();
    let f = |x: &Var, w: &Var| w.matmul(x).tanh();
    let x = Tensor::from_vec(vec![0.1, 0.2, 0.3, 0.4], &[4]).unwrap();
    let j = anvil::jacfwd(f);
    let g = dce(&trace(&j, (&x, &w)).unwrap()).unwrap();
    let s = anvil::lower(&j, (&x, &w)).unwrap();
    let count =
        |g: &anvil::Graph, name: &str| g.iter().filter(|(_, n)| n.op.name() == name).count();
    // J = diag(1 - tanh²) W: the primal's product is the only one (W @ I
    // is folded away, the seed's batch axis stays last), and no transpose.
    assert_eq!(count(&s, "matmul"), 1, "{s}");
    assert_eq!(count(&s, "permute"), 0, "{s}");
    let a = anvil::run_graph(&g, &[x.clone(), w.clone()]).unwrap();
    let b = anvil::run_graph(&s, &[x.clone(), w.clone()]).unwrap();
    a[0].assert_allclose(&b[0], 0.0, 0.0);
    // transpose of transpose, reshape of reshape
    let h = |x: &Var| x.transpose().transpose().reshape(&[2, 2]).reshape(&[4]).sin();
    let g = trace(&h, &x).unwrap();
    let s = rewrite(&g).unwrap();
    let s = dce(&s).unwrap();
    assert_eq!(s.len(), 2, "{s}"); // the input and sin
}

/// In a `jacfwd` Jacobian, sums over the identity seed's products read
/// their diagonal: W3's Jacobian has no `n × n` reduction, and the CPU plan
/// makes one pass over the `n × n` result. Values are those of the graph
/// before simplification, and of `jacrev`.
#[test]
fn seed_sums_read_the_diagonal_and_the_jacobian_is_one_pass() {
    let n = 50;
    let f = |x: &Var| x.softmax(-1) * x.sin().square().sum_all() + (-x.square()).exp() * x;
    let x = Tensor::from_vec((0..n).map(|i| (i as f64 * 0.37).sin()).collect(), &[n]).unwrap();
    let j = anvil::jacfwd(f);
    let s = anvil::lower(&j, &x).unwrap();
    let square = |ty: &anvil::TensorType| ty.shape() == [n, n];
    let reductions_of_squares = s
        .iter()
        .filter(|(_, node)| node.op.name() == "sum" && node.inputs.iter().any(|&i| square(s.ty(i))))
        .count();
    assert_eq!(reductions_of_squares, 0, "{s}");
    let plan = anvil::cpu::compile(&s).unwrap();
    let passes = plan
        .graph()
        .iter()
        .filter(|(_, node)| square(plan.graph().ty(node.out())) && node.op.name() != "const")
        .count();
    assert_eq!(passes, 1, "{}", plan.graph());
    let raw = anvil::transforms::dce(&trace(&j, &x).unwrap()).unwrap();
    let want = anvil::run_graph(&raw, std::slice::from_ref(&x)).unwrap().remove(0);
    let got = anvil::run_graph(&s, std::slice::from_ref(&x)).unwrap().remove(0);
    got.assert_allclose(&want, 1e-14, 1e-15);
    let rev = anvil::jit(anvil::jacrev(f)).eval(&x).unwrap();
    got.assert_allclose(&rev, 1e-13, 1e-14);
}

fn same_bits_or_both_nan(got: &[Tensor], want: &[Tensor]) {
    for (g, w) in got.iter().zip(want) {
        let (g, w) = (g.to_vec::<f64>().unwrap(), w.to_vec::<f64>().unwrap());
        for (x, y) in g.iter().zip(&w) {
            assert!(x == y || (x.is_nan() && y.is_nan()), "{g:?} != {w:?}");
        }
    }
}

/// Rewrites around a 0/1 mask keep every value, NaN, infinities and
/// overflow included: `-(M * a)` moves to `M * (-a)`; `(M * a) * b` and
/// `(M * a) / b` are left as they are (`M * (a * b)` would turn the 0 of
/// `(0 * a) * b` into NaN when `a * b` overflows).
#[test]
fn mask_rewrites_keep_nans_infinities_and_overflow() {
    let mask = Tensor::from_vec(vec![1.0, 0.0, 0.0, 1.0, 1.0, 0.0], &[2, 3]).unwrap();
    let a = Tensor::from_vec(vec![f64::INFINITY, 1e200], &[2, 1]).unwrap();
    let b = Tensor::from_vec(vec![0.0, 1e200], &[2, 1]).unwrap();
    let f = move |a: &Var, b: &Var| {
        let m = a.constant_like(mask.clone());
        let ma = &m * a;
        vec![&ma * b, &ma / &(b + 1e-300), -&ma, b * &ma]
    };
    let raw = trace(&f, (&a, &b)).unwrap();
    let s = anvil::lower(&f, (&a, &b)).unwrap();
    let neg = s.producer_node(s.outputs()[2]);
    assert!(neg.op.name() == "mul", "-(M*a) is M*(-a): {s}");
    let want = run_graph(&raw, &[a.clone(), b.clone()]).unwrap();
    let got = run_graph(&s, &[a, b]).unwrap();
    same_bits_or_both_nan(&got, &want);
    // Overflow: the mask's zeros stay zeros.
    assert_eq!(got[0].to_vec::<f64>().unwrap()[4..], [f64::INFINITY, 0.0]);
}

/// A sum over the identity seed's products reads the diagonal: equal to the
/// dense sum for finite derivatives, and where a derivative is infinite the
/// entry is that derivative, not the NaN that `0 · ∞` spreads in the dense
/// product.
#[test]
fn seed_sums_leave_out_the_seed_zeros() {
    let n = 3;
    let f = |v: &Var, w: &Var| {
        let eye = anvil::eye(n) * v.reshape(&[n as i64, 1]);
        vec![(-(eye * w) / 2.0).sum(&[0])]
    };
    let w = Tensor::from_vec(vec![0.5, -2.0, 3.0], &[n]).unwrap();
    let finite = Tensor::from_vec(vec![1.0, -4.0, 0.25], &[n]).unwrap();
    let s = anvil::lower(&f, (&finite, &w)).unwrap();
    assert!(s.iter().all(|(_, node)| s.ty(node.out()).shape() != [n, n]), "{s}");
    let raw = trace(&f, (&finite, &w)).unwrap();
    same_bits_or_both_nan(
        &run_graph(&s, &[finite.clone(), w.clone()]).unwrap(),
        &run_graph(&raw, &[finite, w.clone()]).unwrap(),
    );
    let infinite = Tensor::from_vec(vec![1.0, f64::INFINITY, 0.25], &[n]).unwrap();
    let got = run_graph(&s, &[infinite.clone(), w.clone()]).unwrap().remove(0);
    assert_eq!(got.to_vec::<f64>().unwrap(), [-0.25, f64::INFINITY, -0.375]);
    let dense = run_graph(&raw, &[infinite, w]).unwrap().remove(0);
    let dense = dense.to_vec::<f64>().unwrap();
    assert!(dense[0].is_nan() && dense[2].is_nan(), "{dense:?}");
}

/// Neutral elements fold away (`x * 1`, `x / 1`, `x + 0`, `x - 0` with
/// constants), and a sum over the axes a broadcast copied along is a
/// product by the number of copies; values are unchanged.
#[test]
fn neutral_elements_and_sums_of_broadcasts_fold() {
    let x = Tensor::from_vec(vec![0.5, -1.0, 2.0], &[3, 1]).unwrap();
    let f = |x: &Var| {
        let ones = x.constant_like(Tensor::ones(&[3, 1]).unwrap());
        let zeros = x.constant_like(Tensor::zeros(&[1]).unwrap());
        let y = (x * &ones) / &ones + &zeros - &zeros; // x
        vec![
            y.broadcast_to(&[4, 3, 5]).sum(&[0, 2]),    // 20 x, as [3]
            y.broadcast_to(&[3, 5]).sum_keepdims(&[1]), // 5 x, as [3, 1]
            y.broadcast_to(&[2, 3, 1]).sum(&[0]),       // 2 x
            y.broadcast_to(&[3, 4]).sum(&[0]),          // not a broadcast axis: kept
            x * x.constant_like(Tensor::ones(&[3, 4]).unwrap()), // ones wider than x: kept
        ]
    };
    let raw = trace(&f, &x).unwrap();
    let s = anvil::lower(&f, &x).unwrap();
    let count = |name: &str| s.iter().filter(|(_, n)| n.op.name() == name).count();
    assert_eq!(count("div") + count("add") + count("sub"), 0, "{s}");
    assert_eq!(count("sum"), 1, "only the sum over a non-broadcast axis stays: {s}");
    assert_eq!(count("broadcast_to"), 1, "{s}");
    let want = run_graph(&raw, std::slice::from_ref(&x)).unwrap();
    let got = run_graph(&s, std::slice::from_ref(&x)).unwrap();
    for (g, w) in got.iter().zip(&want) {
        g.assert_allclose(w, 0.0, 0.0);
    }
    assert_eq!(got[0].to_vec::<f64>().unwrap(), vec![10.0, -20.0, 40.0]);
    // A broadcast to an empty axis sums to zeros, whatever x holds.
    let x = Tensor::from_vec(vec![f64::INFINITY, -1.0, f64::NAN], &[3]).unwrap();
    let empty = |x: &Var| x.broadcast_to(&[0, 3]).sum(&[0]);
    let got = run_graph(&anvil::lower(&empty, &x).unwrap(), std::slice::from_ref(&x)).unwrap();
    assert_eq!(got[0].to_vec::<f64>().unwrap(), vec![0.0; 3]);
}

/// Factors constant along a sum's reduced axes leave the sum: `Σ_j (e_ij /
/// s_i) · x_ij` is `(Σ_j e_ij x_ij) / s_i`, and sums of the same varying
/// factors in another order are one node. Values agree with the graph as
/// written to rounding, in f64 and f32, with keepdims and without, over all
/// axes (split into the axes a factor is constant along first), and with
/// the signs and divisors of the tree.
#[test]
fn factors_constant_along_reduced_axes_leave_the_sum() {
    let f = |x: &Var, s: &Var, c: &Var| {
        let e = x.exp();
        vec![
            (&e / s * x).sum(&[1]),                    // (Σ e x) / s
            (-(x * &(&e / s / s))).sum_keepdims(&[1]), // -(Σ x e) / s², the same Σ
            (&e / s * x).sum_all(),                    // split: rows first
            (c * x * s).sum(&[0, 1]),                  // c constant along both
            (x / c).sum(&[1]),                         // a divisor, c constant
            (&e * x).sum(&[0]),                        // nothing to take out
        ]
    };
    for dtype in [DType::F64, DType::F32] {
        let x = Tensor::from_vec((0..24).map(|i| (i as f64 * 0.37).sin()).collect(), &[4, 6])
            .unwrap()
            .cast(dtype);
        let s = Tensor::from_vec(vec![1.5, 0.25, -2.0, 3.0], &[4, 1]).unwrap().cast(dtype);
        let c = Tensor::from_vec(vec![0.75], &[]).unwrap().cast(dtype);
        let args = (&x, &s, &c);
        let raw = trace(&f, args).unwrap();
        let low = anvil::lower(&f, args).unwrap();
        let want = run_graph(&raw, &[x.clone(), s.clone(), c.clone()]).unwrap();
        let got = run_graph(&low, &[x.clone(), s.clone(), c.clone()]).unwrap();
        let tol = if dtype == DType::F64 { 1e-13 } else { 1e-5 };
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.shape(), w.shape(), "output {k}");
            assert!(g.allclose(w, tol, tol), "{dtype:?} output {k}: {g} vs {w}\n{low}");
        }
        // No division or product by `s` over the full [4, 6] shape is left,
        // and Σ e·x per row is computed once for outputs 0, 1 and 2.
        let text = low.to_string();
        let full = if dtype == DType::F64 { "f64[4,6]" } else { "f32[4,6]" };
        assert!(!text.lines().any(|l| l.contains(&format!("{full} = div"))), "{text}");
        let row_sums = text.lines().filter(|l| l.contains("= sum[axes=[1]")).count();
        assert_eq!(row_sums, 2, "Σ e·x and Σ x/c per row:\n{text}");
    }
}

/// A sum distributes over a difference `y − c` (`c` constant along the
/// reduced axes) only where that cannot cancel: `y = x − max(x)` and
/// `c = log Σ exp(y)`, a log-softmax, whose value `Σ w·(y − c)` becomes
/// `Σ w·y − c Σ w`, computed beside the sums of `c`. Anywhere else the
/// difference stays: distributed, `Σ (x − mean)²` is `Σ x² − …`, which
/// cancels to 0 or below for data far from 0 (the variance of
/// `1e9 + [1, 2, 3]` is 2/3, in f64 and in f32 as for `1e4 + [1, 2, 3]`).
/// A sum of a broadcast copied along more axes than it sums is the source
/// times the count.
#[test]
fn sums_distribute_only_where_they_cannot_cancel() {
    let far = Tensor::from_vec(vec![1e9 + 1.0, 1e9 + 2.0, 1e9 + 3.0], &[3]).unwrap();
    let var = jit(|x: &Var| x.var_all()).eval(&far).unwrap().item().unwrap();
    assert!((var - 2.0 / 3.0).abs() < 1e-6, "{var}");
    let shifted = |x: &Var, c: &Var| (x - c).square().sum_all();
    let c = Tensor::scalar(1e9);
    assert_eq!(jit(shifted).eval((&far, &c)).unwrap().item().unwrap(), 14.0);
    let first = jit(|x: &Var| (x - &x.i(ix![0])).square().sum_all()).eval(&far).unwrap();
    assert_eq!(first.item().unwrap(), 5.0);
    let near = Tensor::from_vec(vec![1e4 + 1.0, 1e4 + 2.0, 1e4 + 3.0], &[3]).unwrap();
    let var32 = jit(|x: &Var| x.var_all()).eval(near.cast(DType::F32)).unwrap();
    assert!((var32.cast(DType::F64).item().unwrap() - 2.0 / 3.0).abs() < 1e-5, "{var32}");

    // log-softmax's value distributes; it agrees with the graph as written
    // and with a log-softmax computed in Rust, for logits near 1e10 too.
    let f = |x: &Var, w: &Var| vec![(w * &x.log_softmax(1)).sum(&[1]), x.log_softmax(1)];
    for offset in [0.0, 1e10] {
        let x =
            Tensor::from_vec((0..24).map(|i| offset + (i as f64 * 0.37).sin()).collect(), &[4, 6])
                .unwrap();
        let w =
            Tensor::from_vec((0..24).map(|i| (i as f64 * 0.91).cos()).collect(), &[4, 6]).unwrap();
        let (xs, ws) = (x.to_vec::<f64>().unwrap(), w.to_vec::<f64>().unwrap());
        let mut want = Vec::new();
        for r in 0..4 {
            let row = &xs[6 * r..6 * r + 6];
            let m = row.iter().copied().fold(f64::MIN, f64::max);
            let lse = row.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
            want.push((0..6).map(|j| ws[6 * r + j] * ((row[j] - m) - lse)).sum::<f64>());
        }
        let low = anvil::lower(&f, (&x, &w)).unwrap();
        let got = run_graph(&low, &[x.clone(), w.clone()]).unwrap();
        let got = got[0].to_vec::<f64>().unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-13 * (1.0 + w.abs()), "{got:?} vs {want:?}\n{low}");
        }
        // Distributed: `Σ w` is a sum of its own (`c Σ w`).
        let text = low.to_string();
        assert!(text.contains("sum[axes=[1], keepdims=true] %1\n"), "{text}");
    }
    let ones = jit(|x: &Var| x.scalar_like(1.0).broadcast_to(&[4, 6]).sum(&[1]))
        .eval(Tensor::zeros(&[2]).unwrap())
        .unwrap();
    assert_eq!(ones.to_vec::<f64>().unwrap(), vec![6.0; 4]);
}

/// The transpose of an outer product `u vᵀ` (a matrix product or a
/// broadcasting product, times a scalar) is `v uᵀ` computed in place: no
/// permute of the full matrix is left, and the values are the same bits. A
/// permute of an elementwise op with a full-size operand stays.
#[test]
fn transposes_of_outer_products_are_computed_transposed() {
    let u = Tensor::from_vec(vec![0.5, -1.25, 2.0], &[3, 1]).unwrap();
    let v = Tensor::from_vec(vec![1.5, 0.25, -3.0, 4.0], &[1, 4]).unwrap();
    let a = Tensor::from_vec((0..12).map(|i| i as f64 * 0.1).collect(), &[3, 4]).unwrap();
    let f = |u: &Var, v: &Var, a: &Var| {
        vec![
            u.matmul(v).transpose(),
            (u * v * 2.0).transpose(),
            (u * v + a).transpose(), // a full-size operand: the permute stays
        ]
    };
    let raw = trace(&f, (&u, &v, &a)).unwrap();
    let low = anvil::lower(&f, (&u, &v, &a)).unwrap();
    let args = [u.clone(), v.clone(), a.clone()];
    let want = run_graph(&raw, &args).unwrap();
    let got = run_graph(&low, &args).unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.shape(), [4, 3]);
        assert_eq!(g.to_vec::<f64>().unwrap(), w.to_vec::<f64>().unwrap(), "{low}");
    }
    let permutes = low.iter().filter(|(_, n)| n.op.name() == "permute").count();
    assert_eq!(permutes, 1, "only the one with a full-size operand:\n{low}");
}

/// Elementwise chains are fused into one kernel; the values are those of the
/// ops one by one, with broadcasting leaves, on one thread and on several.
#[test]
fn fused_elementwise_chains_compute_the_same_values() {
    let (m, n) = (3, 1000);
    let xv: Vec<f64> = (0..m).map(|i| 0.3 * i as f64 - 0.2).collect();
    let yv: Vec<f64> = (0..n).map(|j| (j as f64 * 0.01).sin()).collect();
    let x = Tensor::from_vec(xv.clone(), &[m, 1]).unwrap();
    let y = Tensor::from_vec(yv.clone(), &[n]).unwrap();
    let f = |x: &Var, y: &Var| ((x * y + 1.0).sin() / ((-x).exp() + 2.0) - y.tanh()).square();
    let plan = anvil::cpu::compile(&trace(&f, (&x, &y)).unwrap()).unwrap();
    // The [3, 1000] result is one node: every full-size op is in it.
    let pg = plan.graph();
    let big = pg.iter().filter(|(_, node)| pg.ty(node.out()).shape() == [m, n]).count();
    assert_eq!(big, 1, "{}", plan.graph());
    let want: Vec<f64> = (0..m * n)
        .map(|k| {
            let (a, b) = (xv[k / n], yv[k % n]);
            ((a * b + 1.0).sin() / ((-a).exp() + 2.0) - b.tanh()).powi(2)
        })
        .collect();
    let want = Tensor::from_vec(want, &[m, n]).unwrap();
    let par = anvil::Parallelism::default().threads(2).min_parallel_elems(1);
    for ctx in [anvil::Parallelism::sequential(), par] {
        let got = plan.run(&[x.clone(), y.clone()], &ctx).unwrap().remove(0);
        got.assert_allclose(&want, 1e-15, 1e-15);
    }
}

/// A fused program with few registers runs in long blocks (up to
/// `MAX_BLOCK` elements): a position-dependent generator (the `jacfwd`
/// seed's diagonal) and a broadcast leaf keep their values across block and
/// task boundaries, in a result of several blocks and a partial last one.
#[test]
fn long_blocks_keep_positions_and_broadcasts() {
    use anvil::cpu::fusion::MAX_BLOCK;
    let n = 157; // n * n = 24,649: six blocks of 4,096, the last partial
    assert!(n * n > 5 * MAX_BLOCK && (n * n) % MAX_BLOCK != 0);
    let xv: Vec<f64> = (0..n).map(|i| (0.37 * (i + 1) as f64).sin()).collect();
    let x = Tensor::from_vec(xv.clone(), &[n]).unwrap();
    // J[i, k] = cos(x_i) s δ_ik + sin(x_i), s = Σ x.
    let f = jacfwd(|x: &Var| x.sin() * x.sum_all());
    let plan = anvil::cpu::compile(&anvil::lower(&f, &x).unwrap()).unwrap();
    let pg = plan.graph();
    let (_, node) = pg.iter().find(|(_, node)| pg.ty(node.out()).shape() == [n, n]).unwrap();
    let fused = node.op.try_downcast::<anvil::cpu::fusion::Fused>().unwrap();
    assert_eq!(fused.block(), MAX_BLOCK, "{pg}");
    let s: f64 = xv.iter().sum();
    let want: Vec<f64> = (0..n * n)
        .map(|k| {
            let (i, j) = (k / n, k % n);
            let diag = if i == j { xv[i].cos() * s } else { 0.0 };
            diag + xv[i].sin()
        })
        .collect();
    let want = Tensor::from_vec(want, &[n, n]).unwrap();
    let par = anvil::Parallelism::default().threads(2).min_parallel_elems(1);
    for ctx in [anvil::Parallelism::sequential(), par] {
        let got = plan.run(std::slice::from_ref(&x), &ctx).unwrap().remove(0);
        got.assert_allclose(&want, 1e-13, 1e-13);
    }
}

/// A transpose feeding a matrix product is read as a transposed view by
/// the kernel, not copied; values are unchanged.
#[test]
fn transposes_into_matmul_are_views() {
    let a = Tensor::from_vec((0..12).map(|i| (i as f64 * 0.3).sin()).collect(), &[4, 3]).unwrap();
    let b = Tensor::from_vec((0..8).map(|i| (i as f64 * 0.7).cos()).collect(), &[4, 2]).unwrap();
    let v = Tensor::from_vec(vec![0.5, -1.0, 2.0], &[3]).unwrap();
    let (av, bv) = (a.to_vec::<f64>().unwrap(), b.to_vec::<f64>().unwrap());
    // aᵀ b: [3, 2]
    let want: Vec<f64> =
        (0..6).map(|k| (0..4).map(|r| av[r * 3 + k / 2] * bv[r * 2 + k % 2]).sum()).collect();
    let f = |a: &Var, b: &Var| a.transpose().matmul(b);
    let plan = anvil::cpu::compile(&anvil::lower(&f, (&a, &b)).unwrap()).unwrap();
    assert!(plan.graph().iter().all(|(_, n)| n.op.name() != "permute"), "{}", plan.graph());
    let got = plan.run(&[a.clone(), b.clone()], &anvil::Parallelism::default()).unwrap().remove(0);
    got.assert_allclose(&Tensor::from_vec(want, &[3, 2]).unwrap(), 1e-15, 1e-15);
    // b aᵀ... as (aᵀ)ᵀ: a @ vᵀ-free cases, and both sides transposed.
    let g = |a: &Var, b: &Var| b.transpose().matmul(&a.transpose().transpose()).transpose();
    let got = jit(g).eval((&a, &b)).unwrap();
    let want = jit(|a: &Var, b: &Var| {
        let bt = b.permute(&[1, 0]) + 0.0; // a copy, not a view
        (bt.matmul(a)).permute(&[1, 0]) + 0.0
    })
    .eval((&a, &b))
    .unwrap();
    got.assert_allclose(&want, 1e-15, 1e-15);
    // A vector against a transposed matrix: w bᵀ, [2] @ [2, 4].
    let w = Tensor::from_vec(vec![0.5, -1.0], &[2]).unwrap();
    let got = jit(|b: &Var, w: &Var| w.matmul(&b.transpose())).eval((&b, &w)).unwrap();
    let want: Vec<f64> = (0..4).map(|r| 0.5 * bv[r * 2] - bv[r * 2 + 1]).collect();
    got.assert_allclose(&Tensor::from_vec(want, &[4]).unwrap(), 1e-15, 1e-15);
    let _ = v;
}

/// The Jacobian of a stencil is banded: `jacfwd` of W4's residual lowers to
/// one `diagonals` generator (three diagonals), with the values of the graph
/// as traced, and no `n × n` product or sum is left.
#[test]
fn stencil_jacobians_lower_to_diagonals() {
    use anvil::ops::diagonal::Diagonals;
    let pde = |u: &Var| {
        let n = u.shape()[0];
        let up = u.pad(&[(1, 1)], 0.0);
        let left = up.slice_axis(0, None, Some(-2), 1);
        let right = up.slice_axis(0, Some(2), None, 1);
        (left - u * 2.0 + right) * (n as f64).powi(2) + u.powf(3.0) - u.sin()
    };
    let n = 7;
    let u =
        Tensor::from_vec((0..n).map(|i| (0.37 * (i + 1) as f64).sin()).collect(), &[n]).unwrap();
    let j = jacfwd(pde);
    let g = anvil::lower(&j, &u).unwrap();
    assert_eq!(g.count::<Diagonals>(), 1, "{g}");
    let square = g.iter().filter(|(_, node)| g.ty(node.out()).shape() == [n, n]).count();
    assert_eq!(square, 1, "only the diagonals are n x n: {g}");
    let d = g.iter().find_map(|(_, node)| node.op.downcast_ref::<Diagonals>()).unwrap();
    let mut offsets = d.offsets.clone();
    offsets.sort_unstable();
    assert_eq!(offsets, [-1, 0, 1]);
    let raw = trace(&j, &u).unwrap();
    let want = run_graph(&raw, std::slice::from_ref(&u)).unwrap();
    let got = run_graph(&g, std::slice::from_ref(&u)).unwrap();
    got[0].assert_allclose(&want[0], 1e-15, 0.0);
    // The closed form: main diagonal -2 n² + 3u² - cos u, the others n².
    let uv = u.to_vec::<f64>().unwrap();
    let jv = got[0].to_vec::<f64>().unwrap();
    for i in 0..n {
        for k in 0..n {
            let w = match (i as i64 - k as i64).abs() {
                0 => -2.0 * (n * n) as f64 + 3.0 * uv[i] * uv[i] - uv[i].cos(),
                1 => (n * n) as f64,
                _ => 0.0,
            };
            assert!((jv[i * n + k] - w).abs() <= 1e-12 * w.abs().max(1.0), "J[{i},{k}]");
        }
    }
}

/// Diagonals keep a derivative that is not finite in its own entry: the
/// entries no diagonal covers stay 0, where the dense product `0 · ∞` of
/// the seed and the derivative would be NaN.
#[test]
fn diagonals_keep_infinities_in_their_entry() {
    let f = |x: &Var| x.sqrt();
    let x = Tensor::from_vec(vec![0.0, 1.0, 4.0], &[3]).unwrap();
    let j = jit(jacfwd(f)).eval(&x).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(j[0], f64::INFINITY);
    assert_eq!(&j[1..], [0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.25]);
    let raw = run_graph(&trace(&jacfwd(f), &x).unwrap(), &[x]).unwrap().remove(0);
    let raw = raw.to_vec::<f64>().unwrap();
    assert!(raw[1].is_nan() && raw[2].is_nan(), "the dense product spreads NaN: {raw:?}");
}

/// `sin(x) * x[::-1]` (W7's function).
fn sin_times_flip(x: &Var) -> Var {
    x.sin() * x.flip(&[0])
}

#[test]
fn a_jitted_tiny_jacobian_called_from_several_threads_gives_each_call_its_own_bits() {
    // One plan (one fused step with gathered views of x), called at once
    // from four threads, each with its own inputs: every result is the
    // bits of the same call made alone.
    let f = jit(jacfwd(sin_times_flip));
    let input = |t: usize, k: usize| {
        let v: Vec<f64> = (0..3).map(|i| 0.1 * (t * 7 + k + i) as f64).collect();
        Tensor::from_vec(v, &[3]).unwrap()
    };
    let bits = |t: &Tensor| -> Vec<u64> {
        t.to_vec::<f64>().unwrap().iter().map(|v| v.to_bits()).collect()
    };
    let alone: Vec<Vec<Vec<u64>>> =
        (0..4).map(|t| (0..50).map(|k| bits(&f.eval(input(t, k)).unwrap())).collect()).collect();
    std::thread::scope(|s| {
        for (t, want) in alone.iter().enumerate() {
            let (f, input, bits) = (&f, &input, &bits);
            s.spawn(move || {
                for _ in 0..20 {
                    for (k, w) in want.iter().enumerate() {
                        assert!(&bits(&f.eval(input(t, k)).unwrap()) == w, "thread {t} call {k}");
                    }
                }
            });
        }
    });
    assert_eq!(f.cache_len(), 1);
    // The values: d/dx_j of sin(x_i) x_{n-1-i}.
    let x = input(1, 2);
    let xs = x.to_vec::<f64>().unwrap();
    let got = f.eval(&x).unwrap().to_vec::<f64>().unwrap();
    for i in 0..3 {
        for j in 0..3 {
            let mut want = if i == j { xs[i].cos() * xs[2 - i] } else { 0.0 };
            if j == 2 - i {
                want += xs[i].sin();
            }
            assert!((got[i * 3 + j] - want).abs() < 1e-15, "{got:?}");
        }
    }
}

#[test]
fn a_jitted_tiny_jacobian_compiles_again_for_other_sizes_and_dtypes() {
    let f = jit(jacfwd(sin_times_flip));
    for n in [3usize, 5, 9] {
        let xs: Vec<f64> = (0..n).map(|i| 0.3 + 0.1 * i as f64).collect();
        let x = Tensor::from_vec(xs.clone(), &[n]).unwrap();
        for x in [x.clone(), x.cast(DType::F32)] {
            let out = f.eval(&x).unwrap();
            assert_eq!((out.shape(), out.dtype()), (&[n, n][..], x.dtype()));
            let got = out.cast(DType::F64).to_vec::<f64>().unwrap();
            let tol = if x.dtype() == DType::F32 { 1e-5 } else { 1e-15 };
            for i in 0..n {
                for j in 0..n {
                    let mut want = if i == j { xs[i].cos() * xs[n - 1 - i] } else { 0.0 };
                    if j == n - 1 - i {
                        want += xs[i].sin();
                    }
                    assert!((got[i * n + j] - want).abs() < tol, "n={n} {:?}: {got:?}", x.dtype());
                }
            }
        }
    }
    assert_eq!(f.cache_len(), 6);
}

/// A `select` on a condition known to be all true or all false lowers to
/// the chosen branch (broadcast), values as the select's, NaN in the
/// other branch included.
#[test]
fn a_select_on_a_known_condition_is_its_branch() {
    use anvil::ops::elementwise::Select;
    let x = Tensor::from_vec(vec![1.0, f64::NAN, 3.0], &[3]).unwrap();
    let y = Tensor::from_vec(vec![4.0], &[1]).unwrap();
    for value in [false, true] {
        let cond = Tensor::from_vec(vec![value; 3], &[3]).unwrap();
        let f = move |x: &Var, y: &Var| x.constant_like(cond.clone()).select(x, y);
        let g = anvil::lower(&f, (&x, &y)).unwrap();
        assert_eq!(g.count::<Select>(), 0, "{g}");
        let got = run_graph(&g, &[x.clone(), y.clone()]).unwrap()[0].to_vec::<f64>().unwrap();
        let want = if value { vec![1.0, f64::NAN, 3.0] } else { vec![4.0; 3] };
        let same = got.iter().zip(&want).all(|(a, b)| a == b || (a.is_nan() && b.is_nan()));
        assert!(same, "{value}: {got:?}");
    }
    // A mixed condition stays a select.
    let cond = Tensor::from_vec(vec![true, false, true], &[3]).unwrap();
    let f = move |x: &Var, y: &Var| x.constant_like(cond.clone()).select(x, y);
    assert_eq!(anvil::lower(&f, (&x, &y)).unwrap().count::<Select>(), 1);
}
