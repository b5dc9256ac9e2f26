//! NumPy subscripts (`x.i(ix![...])`), JAX's functional updates
//! (`x.at(ix![...]).set/add/mul/min/max`), the all-axes reductions, `powi`
//! and `jvp_at`, checked against values computed independently: loops
//! over the data that follow NumPy's rules written out by hand, Jacobians
//! worked out by hand, `hessian`.

use anvil::prelude::*;

/// `0, 1, ..., 59` as a `[3, 4, 5]` tensor: element `[i, j, k]` is `20 i + 5 j + k`.
fn x345() -> Tensor {
    Tensor::from_vec((0..60).map(f64::from).collect(), &[3, 4, 5]).unwrap()
}

fn val(i: usize, j: usize, k: usize) -> f64 {
    (20 * i + 5 * j + k) as f64
}

fn ints(v: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.cast(DType::F64).to_vec::<f64>().unwrap()
}

/// `x[index]` of a one-argument subscript, run.
fn read(x: &Tensor, f: impl Fn(&Var) -> Var) -> Tensor {
    (|x: &Var| f(x)).eval(x).unwrap()
}

/// An index counted from the end when negative, for the reference loops.
fn wrap(k: i64, n: usize) -> i64 {
    if k < 0 {
        k + n as i64
    } else {
        k
    }
}

#[test]
fn basic_subscripts_follow_numpy() {
    let x = x345();
    // x[1, 1::2, ::-2]
    let got = read(&x, |x| x.i(ix![1, 1..;2, ..;-2]));
    let want: Vec<f64> = [1, 3].iter().flat_map(|&j| [4, 2, 0].map(|k| val(1, j, k))).collect();
    assert_eq!((got.shape(), f64s(&got)), (&[2, 3][..], want));
    // x[-1:0:-1]: rows 2 and 1.
    let got = read(&x, |x| x.i(ix![-1..0;-1]));
    let want: Vec<f64> = [2, 1]
        .iter()
        .flat_map(|&i| (0..4).flat_map(move |j| (0..5).map(move |k| val(i, j, k))))
        .collect();
    assert_eq!((got.shape(), f64s(&got)), (&[2, 4, 5][..], want));
    // x[:, None, 5:1:-2]: the start clamped to 3, one element.
    let got = read(&x, |x| x.i(ix![.., NewAxis, 5..1;-2]));
    let want: Vec<f64> = (0..3).flat_map(|i| (0..5).map(move |k| val(i, 3, k))).collect();
    assert_eq!((got.shape(), f64s(&got)), (&[3, 1, 1, 5][..], want));
    // x[..., -1] and x[0, ..., None]
    let got = read(&x, |x| x.i(ix![..., -1]));
    let want: Vec<f64> = (0..3).flat_map(|i| (0..4).map(move |j| val(i, j, 4))).collect();
    assert_eq!((got.shape(), f64s(&got)), (&[3, 4][..], want));
    let got = read(&x, |x| x.i(ix![0, ..., NewAxis]));
    assert_eq!(got.shape(), &[4, 5, 1]);
    assert_eq!(f64s(&got), (0..20).map(f64::from).collect::<Vec<_>>());
    // x[1:3, :-1] written with inclusive ranges.
    let got = read(&x, |x| x.i(ix![1..=2, ..=-2]));
    let want: Vec<f64> =
        (1..3).flat_map(|i| (0..3).flat_map(move |j| (0..5).map(move |k| val(i, j, k)))).collect();
    assert_eq!((got.shape(), f64s(&got)), (&[2, 3, 5][..], want));
    // x[2, 3, 4]: a scalar; x[] is x.
    let got = read(&x, |x| x.i(ix![2, 3, 4]));
    assert_eq!((got.shape(), f64s(&got)), (&[][..], vec![59.0]));
    assert_eq!(f64s(&read(&x, |x| x.i(ix![]))), f64s(&x));
    // Indices of any integer type; a computed expression.
    let (a, b) = (1usize, -1i64);
    let got = read(&x, |x| x.i(ix![a, b]));
    assert_eq!(f64s(&got), (0..5).map(|k| val(1, 3, k)).collect::<Vec<_>>());
}

