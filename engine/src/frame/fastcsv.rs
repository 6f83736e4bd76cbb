//! The CSV side of the one-pass groupby: a block read in cache-sized runs
//! of whole lines, filtered by simple comparisons and reduced in one pass
//! over the bytes, with no frame of the block built (a numeric field is
//! parsed where it starts and the parse finds its end, other fields are
//! scanned for the separator, a run's rows are gathered as group ids and
//! value columns and added with one loop per accumulator). The groups and
//! accumulators it shares with the frame side are in `fastagg`.

use polars::prelude::*;
use rustc_hash::FxHashMap;

use super::cells::{self, is_na};
use super::csv::CsvSpec;
use super::dtype::{DType, Schema};
use super::expr::{BinOp, Expr};
use super::fastagg::{Col, Num, Partial, ShortKeys, Vals};
use super::group::GroupSpec;
use super::stage::Stage;
use crate::value::Value;

/// A filter `column op number`.
struct Cmp {
    field: usize,
    op: BinOp,
    v: f64,
}

fn comparisons(e: &Expr, schema: &Schema, out: &mut Vec<Cmp>) -> Option<()> {
    match e {
        Expr::Bin(BinOp::And, a, b) => {
            comparisons(a, schema, out)?;
            comparisons(b, schema, out)
        }
        Expr::Bin(op @ (BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq), a, b) => {
            let (Expr::Col(c), Expr::Lit(v)) = (a.as_ref(), b.as_ref()) else { return None };
            let v = match v {
                Value::Int(i) => *i as f64,
                Value::Float(f) => *f,
                _ => return None,
            };
            let field =
                schema.cols.iter().position(|(n, t)| n == c && matches!(t, DType::Int64 | DType::Float64))?;
            out.push(Cmp { field, op: *op, v });
            Some(())
        }
        _ => None,
    }
}

/// A whole numeric field by pandas' rules (`cells`): an NA token is a
/// missing value, spaces around a number are allowed. `None` where the
/// field is not a number (the block then goes to the general path).
fn parse_num(b: &[u8], t: DType) -> Option<Option<Num>> {
    if is_na(b) {
        return Some(None);
    }
    match t {
        DType::Int64 => cells::int(b).map(|i| Some(Num::I(i))),
        _ => cells::float(b).map(|f| Some(Num::F(f))),
    }
}

/// The number at the start of `b` and the bytes it took, found while
/// parsing (no separate scan for the field's end). The caller checks that
/// a separator or line end follows. NaN is a missing value.
#[inline]
fn parse_num_prefix(b: &[u8], t: DType) -> Option<(Option<Num>, usize)> {
    match t {
        DType::Int64 => {
            let (neg, start) = match b.first() {
                Some(b'-') => (true, 1),
                Some(b'+') => (false, 1),
                _ => (false, 0),
            };
            let mut v: i64 = 0;
            let mut i = start;
            while let Some(d) = b.get(i).map(|c| c.wrapping_sub(b'0')).filter(|d| *d < 10) {
                // Accumulate negatively so that i64::MIN parses too.
                v = v.checked_mul(10)?.checked_sub(i64::from(d))?;
                i += 1;
            }
            if i == start {
                return None;
            }
            let v = if neg { v } else { v.checked_neg()? };
            Some((Some(Num::I(v)), i))
        }
        _ => {
            let (f, n) = super::decimal::parse_prefix(b)?;
            Some(((!f.is_nan()).then_some(Num::F(f)), n))
        }
    }
}

