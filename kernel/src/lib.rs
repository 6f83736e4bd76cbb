//! brisk's Jupyter kernel: the REPL's `Session` behind the Jupyter
//! messaging protocol 5.3 (ZeroMQ sockets and HMAC signatures from
//! `jupyter-zmq-client`, message types from `jupyter-protocol`).
//!
//! The session lives on its own thread (a Rhai engine is not `Send`); the
//! async side owns the sockets. Shell requests are served one at a time, as
//! Jupyter expects; the control socket stays responsive meanwhile, so an
//! interrupt reaches a running compute. Completion, docs, the multi-line
//! check and value display are the REPL's own (`brisk_script`).

pub mod install;
mod progress;
mod report;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc;

use brisk_script::input::{InputState, input_state};
use brisk_script::{ErrorKind, Rendered, ScriptError, Session};
use jupyter_protocol::{
    CodeMirrorMode, CommInfoReply, CompleteReply, ConnectionInfo, DisplayData, ErrorOutput, ExecuteInput,
    ExecuteReply, ExecuteResult, ExecutionCount, HelpLink, HistoryEntry, HistoryReply, HistoryRequest,
    InspectReply, InterruptReply, IsCompleteReply, IsCompleteReplyStatus, JupyterMessage,
    JupyterMessageContent, KernelInfoReply, LanguageInfo, Media, MediaType, ReplyError, ReplyStatus,
    ShutdownReply, Status, StreamContent, UpdateDisplayData,
};
use jupyter_zmq_client::{
    RuntimeError, create_kernel_control_connection, create_kernel_heartbeat_connection,
    create_kernel_iopub_connection, create_kernel_shell_connection, create_kernel_stdin_connection,
};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

pub use report::Out;

/// Work for the session thread.
type Job = Box<dyn FnOnce(&mut Session) + Send>;

#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    #[error("cannot read the connection file {path}: {error}")]
    ConnectionFile { path: String, error: String },
    #[error("cannot open the kernel's sockets: {0}")]
    Sockets(String),
    #[error("cannot start the kernel: {0}")]
    Start(String),
}

/// Run the kernel on the sockets named in a Jupyter connection file, until
/// a `shutdown_request`.
pub fn run(connection_file: &Path) -> Result<(), KernelError> {
    let text = read_connection_file(connection_file).map_err(|e| KernelError::ConnectionFile {
        path: connection_file.display().to_string(),
        error: e.to_string(),
    })?;
    let info: ConnectionInfo = serde_json::from_str(&text).map_err(|e| KernelError::ConnectionFile {
        path: connection_file.display().to_string(),
        error: e.to_string(),
    })?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| KernelError::Start(e.to_string()))?;
    runtime.block_on(serve(info))
}

/// A connection file is a few hundred bytes of JSON: read at most 1 MiB of
/// a regular file, so a wrong path (`/dev/zero`, a FIFO) fails at once.
fn read_connection_file(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    const MAX: u64 = 1 << 20;
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() || meta.len() > MAX {
        return Err(std::io::Error::other("not a connection file (a regular file of at most 1 MiB)"));
    }
    let file = std::fs::File::open(path)?;
    let mut text = String::new();
    file.take(MAX).read_to_string(&mut text)?;
    Ok(text)
}

/// The session thread: runs jobs in order, reports outputs on `out`.
fn session_thread(out: UnboundedSender<Out>) -> (mpsc::Sender<Job>, brisk_engine::CancelToken) {
    let (tx, rx) = mpsc::channel::<Job>();
    let (token_tx, token_rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("brisk-kernel-session".into())
        .spawn(move || {
            let mut session = Session::new();
            if let Err(e) = session.connect_from_env() {
                let _ = out.send(Out::Stderr(format!("{e}; running on this machine's threads\n")));
            }
            let o = out.clone();
            session.set_output(Arc::new(move |s: &str| {
                let _ = o.send(Out::Stdout(format!("{s}\n")));
            }));
            let o = out.clone();
            session.set_debug_output(Arc::new(move |s: &str| {
                let _ = o.send(Out::Stderr(format!("{s}\n")));
            }));
            let o = out.clone();
            session.set_display(Arc::new(move |r: &Rendered| {
                let _ = o.send(Out::Display(r.clone()));
            }));
            let _ = token_tx.send(session.cancel_token());
            while let Ok(job) = rx.recv() {
                // A bug in one request must not end the session: its caller sees no
                // answer (a cell's own panic is an error reply, see `execute`).
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&mut session)));
            }
        })
        .ok();
    let token = token_rx.recv().unwrap_or_default();
    (tx, token)
}