#[test]
fn array_subscripts_follow_numpy_placement() {
    let x = x345();
    // x[idx, :, 2]: the array and the integer are separated, so their
    // broadcast axes ([2, 2]) come first: out[a, b, j] = x[idx[a, b], j, 2].
    let idx = [0i64, 2, -1, 1];
    let f = |x: &Var, i: &Var| x.i(ix![i, .., 2]);
    let got = f.eval((&x, &ints(&idx, &[2, 2]))).unwrap();
    let want: Vec<f64> =
        idx.iter().flat_map(|&k| (0..4).map(move |j| val(wrap(k, 3) as usize, j, 2))).collect();
    assert_eq!((got.shape(), f64s(&got)), (&[2, 2, 4][..], want.clone()));
    // x[None, idx, :, 2]: still separated, so still first (before the new axis).
    let f = |x: &Var, i: &Var| x.i(ix![NewAxis, i, .., 2]);
    let got = f.eval((&x, &ints(&idx, &[2, 2]))).unwrap();
    assert_eq!((got.shape(), f64s(&got)), (&[2, 2, 1, 4][..], want));
    // x[:, r, c] with r [3] and c [2, 1]: adjacent, broadcast to [2, 3] in place.
    let (r, c) = ([0i64, 3, -1], [1i64, 4]);
    let f = |x: &Var, r: &Var, c: &Var| x.i(ix![.., r, c]);
    let got = f.eval((&x, &ints(&r, &[3]), &ints(&c, &[2, 1]))).unwrap();
    let mut want = Vec::new();
    for i in 0..3 {
        for &ca in &c {
            for &rb in &r {
                want.push(val(i, wrap(rb, 4) as usize, ca as usize));
            }
        }
    }
    assert_eq!((got.shape(), f64s(&got)), (&[3, 2, 3][..], want));
    // x[1, r]: an integer beside an array is adjacent: [3, 5].
    let got = (|x: &Var, r: &Var| x.i(ix![1, r])).eval((&x, &ints(&r, &[3]))).unwrap();
    let want: Vec<f64> =
        r.iter().flat_map(|&j| (0..5).map(move |k| val(1, wrap(j, 4) as usize, k))).collect();
    assert_eq!((got.shape(), f64s(&got)), (&[3, 5][..], want));
    // x[i0, 1:3, i2]: separated arrays, their axes first: [2, 2].
    let (i0, i2) = ([2i64, 0], [4i64, -5]);
    let f = |x: &Var, a: &Var, b: &Var| x.i(ix![a, 1..3, b]);
    let got = f.eval((&x, &ints(&i0, &[2]), &ints(&i2, &[2]))).unwrap();
    let want: Vec<f64> = (0..2)
        .flat_map(|t| (1..3).map(move |j| val(i0[t] as usize, j, wrap(i2[t], 5) as usize)))
        .collect();
    assert_eq!((got.shape(), f64s(&got)), (&[2, 2][..], want));
    // A rank-0 traced index drops the axis: x[k] for k = 2.
    let got = (|x: &Var, k: &Var| x.i(ix![k])).eval((&x, &Tensor::scalar(2i64))).unwrap();
    assert_eq!(got.shape(), &[4, 5]);
    assert_eq!(f64s(&got), (40..60).map(f64::from).collect::<Vec<_>>());
}

#[test]
fn traced_indices_out_of_range_are_clamped_on_read() {
    let x = x345();
    // Axis 0 has 3 rows: 7 -> 2, -9 -> -6 -> 0, 3 -> 2, -1 -> 2.
    let got = (|x: &Var, i: &Var| x.i(ix![i, 0, 0])).eval((&x, &ints(&[7, -9, 3, -1], &[4])));
    assert_eq!(f64s(&got.unwrap()), vec![40.0, 0.0, 40.0, 40.0]);
}