/// The end of the field starting at `p`: the first separator, `\n` or
/// `"`. A quote is never a field's end, so the caller's check for a
/// separator there fails and the block goes to the general path, which
/// reads quoting; no separate scan for quotes is needed.
#[inline]
fn field_end(bytes: &[u8], mut p: usize, sep: u8) -> usize {
    // Fields are short as a rule: eight bytes are tested at once (a SIMD
    // call's set-up costs more than most fields take).
    const ONES: u64 = 0x0101_0101_0101_0101;
    let (seps, ends, quotes) = (ONES * u64::from(sep), ONES * u64::from(b'\n'), ONES * u64::from(b'"'));
    while let Some(w) = bytes.get(p..p + 8) {
        let w = u64::from_le_bytes(w.try_into().unwrap_or_default());
        let hit = zero_bytes(w ^ seps) | zero_bytes(w ^ ends) | zero_bytes(w ^ quotes);
        if hit != 0 {
            return p + hit.trailing_zeros() as usize / 8;
        }
        p += 8;
    }
    p + bytes[p..].iter().position(|&b| b == sep || b == b'\n' || b == b'"').unwrap_or(bytes.len() - p)
}

/// The high bit of each zero byte of `x` set. Bytes above the first zero
/// may be flagged wrongly (a borrow), so only the lowest flag is exact.
#[inline]
fn zero_bytes(x: u64) -> u64 {
    x.wrapping_sub(0x0101_0101_0101_0101) & !x & 0x8080_8080_8080_8080
}

/// What the row loop does with one field of the file.
#[derive(Clone, Copy, Default)]
struct Role {
    /// Its index among the group keys (its text is kept).
    key: Option<usize>,
    /// Its slot among the parsed numbers (a value or a filter column).
    num: Option<usize>,
    /// Its type, for parsing.
    t: Option<DType>,
}

/// A groupby partial built from CSV bytes fed in runs of whole lines
/// (the header already removed): every row parsed and filtered as it is
/// met, each run's kept rows added to their groups at the run's end, with
/// no frame of the block built.
pub(crate) struct CsvGroups<'a> {
    g: &'a GroupSpec,
    sep: u8,
    roles: Vec<Role>,
    /// The filters, each on a number slot.
    filters: Vec<(usize, Cmp)>,
    keys: Vec<(usize, DType)>,
    acc: Partial,
    /// This row's numbers: `acc.values` first, then filter-only columns.
    nums: Vec<Option<Num>>,
    /// This row's key fields, as byte ranges of the current run.
    spans: Vec<(usize, usize)>,
    /// The current run's kept rows: their groups and values (by slot),
    /// added to the accumulators at the run's end.
    gids: Vec<u32>,
    vals: Vec<Vals>,
    by_short: ShortKeys,
    by_text: FxHashMap<Vec<u8>, u32>,
    composite: Vec<u8>,
    /// Per key, its text in each group (group order).
    key_text: Vec<Vec<Vec<u8>>>,
}

