//! Trusting an agent's self-signed certificate by pinning the SHA-256 of its leaf:
//! the fingerprint the agent prints (`--fingerprint` for the phone and the doctor),
//! else the first leaf seen (trust on first use: the conformance run, per desk
//! process, and the phone's `--insecure` on loopback). The handshake signature is
//! still checked.

use std::sync::{Arc, Mutex};

use rustls::DigitallySignedStruct;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use sha2::{Digest, Sha256};

/// The pin of one desk process.
#[derive(Debug)]
pub(crate) struct Pinned {
    pin: Mutex<Option<[u8; 32]>>,
    /// The last leaf fingerprint a handshake showed, matching or not.
    seen: Mutex<Option<[u8; 32]>>,
    provider: Arc<CryptoProvider>,
}

impl Pinned {
    /// A verifier pinned to `pin`, or trusting the first leaf it sees.
    pub(crate) fn verifier(pin: Option<[u8; 32]>) -> Arc<Pinned> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Arc::new(Pinned { pin: Mutex::new(pin), seen: Mutex::new(None), provider })
    }

    /// The leaf fingerprint the last handshake showed.
    pub(crate) fn seen(&self) -> Option<[u8; 32]> {
        *self.seen.lock().expect("the pin lock is never poisoned")
    }

    /// A client configuration that checks the server with this verifier.
    pub(crate) fn client_config_for(self: Arc<Self>) -> Arc<rustls::ClientConfig> {
        let provider = self.provider.clone();
        let verifier = self;
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let seen: [u8; 32] = Sha256::digest(end_entity.as_ref()).into();
        *self.seen.lock().expect("the pin lock is never poisoned") = Some(seen);
        let mut pin = self.pin.lock().expect("the pin lock is never poisoned");
        match *pin {
            Some(pinned) if pinned == seen => Ok(ServerCertVerified::assertion()),
            Some(_) => Err(rustls::Error::General(
                "the agent's certificate does not match the pinned SHA-256 fingerprint".into(),
            )),
            None => {
                *pin = Some(seen);
                Ok(ServerCertVerified::assertion())
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// A SHA-256 fingerprint printed on a line: 64 hex digits, optionally as 32
/// colon-separated pairs, optionally after `sha256:` / `sha256=`.
pub(crate) fn fingerprint_in(line: &str) -> Option<[u8; 32]> {
    for word in line.split(|c: char| c.is_whitespace() || c == '=' || c == ',' || c == '(' || c == ')') {
        let lower = word.to_ascii_lowercase();
        let word = lower.strip_prefix("sha256:").or_else(|| lower.strip_prefix("sha-256:")).unwrap_or(&lower);
        let hex: String = word.chars().filter(|c| *c != ':').collect();
        if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            let mut out = [0u8; 32];
            for (i, byte) in out.iter_mut().enumerate() {
                *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
            }
            return Some(out);
        }
    }
    None
}

/// A fingerprint as the SDK prints it: 32 upper-case hex pairs joined by `:`.
pub(crate) fn fingerprint_text(fingerprint: &[u8; 32]) -> String {
    fingerprint.iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

#[cfg(test)]
mod tests {
    use super::{fingerprint_in, fingerprint_text};

    #[test]
    fn fingerprint_is_read_in_its_usual_spellings() {
        let hex = "ab".repeat(32);
        let pairs = vec!["AB"; 32].join(":");
        for line in [
            format!("fingerprint {hex}"),
            format!("listening https://127.0.0.1:4000 sha256={hex}"),
            format!("certificate sha256:{pairs}"),
            format!("SHA-256 Fingerprint={pairs}"),
        ] {
            assert_eq!(fingerprint_in(&line), Some([0xab; 32]), "{line}");
        }
        assert_eq!(fingerprint_in("listening https://127.0.0.1:4000"), None);
        assert_eq!(fingerprint_in(&"a".repeat(63)), None);
        let text = fingerprint_text(&[0xab; 32]);
        assert_eq!(text, pairs);
        assert_eq!(fingerprint_in(&text), Some([0xab; 32]));
    }
}
