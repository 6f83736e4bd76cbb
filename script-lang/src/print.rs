//! All printing, text and HTML, in one place: how every value shows in the
//! REPL, in `print`, and (as text/plain and text/html) in Jupyter. Maps and
//! arrays of maps are tables (comfy-table), long tables elided in the middle
//! as pandas does; computed arrays print as NumPy does; lazy collections
//! show Dask's summaries; everything else prints as Rhai prints it.

use brisk_engine::Value;
use brisk_engine::array::chunk::Chunk;
use brisk_engine::array::dtype::Scalar;
use brisk_engine::array::error::fmt_shape;
use brisk_engine::collections::array::Array as LazyArrayCore;
use brisk_engine::collections::frame::{DataFrame, Series};
use brisk_engine::frame::partition::Frame;
use comfy_table::{ContentArrangement, Table, presets};
use rhai::{Array, Dynamic, Map};

use crate::error::TaskFailure;
use crate::state::Rendered;
use crate::types::{Delayed, LazyArray, LazyBag, LazyFrame, LazySeries, LocalFrame, LocalSeries, RFuture};

/// Rows shown before and after the elision of a long table.
const HEAD_ROWS: usize = 10;
const TAIL_ROWS: usize = 5;

/// Text for a value: a table for maps and arrays of maps.
pub fn render(d: &Dynamic) -> String {
    if let Some(x) = d.read_lock::<LazyArray>() {
        return array_summary(&x);
    }
    if let Some(c) = d.read_lock::<Chunk>() {
        return chunk_table(&c);
    }
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

/// A computed frame as a table, columns in the frame's order, long frames
/// elided in the middle; missing values show as pandas shows them.
pub fn frame_table(
    columns: &[String],
    cells: &dyn Fn(usize, usize) -> String,
    n: usize,
    footer: &str,
) -> String {
    let mut t = table();
    t.set_header(columns.to_vec());
    for i in shown(n, HEAD_ROWS, TAIL_ROWS) {
        match i {
            Some(i) => t.add_row((0..columns.len()).map(|j| cells(i, j)).collect::<Vec<_>>()),
            None => t.add_row(columns.iter().map(|_| "…".to_string()).collect::<Vec<_>>()),
        };
    }
    format!("{t}\n{footer}")
}

/// The same table in HTML, for Jupyter.
pub fn frame_html(
    columns: &[String],
    cells: &dyn Fn(usize, usize) -> String,
    n: usize,
    footer: &str,
) -> String {
    let rows: Vec<Vec<String>> = shown(n, HEAD_ROWS, TAIL_ROWS)
        .into_iter()
        .map(|i| match i {
            Some(i) => (0..columns.len()).map(|j| cells(i, j)).collect(),
            None => columns.iter().map(|_| "…".to_string()).collect(),
        })
        .collect();
    let header: Vec<&str> = columns.iter().map(String::as_str).collect();
    html_table(&header, &rows, Some(footer))
}

/// Columns shown on each side of the elision of a wide array.
const EDGE_COLS: usize = 5;

/// One element as NumPy prints it: six significant digits, scientific
/// notation for very large or small magnitudes.
pub fn element(s: Scalar) -> String {
    match s {
        Scalar::Float(f) if f.is_nan() => "nan".into(),
        Scalar::Float(f) if f.is_infinite() => {
            if f > 0.0 {
                "inf".into()
            } else {
                "-inf".into()
            }
        }
        Scalar::Float(f) if f != 0.0 && (f.abs() >= 1e16 || f.abs() < 1e-4) => format!("{f:.6e}"),
        Scalar::Float(f) if f == f.trunc() => format!("{f:.1}"),
        Scalar::Float(f) => {
            let digits = (6 - (f.abs().log10().floor() as i32) - 1).clamp(0, 15) as usize;
            let t = format!("{f:.digits$}");
            let t = t.trim_end_matches('0');
            if t.ends_with('.') { format!("{t}0") } else { t.to_string() }
        }
        other => other.to_string(),
    }
}

/// Indices to show out of `n`, with `None` where the elision goes.
fn shown(n: usize, head: usize, tail: usize) -> Vec<Option<usize>> {
    if n <= head + tail {
        return (0..n).map(Some).collect();
    }
    (0..head).map(Some).chain(std::iter::once(None)).chain((n - tail..n).map(Some)).collect()
}

/// A computed array as a table: rows × columns for 2-d, one column for
/// 1-d, one table per leading index (elided) above that.
pub fn chunk_table(c: &Chunk) -> String {
    let footer = format!("ndarray {} {}", c.dtype(), fmt_shape(c.shape()));
    match c.ndim() {
        0 => c.get(&[]).map(element).unwrap_or_default(),
        1 => {
            let mut t = table();
            t.set_header(vec!["", "value"]);
            for i in shown(c.shape()[0], HEAD_ROWS, TAIL_ROWS) {
                match i {
                    Some(i) => t.add_row(vec![i.to_string(), c.get(&[i]).map(element).unwrap_or_default()]),
                    None => t.add_row(vec!["…", "…"]),
                };
            }
            format!("{t}\n{footer}")
        }
        2 => format!("{}\n{footer}", matrix(c, &[])),
        _ => {
            let lead = &c.shape()[..c.ndim() - 2];
            let mut out = Vec::new();
            for (k, idx) in brisk_engine::collections::array::grid(lead).into_iter().enumerate() {
                if k == 3 {
                    out.push("…".to_string());
                    break;
                }
                let label: Vec<String> =
                    idx.iter().map(usize::to_string).chain(["…".into(), "…".into()]).collect();
                out.push(format!("[{}]\n{}", label.join(", ").replace("…", ":"), matrix(c, &idx)));
            }
            out.push(footer);
            out.join("\n")
        }
    }
}

fn matrix(c: &Chunk, lead: &[usize]) -> String {
    let nd = c.ndim();
    let (rows, cols) = (c.shape()[nd - 2], c.shape()[nd - 1]);
    let col_idx = shown(cols, EDGE_COLS, EDGE_COLS);
    let mut t = table();
    let mut header = vec![String::new()];
    header.extend(col_idx.iter().map(|j| j.map(|j| j.to_string()).unwrap_or_else(|| "…".into())));
    t.set_header(header);
    for i in shown(rows, HEAD_ROWS, TAIL_ROWS) {
        let mut row = vec![i.map(|i| i.to_string()).unwrap_or_else(|| "…".into())];
        for j in &col_idx {
            row.push(match (i, j) {
                (Some(i), Some(j)) => {
                    let mut idx = lead.to_vec();
                    idx.extend([i, *j]);
                    c.get(&idx).map(element).unwrap_or_default()
                }
                _ => "…".into(),
            });
        }
        t.add_row(row);
    }
    t.to_string()
}

/// A computed array on one line (`to_string`, `print`): its elements as
/// nested lists when small, else its type and shape.
pub fn chunk_text(c: &Chunk) -> String {
    if c.len() > 1000 {
        return format!("ndarray({}, shape={})", c.dtype(), fmt_shape(c.shape()));
    }
    fn go(c: &Chunk, idx: &mut Vec<usize>, out: &mut String) {
        let d = idx.len();
        if d == c.ndim() {
            out.push_str(&c.get(idx).map(element).unwrap_or_default());
            return;
        }
        out.push('[');
        for i in 0..c.shape()[d] {
            if i > 0 {
                out.push_str(", ");
            }
            idx.push(i);
            go(c, idx, out);
            idx.pop();
        }
        out.push(']');
    }
    let mut out = String::new();
    go(c, &mut Vec::new(), &mut out);
    out
}

/// An HTML table for Jupyter (`text/html`), for the values that print as
/// tables; `None` for the rest, which only have `text/plain`.
pub fn html(d: &Dynamic) -> Option<String> {
    if let Some(f) = d.read_lock::<LocalFrame>() {
        return Some(local_frame_html(&f.0));
    }
    if let Some(x) = d.read_lock::<LazyArray>() {
        let text = array_summary(&x);
        let (head, _) = text.split_once('\n').unwrap_or((&text, ""));
        let rows = summary_rows(&text);
        return Some(format!(
            "<p><code>{}</code></p>{}",
            escape(head),
            html_table(&["", "Array", "Chunk"], &rows, None)
        ));
    }
    if let Some(c) = d.read_lock::<Chunk>() {
        let footer = format!("ndarray {} {}", c.dtype(), fmt_shape(c.shape()));
        return match c.ndim() {
            1 => {
                let rows = shown(c.shape()[0], HEAD_ROWS, TAIL_ROWS)
                    .into_iter()
                    .map(|i| match i {
                        Some(i) => vec![i.to_string(), c.get(&[i]).map(element).unwrap_or_default()],
                        None => vec!["…".into(), "…".into()],
                    })
                    .collect::<Vec<_>>();
                Some(html_table(&["", "value"], &rows, Some(&footer)))
            }
            2 => {
                let cols = shown(c.shape()[1], EDGE_COLS, EDGE_COLS);
                let mut header = vec![String::new()];
                header.extend(cols.iter().map(|j| j.map(|j| j.to_string()).unwrap_or_else(|| "…".into())));
                let rows = shown(c.shape()[0], HEAD_ROWS, TAIL_ROWS)
                    .into_iter()
                    .map(|i| {
                        let mut row = vec![i.map(|i| i.to_string()).unwrap_or_else(|| "…".into())];
                        row.extend(cols.iter().map(|j| match (i, j) {
                            (Some(i), Some(j)) => c.get(&[i, *j]).map(element).unwrap_or_default(),
                            _ => "…".into(),
                        }));
                        row
                    })
                    .collect::<Vec<_>>();
                let header: Vec<&str> = header.iter().map(String::as_str).collect();
                Some(html_table(&header, &rows, Some(&footer)))
            }
            _ => None,
        };
    }
    if let Some(m) = d.read_lock::<Map>()
        && !m.is_empty()
    {
        let rows: Vec<Vec<String>> = m.iter().map(|(k, v)| vec![k.to_string(), cell(v)]).collect();
        return Some(html_table(&["key", "value"], &rows, None));
    }
    if let Some(a) = d.read_lock::<Array>()
        && !a.is_empty()
        && a.iter().all(Dynamic::is_map)
    {
        let mut columns: Vec<String> = Vec::new();
        for r in a.iter() {
            if let Some(m) = r.read_lock::<Map>() {
                for k in m.keys() {
                    if !columns.iter().any(|c| c == k.as_str()) {
                        columns.push(k.to_string());
                    }
                }
            }
        }
        let n = a.len();
        let rows: Vec<Vec<String>> = shown(n, HEAD_ROWS, TAIL_ROWS)
            .into_iter()
            .map(|i| match i.and_then(|i| a[i].read_lock::<Map>().map(|m| m.clone())) {
                Some(m) => columns.iter().map(|c| m.get(c.as_str()).map(cell).unwrap_or_default()).collect(),
                None => columns.iter().map(|_| "…".to_string()).collect(),
            })
            .collect();
        let header: Vec<&str> = columns.iter().map(String::as_str).collect();
        return Some(html_table(&header, &rows, Some(&format!("{n} rows × {} columns", columns.len()))));
    }
    None
}

/// The body rows of a comfy-table text table (the lazy array summary).
fn summary_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|l| l.starts_with('│'))
        .skip(1)
        .map(|l| l.trim_matches('│').split('┆').map(|c| c.trim().to_string()).collect())
        .collect()
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn html_table(header: &[&str], rows: &[Vec<String>], footer: Option<&str>) -> String {
    let mut out = String::from("<table><thead><tr>");
    for h in header {
        out += &format!("<th>{}</th>", escape(h));
    }
    out += "</tr></thead><tbody>";
    for r in rows {
        out += "<tr>";
        for (j, c) in r.iter().enumerate() {
            let tag = if j == 0 && header.first().is_some_and(|h| h.is_empty()) { "th" } else { "td" };
            out += &format!("<{tag}>{}</{tag}>", escape(c));
        }
        out += "</tr>";
    }
    out += "</tbody></table>";
    if let Some(f) = footer {
        out += &format!("<p>{}</p>", escape(f));
    }
    out
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
    if d.is_string() { format!("{d:?}") } else { display_scalar(d) }
}