async fn serve(info: ConnectionInfo) -> Result<(), KernelError> {
    let session_id = format!("brisk-{}", std::process::id());
    let sockets = |e: RuntimeError| KernelError::Sockets(e.to_string());
    let mut heartbeat = create_kernel_heartbeat_connection(&info).await.map_err(sockets)?;
    let mut shell = create_kernel_shell_connection(&info, &session_id).await.map_err(sockets)?;
    let mut control = create_kernel_control_connection(&info, &session_id).await.map_err(sockets)?;
    let _stdin = create_kernel_stdin_connection(&info, &session_id).await.map_err(sockets)?;
    let iopub = create_kernel_iopub_connection(&info, &session_id).await.map_err(sockets)?;

    let (out_tx, out_rx) = unbounded_channel();
    let (jobs, cancel) = session_thread(out_tx.clone());
    // SIGINT (interrupt_mode "signal") and interrupt_request do the same.
    let token = cancel.clone();
    if let Err(e) = ctrlc::set_handler(move || token.cancel()) {
        eprintln!("brisk kernel: no SIGINT handler ({e}); interrupts come by message only");
    }
    tokio::spawn(async move { while heartbeat.single_heartbeat().await.is_ok() {} });

    let iopub = Arc::new(tokio::sync::Mutex::new(iopub));
    let (shutdown_tx, mut shutdown_rx) = tokio::sync::oneshot::channel::<()>();
    let ctl_iopub = iopub.clone();
    let ctl_cancel = cancel.clone();
    tokio::spawn(async move {
        let mut shutdown_tx = Some(shutdown_tx);
        loop {
            let msg = match read_request(&mut control).await {
                Ok(m) => m,
                Err(e) if fatal(&e) => break,
                Err(e) => {
                    eprintln!("brisk kernel: dropped a control message: {e}");
                    continue;
                }
            };
            let _ = ctl_iopub.lock().await.send(Status::busy().as_child_of(&msg)).await;
            let reply: Option<JupyterMessage> = match &msg.content {
                JupyterMessageContent::KernelInfoRequest(_) => Some(kernel_info().as_child_of(&msg)),
                JupyterMessageContent::InterruptRequest(_) => {
                    ctl_cancel.cancel();
                    Some(InterruptReply { status: ReplyStatus::Ok, error: None }.as_child_of(&msg))
                }
                JupyterMessageContent::ShutdownRequest(r) => {
                    ctl_cancel.cancel();
                    let reply = ShutdownReply { restart: r.restart, status: ReplyStatus::Ok, error: None };
                    Some(reply.as_child_of(&msg))
                }
                _ => None,
            };
            if let Some(r) = reply {
                let _ = control.send(r).await;
            }
            let _ = ctl_iopub.lock().await.send(Status::idle().as_child_of(&msg)).await;
            if matches!(msg.content, JupyterMessageContent::ShutdownRequest(_)) {
                if let Some(tx) = shutdown_tx.take() {
                    let _ = tx.send(());
                }
                break;
            }
        }
    });

    let mut kernel = Kernel { jobs, out: out_rx, out_tx, iopub, count: 0, history: Vec::new() };
    loop {
        tokio::select! {
            _ = &mut shutdown_rx => break,
            read = read_request(&mut shell) => {
                let msg = match read {
                    Ok(m) => m,
                    Err(e) if fatal(&e) => break,
                    Err(e) => {
                        // A bad signature or a malformed message: dropped, logged, the kernel goes on.
                        eprintln!("brisk kernel: dropped a shell message: {e}");
                        continue;
                    }
                };
                kernel.status(&msg, Status::busy()).await;
                let reply = kernel.handle(&msg).await;
                let stop = matches!(&msg.content, JupyterMessageContent::ExecuteRequest(r) if r.stop_on_error);
                let failed_at = reply.as_ref().filter(|r| stop && matches!(&r.content,
                    JupyterMessageContent::ExecuteReply(x) if x.status == ReplyStatus::Error)).map(|r| r.header.date);
                if let Some(r) = reply
                    && let Err(e) = shell.send(r).await
                {
                    eprintln!("brisk kernel: cannot reply: {e}");
                }
                kernel.status(&msg, Status::idle()).await;
                if let Some(at) = failed_at {
                    abort_queued(&mut kernel, &mut shell, at).await;
                }
            }
        }
    }
    Ok(())
}