#[test]
fn static_subscript_errors_name_axis_index_and_size() {
    let x = x345();
    let err = |f: fn(&Var) -> Var| (|x: &Var| f(x)).eval(&x).unwrap_err().to_string();
    let e = err(|x| x.i(ix![3]));
    assert!(e.contains("index 3") && e.contains("axis 0") && e.contains("size 3"), "{e}");
    let e = err(|x| x.i(ix![.., -5]));
    assert!(e.contains("index -5") && e.contains("axis 1") && e.contains("size 4"), "{e}");
    let e = err(|x| x.at(ix![.., .., 5]).set(0.0));
    assert!(e.contains("index 5") && e.contains("axis 2") && e.contains("size 5"), "{e}");
    let e = err(|x| x.i(ix![..., 0, ...]));
    assert!(e.contains("one ellipsis"), "{e}");
    let e = err(|x| x.i(ix![0, 0, 0, 0]));
    assert!(e.contains("4 indices") && e.contains("rank 3"), "{e}");
    let e = err(|x| x.i(ix![x]));
    assert!(e.contains("f64") && e.contains("i64"), "{e}");
    let e = err(|x| x.i(ix![..;0]));
    assert!(e.contains("step"), "{e}");
    // An update that does not broadcast to x[0] ([4, 5]).
    let e = err(|x| x.at(ix![0]).set(x.i(ix![0, .., 1..3])));
    assert!(e.contains("at"), "{e}");
}

/// `x` ([rows, cols], row-major) with `u` ([m, cols]) combined into the
/// rows `idx` by `op`, updates with an index out of range dropped: the
/// reference loop of `x.at(ix![idx]).<op>(u)`.
fn rows_update(
    x: &[f64],
    cols: usize,
    idx: &[i64],
    u: &[f64],
    op: fn(f64, f64) -> f64,
) -> Vec<f64> {
    let rows = x.len() / cols;
    let mut out = x.to_vec();
    for (j, &k) in idx.iter().enumerate() {
        let r = wrap(k, rows);
        if (0..rows as i64).contains(&r) {
            for c in 0..cols {
                let o = &mut out[r as usize * cols + c];
                *o = op(*o, u[j * cols + c]);
            }
        }
    }
    out
}

#[test]
fn updates_at_traced_rows_accumulate_and_drop_like_jax() {
    let x = Tensor::from_vec(vec![1.5, -2.0, 0.5, 3.0, -1.0, 2.5, 4.0, -0.5], &[4, 2]).unwrap();
    // Row 0 three times (0, -4, 0), row 3 (-1) once; 7 and -6 are out of range.
    let idx = [0i64, 2, -4, -1, 7, -6, 0];
    let u: Vec<f64> = (0..14).map(|k| 0.25 * k as f64 - 1.3).collect();
    let ut = Tensor::from_vec(u.clone(), &[7, 2]).unwrap();
    let it = ints(&idx, &[7]);
    let xs = f64s(&x);
    type Upd = fn(&Var, &Var, &Var) -> Var;
    type Reference = fn(f64, f64) -> f64;
    let cases: [(&str, Upd, Reference); 4] = [
        ("add", |x, i, u| x.at(ix![i]).add(u), |a, b| a + b),
        ("mul", |x, i, u| x.at(ix![i]).mul(u), |a, b| a * b),
        ("min", |x, i, u| x.at(ix![i]).min(u), f64::min),
        ("max", |x, i, u| x.at(ix![i]).max(u), f64::max),
    ];
    for (name, f, op) in cases {
        let got = f.eval((&x, &it, &ut)).unwrap();
        let want = Tensor::from_vec(rows_update(&xs, 2, &idx, &u, op), &[4, 2]).unwrap();
        assert!(got.allclose(&want, 1e-15, 1e-15), "{name}: {got} vs {want}");
    }
    // set: unique rows replaced; a repeated one gets its last update, as NumPy's.
    let got = (|x: &Var, i: &Var, u: &Var| x.at(ix![i]).set(u)).eval((&x, &it, &ut)).unwrap();
    let want = rows_update(&xs, 2, &idx, &u, |_, b| b);
    assert_eq!(f64s(&got), want, "{got}");
    // Its gradient reaches the winning updates only: entries 1, 3 and 6
    // (row 0's last, rows 2 and 3); 0 and 2 are overwritten, 4 and 5 dropped.
    let total = |u: &Var| {
        let (xv, iv) = (u.constant_like(x.clone()), u.constant_like(it.clone()));
        xv.at(ix![&iv]).set(u).sum_all()
    };
    let g = grad(total).eval(&ut).unwrap();
    let wins = [0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0];
    let want: Vec<f64> = wins.iter().flat_map(|&w| [w, w]).collect();
    assert_eq!(f64s(&g), want);
    // An empty axis: every index is out of range, every update dropped (a
    // read of it by an array stays an error, as in JAX).
    let empty = Tensor::zeros(&[0, 2]).unwrap();
    let two = ints(&[0, 1], &[2]);
    let set = |x: &Var, i: &Var| x.at(ix![i]).set(1.0);
    let got = set.eval((&empty, &two)).unwrap();
    assert_eq!(got.shape(), &[0, 2]);
    assert!((|x: &Var, i: &Var| x.i(ix![i])).eval((&empty, &two)).is_err());
    let floats = Tensor::from_vec(vec![0.0, 1.0], &[2]).unwrap();
    assert!(set.eval((&empty, &floats)).is_err(), "f64 indices are still refused");
}

