//! pandas' `category` dtype (of strings) on lazy frames. A category
//! column's partitions hold its strings, so every kernel reads it as a
//! string column; what makes it a category is its type in the schema and,
//! once computed (`categorize`, `cat_as_known`), its known categories,
//! kept by column identity so a column has them for as long as its values
//! are unchanged (through filters, projections, persist, …), as Dask
//! keeps a column's known categories.

use std::sync::Arc;

use super::dataframe::{DataFrame, Series};
use crate::frame::dtype::DType;
use crate::frame::error::FrameError;
use crate::frame::expr::Expr;
use crate::frame::text::TextOp;

impl DataFrame {
    /// The categories of category column `name`, when known.
    pub fn known_categories(&self, name: &str) -> Option<Arc<Vec<String>>> {
        if self.schema.get(name)? != DType::Category {
            return None;
        }
        self.categories.get(self.col_token(name)?).cloned()
    }

    /// These string (or category) columns as category columns whose
    /// categories are known to be the given ones (the caller computed
    /// them: each column's distinct values, sorted).
    pub fn with_categories(&self, cols: Vec<(String, Vec<String>)>) -> Result<DataFrame, FrameError> {
        self.check_columns(cols.iter().map(|(c, _)| c))?;
        let cast: Vec<(String, DType)> = cols
            .iter()
            .filter(|(c, _)| self.schema.get(c) != Some(DType::Category))
            .map(|(c, _)| (c.clone(), DType::Category))
            .collect();
        let f = if cast.is_empty() { self.clone() } else { self.astype(cast)? };
        Ok(f.keeping(cols.into_iter().map(|(c, k)| (c, Arc::new(k))).collect()))
    }

    /// These category columns with these known categories (by name; a
    /// column that is not a category is left alone).
    pub(crate) fn keeping(mut self, known: Vec<(String, Arc<Vec<String>>)>) -> DataFrame {
        if known.is_empty() {
            return self;
        }
        let mut map = self.categories.as_ref().clone();
        for (c, cats) in known {
            if self.schema.get(&c) == Some(DType::Category)
                && let Some(tok) = self.col_token(&c)
            {
                map.insert(tok.clone(), cats);
            }
        }
        self.categories = Arc::new(map);
        self
    }

    /// A frame made of `sources`' rows (moved, joined or stacked) with
    /// the known categories of each of its category columns that every
    /// source holding that column knows alike.
    pub(crate) fn inheriting(self, sources: &[&DataFrame]) -> DataFrame {
        let mut known = Vec::new();
        for (c, t) in &self.schema.cols {
            if *t != DType::Category {
                continue;
            }
            let holders: Vec<Option<Arc<Vec<String>>>> =
                sources.iter().filter(|s| s.schema.contains(c)).map(|s| s.known_categories(c)).collect();
            if let Some(Some(first)) = holders.first()
                && holders.iter().all(|h| h.as_ref() == Some(first))
            {
                known.push((c.clone(), first.clone()));
            }
        }
        self.keeping(known)
    }

    /// The frame with these columns' categories forgotten (still of type
    /// category): `cat.as_unknown()`.
    pub fn without_categories(&self, cols: &[String]) -> DataFrame {
        let mut known = self.categories.as_ref().clone();
        for c in cols {
            if let Some(tok) = self.col_token(c) {
                known.remove(tok);
            }
        }
        DataFrame { categories: Arc::new(known), ..self.clone() }
    }
}

impl Series {
    /// Its categories, when it is a category column of its frame whose
    /// categories are known.
    pub fn known_categories(&self) -> Option<Arc<Vec<String>>> {
        match &self.expr {
            Expr::Col(c) if self.dtype == DType::Category => self.frame.known_categories(c),
            _ => None,
        }
    }

    fn need_category(&self, what: &str) -> Result<(), FrameError> {
        if self.dtype == DType::Category {
            Ok(())
        } else {
            Err(FrameError::DType(format!("{what} needs a category column, not {}", self.dtype)))
        }
    }

    /// The known categories, or Dask's error for unknown ones.
    pub fn categories(&self, what: &str) -> Result<Arc<Vec<String>>, FrameError> {
        self.need_category(what)?;
        self.known_categories().ok_or_else(|| {
            FrameError::Invalid(format!(
                "{what}: the categories of \"{}\" are unknown; use s.cat_as_known() or df.categorize() first, as in Dask",
                self.name
            ))
        })
    }

    /// `cat.codes`: each value's place among the known categories, -1
    /// where missing.
    pub fn cat_codes(&self) -> Result<Series, FrameError> {
        let cats = self.categories("cat_codes")?;
        self.map_expr(|e| Expr::Text(TextOp::Codes(cats), e))
    }

    /// This Series as a category column of known categories `cats`.
    pub fn with_categories(&self, cats: Vec<String>) -> Result<Series, FrameError> {
        self.need_category("cat_as_known")?;
        self.to_frame().with_categories(vec![(self.name.clone(), cats)])?.column(&self.name)
    }

    /// `cat.as_unknown()`.
    pub fn without_categories(&self) -> Result<Series, FrameError> {
        self.need_category("cat_as_unknown")?;
        self.to_frame().without_categories(std::slice::from_ref(&self.name)).column(&self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collections::array::Ctx;
    use crate::collections::frame::from_columns;
    use crate::frame::dtype::Schema;
    use crate::frame::expr::BinOp;
    use crate::value::Value;

    fn frame() -> DataFrame {
        let k = ["b", "a", "c"].iter().map(|s| Value::Str((*s).into())).collect();
        let x = (0..3).map(Value::Int).collect();
        let schema = Schema::new(vec![("k".into(), DType::Str), ("x".into(), DType::Int64)]);
        from_columns(&Ctx::default(), schema, vec![k, x], 2).expect("frame")
    }

    #[test]
    fn known_categories_follow_the_column_while_its_values_do() {
        let f = frame()
            .with_categories(vec![("k".into(), vec!["a".into(), "b".into(), "c".into()])])
            .expect("cat");
        assert_eq!(f.schema.get("k"), Some(DType::Category));
        let cats = f.known_categories("k").expect("known");
        assert_eq!(cats.as_slice(), ["a", "b", "c"]);
        // A projection and a filter keep them; a new value in the column forgets them.
        let p = f.project(&["k".into()]).expect("project");
        assert!(p.known_categories("k").is_some());
        let mask = f
            .column("x")
            .expect("x")
            .map_expr(|e| Expr::bin(BinOp::Gt, *e, Expr::Lit(Value::Int(0))))
            .expect("mask");
        assert!(f.filter(&mask).expect("filter").known_categories("k").is_some());
        let unknown = f.without_categories(&["k".into()]);
        assert_eq!(unknown.schema.get("k"), Some(DType::Category));
        assert!(unknown.known_categories("k").is_none());
        assert!(unknown.column("k").expect("k").cat_codes().is_err());
        assert!(f.column("k").expect("k").cat_codes().is_ok());
        assert!(f.column("x").expect("x").cat_codes().is_err());
    }

    #[test]
    fn only_strings_become_categories() {
        let e = frame().astype(vec![("x".into(), DType::Category)]).expect_err("int");
        assert!(e.to_string().contains("int64 values cannot become a category"), "{e}");
    }
}