/// A value as every front end shows it: text, and HTML for tables.
pub fn rendered(d: &Dynamic) -> Rendered {
    Rendered { plain: display(d), html: html(d) }
}

/// How a value prints in the REPL: tables for maps and records.
pub fn display(d: &Dynamic) -> String {
    render(d)
}

/// How a single value prints (lazy values, futures, failures by name).
pub fn display_scalar(d: &Dynamic) -> String {
    if let Some(x) = d.read_lock::<Delayed>() {
        return format!("Delayed('{}')", x.key);
    }
    if let Some(x) = d.read_lock::<LazyArray>() {
        return array_repr(&x);
    }
    if let Some(x) = d.read_lock::<LazyBag>() {
        return bag_repr(&x);
    }
    if let Some(x) = d.read_lock::<LazyFrame>() {
        return frame_repr(&x.f);
    }
    if let Some(x) = d.read_lock::<LazySeries>() {
        return series_repr(&x.s);
    }
    if let Some(x) = d.read_lock::<LocalFrame>() {
        return local_frame_text(&x.0);
    }
    if let Some(x) = d.read_lock::<LocalSeries>() {
        return local_series_text(&x.0);
    }
    if let Some(c) = d.read_lock::<brisk_engine::array::Chunk>() {
        return chunk_text(&c);
    }
    if let Some(f) = d.read_lock::<RFuture>() {
        return format!("{:?}", f.0);
    }
    if let Some(f) = d.read_lock::<TaskFailure>() {
        return f.to_string();
    }
    if d.is_string() {
        return format!("{d:?}");
    }
    d.to_string()
}