#[test]
fn static_updates_match_loops() {
    let x = x345();
    // x[1, ::2] = v, v of shape [5] broadcast over the 2 selected rows.
    let v: Vec<f64> = (0..5).map(|k| -(k as f64)).collect();
    let f = |x: &Var, v: &Var| x.at(ix![1, ..;2]).set(v);
    let got = f.eval((&x, &Tensor::from_vec(v.clone(), &[5]).unwrap())).unwrap();
    let mut want = f64s(&x);
    for j in [0, 2] {
        for k in 0..5 {
            want[20 + 5 * j + k] = v[k];
        }
    }
    assert_eq!(f64s(&got), want);
    // x[..., ::-2] += 1, x[:, None, 0] *= 2 (a new axis in the index), scalars.
    let got = read(&x, |x| x.at(ix![..., ..;-2]).add(1.0));
    let want: Vec<f64> =
        (0..60).map(|p| p as f64 + if p % 5 % 2 == 0 { 1.0 } else { 0.0 }).collect();
    assert_eq!(f64s(&got), want);
    let got = read(&x, |x| x.at(ix![.., NewAxis, 0]).mul(2.0));
    let want: Vec<f64> = (0..60).map(|p| p as f64 * if p % 20 < 5 { 2.0 } else { 1.0 }).collect();
    assert_eq!(f64s(&got), want);
    // min/max with a value broadcast from [4, 1], get.
    let col = Tensor::from_vec(vec![10.0, 30.0, 8.0, 57.0], &[4, 1]).unwrap();
    let f = |x: &Var, c: &Var| vec![x.at(ix![2]).min(c), x.at(ix![0]).max(c), x.at(ix![2]).get()];
    let out = f.eval((&x, &col)).unwrap();
    let cv = [10.0, 30.0, 8.0, 57.0];
    let want_min: Vec<f64> = (0..60)
        .map(|p| if p >= 40 { (p as f64).min(cv[(p % 20) / 5]) } else { p as f64 })
        .collect();
    let want_max: Vec<f64> =
        (0..60).map(|p| if p < 20 { (p as f64).max(cv[p / 5]) } else { p as f64 }).collect();
    assert_eq!(f64s(&out[0]), want_min);
    assert_eq!(f64s(&out[1]), want_max);
    assert_eq!(f64s(&out[2]), (40..60).map(f64::from).collect::<Vec<_>>());
    // Integer operands keep their dtype; an f64 update is converted.
    let xi = ints(&[1, 2, 3, 4], &[4]);
    let got = (|x: &Var| x.at(ix![1..3]).add(10i64)).eval(&xi).unwrap();
    assert_eq!((got.dtype(), got.to_vec::<i64>().unwrap()), (DType::I64, vec![1, 12, 13, 4]));
}

