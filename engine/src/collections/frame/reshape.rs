//! Frames reshaped partition by partition (Dask's `dd.melt` is
//! `map_partitions(pd.melt)`): `melt`.

use super::dataframe::DataFrame;
use super::shuffle::invalid;
use crate::frame::dtype::{DType, Schema};
use crate::frame::error::FrameError;
use crate::frame::stage::Stage;
use crate::graph::token::Tokenizer;

impl DataFrame {
    /// `melt(#{id_vars, value_vars, var_name, value_name})`, as pandas'
    /// (and Dask's, partition by partition): the value columns stacked into
    /// one (`value_vars` default: every column not an id), beside the
    /// column each value came from. Values of int and float columns meet
    /// as float; other types must agree.
    pub fn melt(
        &self,
        ids: &[String],
        values: Option<&[String]>,
        var_name: &str,
        value_name: &str,
    ) -> Result<DataFrame, FrameError> {
        self.check_columns(ids)?;
        let values: Vec<String> = match values {
            Some(v) => {
                self.check_columns(v)?;
                v.to_vec()
            }
            None => self.schema.names().filter(|n| !ids.iter().any(|i| i == n)).map(String::from).collect(),
        };
        if var_name == value_name || ids.iter().any(|i| i == var_name || i == value_name) {
            return Err(invalid(format!(
                "melt: the columns would be named twice ({var_name:?}, {value_name:?} and the ids {ids:?})"
            )));
        }
        let mut value_type: Option<DType> = None;
        for v in &values {
            let t = self.schema.get(v).unwrap_or(DType::Str);
            value_type = Some(match value_type {
                None => t,
                Some(u) if u == t => u,
                Some(DType::Int64 | DType::Float64) if matches!(t, DType::Int64 | DType::Float64) => {
                    DType::Float64
                }
                Some(u) => {
                    return Err(invalid(format!(
                        "melt: value columns of types {} and {} cannot share one column; astype first",
                        u.name(),
                        t.name()
                    )));
                }
            });
        }
        let value_type = value_type.unwrap_or(DType::Float64);
        let mut cols: Vec<(String, DType)> =
            ids.iter().map(|i| (i.clone(), self.schema.get(i).unwrap_or(DType::Str))).collect();
        cols.push((var_name.to_string(), DType::Str));
        cols.push((value_name.to_string(), value_type));
        let stage = Stage::Melt {
            ids: ids.to_vec(),
            values: values.clone(),
            var_name: var_name.to_string(),
            value_name: value_name.to_string(),
            value_type,
        };
        let tag = Tokenizer::new().str(&self.token).str("melt").serde(&stage).finish();
        let toks = cols.iter().map(|(n, _)| format!("{tag}/{n}")).collect();
        let mut f = self.staged(stage, Schema::new(cols), toks, true);
        f.label = "melt";
        Ok(f)
    }
}