/// Read one request from a ROUTER socket: signature checked, then parsed
/// with the fields the protocol lets clients leave out filled in (the
/// typed messages need them; `jupyter_kernel_test` omits `n` and `unique`
/// in history searches, as ipykernel allows).
async fn read_request<S: zeromq::SocketRecv>(
    conn: &mut jupyter_zmq_client::Connection<S>,
) -> Result<JupyterMessage, RuntimeError> {
    let raw = jupyter_zmq_client::RawMessage::from_multipart(conn.socket.recv().await?, &conn.mac)?;
    let header: jupyter_protocol::Header = serde_json::from_slice(&raw.jparts[0])?;
    let mut content: serde_json::Value = serde_json::from_slice(&raw.jparts[3])?;
    if let serde_json::Value::Object(m) = &mut content {
        let defaults: &[(&str, serde_json::Value)] = match header.msg_type.as_str() {
            "history_request" => &[
                ("output", serde_json::Value::Bool(false)),
                ("raw", serde_json::Value::Bool(true)),
                ("unique", serde_json::Value::Bool(false)),
                ("n", serde_json::Value::from(0)),
                ("session", serde_json::Value::Null),
                ("start", serde_json::Value::from(0)),
                ("stop", serde_json::Value::from(0)),
                ("pattern", serde_json::Value::from("*")),
            ],
            "execute_request" => &[
                ("silent", serde_json::Value::Bool(false)),
                ("store_history", serde_json::Value::Bool(true)),
            ],
            _ => &[],
        };
        for (k, v) in defaults {
            m.entry(k.to_string()).or_insert_with(|| v.clone());
        }
    }
    let content = JupyterMessageContent::from_type_and_content(&header.msg_type, content)
        .map_err(|source| RuntimeError::ParseError { msg_type: header.msg_type.clone(), source })?;
    Ok(JupyterMessage {
        zmq_identities: raw.zmq_identities,
        parent_header: serde_json::from_slice(&raw.jparts[1]).ok(),
        metadata: serde_json::from_slice(&raw.jparts[2]).unwrap_or_default(),
        header,
        content,
        buffers: raw.jparts.get(4..).map(<[_]>::to_vec).unwrap_or_default(),
        channel: None,
    })
}

/// `stop_on_error`: execute requests sent before the failing cell's reply
/// (already waiting) are answered `aborted` without running, as ipykernel
/// does; the first request sent after it ends the aborting.
async fn abort_queued(
    kernel: &mut Kernel,
    shell: &mut jupyter_zmq_client::KernelShellConnection,
    failed_at: chrono::DateTime<chrono::Utc>,
) {
    while let Ok(read) = tokio::time::timeout(std::time::Duration::from_millis(2), read_request(shell)).await
    {
        let Ok(msg) = read else { continue };
        let queued = msg.header.date < failed_at;
        kernel.status(&msg, Status::busy()).await;
        let reply = match &msg.content {
            JupyterMessageContent::ExecuteRequest(_) if queued => Some(
                execute_reply(ReplyStatus::Aborted, ExecutionCount::new(kernel.count), None)
                    .as_child_of(&msg),
            ),
            _ => kernel.handle(&msg).await,
        };
        if let Some(r) = reply {
            let _ = shell.send(r).await;
        }
        kernel.status(&msg, Status::idle()).await;
        if !queued {
            break;
        }
    }
}

/// Errors after which a socket is of no more use.
fn fatal(e: &RuntimeError) -> bool {
    matches!(e, RuntimeError::ZmqError(_) | RuntimeError::IoError(_))
}

fn kernel_info() -> KernelInfoReply {
    KernelInfoReply {
        status: ReplyStatus::Ok,
        protocol_version: "5.3".into(),
        implementation: "brisk".into(),
        implementation_version: env!("CARGO_PKG_VERSION").into(),
        language_info: LanguageInfo {
            name: "rhai".into(),
            version: "1.27".into(),
            mimetype: Some("text/x-rhai".into()),
            file_extension: Some(".rhai".into()),
            pygments_lexer: Some("rust".into()),
            codemirror_mode: Some(CodeMirrorMode::Simple("rust".into())),
            nbconvert_exporter: None,
        },
        banner: format!("brisk {} — Rhai on a lazy task-graph engine", env!("CARGO_PKG_VERSION")),
        help_links: vec![HelpLink { text: "Rhai".into(), url: "https://rhai.rs/book/".into() }],
        debugger: false,
        error: None,
    }
}

