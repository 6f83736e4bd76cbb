//! The dashboard's widgets: pure functions from a `Model` to ratatui
//! widgets and buffer cells, tested against a ratatui test buffer. The
//! inline panel and the full screen share them.

use std::hash::{Hash, Hasher};

use brisk_engine::gpu::Gpus;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Sparkline, Table, Widget};

use super::model::{Group, Model, bytes, thousands};

/// Groups the inline panel shows at most (the rest are counted).
pub const INLINE_GROUPS: usize = 6;

const NAME_WIDTH: usize = 18;

/// Colours told apart on dark and light terminals, one per task group.
const PALETTE: [Color; 8] = [
    Color::Cyan,
    Color::Yellow,
    Color::Magenta,
    Color::Green,
    Color::Blue,
    Color::LightRed,
    Color::LightCyan,
    Color::LightGreen,
];

pub fn group_colour(name: &str) -> Color {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    PALETTE[(h.finish() % PALETTE.len() as u64) as usize]
}

/// The worker table: one row per worker, and one more per extra GPU.
pub fn worker_table(m: &Model) -> Table<'static> {
    let header = Row::new(["worker", "threads", "memory", "spilled", "CPU", "GPU"])
        .style(Style::new().add_modifier(Modifier::BOLD));
    let widths = [
        Constraint::Length(if m.cluster.is_empty() { 8 } else { 14 }),
        Constraint::Length(8),
        Constraint::Length(22),
        Constraint::Length(9),
        Constraint::Length(6),
        Constraint::Fill(1),
    ];
    if !m.cluster.is_empty() {
        let rows = m.cluster.iter().map(|w| {
            let memory = match w.memory_limit {
                Some(limit) => format!("{} / {}", bytes(w.memory), bytes(limit)),
                None => bytes(w.memory),
            };
            Row::new(vec![
                w.name.clone(),
                format!("{}/{}", w.threads_busy, w.threads),
                memory,
                bytes(w.spilled),
                "-".to_string(),
                w.gpu_label.clone().unwrap_or_default(),
            ])
        });
        return Table::new(rows, widths).header(header);
    }
    let w = &m.worker;
    let memory = match w.memory_limit {
        Some(limit) => format!("{} / {}", bytes(w.memory), bytes(limit)),
        None => bytes(w.memory),
    };
    let cpu = w.cpu_percent.map_or("-".to_string(), |c| format!("{c:.0}%"));
    let gpus: Vec<String> = match &w.gpus {
        Gpus::Devices(d) => d
            .iter()
            .map(|g| {
                let own = g.brisk_used.map(|b| format!(" (brisk {})", bytes(b))).unwrap_or_default();
                format!("{} {} / {}{own}", g.name, bytes(g.memory_used), bytes(g.memory_total))
            })
            .collect(),
        Gpus::None(_) => vec!["no GPU".into()],
    };
    let mut rows = vec![Row::new(vec![
        w.name.clone(),
        format!("{}/{}", w.threads_busy, w.threads),
        memory,
        bytes(w.spilled),
        cpu,
        gpus[0].clone(),
    ])];
    rows.extend(gpus[1..].iter().map(|g| Row::new(vec![String::new(); 5].into_iter().chain([g.clone()]))));
    Table::new(rows, widths).header(header)
}

pub fn worker_table_height(m: &Model) -> u16 {
    if !m.cluster.is_empty() {
        return 1 + m.cluster.len().min(32) as u16;
    }
    let gpus = match &m.worker.gpus {
        Gpus::Devices(d) => d.len().max(1),
        Gpus::None(_) => 1,
    };
    1 + gpus as u16
}