/// A shape, with `nan` for a length not known yet.
pub(crate) fn shape_text(a: &LazyArrayCore, shape: &[usize]) -> String {
    if !a.unknown {
        return fmt_shape(shape);
    }
    let parts: Vec<String> = shape
        .iter()
        .enumerate()
        .map(|(d, n)| if d == 0 { "nan".to_string() } else { n.to_string() })
        .collect();
    if parts.len() == 1 { format!("({},)", parts[0]) } else { format!("({})", parts.join(", ")) }
}

pub(crate) fn size_text(bytes: usize) -> String {
    let units = ["B", "kiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{bytes} B") } else { format!("{v:.2} {}", units[u]) }
}

/// Dask's one-line repr: `dask.array<name, shape=…, dtype=…, chunksize=…>`.
pub fn array_repr(x: &LazyArray) -> String {
    let a = &x.a;
    format!(
        "dask.array<{}, shape={}, dtype={}, chunksize={}, chunktype=ndarray>",
        brisk_engine::key::group_of(&a.name),
        shape_text(a, &a.shape()),
        a.dtype,
        shape_text(a, &a.chunksize())
    )
}

/// The summary table Dask shows for a lazy array.
pub fn array_summary(x: &LazyArray) -> String {
    let a = &x.a;
    let graph = brisk_engine::graph::layer::materialize(std::slice::from_ref(&a.layer));
    let layers = crate::collection::layer_count(&a.layer);
    let block_bytes = a.chunksize().iter().product::<usize>() * a.dtype.itemsize();
    let mut t = comfy_table::Table::new();
    t.load_style(comfy_table::presets::UTF8_FULL_CONDENSED);
    t.set_header(vec!["", "Array", "Chunk"]);
    let bytes = |n: usize| if a.unknown { "unknown".to_string() } else { size_text(n) };
    t.add_row(vec!["Bytes".to_string(), bytes(a.nbytes()), bytes(block_bytes)]);
    t.add_row(vec!["Shape".to_string(), shape_text(a, &a.shape()), shape_text(a, &a.chunksize())]);
    t.add_row(vec![
        "Dask graph".to_string(),
        format!("{} chunks in {layers} graph layers", a.nblocks()),
        format!("{} tasks", graph.len()),
    ]);
    t.add_row(vec!["Data type".to_string(), a.dtype.to_string(), "ndarray".to_string()]);
    format!("{}\n{t}", array_repr(x))
}