#[test]
fn subscripts_differentiate_as_worked_out_by_hand() {
    // f(x, u) = sum(w * x.at[idx].add(u)) + sum(x[1:, 0] ** 2):
    // df/dx = w + 2 x on rows 1.. of column 0, df/du[j] = w[idx[j]] (0 if dropped).
    let x = Tensor::from_vec(vec![0.5, -1.0, 2.0, 0.25, -0.75, 1.5], &[3, 2]).unwrap();
    let w = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]).unwrap();
    let idx = ints(&[2, 0, 2, 5], &[4]);
    let u = Tensor::from_vec(vec![0.1; 8], &[4, 2]).unwrap();
    let f = |x: &Var, u: &Var, i: &Var, w: &Var| {
        (w * &x.at(ix![i]).add(u)).sum_all() + x.i(ix![1.., 0]).square().sum_all()
    };
    let g = grad(f).argnums(&[0, 1]).eval((&x, &u, &idx, &w)).unwrap();
    let (gx, gu): (Tensor, Tensor) = (g.part(0).unwrap(), g.part(1).unwrap());
    let xs = f64s(&x);
    let want_x = vec![1.0, 2.0, 3.0 + 2.0 * xs[2], 4.0, 5.0 + 2.0 * xs[4], 6.0];
    let want_u = vec![5.0, 6.0, 1.0, 2.0, 5.0, 6.0, 0.0, 0.0];
    assert_eq!(f64s(&gx), want_x);
    assert_eq!(f64s(&gu), want_u);
    // Products at repeated rows: d/du of prod over the repeats, by hand.
    // x.at[[1, 1]].mul([a, b]) on x = [x0, x1]: result [x0, x1 a b].
    let f = |u: &Var, x: &Var, i: &Var| x.at(ix![i]).mul(u);
    let (xv, uv) = (Tensor::vector(&[2.0, 3.0]), Tensor::vector(&[5.0, 7.0]));
    let j = jacrev(f).eval((&uv, &xv, &ints(&[1, -1], &[2]))).unwrap();
    assert_eq!(f64s(&j), vec![0.0, 0.0, 3.0 * 7.0, 3.0 * 5.0]);
    let jf = jacfwd(f).eval((&uv, &xv, &ints(&[1, -1], &[2]))).unwrap();
    assert_eq!(f64s(&jf), f64s(&j));
}

#[test]
fn subscripts_vmap_like_a_loop() {
    // Batched operand and batched indices, nested: y[b, c] = x[b, idx[b, c], 1..]
    // then .at[idx[b, c]].add(1) on the same row.
    let x = Tensor::from_vec((0..24).map(|k| 0.5 * k as f64).collect(), &[2, 4, 3]).unwrap();
    let idx = ints(&[0, 3, -1, 1, 2, -4], &[2, 3]);
    let inner = |x: &Var, i: &Var| x.i(ix![i, 1..]) + x.at(ix![i]).add(1.0).i(ix![i, 0]);
    let got = vmap(vmap(inner).in_axes([None, Some(0)])).eval((&x, &idx)).unwrap();
    assert_eq!(got.shape(), &[2, 3, 2]);
    let xs = f64s(&x);
    let ids = idx.to_vec::<i64>().unwrap();
    let mut want = Vec::new();
    for b in 0..2 {
        for c in 0..3 {
            let r = wrap(ids[b * 3 + c], 4) as usize;
            for k in 1..3 {
                want.push(xs[b * 12 + r * 3 + k] + xs[b * 12 + r * 3] + 1.0);
            }
        }
    }
    assert_eq!(f64s(&got), want);
}

