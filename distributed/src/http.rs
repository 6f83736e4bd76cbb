//! The scheduler's HTTP port: `/health`, `/metrics` (Prometheus text),
//! `/api/v1/workers` (JSON), and Dask's scaling endpoints
//! (`/api/v1/adaptive_target`, `/api/v1/get_workers`, `/api/v1/check_idle`,
//! `POST /api/v1/retire_workers`), for load balancers, Prometheus,
//! Kubernetes operators and scripts.
//!
//! Requests are parsed by `httparse` (bounded: one request of at most
//! 16 KiB of head and 64 KiB of body, read within 10 s, at most 64 connections at once, the
//! oldest dropped for a new one); answers are small and written whole,
//! then the connection closes. When the cluster has a token every path
//! but `/health` needs it as
//! `Authorization: Bearer TOKEN`. The numbers come from the scheduler's
//! event loop, asked through its queue like any other event.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

/// What the HTTP side asks the event loop for.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Ask {
    Metrics,
    Workers,
    /// With `?target_duration=5s`, when given (seconds).
    AdaptiveTarget(Option<f64>),
    GetWorkers,
    CheckIdle,
    /// With the request's JSON body.
    RetireWorkers(String),
}

/// The event loop's answer: the body, or why the request is wrong (400).
pub(crate) type Answer = Result<String, String>;

/// Sends an [`Ask`] to the event loop and waits for its answer.
pub(crate) type AskLoop = Arc<dyn Fn(Ask, oneshot::Sender<Answer>) -> bool + Send + Sync>;

const HEAD_MAX: usize = 16 << 10;
const BODY_MAX: usize = 64 << 10;
const READ_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_CONNECTIONS: usize = 64;

/// Serve until the task is dropped.
pub(crate) async fn serve(listener: TcpListener, token: Option<String>, ask: AskLoop) {
    let token = token.map(Arc::<str>::from);
    let mut open: VecDeque<AbortHandle> = VecDeque::new();
    loop {
        let (tcp, _) = crate::comm::next_connection(&listener, "scheduler http").await;
        // Past the limit the oldest connection is dropped, not the new
        // one: peers that open connections and say nothing (slowloris)
        // would otherwise keep every health check out until they time out.
        open.retain(|h| !h.is_finished());
        if open.len() >= MAX_CONNECTIONS
            && let Some(oldest) = open.pop_front()
        {
            oldest.abort();
        }
        let (token, ask) = (token.clone(), ask.clone());
        let task = tokio::spawn(async move {
            let _ = tokio::time::timeout(READ_TIMEOUT * 2, answer(tcp, token.as_deref(), &ask)).await;
        });
        open.push_back(task.abort_handle());
    }
}

/// One request, one answer.
async fn answer(mut tcp: TcpStream, token: Option<&str>, ask: &AskLoop) {
    let response = match read_head(&mut tcp).await {
        Ok(head) => respond(&mut tcp, head, token, ask).await,
        Err(status) => Response::text(status, status_text(status)),
    };
    let _ = tcp.write_all(&response.bytes()).await;
    let _ = tcp.shutdown().await;
}

/// The request's head (up to the blank line), or the status to refuse it with.
async fn read_head(tcp: &mut TcpStream) -> Result<Vec<u8>, u16> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = match tokio::time::timeout(READ_TIMEOUT, tcp.read(&mut chunk)).await {
            Ok(Ok(n)) => n,
            Ok(Err(_)) | Err(_) => return Err(408),
        };
        if n == 0 {
            return Err(400);
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.windows(4).any(|w| w == b"\r\n\r\n") {
            return Ok(buf);
        }
        if buf.len() > HEAD_MAX {
            return Err(431);
        }
    }
}

/// The rest of a request's body, after what came with the head: exactly
/// `length` bytes within `READ_TIMEOUT` in all (as the head), or the
/// status to refuse it with.
async fn read_body(tcp: &mut TcpStream, mut body: Vec<u8>, length: usize) -> Result<String, u16> {
    if length > BODY_MAX {
        return Err(413);
    }
    let rest = async {
        let mut chunk = [0u8; 4096];
        while body.len() < length {
            match tcp.read(&mut chunk).await {
                Ok(0) => return Err(400u16),
                Ok(n) => body.extend_from_slice(&chunk[..n]),
                Err(_) => return Err(408),
            }
        }
        Ok(())
    };
    tokio::time::timeout(READ_TIMEOUT, rest).await.map_err(|_| 408u16)??;
    body.truncate(length);
    String::from_utf8(body).map_err(|_| 400)
}

