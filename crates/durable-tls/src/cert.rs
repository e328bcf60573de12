//! Certificates: from PEM files, or generated at start (development), and the
//! rustls configuration built from them.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use sha2::{Digest, Sha256};

use crate::error::TlsError;

/// The one application protocol the server speaks (ALPN).
pub(crate) const ALPN_HTTP_1_1: &[u8] = b"http/1.1";

/// A certificate chain and its key.
pub(crate) struct Identity {
    pub(crate) chain: Vec<CertificateDer<'static>>,
    pub(crate) key: PrivateKeyDer<'static>,
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity").field("chain", &self.chain.len()).field("key", &"<redacted>").finish()
    }
}

/// Reads the chain and key from PEM files.
pub(crate) fn from_pem_files(cert: &Path, key: &Path) -> Result<Identity, TlsError> {
    let cert_error = |reason: String| TlsError::Cert { path: cert.to_owned(), reason };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| cert_error(pem_reason(e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| cert_error(pem_reason(e)))?;
    if chain.is_empty() {
        return Err(cert_error("holds no CERTIFICATE block".to_owned()));
    }
    // The key's error never quotes the file: it is a secret.
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| TlsError::Key { path: key.to_owned(), reason: pem_reason(e) })?;
    Ok(Identity { chain, key })
}

fn pem_reason(e: rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error;
    match e {
        Error::Io(io) => io.to_string(),
        Error::NoItemsFound => "holds no PEM block of the expected kind".to_owned(),
        Error::MissingSectionEnd { .. } => "has a PEM block without its END line".to_owned(),
        Error::IllegalSectionStart { .. } => "has a malformed BEGIN line".to_owned(),
        Error::Base64Decode(_) => "has a PEM block that is not valid base64".to_owned(),
        _ => "is not a valid PEM file".to_owned(),
    }
}

/// Generates a self-signed certificate (ECDSA P-256) for `names` (host names
/// and IP addresses).
pub(crate) fn self_signed(names: Vec<String>) -> Result<Identity, TlsError> {
    let failed = |e: rcgen::Error| TlsError::SelfSigned { reason: e.to_string() };
    let key_pair = rcgen::KeyPair::generate().map_err(failed)?;
    let mut params = rcgen::CertificateParams::new(names).map_err(failed)?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(rcgen::DnType::CommonName, "durable-tls self-signed (development)");
    let cert = params.self_signed(&key_pair).map_err(failed)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key_pair.serialize_der()));
    Ok(Identity { chain: vec![cert.der().clone()], key })
}

/// The SHA-256 fingerprint of a certificate's DER bytes, as
/// `AB:CD:…` (32 pairs of upper-case hex).
pub(crate) fn fingerprint(cert: &CertificateDer<'_>) -> String {
    let digest = Sha256::digest(cert.as_ref());
    digest.iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

/// The rustls configuration: the `ring` provider (named here, never a
/// process-wide default), its safe protocol versions (TLS 1.3 and 1.2), no
/// client certificates, ALPN `http/1.1` only.
pub(crate) fn server_config(identity: Identity) -> Result<Arc<ServerConfig>, TlsError> {
    let failed = |e: rustls::Error| TlsError::TlsConfig { reason: e.to_string() };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(failed)?
        .with_no_client_auth()
        .with_single_cert(identity.chain, identity.key)
        .map_err(failed)?;
    config.alpn_protocols = vec![ALPN_HTTP_1_1.to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_is_32_upper_hex_pairs() {
        let cert = CertificateDer::from(b"abc".to_vec());
        let f = fingerprint(&cert);
        // SHA-256("abc")
        assert!(f.starts_with("BA:78:16:BF:8F:01:CF:EA"), "{f}");
        assert_eq!(f.len(), 32 * 3 - 1);
    }

    #[test]
    fn a_self_signed_identity_makes_a_server_config_with_alpn_http_1_1() {
        let identity = self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        let config = server_config(identity).unwrap();
        assert_eq!(config.alpn_protocols, [b"http/1.1".to_vec()]);
    }

    #[test]
    fn a_key_that_does_not_match_the_certificate_is_refused() {
        let a = self_signed(vec!["localhost".into()]).unwrap();
        let b = self_signed(vec!["localhost".into()]).unwrap();
        let e = server_config(Identity { chain: a.chain, key: b.key }).unwrap_err();
        assert!(matches!(e, TlsError::TlsConfig { .. }), "{e}");
    }

    #[test]
    fn missing_or_empty_pem_files_name_the_file() {
        let e = from_pem_files(Path::new("/nonexistent/cert.pem"), Path::new("/nonexistent/key.pem"))
            .unwrap_err();
        assert!(matches!(&e, TlsError::Cert { path, .. } if path.ends_with("cert.pem")), "{e}");
    }
}
