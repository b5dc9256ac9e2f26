//! This test binary links the plugin's op definitions but not its CPU
//! kernels (`anvil-special-cpu`). The Bessel functions, declared with
//! `unary_elementwise_op!`, need no kernel: every backend runs their block
//! math. Running the cumulative sum, which has a kernel of its own, is a
//! typed error naming the op and what is missing, never a panic. Tracing
//! and transforming work either way, since they need only the rules.

use anvil::prelude::*;
use anvil_special::SpecialExt;

#[test]
fn running_an_op_without_its_kernel_is_an_error_naming_it() {
    let x = Tensor::from_vec(vec![0.5, 1.0], &[2]).unwrap();
    // Elementwise: its own math, no kernel needed.
    let j0 = jit(|x: &Var| x.j0()).eval(&x).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(j0, vec![libm::j0(0.5), libm::j0(1.0)]);
    let err = jit(|x: &Var| x.special_cumsum(0)).eval(&x).unwrap_err();
    match &err {
        Error::MissingRule { op, what, .. } => {
            assert_eq!(op, "special.cumsum");
            assert_eq!(what, "CPU kernel");
        }
        e => panic!("expected MissingRule, got {e:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("special.cumsum") && msg.contains("kernel"), "{msg}");
    // The rules are linked: the graph of a gradient traces fine.
    let g = trace(&grad(|x: &Var| x.j0().sum_all()), &x).unwrap();
    assert!(g.to_string().contains("special.j1"), "{g}");
}