/// `target_duration` in a request's query (`?target_duration=5s`), as the
/// adaptive rule takes it: how soon the queued work should be done.
fn target_duration(target: &str) -> Result<Option<f64>, String> {
    let Some((_, query)) = target.split_once('?') else { return Ok(None) };
    let Some(v) = query.split('&').find_map(|kv| kv.strip_prefix("target_duration=")) else {
        return Ok(None);
    };
    let d = brisk_engine::exec::deadline::parse_duration(v).map_err(|e| format!("target_duration: {e}"))?;
    if d.is_zero() {
        return Err("target_duration must be more than 0".into());
    }
    Ok(Some(d.as_secs_f64()))
}

async fn respond(tcp: &mut TcpStream, head: Vec<u8>, token: Option<&str>, ask: &AskLoop) -> Response {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(&head) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) | Err(_) => return Response::text(400, "bad request"),
    };
    let (Some(method), Some(target)) = (req.method, req.path) else {
        return Response::text(400, "bad request");
    };
    let path = target.split('?').next().unwrap_or(target);
    let post = path == "/api/v1/retire_workers";
    if post && method != "POST" {
        return Response::text(405, "only POST");
    }
    if !post && method != "GET" && method != "HEAD" {
        return Response::text(405, "only GET");
    }
    if path == "/health" {
        return Response::text(200, "ok");
    }
    let route = match path {
        "/metrics" => Ask::Metrics,
        "/api/v1/workers" => Ask::Workers,
        "/api/v1/adaptive_target" => match target_duration(target) {
            Ok(t) => Ask::AdaptiveTarget(t),
            Err(e) => return Response::text(400, &e),
        },
        "/api/v1/get_workers" => Ask::GetWorkers,
        "/api/v1/check_idle" => Ask::CheckIdle,
        "/api/v1/retire_workers" => Ask::RetireWorkers(String::new()),
        _ => {
            return Response::text(
                404,
                "not found: try /health, /metrics, /api/v1/workers, /api/v1/adaptive_target, /api/v1/get_workers, /api/v1/check_idle or POST /api/v1/retire_workers",
            );
        }
    };
    if let Some(expected) = token {
        let given = req
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("authorization"))
            .and_then(|h| std::str::from_utf8(h.value).ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if !given.is_some_and(|g| crate::comm::constant_time_eq(g.trim().as_bytes(), expected.as_bytes())) {
            let mut r = Response::text(401, "this scheduler needs its token: Authorization: Bearer TOKEN");
            r.extra = "WWW-Authenticate: Bearer\r\n";
            return r;
        }
    }
    let route = match route {
        Ask::RetireWorkers(_) => {
            let length = req
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .and_then(|h| std::str::from_utf8(h.value).ok())
                .and_then(|v| v.trim().parse::<usize>().ok());
            let Some(length) = length else { return Response::text(411, "a POST needs Content-Length") };
            match read_body(tcp, head[head_len..].to_vec(), length).await {
                Ok(body) => Ask::RetireWorkers(body),
                Err(status) => return Response::text(status, status_text(status)),
            }
        }
        other => other,
    };
    let content_type = match route {
        Ask::Metrics => "text/plain; version=0.0.4; charset=utf-8",
        _ => "application/json",
    };
    let (tx, rx) = oneshot::channel();
    if !ask(route, tx) {
        return Response::text(503, "the scheduler is closing");
    }
    let body = match rx.await {
        Ok(Ok(body)) => body,
        Ok(Err(e)) => return Response::text(400, &e),
        Err(_) => return Response::text(503, "the scheduler is closing"),
    };
    let mut r = Response { status: 200, content_type, body, extra: "" };
    if method == "HEAD" {
        r.body.clear();
    }
    r
}

struct Response {
    status: u16,
    content_type: &'static str,
    body: String,
    extra: &'static str,
}

impl Response {
    fn text(status: u16, body: &str) -> Response {
        Response { status, content_type: "text/plain; charset=utf-8", body: format!("{body}\n"), extra: "" }
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n{}\r\n",
            self.status,
            status_text(self.status),
            self.content_type,
            self.body.len(),
            self.extra
        )
        .into_bytes();
        out.extend_from_slice(self.body.as_bytes());
        out
    }
}

fn status_text(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

/// Prometheus' text format, one metric family at a time.
#[derive(Default)]
pub(crate) struct Metrics {
    out: String,
}

impl Metrics {
    /// Start a family: its help line and type.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) -> &mut Self {
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        self
    }

    /// One sample with its labels.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) -> &mut Self {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
        self
    }

    /// A family of one sample without labels.
    pub fn single(&mut self, name: &str, kind: &str, help: &str, value: f64) -> &mut Self {
        self.family(name, kind, help).sample(name, &[], value)
    }

    pub fn finish(self) -> String {
        self.out
    }
}