#[test]
fn all_axes_reductions_and_powi() {
    let x = Tensor::from_vec(vec![0.5, -1.5, 2.0, 1.0, -0.25, 3.0], &[2, 3]).unwrap();
    let v = f64s(&x);
    let f = |x: &Var| {
        vec![
            x.max_all(),
            x.min_all(),
            x.prod_all(),
            x.mean_all(),
            x.var_all(),
            x.std_all(),
            x.logsumexp_all(),
            x.argmax_all(),
            x.argmin_all(),
            x.powi(3).sum_all(),
            x.gt(&x.full_like(2.5)).any_all(),
            x.gt(&x.full_like(-2.0)).all_all(),
        ]
    };
    let out: Vec<f64> = f.eval(&x).unwrap().iter().map(|t| f64s(t)[0]).collect();
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|a| (a - mean) * (a - mean)).sum::<f64>() / n;
    let lse = v.iter().map(|a| a.exp()).sum::<f64>().ln();
    let want = [
        3.0,
        -1.5,
        v.iter().product(),
        mean,
        var,
        var.sqrt(),
        lse,
        5.0,
        1.0,
        v.iter().map(|a| a * a * a).sum(),
        1.0,
        1.0,
    ];
    for (k, (g, w)) in out.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-14 * w.abs().max(1.0), "reduction {k}: {g} vs {w}");
    }
    // Every all-axes reduction of a rank-0 result, under grad: the
    // gradient of prod_all is prod / x; of powi(-2) is -2 x^-3.
    let g = grad(|x: &Var| x.prod_all()).eval(&x).unwrap();
    let p: f64 = v.iter().product();
    let want: Vec<f64> = v.iter().map(|a| p / a).collect();
    assert!(g.allclose(&Tensor::from_vec(want, &[2, 3]).unwrap(), 1e-14, 0.0));
    let g = grad(|x: &Var| x.powi(-2).sum_all()).eval(&x).unwrap();
    let want: Vec<f64> = v.iter().map(|a| -2.0 / (a * a * a)).collect();
    assert!(g.allclose(&Tensor::from_vec(want, &[2, 3]).unwrap(), 1e-14, 0.0));
    // powi on integers is exact; negative bases are fine.
    let xi = ints(&[-3, 2, 0], &[3]);
    assert_eq!((|x: &Var| x.powi(3)).eval(&xi).unwrap().to_vec::<i64>().unwrap(), vec![-27, 8, 0]);
}

/// `f(x) = sum(sin(x) * x²) + x0 x1 x2`, whose Hessian the tests compare with.
fn scalar_f(x: &Var) -> Var {
    (x.sin() * x.square()).sum_all() + x.prod_all()
}

#[test]
fn jvp_at_inside_traces_gives_hessian_vector_products() {
    let x = Tensor::vector(&[0.3, -0.7, 1.1]);
    let v = Tensor::vector(&[1.0, -2.0, 0.5]);
    let h = hessian(scalar_f).eval(&x).unwrap();
    let (hs, vs) = (f64s(&h), f64s(&v));
    let hv: Vec<f64> = (0..3).map(|i| (0..3).map(|j| hs[i * 3 + j] * vs[j]).sum()).collect();
    let hv = Tensor::from_vec(hv, &[3]).unwrap();
    // Forward over reverse: the tangent of the gradient along v.
    let fwd_rev = |x: &Var, v: &Var| jvp_at(grad(scalar_f), x, v).1;
    assert!(fwd_rev.eval((&x, &v)).unwrap().allclose(&hv, 1e-13, 1e-13));
    // Reverse over forward: grad of the directional derivative (jvp_at under grad).
    let rev_fwd = |x: &Var, v: &Var| jvp_at(scalar_f, x, v).1;
    let got = grad(rev_fwd).eval((&x, &v)).unwrap();
    assert!(got.allclose(&hv, 1e-13, 1e-13), "{got} vs {hv}");
    // The primal comes back too; several arguments, one without a tangent.
    let f2 = |x: &Var, s: &Var| (x * s).sum_all();
    let s = Tensor::scalar(2.0);
    let both = |x: &Var, s: &Var, v: &Var| {
        let (y, t) = jvp_at(f2, (x, s), (Some(v), None::<&Var>));
        vec![y, t]
    };
    let out = both.eval((&x, &s, &v)).unwrap();
    let xs = f64s(&x);
    assert!((f64s(&out[0])[0] - 2.0 * xs.iter().sum::<f64>()).abs() < 1e-15);
    assert!((f64s(&out[1])[0] - 2.0 * vs.iter().sum::<f64>()).abs() < 1e-15);
    // A tangent that does not fit its primal is an error of the call.
    let bad = |x: &Var| jvp_at(scalar_f, x, x.i(ix![..2])).1;
    let e = bad.eval(&x).unwrap_err().to_string();
    assert!(e.contains("jvp") && e.contains("tangent"), "{e}");
    // Under vmap too: one Hessian-vector product per direction.
    let vs2 = Tensor::from_vec(vec![1.0, -2.0, 0.5, 0.0, 1.0, 0.0], &[2, 3]).unwrap();
    let got = vmap(fwd_rev).in_axes([None, Some(0)]).eval((&x, &vs2)).unwrap();
    let mut want = f64s(&hv);
    want.extend([hs[1], hs[4], hs[7]]);
    assert!(got.allclose(&Tensor::from_vec(want, &[2, 3]).unwrap(), 1e-13, 1e-13), "{got}");
}

