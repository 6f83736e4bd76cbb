//! Connections: addresses, the handshake, and reading and writing frames
//! over any byte stream (plain TCP, or TLS around it). Every read has a
//! size limit and the handshake a deadline, so a peer that sends garbage,
//! too much or nothing is dropped with a reason and never holds a process.

use std::sync::Mutex;
use std::time::Duration;

use brisk_engine::array::gpu::place;
use brisk_engine::key::Key;
use brisk_engine::value::Value;
use rustc_hash::FxHashMap;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::protocol::{
    self, Blob, HANDSHAKE_MAX, HEADER, Hello, MAGIC, MAX_FRAME, PeerMsg, PeerReply, ProtocolError, Reply,
    Role, VERSION,
};
use crate::security::Security;

/// How long a peer has to say hello (and a connection attempt to succeed).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a worker's data port may stay silent in the middle of an
/// answer before the request is given up (Dask's `comm.timeouts.tcp`).
pub const PEER_STALL: Duration = Duration::from_secs(30);

pub type BoxRead = Box<dyn AsyncRead + Unpin + Send>;
pub type BoxWrite = Box<dyn AsyncWrite + Unpin + Send>;

/// Why a connection failed or was dropped.
#[derive(Debug, thiserror::Error)]
pub enum CommError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    #[error("refused: {0}")]
    Refused(String),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error(transparent)]
    Memory(#[from] brisk_engine::memory::MemoryError),
    #[error("bad address {0:?}: expected tcp://HOST:PORT or tls://HOST:PORT")]
    Address(String),
    #[error("TLS: {0}")]
    Tls(String),
}

/// `tcp://host:port`, `tls://host:port` or `host:port`, as host and port
/// (8786, the scheduler's port, when none is given).
pub fn parse_address(s: &str) -> Result<(String, u16), CommError> {
    let bad = || CommError::Address(s.to_string());
    let rest = s.strip_prefix("tcp://").or_else(|| s.strip_prefix("tls://")).unwrap_or(s);
    if rest.is_empty() || rest.contains('/') {
        return Err(bad());
    }
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() => (h, p.parse::<u16>().map_err(|_| bad())?),
        Some(_) => return Err(bad()),
        None => (rest, 8786),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Ok((host.to_string(), port))
}

/// Reads frames, each at most `limit` bytes (and what the memory budget allows).
pub struct FrameReader {
    r: BoxRead,
    limit: u64,
    /// Who is on the other side, for messages.
    peer: String,
}

impl FrameReader {
    pub fn new(r: BoxRead, limit: u64, peer: String) -> FrameReader {
        FrameReader { r, limit, peer }
    }

    pub fn set_limit(&mut self, limit: u64) {
        self.limit = limit;
    }

    /// The next frame's body; `None` when the peer closed between frames.
    pub async fn frame(&mut self) -> Result<Option<Vec<u8>>, CommError> {
        let mut header = [0u8; HEADER];
        match self.r.read_exact(&mut header).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        let len = protocol::frame_len(header, self.limit)?;
        if len > brisk_engine::memory::CHECK_FROM {
            brisk_engine::memory::check(len, || format!("a message from {}", self.peer))?;
        }
        let mut body = vec![0u8; len as usize];
        self.r.read_exact(&mut body).await?;
        Ok(Some(body))
    }

    /// The next frame's body, where the peer may pause at most `stall`
    /// at a time (a large frame may take long, a hung peer may not).
    pub async fn frame_within(&mut self, stall: Duration) -> Result<Option<Vec<u8>>, CommError> {
        let mut header = [0u8; HEADER];
        match tokio::time::timeout(stall, self.r.read_exact(&mut header)).await {
            Err(_) => return Err(CommError::Timeout(stall)),
            Ok(Ok(_)) => {}
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Ok(Err(e)) => return Err(e.into()),
        }
        let len = protocol::frame_len(header, self.limit)?;
        if len > brisk_engine::memory::CHECK_FROM {
            brisk_engine::memory::check(len, || format!("a message from {}", self.peer))?;
        }
        let mut body = vec![0u8; len as usize];
        let mut at = 0;
        while at < body.len() {
            let end = body.len().min(at + (8 << 20));
            match tokio::time::timeout(stall, self.r.read(&mut body[at..end])).await {
                Err(_) => return Err(CommError::Timeout(stall)),
                Ok(Ok(0)) => return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into()),
                Ok(Ok(n)) => at += n,
                Ok(Err(e)) => return Err(e.into()),
            }
        }
        Ok(Some(body))
    }

    /// The next message; `None` when the peer closed between frames.
    pub async fn next<T: DeserializeOwned>(&mut self) -> Result<Option<T>, CommError> {
        match self.frame().await? {
            Some(body) => Ok(Some(protocol::decode(&body)?)),
            None => Ok(None),
        }
    }
}

