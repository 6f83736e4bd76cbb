//! The full-screen dashboard (`:dash`): the alternate screen, redrawn 4
//! times a second until `q`. An expression given with it (`:dash EXPR`)
//! runs while the screen shows; Ctrl-C there cancels it. The terminal is
//! restored on every way out: `q`, an error, or a panic (ratatui's hook).

use std::sync::Arc;
use std::time::Duration;

use brisk_engine::CancelToken;
use brisk_script::SessionState;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::style::Style;

use super::Sampler;
use super::model::Model;
use super::widgets::render_full;

const TICK: Duration = Duration::from_millis(250);

/// Show the dashboard until `q` (or Esc). `work` runs on this thread
/// meanwhile; its result is returned once the screen is closed.
pub fn show<T>(
    state: Arc<SessionState>,
    cancel: CancelToken,
    colour: bool,
    work: impl FnOnce() -> T,
) -> std::io::Result<T> {
    let mut terminal = ratatui::try_init()?;
    // Subscribed before the work starts: a line a program prints at once
    // would otherwise be published while no one listens, and never shown.
    let events = state.client().subscribe(65_536);
    let drawer = std::thread::Builder::new().name("brisk-dash".into()).spawn(move || {
        let sampler = Sampler::new(state);
        let mut model = Model::new(&Default::default());
        let mut result = Ok(());
        loop {
            model.events(events.try_iter());
            model.update(sampler.sample());
            if let Err(e) = terminal.draw(|f| {
                let area = f.area();
                render_full(&model, area, f.buffer_mut());
                if !colour {
                    f.buffer_mut().set_style(area, Style::reset());
                }
            }) {
                result = Err(e);
                break;
            }
            match keys(TICK, &cancel) {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        ratatui::restore();
        result
    })?;
    let out = work();
    // The work is done: the screen stays until the person leaves it.
    match drawer.join() {
        Ok(r) => r.map(|()| out),
        Err(_) => {
            ratatui::restore();
            Err(std::io::Error::other("the dashboard stopped unexpectedly"))
        }
    }
}

/// Wait up to `tick` for keys; `true` when the person asked to leave.
fn keys(tick: Duration, cancel: &CancelToken) -> std::io::Result<bool> {
    if !event::poll(tick)? {
        return Ok(false);
    }
    while {
        if let Event::Key(k) = event::read()?
            && k.kind == KeyEventKind::Press
        {
            match k.code {
                KeyCode::Char('q') | KeyCode::Esc => return Ok(true),
                // Raw mode turns Ctrl-C into a key: it cancels the compute.
                KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => cancel.cancel(),
                _ => {}
            }
        }
        event::poll(Duration::ZERO)?
    } {}
    Ok(false)
}
