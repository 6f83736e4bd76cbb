//! What the REPL and `brisk run` share about the terminal: colours and Ctrl-C.

use std::io::IsTerminal;

use brisk_script::Session;

/// Ctrl-C cancels what the session runs (the script and any compute it
/// waits for, running tasks included). In `brisk run` a second Ctrl-C ends
/// the process; the REPL keeps going.
pub fn interrupt_on_ctrl_c(session: &Session, second_exits: bool) {
    let token = session.cancel_token();
    let installed = ctrlc::set_handler(move || {
        if second_exits && token.is_cancelled() {
            clean_up_now();
            std::process::exit(130);
        }
        token.cancel();
    });
    if let Err(e) = installed {
        eprintln!("warning: Ctrl-C will end brisk at once ({e})");
    }
}

/// SIGTERM and SIGHUP end brisk as they would without a handler (exit code
/// 128 + the signal), but first remove what it was writing: shuffle
/// folders and the staging of unfinished writes, which would stay behind
/// since no destructor runs on such an exit.
pub fn clean_up_on_termination() {
    #[cfg(unix)]
    {
        use signal_hook::consts::{SIGHUP, SIGTERM};
        let mut signals = match signal_hook::iterator::Signals::new([SIGTERM, SIGHUP]) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("warning: SIGTERM will end brisk without removing its temporary files ({e})");
                return;
            }
        };
        let watch = std::thread::Builder::new().name("brisk-signals".into()).spawn(move || {
            if let Some(signal) = signals.forever().next() {
                clean_up_now();
                std::process::exit(128 + signal);
            }
        });
        if let Err(e) = watch {
            eprintln!("warning: SIGTERM will end brisk without removing its temporary files ({e})");
        }
    }
}

/// Remove shuffle folders and unfinished writes now, and cancel the batch
/// jobs the session submitted, before an exit that runs no destructor.
fn clean_up_now() {
    brisk_engine::pieces::Cleanup::now();
    brisk_engine::staging::abandon_all();
    brisk_distributed::deploy::manager::Manager::cancel_all();
}

/// Colours on a terminal, unless `NO_COLOR` is set (no-color.org).
pub fn colour_on(stream: &impl IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none()
}
