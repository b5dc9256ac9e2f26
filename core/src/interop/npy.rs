//! `.npy` files (feature `npy`), through the `npyz` crate.

use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use std::io::{Read, Write};
use std::path::Path;

fn io(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Io { what: what.to_string(), msg: e.to_string() }
}

/// Row-major data from elements stored in Fortran (column-major) order.
fn c_order<T: Copy>(data: Vec<T>, shape: &[usize]) -> Vec<T> {
    let n = data.len();
    let rank = shape.len();
    if rank < 2 || n == 0 {
        return data;
    }
    let mut out = Vec::with_capacity(n);
    let mut index = vec![0usize; rank];
    for _ in 0..n {
        // Column-major offset of the row-major position `index`.
        let (mut offset, mut stride) = (0, 1);
        for (i, d) in index.iter().zip(shape) {
            offset += i * stride;
            stride *= d;
        }
        out.push(data[offset]);
        for axis in (0..rank).rev() {
            index[axis] += 1;
            if index[axis] < shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    out
}

fn read_as<T: Element + npyz::Deserialize, R: Read>(
    file: npyz::NpyFile<R>,
    shape: &[usize],
    what: &str,
) -> Result<Tensor> {
    let fortran = file.order() == npyz::Order::Fortran;
    let data: Vec<T> = file.into_vec().map_err(|e| io(what, e))?;
    let data = if fortran { c_order(data, shape) } else { data };
    Tensor::from_vec(data, shape)
}

impl Tensor {
    /// Reads a tensor from `.npy` data (NumPy's format): dtypes `<f8`,
    /// `<f4`, `<i8` and `|b1` (big-endian too); C or Fortran order (the latter is
    /// reordered to anvil's row-major layout).
    ///
    /// # Errors
    /// [`Error::Io`] for unreadable or malformed data, or an element type
    /// anvil has no dtype for (the error names it).
    pub fn read_npy(reader: impl Read) -> Result<Tensor> {
        let what = "Tensor::read_npy";
        let file = npyz::NpyFile::new(reader).map_err(|e| io(what, e))?;
        let shape: Vec<usize> = file
            .shape()
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| io(what, format!("dimension {d} too large"))))
            .collect::<Result<_>>()?;
        let descr = file.dtype().descr();
        // `descr` is the header's Python literal, e.g. `'<f8'`; npyz swaps
        // the bytes of big-endian (`>`) data itself.
        match descr.trim_matches(['\'', '"']).trim_start_matches(['<', '>', '|', '=']) {
            "f8" => read_as::<f64, _>(file, &shape, what),
            "f4" => read_as::<f32, _>(file, &shape, what),
            "i8" => read_as::<i64, _>(file, &shape, what),
            "b1" => read_as::<bool, _>(file, &shape, what),
            _ => Err(io(
                what,
                format!("element type {descr:?} has no anvil dtype (f8, f4, i8 and b1 do)"),
            )),
        }
    }

    /// Reads a `.npy` file: [`Tensor::read_npy`] on the file at `path`.
    ///
    /// # Errors
    /// [`Error::Io`] naming the path.
    pub fn load_npy(path: impl AsRef<Path>) -> Result<Tensor> {
        let path = path.as_ref();
        let file = std::fs::File::open(path)
            .map_err(|e| io(&format!("Tensor::load_npy({})", path.display()), e))?;
        Tensor::read_npy(std::io::BufReader::new(file))
            .map_err(|e| io(&format!("Tensor::load_npy({})", path.display()), e))
    }

    /// Writes the tensor as `.npy` data (C order; `<f8`, `<f4`, `<i8` or
    /// `|b1`), readable by `numpy.load`.
    ///
    /// ```
    /// # use anvil_core::Tensor;
    /// let t = Tensor::from_vec(vec![1.5f32, -2.0, 3.25, 0.0], &[2, 2])?;
    /// let mut bytes = Vec::new();
    /// t.write_npy(&mut bytes)?;
    /// assert_eq!(Tensor::read_npy(&bytes[..])?, t);
    /// # Ok::<(), anvil_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Io`] when writing fails.
    pub fn write_npy(&self, writer: impl Write) -> Result<()> {
        fn write<T: Element + npyz::AutoSerialize>(t: &Tensor, w: impl Write) -> Result<()> {
            use npyz::WriterBuilder;
            let what = "Tensor::write_npy";
            let shape: Vec<u64> = t.shape().iter().map(|&d| d as u64).collect();
            let mut out = npyz::WriteOptions::new()
                .default_dtype()
                .shape(&shape)
                .writer(w)
                .begin_nd()
                .map_err(|e| io(what, e))?;
            out.extend(t.slice_for::<T>(what)?.iter().copied()).map_err(|e| io(what, e))?;
            out.finish().map_err(|e| io(what, e))
        }
        match self.dtype() {
            DType::F64 => write::<f64>(self, writer),
            DType::F32 => write::<f32>(self, writer),
            DType::I64 => write::<i64>(self, writer),
            DType::Bool => write::<bool>(self, writer),
        }
    }

    /// Writes the tensor to a `.npy` file at `path` ([`Tensor::write_npy`]).
    ///
    /// # Errors
    /// [`Error::Io`] naming the path.
    pub fn save_npy(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let what = format!("Tensor::save_npy({})", path.display());
        let file = std::fs::File::create(path).map_err(|e| io(&what, e))?;
        let mut w = std::io::BufWriter::new(file);
        self.write_npy(&mut w).map_err(|e| io(&what, e))?;
        w.flush().map_err(|e| io(&what, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_round_trips() {
        let cases = [
            Tensor::from_vec(vec![1.0, -2.5, 3.0, 1e300, f64::NAN, 0.0], &[2, 3]).unwrap(),
            Tensor::from_vec(vec![1.0f32, 2.0], &[2, 1]).unwrap(),
            Tensor::from_vec(vec![i64::MIN, 0, i64::MAX], &[3]).unwrap(),
            Tensor::from_vec(vec![true, false, true, true], &[2, 1, 2]).unwrap(),
            Tensor::scalar(4.0),
            Tensor::zeros(&[0, 5]).unwrap(),
        ];
        for t in cases {
            let mut bytes = Vec::new();
            t.write_npy(&mut bytes).unwrap();
            let back = Tensor::read_npy(&bytes[..]).unwrap();
            assert_eq!(back.shape(), t.shape());
            assert_eq!(back.dtype(), t.dtype());
            assert_eq!(format!("{back:?}"), format!("{t:?}"));
        }
    }

    #[test]
    fn fortran_order_files_are_reordered() {
        use npyz::WriterBuilder;
        let mut bytes = Vec::new();
        let mut w = npyz::WriteOptions::new()
            .default_dtype()
            .shape(&[2, 3])
            .order(npyz::Order::Fortran)
            .writer(&mut bytes)
            .begin_nd()
            .unwrap();
        // Column-major elements of [[0, 1, 2], [3, 4, 5]].
        w.extend([0i64, 3, 1, 4, 2, 5]).unwrap();
        w.finish().unwrap();
        let t = Tensor::read_npy(&bytes[..]).unwrap();
        assert_eq!(t.to_vec::<i64>().unwrap(), vec![0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn malformed_and_foreign_data_are_errors() {
        let e = Tensor::read_npy(&b"not an npy file"[..]).unwrap_err();
        assert!(matches!(e, Error::Io { .. }), "{e}");
        let mut bytes = Vec::new();
        {
            use npyz::WriterBuilder;
            let mut w = npyz::WriteOptions::new()
                .default_dtype()
                .shape(&[2])
                .writer(&mut bytes)
                .begin_nd()
                .unwrap();
            w.extend([1u8, 2]).unwrap();
            w.finish().unwrap();
        }
        let e = Tensor::read_npy(&bytes[..]).unwrap_err().to_string();
        assert!(e.contains("u1") && e.contains("no anvil dtype"), "{e}");
        let e = Tensor::load_npy("/nonexistent/x.npy").unwrap_err().to_string();
        assert!(e.contains("/nonexistent/x.npy"), "{e}");
    }
}
