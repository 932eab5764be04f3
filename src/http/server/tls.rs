//! HTTPS: rustls with a certificate chain and key from PEM files, offering
//! HTTP/2 and HTTP/1.1 by ALPN. Browsers multiplex the many small requests
//! of a viewer over one connection only with HTTP/2, and only over TLS.

use std::path::Path;
use std::sync::Arc;

use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

/// A certificate or key that cannot be used, and why.
#[derive(Debug, thiserror::Error)]
#[error("TLS {what} '{path}': {reason}")]
pub struct TlsError {
    what: &'static str,
    path: String,
    reason: String,
}

/// An acceptor for the chain in `cert` (leaf first) and the private key in
/// `key` (PKCS#8, PKCS#1 or SEC1), both PEM.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let fail = |what, path: &Path, reason: String| TlsError {
        what,
        path: path.display().to_string(),
        reason,
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| fail("certificate", cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(fail(
            "certificate",
            cert,
            "no certificate in the file".into(),
        ));
    }
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| fail("key", key, e.to_string()))?;
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| fail("key", key, format!("does not go with the certificate: {e}")))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
