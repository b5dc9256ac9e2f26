//! `serde` for [`Tensor`] and [`DType`] (feature `serde`).
//!
//! A tensor serialises as its shape and its elements in row-major order,
//! tagged by dtype: in JSON, `{"shape":[2],"data":{"f64":[1.0,2.0]}}`.
//! Deserialising checks that the element count fills the shape. (JSON has
//! no NaN or infinities; `serde_json` writes them as `null`, which does not
//! read back as a float: use a binary format for such data.)

use crate::dtype::DType;
use crate::tensor::{Storage, Tensor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Serialize)]
struct TensorRef<'a> {
    shape: &'a [usize],
    data: DataRef<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "lowercase")]
enum DataRef<'a> {
    F64(&'a [f64]),
    F32(&'a [f32]),
    I64(&'a [i64]),
    Bool(&'a [bool]),
}

#[derive(Deserialize)]
struct TensorOwned {
    shape: Vec<usize>,
    data: Data,
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum Data {
    F64(Vec<f64>),
    F32(Vec<f32>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
}

impl Serialize for Tensor {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let data = match self.storage() {
            Storage::F64(v) => DataRef::F64(v),
            Storage::F32(v) => DataRef::F32(v),
            Storage::I64(v) => DataRef::I64(v),
            Storage::Bool(v) => DataRef::Bool(v),
        };
        TensorRef { shape: self.shape(), data }.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Tensor {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Tensor, D::Error> {
        let TensorOwned { shape, data } = TensorOwned::deserialize(d)?;
        let made = match data {
            Data::F64(v) => Tensor::from_vec(v, &shape),
            Data::F32(v) => Tensor::from_vec(v, &shape),
            Data::I64(v) => Tensor::from_vec(v, &shape),
            Data::Bool(v) => Tensor::from_vec(v, &shape),
        };
        made.map_err(serde::de::Error::custom)
    }
}

impl Serialize for DType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for DType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<DType, D::Error> {
        let name = String::deserialize(d)?;
        [DType::F64, DType::F32, DType::I64, DType::Bool]
            .into_iter()
            .find(|t| t.to_string() == name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown dtype {name:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_and_checked_lengths() {
        let t = Tensor::from_vec(vec![1.0, 2.5, -3.0, 4.0], &[2, 2]).unwrap();
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, r#"{"shape":[2,2],"data":{"f64":[1.0,2.5,-3.0,4.0]}}"#);
        assert_eq!(serde_json::from_str::<Tensor>(&json).unwrap(), t);
        for t in [
            Tensor::from_vec(vec![true, false], &[2]).unwrap(),
            Tensor::from_vec(vec![7i64], &[]).unwrap(),
            Tensor::from_vec(vec![1.5f32; 6], &[3, 1, 2]).unwrap(),
        ] {
            let back: Tensor = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
            assert_eq!(back, t);
            assert_eq!(back.dtype(), t.dtype());
        }
        let bad = r#"{"shape":[3],"data":{"i64":[1,2]}}"#;
        let e = serde_json::from_str::<Tensor>(bad).unwrap_err().to_string();
        assert!(e.contains("[3]"), "{e}");
        assert_eq!(serde_json::to_string(&DType::F32).unwrap(), r#""f32""#);
        assert_eq!(serde_json::from_str::<DType>(r#""bool""#).unwrap(), DType::Bool);
        assert!(serde_json::from_str::<DType>(r#""f16""#).is_err());
    }
}
