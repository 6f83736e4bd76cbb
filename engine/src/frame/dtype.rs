//! The column types a brisk frame carries. Partitions are normalized to
//! these on the way in (an `i32` column becomes `int64`, a datetime of any
//! unit becomes nanoseconds), so the schema a lazy frame states before any
//! data is read is the schema every partition has.

use polars::prelude::{DataType, TimeUnit};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DType {
    Int64,
    Float64,
    Bool,
    Str,
    /// Nanoseconds since the epoch, no time zone (pandas' `datetime64[ns]`).
    Datetime,
    /// pandas' `category` of strings. Partitions hold the strings (a
    /// polars `String` column), so every string operation reads it as
    /// `Str`; the frame knows its categories once `categorize` or
    /// `cat_as_known` computed them (sorted, as pandas' `astype`).
    Category,
}

impl DType {
    /// The pandas name, as Dask's `dtypes` shows it.
    pub fn name(self) -> &'static str {
        match self {
            DType::Int64 => "int64",
            DType::Float64 => "float64",
            DType::Bool => "bool",
            DType::Str => "string",
            DType::Datetime => "datetime64[ns]",
            DType::Category => "category",
        }
    }

    /// A dtype as a script names it (pandas and NumPy spellings).
    pub fn parse(s: &str) -> Option<DType> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "int64" | "int" | "i64" | "int32" | "i32" => DType::Int64,
            "float64" | "float" | "f64" | "float32" | "f32" | "double" => DType::Float64,
            "bool" | "boolean" => DType::Bool,
            "string" | "str" | "object" | "utf8" => DType::Str,
            "datetime64[ns]" | "datetime64" | "datetime" | "timestamp" => DType::Datetime,
            "category" => DType::Category,
            _ => return None,
        })
    }

    /// The type of the values an expression reads from a column of this
    /// type: a category's values are its strings.
    pub fn values(self) -> DType {
        if self == DType::Category { DType::Str } else { self }
    }

    pub fn is_numeric(self) -> bool {
        matches!(self, DType::Int64 | DType::Float64 | DType::Bool)
    }

    pub fn to_polars(self) -> DataType {
        match self {
            DType::Int64 => DataType::Int64,
            DType::Float64 => DataType::Float64,
            DType::Bool => DataType::Boolean,
            DType::Str | DType::Category => DataType::String,
            DType::Datetime => DataType::Datetime(TimeUnit::Nanoseconds, None),
        }
    }

    /// The brisk dtype a polars column is normalized to, if any.
    pub fn of_polars(dt: &DataType) -> Option<DType> {
        Some(match dt {
            DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64 => DType::Int64,
            DataType::Float32 | DataType::Float64 => DType::Float64,
            DataType::Boolean => DType::Bool,
            DataType::String => DType::Str,
            DataType::Datetime(_, _) | DataType::Date => DType::Datetime,
            // A column of nothing but nulls has no type of its own; pandas
            // reads it as float64 (NaN).
            DataType::Null => DType::Float64,
            _ => return None,
        })
    }

    /// The type of `a op b` for arithmetic, as NumPy promotes.
    pub fn arith(op_div: bool, a: DType, b: DType) -> Option<DType> {
        use DType::*;
        match (a, b) {
            (Int64 | Bool, Int64 | Bool) if op_div => Some(Float64),
            (Int64 | Bool, Int64 | Bool) => Some(Int64),
            (Float64, Int64 | Float64 | Bool) | (Int64 | Bool, Float64) => Some(Float64),
            _ => None,
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Column names and types, in order.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct Schema {
    pub cols: Vec<(String, DType)>,
}

impl Schema {
    pub fn new(cols: Vec<(String, DType)>) -> Schema {
        Schema { cols }
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.cols.iter().map(|(n, _)| n.as_str())
    }

    pub fn get(&self, name: &str) -> Option<DType> {
        self.cols.iter().find(|(n, _)| n == name).map(|(_, t)| *t)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// "a, b, c" for messages.
    pub fn listing(&self) -> String {
        self.names().collect::<Vec<_>>().join(", ")
    }

    pub fn to_polars(&self) -> polars::prelude::Schema {
        self.cols.iter().map(|(n, t)| polars::prelude::Field::new(n.as_str().into(), t.to_polars())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for t in [DType::Int64, DType::Float64, DType::Bool, DType::Str, DType::Datetime, DType::Category] {
            assert_eq!(DType::parse(t.name()), Some(t));
        }
        assert_eq!(DType::parse("complex"), None);
        assert_eq!(DType::arith(true, DType::Int64, DType::Int64), Some(DType::Float64));
        assert_eq!(DType::arith(false, DType::Int64, DType::Str), None);
    }
}