/// One group's line: name, bar, done/total, and what is in memory/erred.
pub fn group_line(g: &Group, width: u16) -> Line<'static> {
    let name: String = if g.name.chars().count() > NAME_WIDTH {
        g.name.chars().take(NAME_WIDTH - 1).chain(['…']).collect()
    } else {
        format!("{:<NAME_WIDTH$}", g.name)
    };
    let counts = format!(" {}/{}", g.done, g.total);
    let mut tail = format!("  in memory {}", g.in_memory);
    if g.erred > 0 {
        tail += &format!("  erred {}", g.erred);
    }
    let fixed = NAME_WIDTH + 1 + counts.len() + tail.len();
    let bar = (width as usize).saturating_sub(fixed).clamp(10, 40);
    let filled = (g.done as usize * bar).checked_div(g.total as usize).unwrap_or(bar).min(bar);
    let colour = if g.erred > 0 { Color::Red } else { group_colour(&g.name) };
    Line::from(vec![
        Span::raw(name),
        Span::raw(" "),
        Span::styled("█".repeat(filled), Style::new().fg(colour)),
        Span::styled("░".repeat(bar - filled), Style::new().fg(Color::DarkGray)),
        Span::raw(counts),
        Span::styled(tail, Style::new().fg(if g.erred > 0 { Color::Red } else { Color::Reset })),
    ])
}

/// `1,234 tasks/s | 2.1 s | 512/1,024 tasks`
pub fn status_line(m: &Model) -> Line<'static> {
    let (done, total) = m.totals();
    Line::from(format!(
        "{} tasks/s | {:.1} s | {}/{} tasks",
        thousands(m.tasks_per_second),
        m.elapsed.as_secs_f64(),
        thousands(done as f64),
        thousands(total as f64)
    ))
}

/// Lines of the group list, at most `max` groups (unfinished ones first,
/// then the most recent).
fn group_lines(m: &Model, width: u16, max: usize) -> Vec<Line<'static>> {
    let mut order: Vec<&Group> = m.groups.iter().collect();
    order.sort_by_key(|g| g.done >= g.total);
    let mut lines: Vec<Line<'static>> = order.iter().take(max).map(|g| group_line(g, width)).collect();
    if order.len() > max {
        lines.push(Line::from(format!("… and {} more groups", order.len() - max)));
    }
    lines
}

/// Rows the inline panel needs.
pub fn inline_height(m: &Model) -> u16 {
    let groups = m.groups.len().min(INLINE_GROUPS) + usize::from(m.groups.len() > INLINE_GROUPS);
    worker_table_height(m) + groups as u16 + 1
}

