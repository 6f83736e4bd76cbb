//! How local values print in the REPL (and, as text/plain, in Jupyter):
//! maps and arrays of maps as tables (comfy-table), long tables elided in
//! the middle as pandas does; everything else as Rhai prints it.

use comfy_table::{ContentArrangement, Table, presets};
use rhai::{Array, Dynamic, Map};

/// Rows shown before and after the elision of a long table.
const HEAD_ROWS: usize = 10;
const TAIL_ROWS: usize = 5;

/// Text for a value: a table for maps and arrays of maps.
pub fn render(d: &Dynamic) -> String {
    if let Some(m) = d.read_lock::<Map>()
        && !m.is_empty()
    {
        let mut t = table();
        t.set_header(vec!["key", "value"]);
        for (k, v) in m.iter() {
            t.add_row(vec![k.to_string(), cell(v)]);
        }
        return t.to_string();
    }
    if let Some(a) = d.read_lock::<Array>()
        && !a.is_empty()
        && a.iter().all(Dynamic::is_map)
    {
        return records(&a);
    }
    plain(d)
}

/// An array of maps as rows; columns are the keys in order of first use.
fn records(rows: &Array) -> String {
    let mut columns: Vec<String> = Vec::new();
    for r in rows {
        if let Some(m) = r.read_lock::<Map>() {
            for k in m.keys() {
                if !columns.iter().any(|c| c == k.as_str()) {
                    columns.push(k.to_string());
                }
            }
        }
    }
    let mut t = table();
    t.set_header(columns.clone());
    let n = rows.len();
    let elide = n > HEAD_ROWS + TAIL_ROWS;
    for (i, r) in rows.iter().enumerate() {
        if elide && i == HEAD_ROWS {
            t.add_row(columns.iter().map(|_| "…".to_string()).collect::<Vec<_>>());
        }
        if elide && i >= HEAD_ROWS && i < n - TAIL_ROWS {
            continue;
        }
        let Some(m) = r.read_lock::<Map>() else { continue };
        t.add_row(
            columns.iter().map(|c| m.get(c.as_str()).map(cell).unwrap_or_default()).collect::<Vec<_>>(),
        );
    }
    format!("{t}\n{n} rows × {} columns", columns.len())
}

fn table() -> Table {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Disabled);
    t
}

/// A cell: strings without quotes, long values cut.
fn cell(v: &Dynamic) -> String {
    let s = if v.is_string() { v.to_string() } else { plain(v) };
    if s.chars().count() > 60 { format!("{}…", s.chars().take(59).collect::<String>()) } else { s }
}

fn plain(d: &Dynamic) -> String {
    if d.is_string() { format!("{d:?}") } else { crate::api::display_scalar(d) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(i: i64) -> Dynamic {
        let mut m = Map::new();
        m.insert("id".into(), Dynamic::from_int(i));
        m.insert("name".into(), Dynamic::from(format!("n{i}")));
        Dynamic::from_map(m)
    }

    #[test]
    fn maps_and_records_are_tables() {
        let mut m = Map::new();
        m.insert("scheduler".into(), Dynamic::from("threads"));
        let text = render(&Dynamic::from_map(m));
        assert!(text.contains("│ scheduler ┆ threads │"), "{text}");
        let text = render(&Dynamic::from_array((0..3).map(row).collect()));
        assert!(text.contains("│ id ┆ name │") && text.contains("│ 2  ┆ n2   │"), "{text}");
        assert!(text.ends_with("3 rows × 2 columns"), "{text}");
    }

    #[test]
    fn long_tables_are_elided_in_the_middle() {
        let text = render(&Dynamic::from_array((0..100).map(row).collect()));
        assert!(text.contains("│ 9  ┆ n9   │") && text.contains("│ 99 ┆ n99  │"), "{text}");
        assert!(!text.contains("n50"), "{text}");
        assert!(text.contains('…') && text.ends_with("100 rows × 2 columns"), "{text}");
    }

    #[test]
    fn other_values_print_plainly() {
        assert_eq!(render(&Dynamic::from_int(3)), "3");
        assert_eq!(render(&Dynamic::from("x")), "\"x\"");
        assert_eq!(render(&Dynamic::from_array(vec![Dynamic::from_int(1)])), "[1]");
    }
}
