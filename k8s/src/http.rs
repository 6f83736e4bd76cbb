//! The few HTTP calls the operator makes to a scheduler (Dask's scaling
//! API): a plain HTTP/1.1 exchange with short deadlines, since a scheduler
//! that does not answer must not hold up the reconcile loop.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(3);
/// The most of an answer read (the scheduler's are a few KiB).
const MAX_BODY: u64 = 16 << 20;

/// `GET` or `POST` (with a JSON body) `base` + `path`, with the cluster's
/// token; the answer's body as JSON, or why there is none.
pub fn call(
    base: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> Result<serde_json::Value, String> {
    let hostport = base
        .strip_prefix("http://")
        .ok_or_else(|| format!("{base}: only http:// scheduler addresses are supported"))?
        .trim_end_matches('/');
    let addr = hostport
        .to_socket_addrs()
        .map_err(|e| format!("{hostport}: {e}"))?
        .next()
        .ok_or_else(|| format!("{hostport}: no address"))?;
    let mut s = TcpStream::connect_timeout(&addr, DEADLINE).map_err(|e| format!("{base}: {e}"))?;
    s.set_read_timeout(Some(DEADLINE)).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(DEADLINE)).map_err(|e| e.to_string())?;
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {hostport}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n"
    );
    if body.is_some() {
        req.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", payload.len()));
    }
    req.push_str("\r\n");
    req.push_str(&payload);
    s.write_all(req.as_bytes()).map_err(|e| format!("{base}{path}: {e}"))?;
    // The per-read timeout alone would let a peer that sends a byte now
    // and then hold the operator forever: the whole answer has a deadline.
    let until = Instant::now() + DEADLINE;
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("{base}{path}: {e}")),
        };
        raw.extend_from_slice(&buf[..n]);
        if raw.len() as u64 > MAX_BODY {
            return Err(format!("{base}{path}: the answer is over {MAX_BODY} bytes"));
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("{base}{path}: no whole answer within {DEADLINE:?}"));
        }
        s.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
    }
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut headers);
    let start = match resp.parse(&raw) {
        Ok(httparse::Status::Complete(n)) => n,
        _ => return Err(format!("{base}{path}: not an HTTP answer")),
    };
    let code = resp.code.unwrap_or(0);
    let text = String::from_utf8_lossy(&raw[start..]);
    if code != 200 {
        return Err(format!("{base}{path}: HTTP {code}: {}", text.trim()));
    }
    serde_json::from_str(&text).map_err(|e| format!("{base}{path}: the answer is not JSON: {e}"))
}
