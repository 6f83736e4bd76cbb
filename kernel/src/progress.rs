//! Live progress in a notebook: while a cell's compute runs longer than
//! half a second, one display per cell (`display_data` with a display id)
//! is updated in place (`update_display_data`) four times a second with a
//! bar per task group, and finally replaced by a summary line.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use brisk_engine::diagnostics::Snapshot;
use brisk_script::SessionState;
use tokio::sync::mpsc::UnboundedSender;

use crate::report::Out;

const DELAY: Duration = Duration::from_millis(500);
const TICK: Duration = Duration::from_millis(250);

pub struct Watch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watch {
    pub fn start(state: Arc<SessionState>, out: UnboundedSender<Out>, id: String) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("brisk-kernel-progress".into())
            .spawn(move || watch(&state, &out, &flag, &id))
            .ok();
        Watch { stop, thread }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            // Wake it from its wait: a cell must not end up to a tick late.
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// (name, done, total) per group with work since `base`.
pub fn groups(base: &Snapshot, now: &Snapshot) -> Vec<(String, u64, u64)> {
    let before: HashMap<&str, (u64, u64)> =
        base.groups.iter().map(|g| (&*g.name, (g.done, g.total))).collect();
    now.groups
        .iter()
        .filter_map(|g| {
            let (d0, t0) = before.get(&*g.name).copied().unwrap_or((0, 0));
            let pending = g.waiting + g.queued + g.processing;
            (g.total != t0 || g.done != d0 || pending > 0).then(|| {
                (
                    g.name.to_string(),
                    g.done.saturating_sub(d0),
                    g.total.saturating_sub(t0).max(g.done - d0.min(g.done) + pending),
                )
            })
        })
        .collect()
}

/// The display: text and an HTML table of bars, then a line per GPU the
/// computation uses (its memory: brisk's own and the device's).
pub fn render(groups: &[(String, u64, u64)], gpus: &[String], elapsed: Duration) -> (String, String) {
    let mut plain = String::new();
    let mut html = String::from("<table>");
    for (name, done, total) in groups {
        let width = 30u64;
        let filled = (done * width).checked_div(*total).unwrap_or(width).min(width);
        plain += &format!(
            "{name:<18} [{}{}] {done}/{total}\n",
            "#".repeat(filled as usize),
            "-".repeat((width - filled) as usize)
        );
        html += &format!(
            "<tr><td>{}</td><td><progress value=\"{done}\" max=\"{}\"></progress></td><td>{done}/{total}</td></tr>",
            name.replace('<', "&lt;"),
            (*total).max(1)
        );
    }
    let (done, total) = groups.iter().fold((0, 0), |(d, t), g| (d + g.1, t + g.2));
    let line = format!("{done}/{total} tasks | {:.1} s", elapsed.as_secs_f64());
    plain += &line;
    html += &format!("</table><p>{line}</p>");
    for g in gpus {
        plain += &format!("\n{g}");
        html += &format!("<p>{}</p>", g.replace('<', "&lt;"));
    }
    (plain, html)
}

fn watch(state: &SessionState, out: &UnboundedSender<Out>, stop: &AtomicBool, id: &str) {
    let base = state.client().snapshot();
    let t0 = Instant::now();
    let mut shown = false;
    let mut last = Vec::new();
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        let now = state.client().snapshot();
        let g = groups(&base, &now);
        if !g.is_empty() {
            last = g;
        }
        if stopping {
            if shown {
                let (done, total) = last.iter().fold((0, 0), |(d, t), g| (d + g.1, t + g.2));
                let line = format!("{done}/{total} tasks in {:.1} s", t0.elapsed().as_secs_f64());
                let _ = out.send(Out::Progress {
                    id: id.into(),
                    plain: line.clone(),
                    html: format!("<p>{line}</p>"),
                    first: false,
                });
            }
            return;
        }
        let pending = now.groups.iter().any(|g| g.waiting + g.queued + g.processing > 0);
        if pending && t0.elapsed() >= DELAY {
            // A cluster's CUDA workers, else this process's own GPUs.
            let cuda: Vec<String> = if state.with_cluster(|_| ()).is_some() {
                state
                    .client()
                    .workers()
                    .iter()
                    .filter(|w| w.device.is_some())
                    .map(|w| format!("{}: {}", w.name, w.gpu_line()))
                    .collect()
            } else {
                Vec::new()
            };
            let gpus: Vec<String> = if cuda.is_empty() {
                brisk_engine::gpu::in_use().iter().map(brisk_engine::gpu::describe).collect()
            } else {
                cuda
            };
            let (plain, html) = render(&last, &gpus, t0.elapsed());
            let _ = out.send(Out::Progress { id: id.into(), plain, html, first: !shown });
            shown = true;
        }
        let wait = Instant::now();
        while !stop.load(Ordering::SeqCst) && wait.elapsed() < TICK {
            std::thread::park_timeout(TICK.saturating_sub(wait.elapsed()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use brisk_engine::diagnostics::GroupProgress;

    fn g(name: &str, total: u64, done: u64, processing: u64) -> GroupProgress {
        GroupProgress {
            name: Arc::from(name),
            total,
            done,
            erred: 0,
            waiting: total - done - processing,
            queued: 0,
            processing,
            in_memory: done,
        }
    }

    #[test]
    fn bars_count_from_the_start_of_the_cell() {
        let base = Snapshot { groups: vec![g("old", 5, 5, 0)], ..Default::default() };
        let now = Snapshot { groups: vec![g("old", 5, 5, 0), g("sum", 8, 2, 2)], ..Default::default() };
        let gs = groups(&base, &now);
        assert_eq!(gs, vec![("sum".to_string(), 2, 8)]);
        let (plain, html) = render(&gs, &[], Duration::from_millis(1500));
        assert!(plain.starts_with("sum                [#######-----------------------] 2/8"), "{plain}");
        assert!(plain.ends_with("2/8 tasks | 1.5 s"), "{plain}");
        assert!(html.contains("<progress value=\"2\" max=\"8\">"), "{html}");
        let gpu = brisk_engine::gpu::GpuInfo {
            index: 0,
            name: "NVIDIA H100".into(),
            memory_used: 3 << 30,
            memory_total: 80 << 30,
            brisk_used: Some(1 << 30),
        };
        let (plain, html) = render(&gs, &[brisk_engine::gpu::describe(&gpu)], Duration::from_millis(1500));
        let line = plain.lines().last().unwrap_or_default().to_string();
        assert!(line.starts_with("GPU 0 NVIDIA H100: brisk 1") && line.ends_with(" in use"), "{plain}");
        assert!(html.ends_with(&format!("<p>{line}</p>")), "{html}");
    }
}