struct Kernel {
    jobs: mpsc::Sender<Job>,
    out: UnboundedReceiver<Out>,
    /// For the progress display of a cell.
    out_tx: UnboundedSender<Out>,
    iopub: Arc<tokio::sync::Mutex<jupyter_zmq_client::KernelIoPubConnection>>,
    count: usize,
    history: Vec<Hist>,
}

/// The session number in history replies (one kernel, one session).
const SESSION: usize = 1;

/// One executed cell, for `history_request`.
#[derive(Clone, Debug, PartialEq)]
struct Hist {
    line: usize,
    input: String,
    /// The result's text, or "" for none.
    output: String,
}

/// The entries a history request asks for, and whether with outputs.
fn history<'a>(all: &'a [Hist], req: &HistoryRequest) -> (Vec<&'a Hist>, bool) {
    match req {
        HistoryRequest::Tail { n, output, .. } => {
            let n = (*n).max(0) as usize;
            (all[all.len().saturating_sub(n)..].iter().collect(), *output)
        }
        HistoryRequest::Range { session, start, stop, output, .. } => {
            if session.is_some_and(|s| s > 0 && s as usize != SESSION) {
                return (Vec::new(), *output);
            }
            let (start, stop) = (*start as i64, *stop as i64);
            let hits = all
                .iter()
                .filter(|h| h.line as i64 >= start && (stop <= 0 || (h.line as i64) < stop))
                .collect();
            (hits, *output)
        }
        HistoryRequest::Search { pattern, unique, output, n, .. } => {
            let mut hits: Vec<&Hist> = all.iter().filter(|h| glob_match(pattern, &h.input)).collect();
            if *unique {
                // The latest of each input, in order.
                let mut seen = std::collections::HashSet::new();
                hits.reverse();
                hits.retain(|h| seen.insert(h.input.as_str()));
                hits.reverse();
            }
            if *n > 0 {
                hits = hits.split_off(hits.len().saturating_sub(*n as usize));
            }
            (hits, *output)
        }
    }
}

