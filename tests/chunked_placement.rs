//! Chunked `vmap`, `jacfwd` and `jacrev` write every chunk straight into its
//! place in the final result (issue 14, "chunking becomes a loop"): the
//! compiled plan has no full-size `concatenate` (of the last partial chunk)
//! or `permute` (of `jacfwd`'s basis axis to the back), and its peak is the
//! result plus about one chunk's values — not two or three results.

use anvil::prelude::*;

fn rand(shape: &[usize], seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let v = (0..n).map(|i| ((i as f64 + 1.0) * 0.7 + seed as f64).sin()).collect();
    Tensor::from_vec(v, shape).unwrap()
}

/// The compiled plan of `f` at `args`: its peak bytes, and the number of
/// full-size concatenates and permutes (of `numel` elements) left in it.
fn plan_of<F: anvil::Function>(f: &F, x: &Tensor, numel: usize) -> (usize, usize, String) {
    let plan = anvil::cpu::compile(&anvil::lower(f, x).unwrap()).unwrap();
    let g = plan.graph();
    let copies = g
        .iter()
        .filter(|(_, n)| {
            (n.op.is::<anvil::ops::movement::Concatenate>()
                || n.op.is::<anvil::ops::movement::Permute>())
                && g.ty(n.out()).numel() == numel
        })
        .count();
    (plan.peak_bytes(), copies, format!("{g}"))
}

fn f(x: &Var) -> Var {
    (x.sin() * x.sum_all()).tanh() + x * 0.5
}

#[test]
fn chunked_jacobians_are_written_in_place() {
    let n = 60;
    let x = rand(&[n], 1);
    let result = n * n * 8;
    let want = jacfwd(f).eval(&x).unwrap();
    // Exact chunks (60 = 6 x 10) and a partial last chunk (60 = 8 x 7 + 4).
    for k in [10, 7] {
        for (name, j) in [("jacfwd", jacfwd(f).chunk_size(k)), ("jacrev", jacrev(f).chunk_size(k))]
        {
            let (peak, copies, text) = plan_of(&j, &x, n * n);
            assert_eq!(copies, 0, "{name} chunk {k}: a full-size copy is left\n{text}");
            // (jacrev with exact chunks needs nothing: its stacked chunks are
            // the Jacobian's rows already.)
            if name == "jacfwd" || n % k != 0 {
                assert!(text.contains("placed_scan"), "{name} chunk {k}\n{text}");
            }
            // The result, plus a few chunk-sized values (k x n each).
            assert!(peak <= result + 8 * k * n * 8, "{name} chunk {k}: peak {peak}\n{text}");
            j.eval(&x).unwrap().assert_allclose(&want, 1e-14, 1e-14);
        }
    }
    // Unchunked, for comparison: no loop at all.
    let (_, _, text) = plan_of(&jacfwd(f), &x, n * n);
    assert!(!text.contains("scan"), "{text}");
}

#[test]
fn chunked_vmap_with_several_outputs_and_out_axes() {
    // Two outputs of different shapes, the batch moved to the back of one.
    let g = |x: &Var| vec![x.exp() * x.sum_all(), x.matmul(&x.unsqueeze(-1)).squeeze(&[-1])];
    let xs = rand(&[11, 4], 2);
    for out_axes in [[0, 0], [1, 0]] {
        let want = vmap(g).out_axes(out_axes).eval(&xs).unwrap();
        for k in [2, 3, 5] {
            let v = vmap(g).out_axes(out_axes).chunk_size(k);
            let got = v.eval(&xs).unwrap();
            for (a, b) in got.iter().zip(&want) {
                a.assert_allclose(b, 1e-14, 1e-14);
            }
            let text = format!(
                "{}",
                anvil::cpu::compile(&anvil::lower(&v, &xs).unwrap()).unwrap().graph()
            );
            assert!(text.contains("placed_scan") && !text.contains("concatenate"), "{text}");
        }
    }
}

#[test]
fn nested_and_single_precision_chunked_jacobians() {
    let x = rand(&[9], 3);
    // A Hessian whose inner Jacobian is chunked, and its own chunks.
    let loss = |x: &Var| (x.sin() * x).sum_all() * x.sum_all();
    let want = hessian(loss).eval(&x).unwrap();
    let h = jacfwd(jacrev(loss).chunk_size(4)).chunk_size(2);
    h.eval(&x).unwrap().assert_allclose(&want, 1e-12, 1e-12);
    // f32 and a batch of inputs under vmap.
    let x32 = x.cast(DType::F32);
    let j32 = jacfwd(f).chunk_size(4).eval(&x32).unwrap();
    assert_eq!(j32.dtype(), DType::F32);
    j32.cast(DType::F64).assert_allclose(&jacfwd(f).eval(&x).unwrap(), 1e-5, 1e-5);
    let xs = rand(&[3, 9], 4);
    let vj = vmap(jacrev(f).chunk_size(4)).eval(&xs).unwrap();
    vj.assert_allclose(&vmap(jacrev(f)).eval(&xs).unwrap(), 1e-14, 1e-14);
}