/// Writes frames.
pub struct FrameWriter {
    w: BoxWrite,
}

impl FrameWriter {
    pub fn new(w: BoxWrite) -> FrameWriter {
        FrameWriter { w }
    }

    pub async fn send<T: Serialize>(&mut self, msg: &T) -> Result<(), CommError> {
        self.send_sized(msg, 0).await
    }

    /// As `send`, for a message of about `hint` bytes (see `encode_sized`).
    pub async fn send_sized<T: Serialize>(&mut self, msg: &T, hint: usize) -> Result<(), CommError> {
        let frame = protocol::encode_sized(msg, hint)?;
        self.send_frame(&frame).await
    }

    /// An encoded frame, as `protocol::encode` makes it.
    pub async fn send_frame(&mut self, frame: &[u8]) -> Result<(), CommError> {
        self.w.write_all(frame).await?;
        self.w.flush().await?;
        Ok(())
    }

    pub async fn shutdown(&mut self) {
        let _ = self.w.shutdown().await;
    }
}

/// The next connection of `listener`. An accept error (out of file
/// descriptors, say) is logged and waited out rather than spun on.
pub async fn next_connection(
    listener: &tokio::net::TcpListener,
    who: &str,
) -> (TcpStream, std::net::SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(x) => return x,
            Err(e) => {
                crate::log::warn(who, &format!("cannot accept a connection: {e}"));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// An id no other process or client is likely to have: how a scheduler
/// knows a worker or client again when it comes back.
pub fn random_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    h.write_u128(now.map_or(0, |d| d.as_nanos()));
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    h.write_u64(N.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.finish()
}

/// A connection's writer side: send everything queued on `rx` as one
/// frame per wake-up, so bursts batch without timers; ends when the
/// channel closes or the peer goes.
pub async fn send_batches<T: Serialize>(mut w: FrameWriter, mut rx: UnboundedReceiver<Vec<T>>) {
    while let Some(mut batch) = rx.recv().await {
        while let Ok(more) = rx.try_recv() {
            batch.extend(more);
        }
        if w.send(&batch).await.is_err() {
            break;
        }
    }
    w.shutdown().await;
}

/// A `GetData` answer.
pub struct Fetched {
    pub values: Vec<(Key, Option<Value>)>,
    pub on_device: Vec<Key>,
    /// Why the blocks lent device to device could not be copied (their
    /// keys are answered `None`): ask this peer for host copies from now on.
    pub ipc_failed: Option<String>,
    /// Device bytes of the values that came device to device.
    pub lent_bytes: u64,
}

/// Connections to workers' data ports, kept open for the next request:
/// how workers fetch inputs and clients fetch results.
pub struct PeerPool {
    security: Security,
    name: String,
    idle: Mutex<FxHashMap<String, Vec<Conn>>>,
}

impl PeerPool {
    pub fn new(security: Security, name: &str) -> PeerPool {
        PeerPool { security, name: name.to_string(), idle: Mutex::new(FxHashMap::default()) }
    }

    /// The values of `keys` held at `addr` (`None` for those it does not
    /// hold), and which of them belong on a GPU. A CUDA worker names its
    /// `host`: a CUDA worker there lends GPU blocks device to device, which
    /// are copied onto this process's GPU off the I/O threads before the
    /// peer is told it may reuse their staging memory. Everything else
    /// comes as host copies.
    pub async fn get_data(
        &self,
        addr: &str,
        keys: Vec<Key>,
        host: Option<&str>,
    ) -> Result<Fetched, CommError> {
        let mut fetched =
            Fetched { values: Vec::new(), on_device: Vec::new(), ipc_failed: None, lent_bytes: 0 };
        let mut ask = keys;
        // Rounds: an answer lends a bounded amount and names the rest `later`.
        while !ask.is_empty() {
            let asked = ask.len();
            let msg = PeerMsg::GetData { keys: ask, host: host.map(str::to_string) };
            let (reply, mut conn) = self.exchange(addr, &msg).await?;
            let PeerReply::Data { values, on_device, shipped, later } = reply else {
                return Err(CommError::Refused("the peer answered another question".into()));
            };
            fetched.values.extend(values);
            fetched.on_device.extend(on_device);
            if !shipped.is_empty() {
                let import = move || {
                    shipped
                        .into_iter()
                        .map(|(k, s)| (k, place::import(&s).map_err(|e| e.to_string())))
                        .collect()
                };
                let imported: Vec<(Key, Result<Value, String>)> =
                    tokio::task::spawn_blocking(import)
                        .await
                        .map_err(|e| CommError::Refused(format!("copying lent GPU blocks failed: {e}")))?;
                // The peer holds the staging memory until told, whatever happened here.
                match Self::send_on(&mut conn, &PeerMsg::Release).await? {
                    PeerReply::Released => {}
                    _ => return Err(CommError::Refused("the peer answered another question".into())),
                }
                for (k, v) in imported {
                    match v {
                        Ok(v) => {
                            fetched.lent_bytes += place::device_bytes(&v);
                            fetched.on_device.push(k.clone());
                            fetched.values.push((k, Some(v)));
                        }
                        Err(e) => {
                            fetched.ipc_failed.get_or_insert(e);
                            fetched.values.push((k, None));
                        }
                    }
                }
            }
            self.keep(addr, conn);
            // After a refusal (or an answer that lent nothing) the rest is
            // left to the caller, who asks again or for host copies.
            ask = if fetched.ipc_failed.is_some() || later.len() >= asked {
                fetched.values.extend(later.into_iter().map(|k| (k, None)));
                Vec::new()
            } else {
                later
            };
        }
        Ok(fetched)
    }

    /// The shuffle pieces `inputs` of output `out` of the shuffle folder
    /// `name`, written by the worker at `addr`.
    pub async fn get_pieces(
        &self,
        addr: &str,
        name: &str,
        out: u32,
        inputs: Vec<u32>,
    ) -> Result<Result<Vec<Blob>, String>, CommError> {
        match self.ask(addr, &PeerMsg::GetPieces { name: name.to_string(), out, inputs }).await? {
            PeerReply::Pieces { pieces } => Ok(pieces),
            _ => Err(CommError::Refused("the peer answered another question".into())),
        }
    }

    async fn ask(&self, addr: &str, msg: &PeerMsg) -> Result<PeerReply, CommError> {
        let (reply, conn) = self.exchange(addr, msg).await?;
        self.keep(addr, conn);
        Ok(reply)
    }

    /// Send `msg` on a pooled or new connection to `addr`; the answer and
    /// the connection, for [`PeerPool::keep`] once its exchange is over.
    async fn exchange(&self, addr: &str, msg: &PeerMsg) -> Result<(PeerReply, Conn), CommError> {
        let pooled = self.idle.lock().unwrap_or_else(|e| e.into_inner()).get_mut(addr).and_then(Vec::pop);
        let mut conn = match pooled {
            Some(c) => c,
            None => connect(addr, Role::Peer, &self.name, &self.security).await?,
        };
        let reply = Self::send_on(&mut conn, msg).await?;
        Ok((reply, conn))
    }

    async fn send_on(conn: &mut Conn, msg: &PeerMsg) -> Result<PeerReply, CommError> {
        tokio::time::timeout(PEER_STALL, conn.writer.send(msg))
            .await
            .map_err(|_| CommError::Timeout(PEER_STALL))??;
        let Some(body) = conn.reader.frame_within(PEER_STALL).await? else {
            return Err(CommError::Refused("the peer closed the connection".into()));
        };
        Ok(protocol::decode(&body)?)
    }

    fn keep(&self, addr: &str, conn: Conn) {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).entry(addr.to_string()).or_default().push(conn);
    }
}

/// An open, authenticated connection.
pub struct Conn {
    pub reader: FrameReader,
    pub writer: FrameWriter,
    /// This side's address of the connection (the interface that reaches the peer).
    pub local: Option<std::net::SocketAddr>,
}

/// Connect to `address` as `role` and say hello; refused or silent peers
/// give an error.
pub async fn connect(address: &str, role: Role, name: &str, security: &Security) -> Result<Conn, CommError> {
    let (host, port) = parse_address(address)?;
    security.check_scheme(address)?;
    let tcp = tokio::time::timeout(HANDSHAKE_TIMEOUT, TcpStream::connect((host.as_str(), port)))
        .await
        .map_err(|_| CommError::Timeout(HANDSHAKE_TIMEOUT))??;
    tcp.set_nodelay(true)?;
    let local = tcp.local_addr().ok();
    // The TLS handshake under the same deadline: a peer that takes the
    // connection and never answers must not hang the caller.
    let (r, w) = tokio::time::timeout(HANDSHAKE_TIMEOUT, security.wrap_client(tcp, &host))
        .await
        .map_err(|_| CommError::Timeout(HANDSHAKE_TIMEOUT))??;
    let mut reader = FrameReader::new(r, HANDSHAKE_MAX, address.to_string());
    let mut writer = FrameWriter::new(w);
    let hello = Hello {
        magic: MAGIC.into(),
        version: VERSION,
        role,
        token: security.token.clone(),
        name: name.to_string(),
    };
    let reply = tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
        writer.send(&hello).await?;
        reader.next::<Reply>().await
    })
    .await
    .map_err(|_| CommError::Timeout(HANDSHAKE_TIMEOUT))??;
    match reply {
        Some(Reply::Welcome { .. }) => {
            reader.set_limit(MAX_FRAME);
            Ok(Conn { reader, writer, local })
        }
        Some(Reply::Refused { reason }) => Err(CommError::Refused(reason)),
        None => Err(CommError::Refused("the peer closed the connection during the handshake".into())),
    }
}

