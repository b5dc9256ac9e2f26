//! Data in from faer, ndarray and nalgebra, a Jacobian in anvil, data back
//! out; the directions documented as zero-copy share buffers (pointer
//! equality), the others copy.

use anvil::prelude::*;

/// f(x) = A·tanh(x) with A fixed: J = A·diag(1 - tanh²(x)).
fn expected_jacobian(a: &[f64], x: &[f64], n: usize) -> Vec<f64> {
    let mut j = vec![0.0; n * n];
    for r in 0..n {
        for c in 0..n {
            j[r * n + c] = a[r * n + c] * (1.0 - x[c].tanh().powi(2));
        }
    }
    j
}

fn jac(a: &Tensor, x: &Tensor) -> Tensor {
    let a = a.clone();
    let f = move |x: &Var| {
        x.constant_like(a.clone()).matmul(&x.tanh().reshape(&[-1, 1])).reshape(&[-1])
    };
    jacfwd(f).eval(x).unwrap()
}

#[test]
fn faer_ndarray_and_nalgebra_in_and_out_around_a_jacobian() {
    let n = 4;
    let a_data: Vec<f64> = (0..n * n).map(|k| ((k * 7 % 5) as f64 - 2.0) / 3.0).collect();
    let x_data: Vec<f64> = (0..n).map(|k| 0.3 * k as f64 - 0.4).collect();
    let expected = expected_jacobian(&a_data, &x_data, n);

    // ndarray: in without a copy (standard layout), the Jacobian out
    // without a copy (its buffer is not shared).
    let a_nd = ndarray::Array2::from_shape_vec((n, n), a_data.clone()).unwrap();
    let a_ptr = a_nd.as_ptr();
    let a = Tensor::from(a_nd);
    assert!(std::ptr::eq(a.as_slice::<f64>().unwrap().as_ptr(), a_ptr), "ndarray -> Tensor copied");
    let x = Tensor::from(ndarray::Array1::from_vec(x_data.clone()));
    let j = jac(&a, &x);
    let j_ptr = j.as_slice::<f64>().unwrap().as_ptr();
    let view = j.ndarray_view::<f64>().unwrap();
    assert!(std::ptr::eq(view.as_ptr(), j_ptr), "Tensor -> ArrayView copied");
    let j_nd = j.into_ndarray::<f64>().unwrap();
    assert!(std::ptr::eq(j_nd.as_ptr(), j_ptr), "Tensor -> Array copied an unshared buffer");
    for (got, want) in j_nd.iter().zip(&expected) {
        assert!((got - want).abs() < 1e-14);
    }

    // faer: in by copy (column storage), out as a zero-copy view and by copy.
    let a_faer = faer::Mat::<f64>::from_fn(n, n, |r, c| a_data[r * n + c]);
    let a = Tensor::from(&a_faer);
    let j = jac(&a, &x);
    let view = j.faer_view::<f64>().unwrap();
    assert!(std::ptr::eq(view.as_ptr(), j.as_slice::<f64>().unwrap().as_ptr()));
    let j_faer = faer::Mat::<f64>::try_from(&j).unwrap();
    for r in 0..n {
        for c in 0..n {
            assert!((j_faer[(r, c)] - expected[r * n + c]).abs() < 1e-14);
        }
    }

    // nalgebra: the matrix in by copy, the vector in and out without copies,
    // the Jacobian out as a zero-copy view and by copy.
    let a_na = nalgebra::DMatrix::from_fn(n, n, |r, c| a_data[r * n + c]);
    let a = Tensor::from(&a_na);
    let x_na = nalgebra::DVector::from_vec(x_data.clone());
    let x_ptr = x_na.as_ptr();
    let x = Tensor::from(x_na);
    assert!(std::ptr::eq(x.as_slice::<f64>().unwrap().as_ptr(), x_ptr), "DVector -> Tensor copied");
    let j = jac(&a, &x);
    let view = j.nalgebra_view::<f64>().unwrap();
    assert!(std::ptr::eq(view.as_ptr(), j.as_slice::<f64>().unwrap().as_ptr()));
    let j_na = nalgebra::DMatrix::<f64>::try_from(&j).unwrap();
    assert_eq!(view, j_na);
    // The Jacobian's rows, checked against the closed form; a Newton-like
    // use: nalgebra solves with it directly.
    for r in 0..n {
        for c in 0..n {
            assert!((j_na[(r, c)] - expected[r * n + c]).abs() < 1e-14);
        }
    }
    let back = x.into_dvector::<f64>().unwrap();
    assert!(std::ptr::eq(back.as_ptr(), x_ptr), "Tensor -> DVector copied an unshared buffer");
}

#[test]
fn npy_and_serde_round_trip_through_a_computation() {
    let dir = std::env::temp_dir().join(format!("anvil-interop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("x.npy");
    let x = Tensor::from_vec(vec![0.5, -1.0, 2.0], &[3]).unwrap();
    x.save_npy(&path).unwrap();
    let y = grad(|x: &Var| (x * x).sum_all()).eval(Tensor::load_npy(&path).unwrap()).unwrap();
    assert_eq!(y.to_vec::<f64>().unwrap(), vec![1.0, -2.0, 4.0]);
    let json = serde_json::to_string(&y).unwrap();
    assert_eq!(serde_json::from_str::<Tensor>(&json).unwrap(), y);
    std::fs::remove_dir_all(&dir).unwrap();
}
