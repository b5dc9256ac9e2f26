//! This test binary links the plugin's op definitions but not its CPU
//! kernels (`anvil-special-cpu`): using an op is a typed error naming the
//! op and what is missing, never a panic. Tracing and transforming still
//! work, since they need only the rules.

use anvil::prelude::*;
use anvil_special::SpecialExt;

#[test]
fn running_an_op_without_its_kernel_is_an_error_naming_it() {
    let x = Tensor::from_vec(vec![0.5, 1.0], &[2]).unwrap();
    let err = jit(|x: &Var| x.j0()).call(&x).unwrap_err();
    match &err {
        Error::MissingRule { op, what, .. } => {
            assert_eq!(op, "special.j0");
            assert_eq!(what, "CPU kernel");
        }
        e => panic!("expected MissingRule, got {e:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("special.j0") && msg.contains("kernel"), "{msg}");
    // The rules are linked: the graph of its gradient traces fine.
    let g = trace(&grad(|x: &Var| x.j0().sum_all()), &x).unwrap();
    assert!(g.to_string().contains("special.j1"), "{g}");
    let e = jit(|x: &Var| x.cumsum(0)).call(&x).unwrap_err().to_string();
    assert!(e.contains("special.cumsum"), "{e}");
}