/// Take a connection: TLS if configured, then the peer's hello within the
/// deadline, checked (brisk, this version, the token, an allowed role).
/// A refused peer is told why before it is dropped.
pub async fn accept(
    tcp: TcpStream,
    security: &Security,
    allowed: &[Role],
) -> Result<(Hello, Conn), CommError> {
    let peer = tcp.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
    let local = tcp.local_addr().ok();
    tcp.set_nodelay(true)?;
    let accepted = tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
        let (r, w) = security.wrap_server(tcp).await?;
        let mut reader = FrameReader::new(r, HANDSHAKE_MAX, peer.clone());
        let writer = FrameWriter::new(w);
        let hello = reader.next::<Hello>().await?;
        Ok::<_, CommError>((hello, reader, writer))
    })
    .await
    .map_err(|_| CommError::Timeout(HANDSHAKE_TIMEOUT))??;
    let (hello, mut reader, mut writer) = accepted;
    let Some(hello) = hello else {
        return Err(CommError::Refused("closed before saying hello".into()));
    };
    if let Err(reason) = check_hello(&hello, security, allowed) {
        let _ = tokio::time::timeout(
            Duration::from_secs(1),
            writer.send(&Reply::Refused { reason: reason.clone() }),
        )
        .await;
        writer.shutdown().await;
        return Err(CommError::Refused(reason));
    }
    writer.send(&Reply::Welcome { version: VERSION }).await?;
    reader.set_limit(MAX_FRAME);
    Ok((hello, Conn { reader, writer, local }))
}

