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
            std::process::exit(130);
        }
        token.cancel();
    });
    if let Err(e) = installed {
        eprintln!("warning: Ctrl-C will end brisk at once ({e})");
    }
}

/// Colours on a terminal, unless `NO_COLOR` is set (no-color.org).
pub fn colour_on(stream: &impl IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none()
}
