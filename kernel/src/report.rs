//! What the session thread sends the sockets' side while a cell runs.

use brisk_script::Rendered;

/// What the session thread reports while it runs a cell.
#[derive(Debug)]
pub enum Out {
    Stdout(String),
    Stderr(String),
    Display(Rendered),
    /// A progress display: shown first, then updated in place.
    Progress {
        id: String,
        plain: String,
        html: String,
        first: bool,
    },
}