/// Dask's repr: `dask.bag<map, npartitions=4>`.
pub fn bag_repr(b: &LazyBag) -> String {
    format!("dask.bag<{}, npartitions={}>", b.b.label, b.b.npartitions())
}

/// Dask's repr: the structure without the data.
pub fn frame_repr(f: &DataFrame) -> String {
    let mut t = comfy_table::Table::new();
    t.load_style(comfy_table::presets::NOTHING);
    let mut header = vec![String::new()];
    header.extend(f.schema.names().map(String::from));
    t.set_header(header);
    let mut types = vec![format!("npartitions={}", f.npartitions())];
    types.extend(f.schema.cols.iter().map(|(_, d)| d.name().to_string()));
    t.add_row(types);
    format!("Dask DataFrame Structure:\n{t}\nDask Name: {}, {} columns", f.label, f.schema.cols.len())
}

pub fn series_repr(s: &Series) -> String {
    format!(
        "Dask Series Structure:\nnpartitions={}\n{}\nName: {}, dtype: {}",
        s.frame.npartitions(),
        s.dtype,
        s.name,
        s.dtype
    )
}

/// One cell as pandas prints it: `NaN` for a missing number, `None`
/// for a missing string, six significant digits for floats.
pub(crate) fn cell_text(v: &Value, numeric: bool) -> String {
    match v {
        Value::Unit if numeric => "NaN".into(),
        Value::Unit => "None".into(),
        Value::Float(f) => element(brisk_engine::array::Scalar::Float(*f)),
        Value::Bool(b) => {
            if *b {
                "True".into()
            } else {
                "False".into()
            }
        }
        other => other.to_string(),
    }
}

