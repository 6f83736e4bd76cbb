//! Element types of array chunks and NumPy's promotion rules between them
//! (NumPy 2, NEP 50: a Python scalar is "weak" and adapts to the array).

use std::fmt;

use serde::{Deserialize, Serialize};

/// The element type of an array. The order is NumPy's promotion order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum DType {
    Bool,
    I64,
    F32,
    F64,
}

/// A script scalar on one side of an array operation.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
}

impl Scalar {
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => f64::from(u8::from(b)),
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => write!(f, "{x:?}"),
        }
    }
}

impl DType {
    pub const ALL: [DType; 4] = [DType::Bool, DType::I64, DType::F32, DType::F64];

    /// The name scripts use (`"f64"`), also in error messages.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I64 => "i64",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }

    /// Accepts brisk's names and NumPy's (`"float64"`, `"int64"`).
    pub fn parse(s: &str) -> Option<DType> {
        Some(match s {
            "bool" => DType::Bool,
            "i64" | "int64" | "int" => DType::I64,
            "f32" | "float32" => DType::F32,
            "f64" | "float64" | "float" => DType::F64,
            _ => return None,
        })
    }

    pub fn itemsize(self) -> usize {
        match self {
            DType::Bool => 1,
            DType::F32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    /// The common type of two arrays (`np.result_type`).
    pub fn promote(a: DType, b: DType) -> DType {
        match (a.min(b), a.max(b)) {
            // int64 with float32 needs float64 to hold every integer exactly enough.
            (DType::I64, DType::F32) => DType::F64,
            (_, hi) => hi,
        }
    }

    /// The result type of an array with a weak Python scalar.
    pub fn promote_scalar(self, s: Scalar) -> DType {
        match (self, s) {
            (_, Scalar::Bool(_)) => self,
            (DType::Bool, Scalar::Int(_)) => DType::I64,
            (_, Scalar::Int(_)) => self,
            (DType::Bool | DType::I64, Scalar::Float(_)) => DType::F64,
            (_, Scalar::Float(_)) => self,
        }
    }

    /// The floating type a true division, mean or `sqrt` gives.
    pub fn to_float(self) -> DType {
        if self == DType::F32 { DType::F32 } else { DType::F64 }
    }

    /// The type of `sum`/`prod`: bools count as integers.
    pub fn sum_type(self) -> DType {
        if self == DType::Bool { DType::I64 } else { self }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DType::*;

    #[test]
    fn promotion_follows_numpy() {
        // np.result_type for each pair.
        let table = [
            (Bool, Bool, Bool),
            (Bool, I64, I64),
            (Bool, F32, F32),
            (I64, F32, F64),
            (I64, F64, F64),
            (F32, F64, F64),
            (F32, F32, F32),
        ];
        for (a, b, r) in table {
            assert_eq!(DType::promote(a, b), r, "{a} {b}");
            assert_eq!(DType::promote(b, a), r, "{b} {a}");
        }
        assert_eq!(F32.promote_scalar(Scalar::Float(2.0)), F32);
        assert_eq!(I64.promote_scalar(Scalar::Float(2.0)), F64);
        assert_eq!(Bool.promote_scalar(Scalar::Int(1)), I64);
        assert_eq!(I64.promote_scalar(Scalar::Bool(true)), I64);
        assert_eq!(DType::parse("float32"), Some(F32));
        assert_eq!(DType::parse("complex"), None);
    }
}