/// A label value as the text format wants it.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let mut m = Metrics::default();
        m.family("x_total", "counter", "X.").sample("x_total", &[("g", "a\"b\\c\nd")], 2.0);
        let text = m.finish();
        assert!(text.contains(r#"x_total{g="a\"b\\c\nd"} 2"#), "{text}");
        assert!(text.starts_with("# HELP x_total X.\n# TYPE x_total counter\n"));
    }

    #[tokio::test]
    async fn requests_are_parsed_checked_and_answered() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let ask: AskLoop = Arc::new(|what, tx: oneshot::Sender<Answer>| match what {
            Ask::RetireWorkers(b) if b == "bad" => tx.send(Err("not JSON".into())).is_ok(),
            what => tx.send(Ok(format!("{what:?}"))).is_ok(),
        });
        let server = tokio::spawn(serve(listener, Some("tok".into()), ask));
        let get = |req: Vec<u8>| async move {
            let mut s = TcpStream::connect(addr).await.expect("connect");
            s.write_all(&req).await.expect("write");
            let mut out = String::new();
            s.read_to_string(&mut out).await.expect("read");
            out
        };
        let ok = get(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()).await;
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n") && ok.ends_with("\r\n\r\nok\n"), "{ok}");
        let denied = get(b"GET /metrics HTTP/1.1\r\n\r\n".to_vec()).await;
        assert!(denied.starts_with("HTTP/1.1 401"), "{denied}");
        let wrong = get(b"GET /metrics HTTP/1.1\r\nAuthorization: Bearer nope\r\n\r\n".to_vec()).await;
        assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
        let metrics = get(b"GET /metrics HTTP/1.1\r\nauthorization: Bearer tok\r\n\r\n".to_vec()).await;
        assert!(metrics.starts_with("HTTP/1.1 200") && metrics.ends_with("Metrics"), "{metrics}");
        let workers =
            get(b"GET /api/v1/workers?x=1 HTTP/1.1\r\nAuthorization: Bearer tok\r\n\r\n".to_vec()).await;
        assert!(workers.contains("application/json") && workers.ends_with("Workers"), "{workers}");
        assert!(get(b"GET /nope HTTP/1.1\r\n\r\n".to_vec()).await.starts_with("HTTP/1.1 404"));
        assert!(get(b"POST /health HTTP/1.1\r\n\r\n".to_vec()).await.starts_with("HTTP/1.1 405"));
        let auth = "Authorization: Bearer tok\r\n";
        let retire = get(format!(
            "POST /api/v1/retire_workers HTTP/1.1\r\n{auth}Content-Length: 8\r\n\r\n{{\"n\": 1}}"
        )
        .into_bytes())
        .await;
        assert!(
            retire.starts_with("HTTP/1.1 200") && retire.ends_with("RetireWorkers(\"{\\\"n\\\": 1}\")"),
            "{retire}"
        );
        let bad = get(format!("POST /api/v1/retire_workers HTTP/1.1\r\n{auth}Content-Length: 3\r\n\r\nbad")
            .into_bytes())
        .await;
        assert!(bad.starts_with("HTTP/1.1 400") && bad.contains("not JSON"), "{bad}");
        let nolen = get(format!("POST /api/v1/retire_workers HTTP/1.1\r\n{auth}\r\n").into_bytes()).await;
        assert!(nolen.starts_with("HTTP/1.1 411"), "{nolen}");
        let big =
            get(format!("POST /api/v1/retire_workers HTTP/1.1\r\n{auth}Content-Length: 999999\r\n\r\n")
                .into_bytes())
            .await;
        assert!(big.starts_with("HTTP/1.1 413"), "{big}");
        let got = get(format!("GET /api/v1/retire_workers HTTP/1.1\r\n{auth}\r\n").into_bytes()).await;
        assert!(got.starts_with("HTTP/1.1 405"), "{got}");
        let target = get(format!("GET /api/v1/adaptive_target HTTP/1.1\r\n{auth}\r\n").into_bytes()).await;
        assert!(target.ends_with("AdaptiveTarget(None)"), "{target}");
        let target = get(
            format!("GET /api/v1/adaptive_target?target_duration=2m HTTP/1.1\r\n{auth}\r\n").into_bytes()
        )
        .await;
        assert!(target.ends_with("AdaptiveTarget(Some(120.0))"), "{target}");
        let bad =
            get(format!("GET /api/v1/adaptive_target?target_duration=soon HTTP/1.1\r\n{auth}\r\n")
                .into_bytes())
            .await;
        assert!(bad.starts_with("HTTP/1.1 400") && bad.contains("target_duration"), "{bad}");
        assert!(get(b"\x00\x01garbage\r\n\r\n".to_vec()).await.starts_with("HTTP/1.1 400"));
        let huge = [b"GET / HTTP/1.1\r\nX: ".to_vec(), vec![b'a'; 20_000]].concat();
        assert!(get(huge).await.starts_with("HTTP/1.1 431"));
        // A peer that closes early is no trouble.
        drop(TcpStream::connect(addr).await.expect("connect"));
        assert!(get(b"GET /health HTTP/1.1\r\n\r\n".to_vec()).await.starts_with("HTTP/1.1 200"));
        server.abort();
    }
}
