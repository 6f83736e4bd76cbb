//! The lazy, user-facing collections. Each builds graph layers and knows its
//! metadata without computing; the per-block kernels live beside them
//! (`crate::array` for arrays).

pub mod array;
pub mod bag;
pub mod dataframe;