/// The inline panel: the worker table, one bar per group, a status line.
pub fn render_inline(m: &Model, area: Rect, buf: &mut Buffer) {
    let [table, groups, status] = Layout::vertical([
        Constraint::Length(worker_table_height(m)),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(area);
    Widget::render(worker_table(m), table, buf);
    Paragraph::new(group_lines(m, area.width, INLINE_GROUPS)).render(groups, buf);
    Paragraph::new(status_line(m)).render(status, buf);
}

/// Lines of programs' output the full screen shows (the latest).
const LOG_ROWS: usize = 8;

/// The full screen: workers, progress, programs' output (once there is
/// some), the task stream and memory over time.
pub fn render_full(m: &Model, area: Rect, buf: &mut Buffer) {
    // The log takes room only once a program printed something.
    let log_rows = if m.log.is_empty() { 0 } else { m.log.len().min(LOG_ROWS) as u16 + 2 };
    let [top, groups, log, bottom, help] = Layout::vertical([
        Constraint::Length(worker_table_height(m) + 2),
        Constraint::Length((m.groups.len().clamp(1, 12) + 3) as u16),
        Constraint::Length(log_rows),
        Constraint::Min(6),
        Constraint::Length(1),
    ])
    .areas(area);
    let bordered = |title: String| Block::new().borders(Borders::ALL).title(title);
    if log_rows > 0 {
        let shown = (log.height.saturating_sub(2) as usize).min(m.log.len());
        let lines: Vec<Line<'_>> = m.log.iter().skip(m.log.len() - shown).map(|l| Line::from(&**l)).collect();
        Paragraph::new(lines).block(bordered(" Log (programs' output) ".into())).render(log, buf);
    }
    Widget::render(worker_table(m).block(bordered(" Workers ".into())), top, buf);
    let mut lines = group_lines(m, groups.width.saturating_sub(2), 12);
    if lines.is_empty() {
        lines.push(Line::from("no tasks yet"));
    }
    lines.push(status_line(m));
    Paragraph::new(lines).block(bordered(" Progress ".into())).render(groups, buf);
    let [stream, memory] =
        Layout::horizontal([Constraint::Percentage(65), Constraint::Percentage(35)]).areas(bottom);
    let stream_block = bordered(" Task stream (threads × time) ".into());
    let inner = stream_block.inner(stream);
    stream_block.render(stream, buf);
    render_stream(m, inner, buf);
    let peak = m.memory.iter().map(|x| x.1).max().unwrap_or(0);
    let data: Vec<u64> = m.memory.iter().map(|x| x.1).collect();
    let tail = &data[data.len().saturating_sub(memory.width.saturating_sub(2) as usize)..];
    Sparkline::default()
        .block(bordered(format!(" Memory {} (peak {}) ", bytes(m.worker.memory), bytes(peak))))
        .data(tail)
        .style(Style::new().fg(Color::Cyan))
        .render(memory, buf);
    Paragraph::new("q: back to the prompt   Ctrl-C: cancel the running compute")
        .style(Style::new().add_modifier(Modifier::DIM))
        .render(help, buf);
}

/// What ran where, over time: one row per thread, time along the row
/// (the latest span that fits), each task a run of cells in its group's
/// colour; failed tasks in red. The last row names the groups.
pub fn render_stream(m: &Model, area: Rect, buf: &mut Buffer) {
    if area.height < 2 || area.width < 8 || m.stream.is_empty() {
        Paragraph::new("no tasks have run since the dashboard opened").render(area, buf);
        return;
    }
    let rows = (area.height - 1) as usize;
    let width = area.width as u64;
    let end = m.stream.iter().map(|r| r.stop_us).max().unwrap_or(0);
    let start = m.stream.iter().map(|r| r.start_us).min().unwrap_or(0);
    // At most 10 s across, so recent work stays readable.
    let span = (end - start).clamp(1, 10_000_000);
    let from = end.saturating_sub(span);
    let col = |t: u64| ((t.saturating_sub(from)) * (width - 1) / span).min(width - 1) as u16;
    for r in m.stream.iter().filter(|r| r.stop_us >= from && r.thread < rows) {
        let style = if r.ok { Style::new().fg(group_colour(&r.group)) } else { Style::new().fg(Color::Red) };
        let symbol = if r.ok { "█" } else { "×" };
        for x in col(r.start_us)..=col(r.stop_us) {
            buf[(area.x + x, area.y + r.thread as u16)].set_symbol(symbol).set_style(style);
        }
    }
    let mut seen: Vec<&str> = Vec::new();
    for r in m.stream.iter().rev() {
        if !seen.contains(&&*r.group) {
            seen.push(&r.group);
        }
    }
    seen.sort_unstable();
    let legend: Vec<Span<'static>> = seen
        .iter()
        .flat_map(|g| [Span::styled("■ ", Style::new().fg(group_colour(g))), Span::raw(format!("{g}  "))])
        .chain([Span::raw(format!("| {:.1} s across", span as f64 / 1e6))])
        .collect();
    Paragraph::new(Line::from(legend)).render(Rect { y: area.y + area.height - 1, height: 1, ..area }, buf);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use brisk_engine::gpu::GpuInfo;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    use super::*;
    use crate::dash::model::{Ran, Worker};

    /// The text of each row of a buffer (what a person reads on the screen).
    fn buffer_text(buf: &Buffer) -> Vec<String> {
        let area = buf.area;
        (0..area.height)
            .map(|y| {
                let row: String = (0..area.width).map(|x| buf[(area.x + x, area.y + y)].symbol()).collect();
                row.trim_end().to_string()
            })
            .collect()
    }

    fn model(gpus: Gpus) -> Model {
        let mut m = Model::new(&Default::default());
        m.worker = Worker {
            name: "local".into(),
            threads_busy: 3,
            threads: 8,
            memory: 3 << 29,
            memory_limit: Some(16 << 30),
            spilled: 0,
            cpu_percent: Some(712.4),
            gpus,
            gpu_label: None,
        };
        m.groups = vec![
            Group { name: Arc::from("random"), total: 100, done: 100, in_memory: 4, erred: 0, processing: 0 },
            Group { name: Arc::from("sum"), total: 40, done: 10, in_memory: 2, erred: 1, processing: 3 },
        ];
        m.tasks_per_second = 1234.0;
        m.elapsed = Duration::from_millis(2100);
        m
    }

    fn draw(m: &Model, w: u16, h: u16, full: bool) -> Vec<String> {
        let mut term = Terminal::new(TestBackend::new(w, h)).expect("terminal");
        term.draw(|f| {
            if full {
                render_full(m, f.area(), f.buffer_mut())
            } else {
                render_inline(m, f.area(), f.buffer_mut())
            }
        })
        .expect("draw");
        buffer_text(term.backend().buffer())
    }

    #[test]
    fn the_inline_panel_shows_workers_groups_and_rate() {
        let m = model(Gpus::None("no GPU device".into()));
        assert_eq!(inline_height(&m), 5);
        let rows = draw(&m, 100, inline_height(&m), false);
        assert!(
            rows[0].starts_with("worker") && rows[0].contains("threads") && rows[0].contains("GPU"),
            "{rows:?}"
        );
        assert!(rows[1].contains("local") && rows[1].contains("3/8"), "{rows:?}");
        assert!(
            rows[1].contains("1.5 GiB / 16.0 GiB") && rows[1].contains("712%") && rows[1].contains("no GPU")
        );
        // Unfinished groups first; the bar is a quarter full.
        assert!(
            rows[2].starts_with("sum ") && rows[2].contains(" 10/40") && rows[2].contains("erred 1"),
            "{rows:?}"
        );
        let bar: String = rows[2].chars().skip(NAME_WIDTH + 1).take_while(|c| "█░".contains(*c)).collect();
        assert_eq!(bar.chars().filter(|&c| c == '█').count() * 4, bar.chars().count(), "{bar}");
        assert!(rows[3].starts_with("random") && rows[3].contains("100/100"));
        assert_eq!(rows[4], "1,234 tasks/s | 2.1 s | 110/140 tasks");
    }

    #[test]
    fn every_gpu_gets_a_row() {
        let gpu = |index, used, brisk_used| GpuInfo {
            index,
            name: "NVIDIA H100".into(),
            memory_used: used,
            memory_total: 80 << 30,
            brisk_used,
        };
        let m = model(Gpus::Devices(vec![gpu(0, 2 << 30, Some(3 << 29)), gpu(1, 0, None)]));
        assert_eq!(inline_height(&m), 6);
        let rows = draw(&m, 110, 6, false);
        assert!(rows[1].ends_with("NVIDIA H100 2.0 GiB / 80.0 GiB (brisk 1.5 GiB)"), "{rows:?}");
        assert_eq!(rows[2].trim(), "NVIDIA H100 0 B / 80.0 GiB");
    }

    /// A CUDA cluster's workers: each row names its GPU and what its
    /// results hold of it (`WorkerInfo::gpu_line`, as `brisk top` and
    /// `:dash` show it).
    #[test]
    fn cuda_workers_show_device_memory_and_spilled_bytes() {
        let info = |name: &str, device| brisk_engine::client::WorkerInfo {
            name: name.into(),
            address: "tcp://127.0.0.1:1".into(),
            threads: 1,
            running: 1,
            in_memory: 4,
            memory: 1 << 30,
            memory_limit: Some(32 << 30),
            spilled: 0,
            gpu: "GPU 0: NVIDIA H100, 79.2 GiB".into(),
            device,
            resources: vec![("GPU".into(), 1.0)],
            pid: 1,
        };
        let d = brisk_engine::client::DeviceMemory {
            used: 3 << 29,
            limit: 2 << 30,
            spilled: 1 << 29,
            transferred: 0,
        };
        let sample = crate::dash::model::Sample {
            at: Duration::from_millis(100),
            snapshot: Default::default(),
            cpu_seconds: None,
            memory_limit: None,
            gpus: Gpus::None("none".into()),
            cluster: Some(vec![info("cuda-0", Some(d)), info("cpu-0", None)]),
        };
        let mut m = model(Gpus::None("none".into()));
        m.update(sample);
        let rows = draw(&m, 150, worker_table_height(&m) + 3, false);
        let text = rows.join("\n");
        assert!(
            rows[1].starts_with("cuda-0")
                && rows[1].ends_with("GPU 0: NVIDIA H100, 79.2 GiB · 1.5 GiB / 2.0 GiB, 512.0 MiB moved off"),
            "{text}"
        );
        assert!(rows[2].starts_with("cpu-0") && rows[2].ends_with("GPU 0: NVIDIA H100, 79.2 GiB"), "{text}");
    }

    #[test]
    fn many_groups_are_counted_not_listed() {
        let mut m = model(Gpus::None("none".into()));
        m.groups = (0..9)
            .map(|i| Group {
                name: Arc::from(format!("g{i}")),
                total: 2,
                done: 1,
                in_memory: 1,
                erred: 0,
                processing: 1,
            })
            .collect();
        let rows = draw(&m, 90, inline_height(&m), false);
        assert_eq!(rows.len(), 2 + INLINE_GROUPS + 2);
        assert_eq!(rows[2 + INLINE_GROUPS], "… and 3 more groups");
    }

    #[test]
    fn the_full_screen_has_a_task_stream_and_memory() {
        let mut m = model(Gpus::None("none".into()));
        m.stream = [(0, 0, 400_000, true), (1, 100_000, 1_000_000, true), (1, 1_000_000, 1_200_000, false)]
            .into_iter()
            .map(|(thread, start_us, stop_us, ok)| Ran {
                group: Arc::from("sum"),
                thread,
                start_us,
                stop_us,
                ok,
            })
            .collect();
        m.memory = (0..50u64).map(|i| (Duration::from_millis(i * 250), i << 20)).collect();
        m.worker.memory = 49 << 20;
        let rows = draw(&m, 100, 30, true);
        let text = rows.join("\n");
        for needle in [
            " Workers ",
            " Progress ",
            " Task stream",
            " Memory 49.0 MiB (peak 49.0 MiB) ",
            "q: back to the prompt",
        ] {
            assert!(text.contains(needle), "{needle:?} missing:\n{text}");
        }
        // Thread 0 ran for the first third of the span; thread 1 after it, then a failure.
        let stream_top = rows.iter().position(|r| r.contains("Task stream")).expect("stream") + 1;
        let t0 = &rows[stream_top];
        let t1 = &rows[stream_top + 1];
        assert!(t0.starts_with("│█") && t0.contains("█ "), "{t0:?}");
        assert!(t1.contains('×') && !t1.starts_with("│█"), "{t1:?}");
        assert!(text.contains("■ sum"), "a legend names the group:\n{text}");
        assert!(!text.contains(" Log "), "no log before a program printed:\n{text}");
    }

    #[test]
    fn the_full_screen_shows_the_latest_lines_programs_printed() {
        let mut m = model(Gpus::None("none".into()));
        m.log = (0..20).map(|i| Arc::from(format!("w0: epoch {i}"))).collect();
        let rows = draw(&m, 100, 40, true);
        let text = rows.join("\n");
        assert!(text.contains(" Log (programs' output) "), "{text}");
        assert!(text.contains("│w0: epoch 19") && text.contains("│w0: epoch 12"), "{text}");
        assert!(!text.contains("epoch 11"), "only the latest lines:\n{text}");
        assert!(text.contains(" Task stream"), "the stream still shows:\n{text}");
    }

    #[test]
    fn tiny_areas_do_not_panic() {
        let mut m = model(Gpus::None("none".into()));
        // A task that ran within the runtime's first microsecond.
        m.stream.push_back(Ran { group: Arc::from("g"), thread: 0, start_us: 0, stop_us: 0, ok: true });
        for (w, h) in [(1, 1), (5, 3), (20, 4), (0, 0)] {
            let _ = draw(&m, w.max(1), h.max(1), true);
            let _ = draw(&m, w.max(1), h.max(1), false);
        }
    }
}