#[test]
fn subscript_programs_vmap_like_loops_over_any_argument() {
    use anvil_testing::check_vmap;
    // A program mixing reads and every update: x [4, 3], idx [3], u [3].
    fn prog(x: &Var, idx: &Var, u: &Var) -> Var {
        let y = x.at(ix![idx, -1]).add(u).at(ix![1..;2, NewAxis]).mul(2.0);
        let z = y.at(ix![idx]).max(x.i(ix![0])).at(ix![.., ..;-2]).set(u.i(ix![..2]));
        z.at(ix![-1, idx]).min(u).i(ix![idx, ..]) + y.i(ix![..., 1]).sum_all()
    }
    let x =
        Tensor::from_vec((0..24).map(|k| (k as f64 * 0.37).sin()).collect(), &[2, 4, 3]).unwrap();
    let idx = ints(&[3, 0, -1, 2, 7, -5], &[2, 3]);
    let u = Tensor::from_vec(vec![0.3, -0.8, 0.5, 0.1, 0.9, -0.2], &[2, 3]).unwrap();
    let (x0, i0, u0) = (
        x.select_axis(0, 0).unwrap(),
        idx.select_axis(0, 1).unwrap(),
        u.select_axis(0, 0).unwrap(),
    );
    // Every argument batched, each alone, and pairs.
    let cases: [(&[Tensor; 3], [Option<usize>; 3]); 4] = [
        (&[x.clone(), idx.clone(), u.clone()], [Some(0), Some(0), Some(0)]),
        (&[x.clone(), i0.clone(), u0.clone()], [Some(0), None, None]),
        (&[x0.clone(), idx.clone(), u0.clone()], [None, Some(0), None]),
        (&[x0.clone(), i0.clone(), u.clone()], [None, None, Some(0)]),
    ];
    for (args, axes) in cases {
        check_vmap(&prog, args, &axes, 1e-14, 1e-14).unwrap_or_else(|e| panic!("{axes:?}: {e}"));
    }
}

#[test]
fn jacobians_of_subscripts_agree_with_the_hand_worked_one() {
    // f(x) = x.at[[0, 2]].set(x[1:3] ** 2)[::-1] on x in R^3: the update
    // gives [x1², x1, x2²], reversed f = [x2², x1, x1²].
    let f = |x: &Var| {
        let idx = x.constant_like(ints(&[0, 2], &[2]));
        x.at(ix![&idx]).set(x.i(ix![1..3]).square()).i(ix![..;-1])
    };
    let x = Tensor::vector(&[0.5, -1.5, 2.0]);
    let want = [0.0, 0.0, 4.0, 0.0, 1.0, 0.0, 0.0, -3.0, 0.0];
    let jf = jacfwd(f).eval(&x).unwrap();
    let jr = jacrev(f).eval(&x).unwrap();
    assert_eq!(jf.shape(), &[3, 3]);
    assert_eq!(f64s(&jf), want);
    assert_eq!(f64s(&jr), want);
    // Second derivatives through a gather: hessian of sum(x[idx]³) with a
    // repeated index is diag(6 x_k · count_k).
    let g = |x: &Var| {
        let idx = x.constant_like(ints(&[2, 2, 0], &[3]));
        x.i(ix![&idx]).powi(3).sum_all()
    };
    let h = hessian(g).eval(&x).unwrap();
    assert_eq!(f64s(&h), vec![3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 24.0]);
}

