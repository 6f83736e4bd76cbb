//! The API reference: one entry per script function, with a summary and a
//! Rhai example. Each area keeps its entries in a `DOCS` table beside its
//! registrations; `all` chains them in the order of the guide, the single
//! doc source for `:help`, completion and Jupyter's inspect. Tests check
//! that every registered function has an entry and that every example runs.

pub use super::fndoc::FnDoc;

/// The areas' tables, in the order of the guide. Each area keeps its
/// entries beside its registrations; `api/array_docs.rs` and
/// `api/dataframe_docs.rs` hold those of `array.rs` and `dataframe.rs`,
/// and the collection protocol (`compute`, `persist`, `visualize`,
/// `graph_info`, registered in `collection.rs`) is in `delayed.rs`'s table.
const AREAS: &[&[FnDoc]] = &[
    super::delayed::DOCS,
    super::futures::DOCS,
    super::futures_more::DOCS,
    super::coordinate::DOCS,
    super::task_client::DOCS,
    super::cluster::DOCS,
    super::deploy::DOCS,
    super::kube::DOCS,
    super::config::DOCS,
    super::DOCS,
    super::array_create::DOCS,
    super::array_docs::DOCS,
    super::array_more::DOCS,
    super::gpu_kernels::DOCS,
    super::ml::DOCS,
    super::bag::DOCS,
    super::bag_more::DOCS,
    super::dataframe_docs::DOCS,
    super::series_text::DOCS,
    super::series_where::DOCS,
    super::frame_order::DOCS,
    super::frame_call::DOCS,
    super::frame_stats::DOCS,
    super::frame_window::DOCS,
    super::frame_reshape::DOCS,
    super::frame_category::DOCS,
    super::to_delayed::DOCS,
];

/// Every documented entry, in the order of the guide.
pub fn all() -> impl Iterator<Item = &'static FnDoc> {
    AREAS.iter().flat_map(|area| area.iter())
}

/// The entry for `name`, if documented.
pub fn lookup(name: &str) -> Option<&'static FnDoc> {
    all().find(|d| d.name == name)
}

/// Text for `:help NAME` and Jupyter's inspect.
/// Every entry of a name (`map` is a futures call and a bag method).
pub fn help(name: &str) -> Option<String> {
    let entries: Vec<String> = all()
        .filter(|d| d.name == name)
        .map(|d| format!("{}\n\n{}\n\nExample:\n{}", d.signature, d.summary, indent(d.example)))
        .collect();
    (!entries.is_empty()).then(|| entries.join("\n\n"))
}

/// One line per entry, for `:help` with no name.
pub fn index() -> String {
    let width = all().map(|d| d.name.len()).max().unwrap_or(0);
    all().map(|d| format!("{:width$}  {}", d.name, first_sentence(d.summary))).collect::<Vec<_>>().join("\n")
}

fn first_sentence(s: &str) -> &str {
    match s.find(". ") {
        Some(i) => &s[..=i],
        None => s,
    }
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The entries of the one flat table before it was split by area.
    const ENTRIES_BEFORE_SPLIT: usize = 174;

    /// Names with an entry in each of two (or more) areas, in the order
    /// `help` shows them: `map` (futures, bag, Series), `map_partitions` (bag, frame_order),
    /// `groupby` (bag, dataframe), `status` (a future's, a deployed
    /// cluster's) and `shape` (an array's, a frame's).
    const IN_TWO_AREAS: &[&str] = &[
        "map",
        "map_partitions",
        "groupby",
        "status",
        "shape",
        "topk",
        "isin",
        "reduction",
        "any",
        "all",
        "str_strip",
        "where",
        "clip",
        "mask",
        "to_json",
        "apply",
        "sum",
        "median",
        "cumsum",
        "join",
        "repartition",
        "str_split",
    ];

    #[test]
    fn every_entry_is_in_exactly_one_area() {
        // Areas added since the split bring their own entries.
        // `story` and `run_command` came later, to the futures area;
        // `shift`, `diff`, `concat`, `len` and `shape` to frame_order's;
        // the nan-reductions, `isinf`, `log1p`, `expm1`, `sign` and
        // `map_overlap` to the arrays'; `get_partition`, `loc`, `iloc` and
        // `reset_index` and `melt` to frame_order's; `to_json` to the frames'.
        assert_eq!(
            all().count(),
            ENTRIES_BEFORE_SPLIT
                + 2
                + 5
                + 12
                + 4
                + 1
                + 1
                + super::super::array_more::DOCS.len()
                + super::super::bag_more::DOCS.len()
                + super::super::series_text::DOCS.len()
                + super::super::series_where::DOCS.len()
                + super::super::frame_call::DOCS.len()
                + super::super::frame_stats::DOCS.len()
                + super::super::frame_window::DOCS.len()
                + super::super::frame_reshape::DOCS.len()
                + super::super::frame_category::DOCS.len()
                + super::super::to_delayed::DOCS.len()
                + super::super::futures_more::DOCS.len()
                + super::super::coordinate::DOCS.len()
                + 1 // `store`, in the arrays' table
                + super::super::task_client::DOCS.len()
                - 1 // `rolling` moved from frame_order's table to frame_window's
                + super::super::cluster::DOCS.len()
                + super::super::deploy::DOCS.len()
                + super::super::kube::DOCS.len()
                + super::super::gpu_kernels::DOCS.len()
                + super::super::ml::DOCS.len()
        );
        let mut seen: Vec<(&str, usize)> = Vec::new();
        for (area, docs) in AREAS.iter().enumerate() {
            for d in docs.iter() {
                for &(name, other) in &seen {
                    if name == d.name {
                        assert!(
                            other != area && IN_TWO_AREAS.contains(&name),
                            "{name} is documented twice (areas {other} and {area})"
                        );
                    }
                }
                seen.push((d.name, area));
            }
        }
        for name in IN_TWO_AREAS {
            let n = if *name == "map" { 3 } else { 2 };
            assert_eq!(all().filter(|d| d.name == *name).count(), n, "{name}");
        }
    }
}