impl<'a> CsvGroups<'a> {
    /// `None` when the fast path does not apply to these stages and spec.
    pub(crate) fn new(spec: &CsvSpec, stages: &[Stage], g: &'a GroupSpec) -> Option<CsvGroups<'a>> {
        let schema = &spec.schema;
        let ncols = schema.cols.len();
        if ncols == 0 || g.by.is_empty() {
            return None;
        }
        let mut cmps = Vec::new();
        for s in stages {
            match s {
                Stage::Project(_) => {}
                Stage::Filter(e) => comparisons(e, schema, &mut cmps)?,
                _ => return None,
            }
        }
        let field_of = |c: &str| schema.cols.iter().position(|(n, _)| n == c);
        let mut roles = vec![Role::default(); ncols];
        let mut keys: Vec<(usize, DType)> = Vec::new();
        for b in &g.by {
            let i = field_of(b)?;
            let t = schema.cols[i].1;
            if !matches!(t, DType::Str | DType::Int64) || roles[i].key.is_some() {
                return None;
            }
            roles[i].key = Some(keys.len());
            keys.push((i, t));
        }
        let acc = Partial::new(g, |c| field_of(c).map(|i| (i, schema.cols[i].1)))?;
        for (slot, (i, t)) in acc.values.iter().enumerate() {
            roles[*i].num = Some(slot);
            roles[*i].t = Some(*t);
        }
        let mut slots = acc.values.len();
        let mut filters = Vec::new();
        for c in cmps {
            let r = &mut roles[c.field];
            let slot = match r.num {
                Some(s) => s,
                None => {
                    r.num = Some(slots);
                    r.t = Some(schema.cols[c.field].1);
                    slots += 1;
                    slots - 1
                }
            };
            filters.push((slot, c));
        }
        let vals = acc
            .values
            .iter()
            .map(|(_, t)| if *t == DType::Int64 { Vals::I(Vec::new()) } else { Vals::F(Vec::new()) })
            .collect();
        Some(CsvGroups {
            g,
            sep: spec.sep,
            roles,
            filters,
            key_text: vec![Vec::new(); keys.len()],
            spans: vec![(0, 0); keys.len()],
            keys,
            acc,
            nums: vec![None; slots],
            gids: Vec::new(),
            vals,
            by_short: ShortKeys::new(),
            by_text: FxHashMap::default(),
            composite: Vec::new(),
        })
    }

    /// Add the rows of `bytes`, whole lines (the last may lack its `\n`).
    /// `None` where the fast path cannot give the general path's answer
    /// (a quote, a field that does not parse, a row of other width).
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Option<()> {
        let (sep, len, ncols) = (self.sep, bytes.len(), self.roles.len());
        let mut p = 0;
        while p < len {
            // A blank line holds no row.
            match bytes[p] {
                b'\n' => {
                    p += 1;
                    continue;
                }
                b'\r' if bytes.get(p + 1).is_none_or(|&c| c == b'\n') => {
                    p += 2;
                    continue;
                }
                _ => {}
            }
            // Filters: a missing value passes no comparison (NumPy's rule).
            // A row that fails one is still walked to check its width.
            let mut keep = true;
            for f in 0..ncols {
                let role = self.roles[f];
                let start = p;
                match (role.num, role.key) {
                    (Some(slot), None) if keep => {
                        let t = role.t?;
                        let at_end = p == len || bytes[p] == sep || bytes[p] == b'\n' || bytes[p] == b'\r';
                        self.nums[slot] = if at_end {
                            None
                        } else {
                            // A number that does not end at the field's end
                            // (an NA token, spaces, `Infinity`) is read whole
                            // by pandas' rules.
                            match parse_num_prefix(&bytes[p..], t).filter(|(_, n)| {
                                bytes.get(p + n).is_none_or(|&c| c == sep || c == b'\n' || c == b'\r')
                            }) {
                                Some((v, n)) => {
                                    p += n;
                                    v
                                }
                                None => {
                                    let end = field_end(bytes, p, sep);
                                    let mut field = &bytes[p..end];
                                    if f + 1 == ncols {
                                        field = field.strip_suffix(b"\r").unwrap_or(field);
                                    }
                                    p = end;
                                    parse_num(field, t)?
                                }
                            }
                        };
                        if !self.passes(slot) {
                            keep = false;
                        }
                    }
                    _ => {
                        p = field_end(bytes, p, sep);
                        if keep && (role.key.is_some() || role.num.is_some()) {
                            let mut end = p;
                            if f + 1 == ncols && end > start && bytes[end - 1] == b'\r' {
                                end -= 1;
                            }
                            if let Some(k) = role.key {
                                self.spans[k] = (start, end);
                            }
                            if let Some(slot) = role.num {
                                self.nums[slot] = parse_num(&bytes[start..end], role.t?)?;
                                if !self.passes(slot) {
                                    keep = false;
                                }
                            }
                        }
                    }
                }
                // The field's end: a separator, or the line's end for the last.
                if f + 1 < ncols {
                    if bytes.get(p) != Some(&sep) {
                        return None;
                    }
                    p += 1;
                } else {
                    match bytes.get(p) {
                        None => {}
                        Some(b'\n') => p += 1,
                        Some(b'\r') if bytes.get(p + 1).is_none_or(|&c| c == b'\n') => p += 2,
                        Some(_) => return None,
                    }
                }
            }
            // Rows with a missing key (empty or an NA token) are dropped,
            // as pandas' groupby does (`dropna=True`).
            if !keep || self.spans.iter().any(|(a, b)| is_na(&bytes[*a..*b])) {
                continue;
            }
            let gid = self.group_of(bytes)?;
            self.gids.push(gid as u32);
            for (col, x) in self.vals.iter_mut().zip(&self.nums) {
                col.push(*x)?;
            }
        }
        let cols: Vec<Col<'_>> = self.vals.iter().map(Vals::col).collect();
        let added = self.acc.add_batch(&self.gids, &cols);
        self.gids.clear();
        self.vals.iter_mut().for_each(Vals::clear);
        added
    }

    /// Whether this row's number in `slot` passes the filters on it.
    #[inline]
    fn passes(&self, slot: usize) -> bool {
        self.filters.iter().filter(|(s, _)| *s == slot).all(|(_, c)| {
            let Some(v) = self.nums[slot] else { return false };
            let v = v.f();
            match c.op {
                BinOp::Lt => v < c.v,
                BinOp::Le => v <= c.v,
                BinOp::Gt => v > c.v,
                BinOp::Ge => v >= c.v,
                _ => v == c.v,
            }
        })
    }

    /// The group of this row's keys (`spans` into `bytes`), made if new.
    #[inline]
    fn group_of(&mut self, bytes: &[u8]) -> Option<usize> {
        let next = self.key_text.first().map_or(0, Vec::len) as u32;
        let gid = if let [(a, b)] = self.spans[..]
            && self.keys[0].1 == DType::Str
        {
            let k = &bytes[a..b];
            if k.len() < 16 {
                // Short keys as one number (bytes, then the length in the
                // top byte): no string hash or compare. Mid-run the 16
                // bytes are loaded at once and masked, as a byte copy
                // into a buffer would stall the load that follows it.
                let bits = match bytes.get(a..a + 16) {
                    Some(w) => u128::from_le_bytes(w.try_into().ok()?) & ((1u128 << (8 * k.len())) - 1),
                    None => {
                        let mut w = [0u8; 16];
                        w[..k.len()].copy_from_slice(k);
                        u128::from_le_bytes(w)
                    }
                };
                self.by_short.get_or_insert(bits | (k.len() as u128) << 120, next)
            } else {
                match self.by_text.get(k) {
                    Some(g) => *g,
                    None => {
                        self.by_text.insert(k.to_vec(), next);
                        next
                    }
                }
            }
        } else {
            self.composite.clear();
            for ((_, t), (a, b)) in self.keys.iter().zip(&self.spans) {
                let field = &bytes[*a..*b];
                match t {
                    DType::Int64 => {
                        let v: i64 = std::str::from_utf8(field).ok()?.parse().ok()?;
                        self.composite.extend_from_slice(&v.to_le_bytes());
                    }
                    _ => {
                        self.composite.extend_from_slice(field);
                        self.composite.push(0xFF);
                    }
                }
            }
            match self.by_text.get(self.composite.as_slice()) {
                Some(g) => *g,
                None => {
                    self.by_text.insert(self.composite.clone(), next);
                    next
                }
            }
        };
        if gid == next {
            for (texts, (a, b)) in self.key_text.iter_mut().zip(&self.spans) {
                texts.push(bytes[*a..*b].to_vec());
            }
            self.acc.push_group();
        }
        Some(gid as usize)
    }

    /// The partial frame, as `GroupSpec::partial` makes it.
    pub(crate) fn finish(self) -> Option<DataFrame> {
        let mut cols: Vec<Column> = Vec::with_capacity(self.keys.len());
        for ((name, (_, t)), texts) in self.g.by.iter().zip(&self.keys).zip(&self.key_text) {
            let c = match t {
                DType::Int64 => {
                    let v: Vec<i64> = texts
                        .iter()
                        .map(|k| std::str::from_utf8(k).ok().and_then(|s| s.parse().ok()))
                        .collect::<Option<_>>()?;
                    Series::new(name.as_str().into(), v)
                }
                _ => {
                    let v: Vec<&str> =
                        texts.iter().map(|k| std::str::from_utf8(k).ok()).collect::<Option<_>>()?;
                    Series::new(name.as_str().into(), v)
                }
            };
            cols.push(c.into_column());
        }
        self.acc.frame(self.g, cols)
    }
}

/// The groupby partial of CSV block bytes (the header already removed),
/// or `None` when the fast path does not apply or a field does not parse.
pub fn group_partial(spec: &CsvSpec, bytes: &[u8], stages: &[Stage], g: &GroupSpec) -> Option<DataFrame> {
    let mut groups = CsvGroups::new(spec, stages, g)?;
    groups.feed(bytes)?;
    groups.finish()
}

/// A groupby partial of block `[start, end)` by the fused fast path, or
/// `None` where it does not apply (the caller then reads the block).
pub fn read_group(
    spec: &CsvSpec,
    path: &str,
    start: u64,
    end: u64,
    stages: &[super::stage::Stage],
    g: &super::group::GroupSpec,
) -> Result<Option<DataFrame>, crate::error::TaskError> {
    thread_local! {
        /// One read buffer per worker thread, reused from block to block.
        static RUNS: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let Some(mut groups) = CsvGroups::new(spec, stages, g) else { return Ok(None) };
    let mut header = start == 0 && spec.header;
    let fed = RUNS.with(|cell| {
        let mut buf = cell.borrow_mut();
        let fed = crate::io::for_each_lines(path, start, end, &mut buf, |lines| {
            let lines = if header {
                header = false;
                lines.iter().position(|&b| b == b'\n').map_or(&[][..], |i| &lines[i + 1..])
            } else {
                lines
            };
            groups.feed(lines)
        });
        // Keep the buffer, but not one grown by some very long line.
        if buf.capacity() > 16 << 20 {
            *buf = Vec::new();
        }
        fed
    })?;
    Ok(fed.and_then(|()| groups.finish()))
}

#[cfg(test)]
mod tests {
    use super::super::fastagg::frame_partial;
    use super::*;
    use crate::frame::red::Red;

    fn spec() -> CsvSpec {
        CsvSpec {
            sep: b',',
            header: true,
            schema: Schema::new(vec![
                ("k".into(), DType::Str),
                ("n".into(), DType::Int64),
                ("x".into(), DType::Float64),
                ("y".into(), DType::Int64),
            ]),
        }
    }

    fn same(a: &DataFrame, b: &DataFrame, what: &str) {
        assert_eq!(a.get_column_names(), b.get_column_names(), "{what}");
        assert_eq!(a.height(), b.height(), "{what}");
        for (ca, cb) in a.columns().iter().zip(b.columns()) {
            for i in 0..a.height() {
                let (x, y) =
                    (crate::value::cell(ca.get(i).expect("a")), crate::value::cell(cb.get(i).expect("b")));
                let ok = match (&x, &y) {
                    (Value::Float(p), Value::Float(q)) => {
                        (p.is_nan() && q.is_nan()) || (p - q).abs() <= 1e-9 * p.abs().max(q.abs()).max(1.0)
                    }
                    _ => x == y,
                };
                assert!(ok, "{what}: column {} row {i}: {x:?} vs {y:?}", ca.name());
            }
        }
    }

    /// The fast path and the general path give the same answer.
    #[test]
    fn fast_partials_equal_the_general_ones() {
        let mut text = String::new();
        for i in 0..500i64 {
            let k = if i % 17 == 0 {
                String::new()
            } else if i % 19 == 0 {
                format!("a key of sixteen bytes or more {}", i % 2)
            } else {
                format!("k{}", i % 7)
            };
            if i % 50 == 49 {
                text += "\n";
            }
            let x = if i % 11 == 0 {
                String::new()
            } else if i % 23 == 0 {
                "NaN".into()
            } else {
                format!("{}.25", i % 13 - 6)
            };
            let y = if i % 5 == 0 { String::new() } else { (i * 31 % 97 - 40).to_string() };
            text += &format!("{k},{},{x},{y}\r\n", i % 3);
        }
        let bytes = text.as_bytes();
        let sp = spec();
        let general = super::super::csv::parse(&sp, bytes, None).expect("parse");
        let reds = [Red::Sum, Red::Mean, Red::Min, Red::Max, Red::Count, Red::Std, Red::Size];
        for by in [vec!["k".to_string()], vec!["k".to_string(), "n".to_string()], vec!["n".to_string()]] {
            for col in ["x", "y"] {
                let aggs = reds
                    .iter()
                    .map(|r| {
                        (
                            format!("{}{col}", r.name()),
                            if *r == Red::Size { String::new() } else { col.to_string() },
                            *r,
                            sp.schema.get(col).unwrap_or(DType::Str),
                        )
                    })
                    .collect();
                let g = GroupSpec { by: by.clone(), aggs };
                let cut = Expr::bin(BinOp::Gt, Expr::col("x"), Expr::Lit(Value::Float(-3.0)));
                for stages in [vec![], vec![Stage::Filter(cut.clone())]] {
                    let fast = group_partial(&sp, bytes, &stages, &g).expect("fast path applies");
                    let mut df = general.clone();
                    for s in &stages {
                        df = s.apply(df).expect("stage");
                    }
                    let slow = g.partial(&df).expect("general");
                    let a = g.finish(&g.regroup(&fast).expect("regroup")).expect("finish");
                    let b = g.finish(&g.regroup(&slow).expect("regroup")).expect("finish");
                    same(&a, &b, &format!("by {by:?} on {col}, {} stages", stages.len()));
                }
            }
        }
    }

    /// Lines fed in several runs give the partial of one feed, and many
    /// short keys (the table grows) or keys at a run's very end hash alike.
    #[test]
    fn runs_and_many_keys_give_one_partial() {
        let sp = spec();
        let mut text = String::new();
        for i in 0..6000i64 {
            text += &format!("k{},{},{}.5,{}\n", i * 7919 % 3001, i % 3, i % 100, i64::MIN + i);
        }
        let g = GroupSpec {
            by: vec!["k".into()],
            aggs: vec![
                ("x".into(), "x".into(), Red::Sum, DType::Float64),
                ("y".into(), "y".into(), Red::Min, DType::Int64),
            ],
        };
        let one = group_partial(&sp, text.as_bytes(), &[], &g).expect("one feed");
        assert_eq!(one.height(), 3001);
        let mut groups = CsvGroups::new(&sp, &[], &g).expect("applies");
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        for run in lines.chunks(777) {
            groups.feed(run.concat().as_bytes()).expect("feeds");
        }
        let runs = groups.finish().expect("finish");
        let general = super::super::csv::parse(&sp, text.as_bytes(), None).expect("parse");
        let slow = g.partial(&general).expect("general");
        let fin = |df: &DataFrame| g.finish(&g.regroup(df).expect("regroup")).expect("finish");
        same(&fin(&one), &fin(&runs), "one feed and runs");
        same(&fin(&one), &fin(&slow), "fast and general");
        // An int beyond i64 falls back; so does a number with trailing text.
        assert!(group_partial(&sp, b"a,1,2.0,9223372036854775808\n", &[], &g).is_none());
        assert!(group_partial(&sp, b"a,1,2.0x,3\n", &[], &g).is_none());
        assert!(group_partial(&sp, b"a,1,2.0,3,4\n", &[], &g).is_none());
    }

    #[test]
    fn short_keys_keep_their_ids_through_growth() {
        let mut t = ShortKeys::new();
        let keys: Vec<u128> = (0..5000u128).map(|i| if i == 0 { 0 } else { i << 100 | i }).collect();
        for (g, k) in keys.iter().enumerate() {
            assert_eq!(t.get_or_insert(*k, g as u32), g as u32);
        }
        for (g, k) in keys.iter().enumerate().rev() {
            assert_eq!(t.get_or_insert(*k, 99_999), g as u32, "key {k:x}");
        }
        assert!(t.keys.len() >= 2 * t.len);
    }

    #[test]
    fn frame_partials_equal_polars_group_by() {
        let sp = spec();
        let mut text = String::new();
        for i in 0..300i64 {
            let k = if i % 17 == 0 { String::new() } else { format!("k{}", i % 5) };
            let x = if i % 11 == 0 {
                String::new()
            } else if i % 23 == 0 {
                "NaN".into()
            } else {
                format!("{}.5", i % 13 - 6)
            };
            // Missing ints too (the column is then copied, not borrowed).
            let y = if i % 9 == 0 { String::new() } else { (i * 7 % 31).to_string() };
            text += &format!("{k},{},{x},{y}\n", i % 4);
        }
        let mut df = super::super::csv::parse(&sp, text.as_bytes(), None).expect("parse");
        // A key without missing values, short (in the Arrow view) and long.
        let w: Vec<String> = (0..300)
            .map(|i| {
                if i % 7 == 0 { format!("a key longer than twelve {}", i % 2) } else { format!("w{}", i % 3) }
            })
            .collect();
        df.with_column(Series::new("w".into(), w).into_column()).expect("w");
        // Value columns without missing values (read in place, not copied).
        let z: Vec<f64> = (0..300).map(|i| f64::from(i % 17) - 4.25).collect();
        let c: Vec<i64> = (0..300).map(|i| i * 13 % 41 - 20).collect();
        df.with_column(Series::new("z".into(), z).into_column()).expect("z");
        df.with_column(Series::new("c".into(), c).into_column()).expect("c");
        let dtype = |c: &str| match c {
            "z" => DType::Float64,
            "c" => DType::Int64,
            _ => sp.schema.get(c).unwrap_or(DType::Str),
        };
        for by in ["k", "n", "w"] {
            let aggs = [Red::Sum, Red::Mean, Red::Min, Red::Max, Red::Count, Red::Var, Red::Size]
                .iter()
                .flat_map(|r| {
                    ["x", "y", "z", "c"].map(|c| {
                        let src = if *r == Red::Size { String::new() } else { c.to_string() };
                        (format!("{}{c}", r.name()), src, *r, dtype(c))
                    })
                })
                .collect();
            let g = GroupSpec { by: vec![by.to_string()], aggs };
            let fast = frame_partial(&g, &df).expect("fast path applies");
            let slow = g.polars_partial(&df).expect("polars");
            let a = g.finish(&g.regroup(&fast).expect("regroup")).expect("finish");
            let b = g.finish(&g.regroup(&slow).expect("regroup")).expect("finish");
            same(&a, &b, &format!("frame partial by {by}"));
        }
    }

    #[test]
    fn quotes_other_stages_and_bad_fields_fall_back() {
        let sp = spec();
        let g = GroupSpec {
            by: vec!["k".into()],
            aggs: vec![("x".into(), "x".into(), Red::Sum, DType::Float64)],
        };
        assert!(group_partial(&sp, b"\"a\",1,2.0,3\n", &[], &g).is_none());
        // A quote in a skipped field, in the last field, or after many rows.
        assert!(group_partial(&sp, b"a,\"1\",2.0,3\n", &[], &g).is_none());
        assert!(group_partial(&sp, b"a,1,2.0,\"3\"\n", &[], &g).is_none());
        assert!(group_partial(&sp, b"a,1,2.0,3\"\n", &[], &g).is_none());
        let mut long = "abc,1,2.5,3\n".repeat(1000);
        long += "a\"b,1,2.5,3\n";
        assert!(group_partial(&sp, long.as_bytes(), &[], &g).is_none());
        assert!(group_partial(&sp, b"a,1,oops,3\n", &[], &g).is_none());
        assert!(group_partial(&sp, b"a,1,2.0\n", &[], &g).is_none());
        assert!(group_partial(&sp, b"a,1,2.0,3\n", &[Stage::DropNa(vec!["x".into()])], &g).is_none());
        assert!(group_partial(&sp, b"a,1,2.0,3\n", &[], &g).is_some());
    }
}