fn check_hello(hello: &Hello, security: &Security, allowed: &[Role]) -> Result<(), String> {
    if hello.magic != MAGIC {
        return Err("not a brisk peer".into());
    }
    if hello.version != VERSION {
        return Err(format!(
            "protocol version {} is not this process's version {VERSION}; run the same brisk everywhere",
            hello.version
        ));
    }
    if let Some(expected) = &security.token {
        match &hello.token {
            None => return Err("this cluster needs a token (--token or BRISK_TOKEN)".into()),
            Some(t) if !constant_time_eq(t.as_bytes(), expected.as_bytes()) => {
                return Err("wrong token".into());
            }
            Some(_) => {}
        }
    }
    if !allowed.contains(&hello.role) {
        return Err(format!("a {} cannot connect here", hello.role.name()));
    }
    Ok(())
}

/// Equal-length comparison that takes the same time wherever the first
/// difference is, so the token cannot be guessed byte by byte.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse() {
        assert_eq!(parse_address("tcp://127.0.0.1:8786").expect("ok"), ("127.0.0.1".into(), 8786));
        assert_eq!(parse_address("localhost:1").expect("ok"), ("localhost".into(), 1));
        assert_eq!(parse_address("tls://h").expect("ok"), ("h".into(), 8786));
        assert_eq!(parse_address("tcp://[::1]:5").expect("ok"), ("::1".into(), 5));
        for bad in ["", "tcp://", "tcp://h:notaport", "tcp://h:70000", "http://h:1/x", ":5"] {
            assert!(parse_address(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tokens_compare() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