/// IPython's history search patterns: `*` any run, `?` one character.
fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < t.len() {
        if i < p.len() && (p[i] == '?' || p[i] == t[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

fn media(r: &Rendered) -> Media {
    let mut items = vec![MediaType::Plain(r.plain.clone())];
    if let Some(h) = &r.html {
        items.push(MediaType::Html(h.clone()));
    }
    Media::from(items)
}

impl Kernel {
    async fn publish(&self, msg: JupyterMessage) {
        if let Err(e) = self.iopub.lock().await.send(msg).await {
            eprintln!("brisk kernel: cannot publish: {e}");
        }
    }

    async fn status(&self, parent: &JupyterMessage, s: Status) {
        self.publish(s.as_child_of(parent)).await;
    }

    /// Run `f` on the session thread and wait for its answer.
    async fn on_session<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Session) -> T + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.jobs
            .send(Box::new(move |s: &mut Session| {
                let _ = tx.send(f(s));
            }))
            .ok()?;
        rx.await.ok()
    }

    async fn handle(&mut self, msg: &JupyterMessage) -> Option<JupyterMessage> {
        Some(match &msg.content {
            JupyterMessageContent::KernelInfoRequest(_) => kernel_info().as_child_of(msg),
            JupyterMessageContent::ExecuteRequest(req) => {
                return Some(self.execute(msg, req.code.clone(), req.silent, req.store_history).await);
            }
            JupyterMessageContent::CompleteRequest(req) => {
                let (code, pos) = (req.code.clone(), req.cursor_pos);
                let byte = char_to_byte(&code, pos);
                // No candidates rather than no reply, should completion fail.
                let c = self
                    .on_session(move |s| s.complete(&code, byte))
                    .await
                    .unwrap_or(brisk_script::complete::Completion { start: byte, candidates: Vec::new() });
                let start = byte_to_char(&req.code, c.start);
                CompleteReply {
                    matches: c.candidates,
                    cursor_start: start,
                    cursor_end: pos,
                    metadata: Default::default(),
                    status: ReplyStatus::Ok,
                    error: None,
                }
                .as_child_of(msg)
            }
            JupyterMessageContent::InspectRequest(req) => {
                let word = word_at(&req.code, char_to_byte(&req.code, req.cursor_pos));
                let doc = brisk_script::api::docs::help(&word);
                InspectReply {
                    found: doc.is_some(),
                    data: doc.map(|d| Media::from(MediaType::Plain(d))).unwrap_or_default(),
                    metadata: Default::default(),
                    status: ReplyStatus::Ok,
                    error: None,
                }
                .as_child_of(msg)
            }
            JupyterMessageContent::IsCompleteRequest(req) => {
                let (status, indent) = match input_state(&req.code) {
                    InputState::Complete => (IsCompleteReplyStatus::Complete, ""),
                    InputState::Incomplete => (IsCompleteReplyStatus::Incomplete, "  "),
                    _ => (IsCompleteReplyStatus::Invalid, ""),
                };
                IsCompleteReply { status, indent: indent.into() }.as_child_of(msg)
            }
            JupyterMessageContent::HistoryRequest(req) => {
                let (entries, output) = history(&self.history, req);
                let history = entries
                    .into_iter()
                    .map(|h| {
                        if output {
                            HistoryEntry::InputOutput(SESSION, h.line, (h.input.clone(), h.output.clone()))
                        } else {
                            HistoryEntry::Input(SESSION, h.line, h.input.clone())
                        }
                    })
                    .collect();
                HistoryReply { history, status: ReplyStatus::Ok, error: None }.as_child_of(msg)
            }
            JupyterMessageContent::CommInfoRequest(_) => {
                CommInfoReply { status: ReplyStatus::Ok, comms: HashMap::new(), error: None }.as_child_of(msg)
            }
            JupyterMessageContent::ShutdownRequest(r) => {
                ShutdownReply { restart: r.restart, status: ReplyStatus::Ok, error: None }.as_child_of(msg)
            }
            _ => return None,
        })
    }

    async fn execute(
        &mut self,
        msg: &JupyterMessage,
        code: String,
        silent: bool,
        store: bool,
    ) -> JupyterMessage {
        if !silent && store {
            self.count += 1;
            self.history.push(Hist { line: self.count, input: code.clone(), output: String::new() });
        }
        let count = ExecutionCount::new(self.count);
        if !silent {
            self.publish(ExecuteInput { code: code.clone(), execution_count: count }.as_child_of(msg)).await;
        }
        let origin = format!("<cell {}>", self.count);
        let (tx, mut done) = tokio::sync::oneshot::channel();
        let text = code.clone();
        let o = origin.clone();
        let progress_out = self.out_tx.clone();
        let id = format!("brisk-progress-{}-{}", std::process::id(), self.count);
        let job: Job = Box::new(move |s: &mut Session| {
            let watch = progress::Watch::start(s.state().clone(), progress_out, id);
            let result = brisk_script::error::catch_panic(&o, || s.eval(&text, &o).map(|v| v.rendered()));
            drop(watch);
            let _ = tx.send(result);
        });
        if self.jobs.send(job).is_err() {
            return execute_reply(
                ReplyStatus::Error,
                count,
                Some(kernel_error("the session thread has stopped")),
            )
            .as_child_of(msg);
        }
        let result = loop {
            tokio::select! {
                r = &mut done => break r.ok(),
                Some(o) = self.out.recv() => self.forward(msg, o, silent).await,
            }
        };
        while let Ok(o) = self.out.try_recv() {
            self.forward(msg, o, silent).await;
        }
        match result {
            Some(Ok(value)) => {
                if let (Some(r), false) = (value, silent) {
                    if let Some(h) = self.history.last_mut().filter(|h| h.line == self.count && store) {
                        h.output = r.plain.clone();
                    }
                    let transient = Some(jupyter_protocol::Transient { display_id: None });
                    let out = ExecuteResult {
                        execution_count: count,
                        data: media(&r),
                        metadata: Default::default(),
                        transient,
                    };
                    self.publish(out.as_child_of(msg)).await;
                }
                execute_reply(ReplyStatus::Ok, count, None).as_child_of(msg)
            }
            Some(Err(e)) => {
                let (ename, evalue, traceback) = error_parts(&e, &code, &origin);
                if !silent {
                    let out = ErrorOutput {
                        ename: ename.clone(),
                        evalue: evalue.clone(),
                        traceback: traceback.clone(),
                    };
                    self.publish(out.as_child_of(msg)).await;
                }
                execute_reply(ReplyStatus::Error, count, Some(ReplyError { ename, evalue, traceback }))
                    .as_child_of(msg)
            }
            None => execute_reply(
                ReplyStatus::Error,
                count,
                Some(kernel_error("the session thread stopped during the cell")),
            )
            .as_child_of(msg),
        }
    }

    async fn forward(&self, parent: &JupyterMessage, o: Out, silent: bool) {
        if silent {
            return;
        }
        let m = match o {
            Out::Stdout(text) => StreamContent::stdout(&text).as_child_of(parent),
            Out::Stderr(text) => StreamContent::stderr(&text).as_child_of(parent),
            Out::Display(r) => DisplayData::new(media(&r)).as_child_of(parent),
            Out::Progress { id, plain, html, first } => {
                let data = media(&Rendered { plain, html: Some(html) });
                if first {
                    let mut d = DisplayData::new(data);
                    d.transient = Some(jupyter_protocol::Transient { display_id: Some(id) });
                    d.as_child_of(parent)
                } else {
                    UpdateDisplayData::new(data, &id).as_child_of(parent)
                }
            }
        };
        self.publish(m).await;
    }
}

/// An execute reply (`user_expressions` is an object, never null: the
/// message schema requires it).
fn execute_reply(status: ReplyStatus, count: ExecutionCount, error: Option<ReplyError>) -> ExecuteReply {
    ExecuteReply {
        status,
        execution_count: count,
        payload: vec![],
        user_expressions: Some(HashMap::new()),
        error: error.map(Box::new),
    }
}

fn kernel_error(what: &str) -> ReplyError {
    ReplyError { ename: "KernelError".into(), evalue: what.into(), traceback: vec![] }
}

/// `ename`, `evalue` and a traceback whose lines carry the position.
fn error_parts(e: &ScriptError, code: &str, origin: &str) -> (String, String, Vec<String>) {
    let ename = match e.kind {
        ErrorKind::Syntax => "SyntaxError",
        ErrorKind::Runtime => "RuntimeError",
        ErrorKind::Task => "TaskError",
        ErrorKind::Cancelled => "KeyboardInterrupt",
        ErrorKind::Internal => "InternalError",
    };
    let block = brisk_script::error::error_block(e, code, origin, false);
    (ename.into(), e.to_string(), block.lines().map(str::to_string).collect())
}

fn char_to_byte(s: &str, chars: usize) -> usize {
    s.char_indices().nth(chars).map_or(s.len(), |(b, _)| b)
}

fn byte_to_char(s: &str, byte: usize) -> usize {
    s[..byte.min(s.len())].chars().count()
}

/// The identifier around a byte position (for inspect).
fn word_at(s: &str, pos: usize) -> String {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let pos = pos.min(s.len());
    let start = s[..pos].rfind(|c: char| !is_word(c)).map_or(0, |i| i + 1);
    let end = s[pos..].find(|c: char| !is_word(c)).map_or(s.len(), |i| pos + i);
    s[start..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_tail_range_and_search() {
        let all: Vec<Hist> = ["1 + 1", "x", "1 + 1"]
            .iter()
            .enumerate()
            .map(|(i, c)| Hist { line: i + 1, input: c.to_string(), output: String::new() })
            .collect();
        let lines = |r: (Vec<&Hist>, bool)| r.0.iter().map(|h| h.line).collect::<Vec<_>>();
        assert_eq!(lines(history(&all, &HistoryRequest::Tail { n: 2, output: false, raw: true })), [2, 3]);
        let range = HistoryRequest::Range { session: Some(1), start: 2, stop: 3, output: true, raw: true };
        assert_eq!(lines(history(&all, &range)), [2]);
        let search =
            |unique, n| HistoryRequest::Search { pattern: "1*".into(), unique, output: false, raw: true, n };
        assert_eq!(lines(history(&all, &search(false, 0))), [1, 3]);
        assert_eq!(lines(history(&all, &search(true, 0))), [3]);
        assert_eq!(lines(history(&all, &search(false, 1))), [3]);
        assert!(glob_match("a?c*", "abcdef") && !glob_match("a?c", "abcd") && glob_match("*", ""));
    }

    #[test]
    fn positions_count_characters() {
        assert_eq!(char_to_byte("é + x", 4), 5);
        assert_eq!(byte_to_char("é + x", 5), 4);
        assert_eq!(word_at("let y = from_sequence(", 15), "from_sequence");
        assert_eq!(word_at("gather", 6), "gather");
    }
}
