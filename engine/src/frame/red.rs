//! The reductions a Series or a groupby can ask for (`sum`, `mean`, …) and
//! the type each gives.

use serde::{Deserialize, Serialize};

use super::dtype::DType;
use super::error::FrameError;

/// A reduction of one column (`s.sum()`, `agg(#{x: "std"})`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Red {
    Sum,
    Mean,
    Min,
    Max,
    Count,
    Std,
    Var,
    Size,
    NUnique,
}

impl Red {
    pub fn parse(s: &str) -> Option<Red> {
        Some(match s {
            "sum" => Red::Sum,
            "mean" => Red::Mean,
            "min" => Red::Min,
            "max" => Red::Max,
            "count" => Red::Count,
            "std" => Red::Std,
            "var" | "variance" => Red::Var,
            "size" => Red::Size,
            "nunique" => Red::NUnique,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Red::Sum => "sum",
            Red::Mean => "mean",
            Red::Min => "min",
            Red::Max => "max",
            Red::Count => "count",
            Red::Std => "std",
            Red::Var => "var",
            Red::Size => "size",
            Red::NUnique => "nunique",
        }
    }

    /// The result type for a column of type `t`, or why it has none.
    pub fn dtype(self, t: DType) -> Result<DType, FrameError> {
        use DType::*;
        let numeric = matches!(t, Int64 | Float64 | Bool);
        match self {
            Red::Count | Red::Size | Red::NUnique => Ok(Int64),
            Red::Sum if t == Float64 => Ok(Float64),
            Red::Sum if numeric => Ok(Int64),
            Red::Mean | Red::Std | Red::Var if numeric => Ok(Float64),
            // pandas: "Categorical is not ordered for operation min".
            Red::Min | Red::Max if t == Category => Err(FrameError::DType(format!(
                "{} is not defined for a category column (its categories are unordered)",
                self.name()
            ))),
            Red::Min | Red::Max if t != Bool => Ok(t),
            Red::Min | Red::Max => Ok(Bool),
            _ => Err(FrameError::DType(format!("{} is not defined for a {} column", self.name(), t.name()))),
        }
    }
}
