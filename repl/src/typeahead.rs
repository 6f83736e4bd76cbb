//! Input typed ahead faster than the REPL reads it: a paste the terminal
//! did not bracket.
//!
//! rustyline handles one key at a time, writes each to the terminal, and
//! redraws the whole line each time the cursor reaches the terminal's edge
//! (on every key, with colours or a hint), so a pasted line of n bytes cost
//! O(n²): 20 KB took 11 s and 200 KB never finished. While input waits, a
//! long line is kept aside instead (`Chunker`): rustyline's line stays
//! empty and nothing is drawn, and the line is given back to rustyline
//! whole, in one redraw, once the input stops (or the REPL joins it to the
//! line at Enter).

use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::termios::{SetArg, cfmakeraw, tcgetattr, tcsetattr};
use rustyline::{
    Cmd, ConditionalEventHandler, Event, EventContext, KeyCode, KeyEvent, Modifiers, Movement, RepeatCount,
};

/// From this length on, a line with more input waiting is kept aside.
/// Shorter lines stay in rustyline, so that Tab and the other keys typed
/// ahead keep their meaning.
pub const CHUNK: usize = 256;

/// The start of the line being entered, kept aside by `Chunker`.
pub type Stash = Arc<Mutex<String>>;

/// Bound to every key. A character at the end of a long line, while more
/// input waits, goes to the stash with the line (rustyline's line is
/// emptied); the first key once the input stops gives the stash back to
/// rustyline as one insert. The REPL joins a stash left at Enter.
pub struct Chunker {
    pub stash: Stash,
}

impl ConditionalEventHandler for Chunker {
    fn handle(&self, evt: &Event, _: RepeatCount, _: bool, ctx: &EventContext<'_>) -> Option<Cmd> {
        let key = match evt.get(0)? {
            KeyEvent(KeyCode::Char(c), Modifiers::NONE | Modifiers::SHIFT) => Some(*c),
            KeyEvent(KeyCode::Tab, Modifiers::NONE) => Some('\t'),
            // Ctrl-D on the empty line left while a paste is kept aside would end the REPL.
            KeyEvent(KeyCode::Char('D'), Modifiers::CTRL) => None,
            _ => return None,
        };
        let line = ctx.line();
        let mut stash = lock(&self.stash);
        if ctx.pos() < line.len() || (stash.is_empty() && line.len() < CHUNK) {
            return None;
        }
        // A pasting terminal may pause between its writes: the stash is given
        // back (one redraw of the whole line) only once the input has paused.
        let more = waiting(Duration::ZERO) || (!stash.is_empty() && waiting(PAUSE));
        if let Some(c) = key
            && more
        {
            stash.push_str(line);
            stash.push(c);
            return Some(if line.is_empty() { Cmd::Noop } else { Cmd::Kill(Movement::WholeBuffer) });
        }
        if stash.is_empty() {
            return None;
        }
        let mut text = std::mem::take(&mut *stash);
        text.extend(key);
        Some(Cmd::Insert(1, text))
    }
}

pub fn lock(stash: &Stash) -> std::sync::MutexGuard<'_, String> {
    stash.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether input waits on stdin, or arrives within `wait`.
fn waiting(wait: Duration) -> bool {
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    let timeout = PollTimeout::try_from(wait).unwrap_or(PollTimeout::ZERO);
    poll(&mut fds, timeout).is_ok_and(|n| n > 0)
}

/// Read and drop what waits on stdin until the input pauses; how many
/// bytes that was. In raw mode, as rustyline reads, so that the terminal
/// neither echoes nor edits what is dropped.
pub fn drop_waiting() -> usize {
    let stdin = std::io::stdin();
    let saved = tcgetattr(stdin.as_fd()).ok();
    if let Some(saved) = &saved {
        let mut raw = saved.clone();
        cfmakeraw(&mut raw);
        let _ = tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw);
    }
    let mut buf = vec![0u8; 64 << 10];
    let mut dropped = 0;
    // Bounded, should something write without end.
    while dropped < MAX_DROPPED && waiting(PAUSE) {
        match nix::unistd::read(stdin.as_fd(), &mut buf) {
            Ok(0) => break,
            Ok(n) => dropped += n,
            Err(Errno::EINTR | Errno::EAGAIN) => {}
            Err(_) => break,
        }
    }
    if let Some(saved) = &saved {
        let _ = tcsetattr(stdin.as_fd(), SetArg::TCSANOW, saved);
    }
    dropped
}

const MAX_DROPPED: usize = crate::source::MAX_SCRIPT as usize;

/// A pause this long ends a burst of typed-ahead input: terminals deliver
/// a paste in chunks well under a millisecond apart.
const PAUSE: Duration = Duration::from_millis(30);