/// Cells of a local frame by (row, column), and the header.
pub(crate) fn cells(f: &Frame) -> (Vec<String>, Vec<Vec<Value>>, Vec<bool>) {
    let names = f.column_names();
    let cols: Vec<Vec<Value>> = names.iter().map(|n| brisk_engine::value::column_values(&f.0, n)).collect();
    let numeric = cols
        .iter()
        .map(|c| c.iter().all(|v| matches!(v, Value::Unit | Value::Int(_) | Value::Float(_))))
        .collect();
    (names, cols, numeric)
}

pub fn local_frame_text(f: &Frame) -> String {
    if f.height() == 0 {
        return format!("Empty DataFrame\nColumns: [{}]", f.column_names().join(", "));
    }
    let (names, cols, numeric) = cells(f);
    let footer = format!("{} rows × {} columns", f.height(), names.len());
    frame_table(&names, &|i, j| cell_text(&cols[j][i], numeric[j]), f.height(), &footer)
}

pub fn local_frame_html(f: &Frame) -> String {
    let (names, cols, numeric) = cells(f);
    let footer = format!("{} rows × {} columns", f.height(), names.len());
    frame_html(&names, &|i, j| cell_text(&cols[j][i], numeric[j]), f.height(), &footer)
}

pub fn local_series_text(f: &Frame) -> String {
    let (names, cols, numeric) = cells(f);
    let name = names.first().cloned().unwrap_or_default();
    if f.height() == 0 || cols.is_empty() {
        return format!("Series([], Name: {name})");
    }
    let footer = format!("{} rows, Name: {name}", f.height());
    frame_table(&names, &|i, _| cell_text(&cols[0][i], numeric[0]), f.height(), &footer)
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
    fn tables_have_html_too() {
        let mut m = Map::new();
        m.insert("a<b".into(), Dynamic::from_int(1));
        let h = html(&Dynamic::from_map(m)).expect("html");
        assert_eq!(
            h,
            "<table><thead><tr><th>key</th><th>value</th></tr></thead><tbody><tr><td>a&lt;b</td><td>1</td></tr></tbody></table>"
        );
        let h = html(&Dynamic::from_array((0..30).map(row).collect())).expect("html");
        assert!(h.contains("<td>n29</td>") && h.contains("<td>…</td>") && !h.contains("<td>n12</td>"), "{h}");
        assert!(h.ends_with("<p>30 rows × 2 columns</p>"), "{h}");
        assert_eq!(html(&Dynamic::from_int(3)), None);
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
