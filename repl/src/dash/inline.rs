//! The inline panel: drawn on stderr under the input while a compute runs
//! longer than half a second, redrawn in place 5 times a second, and
//! replaced by a one-line summary when the work ends. Drawn with plain
//! cursor movement (up, erase below) rather than a ratatui inline viewport,
//! which would have to ask the terminal where the cursor is and could eat
//! keys typed ahead.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use brisk_script::SessionState;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier};

use super::Sampler;
use super::model::Model;
use super::widgets::{inline_height, render_inline};

/// How long work runs before the panel appears.
const DELAY: Duration = Duration::from_millis(500);
/// Time between redraws.
const TICK: Duration = Duration::from_millis(200);

/// Rows of the panel on the screen now. Script output takes this lock and
/// clears the panel first (`print_line`), so lines never mix with it.
static ON_SCREEN: Mutex<u16> = Mutex::new(0);

/// Print a line of script output on stdout, clearing the panel first (it
/// is drawn again at the next tick).
pub fn print_line(text: &str) {
    let mut rows = ON_SCREEN.lock().unwrap_or_else(|e| e.into_inner());
    if *rows > 0 {
        let mut err = std::io::stderr();
        let _ = write!(err, "{}", clear(*rows));
        let _ = err.flush();
        *rows = 0;
    }
    if let Err(e) = writeln!(std::io::stdout().lock(), "{text}")
        && e.kind() == std::io::ErrorKind::BrokenPipe
    {
        // The reader is gone (`brisk run s.rhai | head`): stop quietly, as
        // a program that SIGPIPE ends would (128 + 13).
        std::process::exit(141);
    }
}

/// The panel's thread; dropping it stops the thread and clears the panel.
pub struct Panel {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Panel {
    pub fn start(state: Arc<SessionState>, colour: bool) -> Panel {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("brisk-panel".into())
            .spawn(move || run(&Sampler::new(state), &flag, colour))
            .ok();
        Panel { stop, thread }
    }
}

impl Drop for Panel {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            // Wake it from its wait, so the prompt comes back at once.
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

fn run(sampler: &Sampler, stop: &AtomicBool, colour: bool) {
    let mut err = std::io::stderr();
    // The work being watched: its model, when it began, whether it was shown.
    let mut burst: Option<(Model, Instant, bool)> = None;
    // The runtime before the work to watch was submitted: progress counts
    // from here (the work may be well under way when first seen).
    let mut base = sampler.snapshot();
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        let sample = sampler.sample();
        let pending = sample.snapshot.groups.iter().any(|g| g.waiting + g.queued + g.processing > 0);
        if burst.is_none() && pending && !stopping {
            burst = Some((Model::new(&base), Instant::now(), false));
        }
        if !pending {
            base = sample.snapshot.clone();
        }
        if let Some((model, since, shown)) = &mut burst {
            model.update(sample);
            let mut rows = ON_SCREEN.lock().unwrap_or_else(|e| e.into_inner());
            if !pending || stopping {
                // The work ended (or the input did): leave the summary.
                if *shown {
                    let _ = writeln!(err, "{}{}", clear(*rows), model.summary());
                    let _ = err.flush();
                    *rows = 0;
                }
                burst = None;
            } else if since.elapsed() >= DELAY {
                let lines = render(model, colour);
                let _ = write!(err, "{}{}", clear(*rows), lines.join("\n"));
                let _ = err.flush();
                *rows = lines.len() as u16;
                *shown = true;
            }
        }
        if stopping {
            return;
        }
        sleep_unless_stopped(stop, TICK);
    }
}

fn sleep_unless_stopped(stop: &AtomicBool, total: Duration) {
    let t0 = Instant::now();
    while !stop.load(Ordering::SeqCst) && t0.elapsed() < total {
        std::thread::park_timeout(total.saturating_sub(t0.elapsed()));
    }
}

/// Move to the start of a panel of `rows` lines (the cursor is on its last
/// line) and erase it and everything below.
fn clear(rows: u16) -> String {
    match rows {
        0 => String::new(),
        1 => "\r\x1b[J".into(),
        n => format!("\x1b[{}A\r\x1b[J", n - 1),
    }
}

/// The panel as lines of text, fitted to the terminal.
fn render(model: &Model, colour: bool) -> Vec<String> {
    let (cols, rows) = ratatui::crossterm::terminal::size().unwrap_or((100, 24));
    let cols = if cols == 0 { 100 } else { cols };
    let rows = if rows == 0 { 24 } else { rows };
    // One column short of the edge: a full line would wrap on some terminals.
    let area = Rect::new(
        0,
        0,
        cols.saturating_sub(1).clamp(20, 140),
        inline_height(model).min(rows.saturating_sub(1)).max(1),
    );
    let mut buf = Buffer::empty(area);
    render_inline(model, area, &mut buf);
    to_ansi(&buf, colour)
}

/// Each row of a buffer as text, with SGR colours when `colour`.
pub fn to_ansi(buf: &Buffer, colour: bool) -> Vec<String> {
    let area = buf.area;
    (0..area.height)
        .map(|y| {
            let mut line = String::new();
            let mut current = None;
            for x in 0..area.width {
                let cell = &buf[(area.x + x, area.y + y)];
                if colour {
                    let style = (
                        cell.fg,
                        cell.modifier.contains(Modifier::BOLD),
                        cell.modifier.contains(Modifier::DIM),
                    );
                    if current != Some(style) {
                        line += &sgr(style.0, style.1, style.2);
                        current = Some(style);
                    }
                }
                line += cell.symbol();
            }
            let mut line = line.trim_end().to_string();
            if colour {
                line += "\x1b[0m";
            }
            line
        })
        .collect()
}

fn sgr(fg: Color, bold: bool, dim: bool) -> String {
    let code = match fg {
        Color::Black => 30,
        Color::Red => 31,
        Color::Green => 32,
        Color::Yellow => 33,
        Color::Blue => 34,
        Color::Magenta => 35,
        Color::Cyan => 36,
        Color::Gray => 37,
        Color::DarkGray => 90,
        Color::LightRed => 91,
        Color::LightGreen => 92,
        Color::LightYellow => 93,
        Color::LightBlue => 94,
        Color::LightMagenta => 95,
        Color::LightCyan => 96,
        Color::White => 97,
        _ => 39,
    };
    let weight = if bold {
        ";1"
    } else if dim {
        ";2"
    } else {
        ""
    };
    format!("\x1b[0;{code}{weight}m")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_panel_is_redrawn_in_place() {
        assert_eq!(clear(0), "");
        assert_eq!(clear(1), "\r\x1b[J");
        assert_eq!(clear(5), "\x1b[4A\r\x1b[J");
    }

    #[test]
    fn colours_become_sgr_codes_only_when_asked() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 6, 1));
        buf.set_string(0, 0, "ab", ratatui::style::Style::new().fg(Color::Cyan));
        buf.set_string(2, 0, "c", ratatui::style::Style::new().add_modifier(Modifier::BOLD));
        assert_eq!(to_ansi(&buf, false), ["abc"]);
        assert_eq!(to_ansi(&buf, true), ["\x1b[0;36mab\x1b[0;39;1mc\x1b[0;39m\x1b[0m"]);
    }
}
