//! What a connection needs to be trusted: the shared token (checked in the
//! handshake) and, when configured, TLS around the TCP stream.

use tokio::net::TcpStream;

use crate::comm::{BoxRead, BoxWrite, CommError};

/// The cluster's secret and transport settings, the same on every process.
#[derive(Clone, Debug, Default)]
pub struct Security {
    /// `--token` or `BRISK_TOKEN`; `None`: no token is asked for.
    pub token: Option<String>,
}

impl Security {
    /// The token from `flag`, else from `BRISK_TOKEN`.
    pub fn with_token(flag: Option<String>) -> Security {
        let token = flag.or_else(|| std::env::var("BRISK_TOKEN").ok()).filter(|t| !t.is_empty());
        Security { token }
    }

    pub(crate) async fn wrap_client(
        &self,
        tcp: TcpStream,
        _host: &str,
    ) -> Result<(BoxRead, BoxWrite), CommError> {
        let (r, w) = tcp.into_split();
        Ok((Box::new(r), Box::new(w)))
    }

    pub(crate) async fn wrap_server(&self, tcp: TcpStream) -> Result<(BoxRead, BoxWrite), CommError> {
        let (r, w) = tcp.into_split();
        Ok((Box::new(r), Box::new(w)))
    }
}