#[test]
fn many_repeated_traced_positions_combine_like_a_loop() {
    // 23 updates into 5 elements, positions from -7 to 7 (some dropped),
    // in a scrambled order: every combination against the reference loop.
    let mut state = 12345u64;
    let mut next = move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) as i64
    };
    let idx: Vec<i64> = (0..23).map(|_| next() % 15 - 7).collect();
    let u: Vec<f64> = (0..23).map(|_| (next() % 1000) as f64 / 500.0 - 1.0).collect();
    let xs = vec![0.5, -1.25, 2.0, 0.75, -0.5];
    let (x, it) = (Tensor::vector(&xs), ints(&idx, &[23]));
    let ut = Tensor::vector(&u);
    type Upd = fn(&Var, &Var, &Var) -> Var;
    type Reference = fn(f64, f64) -> f64;
    let cases: [(&str, Upd, Reference); 4] = [
        ("add", |x, i, u| x.at(ix![i]).add(u), |a, b| a + b),
        ("mul", |x, i, u| x.at(ix![i]).mul(u), |a, b| a * b),
        ("min", |x, i, u| x.at(ix![i]).min(u), f64::min),
        ("max", |x, i, u| x.at(ix![i]).max(u), f64::max),
    ];
    for (name, f, op) in cases {
        let got = f.eval((&x, &it, &ut)).unwrap();
        let want = Tensor::from_vec(rows_update(&xs, 1, &idx, &u, op), &[5]).unwrap();
        assert!(got.allclose(&want, 1e-14, 1e-14), "{name}: {got} vs {want} ({idx:?})");
    }
}

#[test]
fn fixed_lists_and_tensors_index_like_arrays() {
    let x = x345();
    let rows = ints(&[2, 0], &[2]);
    // x[[2, 0], 1], x[:, [-1, 0, -1], 4] (a list, checked) and x[rows] (a captured tensor).
    let f = |x: &Var| {
        vec![x.i(ix![[2, 0], 1]), x.i(ix![.., vec![-1, 0, -1], 4]), x.at(ix![&rows, 0, 0]).add(1.0)]
    };
    let out = f.eval(&x).unwrap();
    let want: Vec<f64> = [2, 0].iter().flat_map(|&i| (0..5).map(move |k| val(i, 1, k))).collect();
    assert_eq!((out[0].shape(), f64s(&out[0])), (&[2, 5][..], want));
    let want: Vec<f64> = (0..3).flat_map(|i| [3, 0, 3].map(|j| val(i, j, 4))).collect();
    assert_eq!((out[1].shape(), f64s(&out[1])), (&[3, 3][..], want));
    let mut want = f64s(&x);
    want[0] += 1.0;
    want[40] += 1.0;
    assert_eq!(f64s(&out[2]), want);
    // A list entry out of range is an error naming it, as an integer is.
    let e = (|x: &Var| x.i(ix![.., [1, 4]])).eval(&x).unwrap_err().to_string();
    assert!(e.contains("index 4") && e.contains("axis 1") && e.contains("size 4"), "{e}");
}

/// The names of the ops of `f`'s graph at `x`, parameters aside.
fn ops_of(f: impl Fn(&Var) -> Var, x: &Tensor) -> Vec<&'static str> {
    let g = trace(&|x: &Var| f(x), x).unwrap();
    g.iter().map(|(_, n)| n.op.name()).filter(|n| *n != "param").collect()
}

#[test]
fn a_static_read_is_one_slice_and_one_reshape() {
    let x = x345();
    assert_eq!(ops_of(|x| x.i(ix![1.., NewAxis, ..;-2, -1]), &x), ["slice", "reshape"]);
    assert_eq!(ops_of(|x| x.i(ix![..., 0..5]), &x), Vec::<&str>::new());
    assert_eq!(ops_of(|x| x.i(ix![..., 0..4]), &x), ["slice"]);
    assert_eq!(ops_of(|x| x.i(ix![.., NewAxis]), &x), ["reshape"]);
}
