//! What a connection needs to be trusted: the shared token (checked in the
//! handshake) and, when configured, mutual TLS around the TCP stream.
//!
//! TLS is Dask's: every process (scheduler, worker, client) holds a
//! certificate signed by the cluster's CA and accepts only peers whose
//! certificate that CA signed, in both directions. As in Dask, the peer's
//! host name is not checked against its certificate (workers come and go
//! on addresses nobody put in a certificate); the CA is the trust.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use tokio::net::TcpStream;

use crate::comm::{BoxRead, BoxWrite, CommError};

/// The cluster's secret and transport settings, the same on every process.
#[derive(Clone, Debug, Default)]
pub struct Security {
    /// `--token` or `BRISK_TOKEN`; `None`: no token is asked for.
    pub token: Option<String>,
    /// Mutual TLS; `None`: plain TCP.
    pub tls: Option<Arc<Tls>>,
}

/// Where the certificate, its key and the CA are (`--tls-cert`,
/// `--tls-key`, `--tls-ca`, else `BRISK_TLS_CERT`, `BRISK_TLS_KEY`,
/// `BRISK_TLS_CA`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TlsFiles {
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub ca: Option<PathBuf>,
}

impl TlsFiles {
    /// The flags given, each else from its environment variable.
    pub fn or_env(self) -> TlsFiles {
        let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        TlsFiles {
            cert: self.cert.or_else(|| env("BRISK_TLS_CERT")),
            key: self.key.or_else(|| env("BRISK_TLS_KEY")),
            ca: self.ca.or_else(|| env("BRISK_TLS_CA")),
        }
    }
}

/// Both sides of mutual TLS, built once from the files.
pub struct Tls {
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
    pub files: TlsFiles,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("files", &self.files).finish_non_exhaustive()
    }
}

/// Why the TLS settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    #[error("TLS needs all three of --tls-cert, --tls-key and --tls-ca (missing: {0})")]
    Incomplete(String),
    #[error("cannot read {what} {path}: {error}")]
    Read { what: &'static str, path: PathBuf, error: String },
    #[error("TLS: {0}")]
    Config(String),
}

impl Security {
    /// The token from `flag`, else from `BRISK_TOKEN`; no TLS.
    pub fn with_token(flag: Option<String>) -> Security {
        let token = flag.or_else(|| std::env::var("BRISK_TOKEN").ok()).filter(|t| !t.is_empty());
        Security { token, tls: None }
    }

    /// The token as [`Security::with_token`], and TLS when any of the
    /// files is given (then all three must be).
    pub fn from_flags(token: Option<String>, files: TlsFiles) -> Result<Security, SecurityError> {
        let mut s = Security::with_token(token);
        let files = files.or_env();
        if files != TlsFiles::default() {
            s.tls = Some(Arc::new(Tls::load(files)?));
        }
        Ok(s)
    }

    /// The scheme of this cluster's addresses.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "tls" } else { "tcp" }
    }

    /// Refuse an address whose scheme does not match the settings, with
    /// what to do about it.
    pub(crate) fn check_scheme(&self, address: &str) -> Result<(), CommError> {
        let tls_address = address.starts_with("tls://");
        match (&self.tls, tls_address) {
            (None, true) => Err(CommError::Tls(format!(
                "{address} is a TLS address: give --tls-cert, --tls-key and --tls-ca (or BRISK_TLS_*)"
            ))),
            (Some(_), false) if address.starts_with("tcp://") => {
                Err(CommError::Tls(format!("TLS is configured, but {address} is a plain tcp:// address")))
            }
            _ => Ok(()),
        }
    }

    pub(crate) async fn wrap_client(
        &self,
        tcp: TcpStream,
        host: &str,
    ) -> Result<(BoxRead, BoxWrite), CommError> {
        let Some(tls) = &self.tls else {
            let (r, w) = tcp.into_split();
            return Ok((Box::new(r), Box::new(w)));
        };
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| CommError::Tls(format!("{host:?} is not a host name: {e}")))?;
        let stream = tokio_rustls::TlsConnector::from(tls.client.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| CommError::Tls(e.to_string()))?;
        let (r, w) = tokio::io::split(stream);
        Ok((Box::new(r), Box::new(w)))
    }

    pub(crate) async fn wrap_server(&self, tcp: TcpStream) -> Result<(BoxRead, BoxWrite), CommError> {
        let Some(tls) = &self.tls else {
            let (r, w) = tcp.into_split();
            return Ok((Box::new(r), Box::new(w)));
        };
        let stream = tokio_rustls::TlsAcceptor::from(tls.server.clone())
            .accept(tcp)
            .await
            .map_err(|e| CommError::Tls(e.to_string()))?;
        let (r, w) = tokio::io::split(stream);
        Ok((Box::new(r), Box::new(w)))
    }
}

impl Tls {
    /// Read the PEM files and build both configurations.
    pub fn load(files: TlsFiles) -> Result<Tls, SecurityError> {
        let missing: Vec<&str> =
            [("--tls-cert", &files.cert), ("--tls-key", &files.key), ("--tls-ca", &files.ca)]
                .into_iter()
                .filter(|(_, f)| f.is_none())
                .map(|(n, _)| n)
                .collect();
        let (Some(cert), Some(key), Some(ca)) = (&files.cert, &files.key, &files.ca) else {
            return Err(SecurityError::Incomplete(missing.join(", ")));
        };
        let certs = read_certs(cert, "the certificate")?;
        let key = PrivateKeyDer::from_pem_file(key).map_err(|e| SecurityError::Read {
            what: "the private key",
            path: key.clone(),
            error: e.to_string(),
        })?;
        let mut roots = RootCertStore::empty();
        for c in read_certs(ca, "the CA certificate")? {
            roots.add(c).map_err(|e| SecurityError::Config(format!("the CA in {}: {e}", ca.display())))?;
        }
        let roots = Arc::new(roots);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = |e: rustls::Error| SecurityError::Config(e.to_string());

        let client_verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| SecurityError::Config(e.to_string()))?;
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(config)?
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(certs.clone(), key.clone_key())
            .map_err(config)?;

        let server_verifier =
            rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                .build()
                .map_err(|e| SecurityError::Config(e.to_string()))?;
        let client = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(config)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyNameOfTheCa { inner: server_verifier }))
            .with_client_auth_cert(certs, key)
            .map_err(config)?;
        Ok(Tls { client: Arc::new(client), server: Arc::new(server), files })
    }
}

fn read_certs(path: &Path, what: &'static str) -> Result<Vec<CertificateDer<'static>>, SecurityError> {
    let err = |e: rustls::pki_types::pem::Error| SecurityError::Read {
        what,
        path: path.into(),
        error: e.to_string(),
    };
    let certs =
        CertificateDer::pem_file_iter(path).map_err(err)?.collect::<Result<Vec<_>, _>>().map_err(err)?;
    if certs.is_empty() {
        return Err(SecurityError::Read { what, path: path.into(), error: "no certificate in it".into() });
    }
    Ok(certs)
}

/// The CA's verdict on a server's certificate, whatever name it was
/// reached by (Dask's `check_hostname = False`).
#[derive(Debug)]
struct AnyNameOfTheCa {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
}

impl ServerCertVerifier for AnyNameOfTheCa {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use rustls::{CertificateError, Error};
        match self.inner.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
