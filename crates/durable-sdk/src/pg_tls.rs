//! TLS for [`PgReceiptStore`](crate::stores::PgReceiptStore): the URL's
//! `sslmode` and `sslrootcert` (tokio-postgres knows neither `verify-full`
//! nor `sslrootcert`, so the store takes both out of the URL and reads them
//! itself), and the rustls configuration of each mode.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// How the store's connections use TLS: the URL's `sslmode` (libpq's
/// names), or [`PgReceiptOptionsBuilder::ssl_mode`](crate::stores::PgReceiptOptionsBuilder::ssl_mode).
///
/// TLS runs over TCP: PostgreSQL never encrypts a Unix socket, so there
/// `prefer` stays plain and `require` or `verify-full` fail to connect.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PgSslMode {
    /// `disable`: never TLS.
    Disable,
    /// `prefer`, the default (as libpq's): TLS when the server offers it,
    /// plain when it does not, and no certificate verified. It keeps a
    /// passive listener out, no more: whoever can intercept the connection
    /// can answer "no TLS", or pose as the server.
    Prefer,
    /// `require`: TLS or no connection, with no certificate verified. The
    /// receipts and the login cannot be read off the wire, but whoever can
    /// intercept the connection can pose as the server, and read and change
    /// what the store keeps there. Across a network you do not control, use
    /// [`VerifyFull`](Self::VerifyFull).
    Require,
    /// `verify-full`: TLS, the server's certificate chain verified against
    /// the roots (`sslrootcert`, else the system's store) and its name
    /// against the host connected to.
    VerifyFull,
}

impl PgSslMode {
    /// libpq's name of the mode (`verify-full`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            PgSslMode::Disable => "disable",
            PgSslMode::Prefer => "prefer",
            PgSslMode::Require => "require",
            PgSslMode::VerifyFull => "verify-full",
        }
    }

    fn parse(value: &str) -> Result<PgSslMode, String> {
        match value {
            "disable" => Ok(PgSslMode::Disable),
            "prefer" => Ok(PgSslMode::Prefer),
            "require" => Ok(PgSslMode::Require),
            "verify-full" => Ok(PgSslMode::VerifyFull),
            other => Err(format!(
                "postgres: sslmode {other:?} is not one this store supports (disable, prefer, require, verify-full)"
            )),
        }
    }
}

impl fmt::Display for PgSslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where `verify-full` takes its roots from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Roots {
    /// The system's store (`sslrootcert=system`, or none given).
    System,
    /// A PEM file of CA certificates (`sslrootcert=<path>`).
    File(PathBuf),
}

impl Roots {
    fn from_url(value: String) -> Roots {
        if value == "system" { Roots::System } else { Roots::File(PathBuf::from(value)) }
    }
}

/// The TLS of a store's connections: the mode, where its roots come from,
/// and the connector made from them (the roots are read once, when the
/// options are built).
#[derive(Clone)]
pub(crate) struct PgTls {
    mode: PgSslMode,
    roots: Option<Roots>,
    connector: MakeRustlsConnect,
}

impl fmt::Debug for PgTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl PgTls {
    /// The TLS that `url`'s `sslmode` and `sslrootcert` ask for, the
    /// builder's `mode` and `root_file` winning over them; and the URL
    /// without the two, for tokio-postgres to parse. Each error names the
    /// rule and the value.
    pub(crate) fn from_url(
        url: &str,
        mode: Option<PgSslMode>,
        root_file: Option<PathBuf>,
    ) -> Result<(String, PgTls), String> {
        let taken = take_tls_params(url);
        let roots = root_file.map(Roots::File).or(taken.root.map(Roots::from_url));
        let mode = match (mode, taken.mode) {
            (Some(mode), _) => mode,
            (None, Some(value)) => PgSslMode::parse(&value)?,
            // A root given says the certificate is to be checked.
            (None, None) if roots.is_some() => PgSslMode::VerifyFull,
            (None, None) => PgSslMode::Prefer,
        };
        if roots.is_some() && mode != PgSslMode::VerifyFull {
            return Err(format!(
                "postgres: sslrootcert is for sslmode=verify-full, and sslmode is {mode}, which verifies no certificate"
            ));
        }
        let connector = connector(mode, roots.as_ref())?;
        Ok((taken.rest, PgTls { mode, roots, connector }))
    }

    pub(crate) fn mode(&self) -> PgSslMode {
        self.mode
    }

    /// What tokio-postgres is told: whether to ask for TLS and whether to
    /// go on without it.
    pub(crate) fn tokio_postgres_mode(&self) -> SslMode {
        match self.mode {
            PgSslMode::Disable => SslMode::Disable,
            PgSslMode::Prefer => SslMode::Prefer,
            PgSslMode::Require | PgSslMode::VerifyFull => SslMode::Require,
        }
    }

    pub(crate) fn connector(&self) -> MakeRustlsConnect {
        self.connector.clone()
    }

    /// `sslmode=verify-full, roots from /etc/…/root.pem`, for messages.
    pub(crate) fn describe(&self) -> String {
        match (&self.roots, self.mode) {
            (Some(Roots::File(path)), mode) => format!("sslmode={mode}, roots from {}", path.display()),
            (Some(Roots::System) | None, PgSslMode::VerifyFull) => {
                "sslmode=verify-full, the system's roots".to_owned()
            }
            (_, mode) => format!("sslmode={mode}"),
        }
    }
}

/// A rustls client for `mode`: with `verify-full`, the roots given or the
/// system's; otherwise one that checks no certificate (the handshake's
/// signatures are still checked).
fn connector(mode: PgSslMode, roots: Option<&Roots>) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("postgres: cannot set up TLS: {e}"))?;
    let config = match mode {
        PgSslMode::VerifyFull => {
            let store = match roots.unwrap_or(&Roots::System) {
                Roots::File(path) => roots_from_file(path)?,
                Roots::System => system_roots()?,
            };
            builder.with_root_certificates(store).with_no_client_auth()
        }
        PgSslMode::Disable | PgSslMode::Prefer | PgSslMode::Require => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoCertificateCheck(provider)))
            .with_no_client_auth(),
    };
    Ok(MakeRustlsConnect::new(config))
}

fn roots_from_file(path: &Path) -> Result<RootCertStore, String> {
    let fail = |why: String| format!("postgres: sslrootcert {}: {why}", path.display());
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| fail(format!("cannot read it: {e}")))?
        .collect::<Result<_, _>>()
        .map_err(|e| fail(format!("not a PEM file of certificates: {e}")))?;
    if certs.is_empty() {
        return Err(fail("holds no certificate (PEM, `-----BEGIN CERTIFICATE-----`)".to_owned()));
    }
    let mut store = RootCertStore::empty();
    for cert in certs {
        store.add(cert).map_err(|e| fail(format!("a certificate in it is not usable as a root: {e}")))?;
    }
    Ok(store)
}

fn system_roots() -> Result<RootCertStore, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut store = RootCertStore::empty();
    let (_, unusable) = store.add_parsable_certificates(found.certs);
    if store.is_empty() {
        let errors: Vec<String> = found.errors.iter().map(|e| e.to_string()).collect();
        return Err(format!(
            "postgres: sslmode=verify-full needs roots: none given (sslrootcert) and none usable in the system's store \
             ({unusable} unusable{}{})",
            if errors.is_empty() { "" } else { "; " },
            errors.join("; ")
        ));
    }
    Ok(store)
}

/// `disable`, `prefer` and `require` check no certificate, as libpq's:
/// any certificate is taken, but the handshake's signatures are still
/// verified (the connection is encrypted to whoever holds that certificate's
/// key).
#[derive(Debug)]
struct NoCertificateCheck(Arc<CryptoProvider>);

impl ServerCertVerifier for NoCertificateCheck {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A connection string without its `sslmode` and `sslrootcert`, and their
/// values.
#[derive(Debug, PartialEq, Eq)]
struct Taken {
    rest: String,
    mode: Option<String>,
    root: Option<String>,
}

/// Takes `sslmode` and `sslrootcert` out of a URL's query
/// (`postgres://…?sslmode=verify-full`, values percent-decoded) or out of
/// libpq's `key=value` form (values quoted or not). Anything it cannot
/// read is left as it is, for tokio-postgres to say what is wrong with it.
fn take_tls_params(url: &str) -> Taken {
    let unchanged = || Taken { rest: url.to_owned(), mode: None, root: None };
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let Some((base, query)) = url.split_once('?') else { return unchanged() };
        let mut taken = Taken { rest: String::new(), mode: None, root: None };
        let mut kept = Vec::new();
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = || percent_encoding::percent_decode_str(value).decode_utf8_lossy().into_owned();
            match &*percent_encoding::percent_decode_str(key).decode_utf8_lossy() {
                "sslmode" => taken.mode = Some(value()),
                "sslrootcert" => taken.root = Some(value()),
                _ => kept.push(pair),
            }
        }
        taken.rest = if kept.is_empty() { base.to_owned() } else { format!("{base}?{}", kept.join("&")) };
        return taken;
    }
    take_from_key_values(url).unwrap_or_else(unchanged)
}

/// [`take_tls_params`] for libpq's `key=value` form: `None` when it is not
/// well formed.
fn take_from_key_values(s: &str) -> Option<Taken> {
    let bytes = s.as_bytes();
    let space = |i: usize| i < bytes.len() && bytes[i].is_ascii_whitespace();
    let mut taken = Taken { rest: String::new(), mode: None, root: None };
    let mut copied = 0;
    let mut i = 0;
    loop {
        while space(i) {
            i += 1;
        }
        if i == bytes.len() {
            break;
        }
        let start = i;
        while i < bytes.len() && bytes[i] != b'=' && !space(i) {
            i += 1;
        }
        let key = &s[start..i];
        while space(i) {
            i += 1;
        }
        if bytes.get(i) != Some(&b'=') {
            return None;
        }
        i += 1;
        while space(i) {
            i += 1;
        }
        // The delimiters are ASCII, so byte steps stay on char boundaries
        // except after a backslash, which takes the whole next char.
        let quoted = bytes.get(i) == Some(&b'\'');
        if quoted {
            i += 1;
        }
        let mut value = String::new();
        loop {
            let c = s[i..].chars().next();
            match c {
                None if quoted => return None,
                None => break,
                Some('\'') if quoted => {
                    i += 1;
                    break;
                }
                Some(c) if !quoted && c.is_ascii_whitespace() => break,
                Some('\\') => {
                    let next = s[i + 1..].chars().next()?;
                    value.push(next);
                    i += 1 + next.len_utf8();
                }
                Some(c) => {
                    value.push(c);
                    i += c.len_utf8();
                }
            }
        }
        let slot = match key {
            "sslmode" => &mut taken.mode,
            "sslrootcert" => &mut taken.root,
            _ => continue,
        };
        *slot = Some(value);
        taken.rest.push_str(&s[copied..start]);
        copied = i;
    }
    taken.rest.push_str(&s[copied..]);
    Some(taken)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken(rest: &str, mode: Option<&str>, root: Option<&str>) -> Taken {
        Taken { rest: rest.to_owned(), mode: mode.map(str::to_owned), root: root.map(str::to_owned) }
    }

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_of_a_url() {
        assert_eq!(
            take_tls_params(
                "postgres://u:p@h/d?sslmode=verify-full&application_name=x&sslrootcert=%2Ftmp%2Fca%201.pem"
            ),
            taken("postgres://u:p@h/d?application_name=x", Some("verify-full"), Some("/tmp/ca 1.pem"))
        );
        assert_eq!(
            take_tls_params("postgresql://h/d?sslmode=require"),
            taken("postgresql://h/d", Some("require"), None)
        );
        assert_eq!(take_tls_params("postgres://h/d"), taken("postgres://h/d", None, None));
    }

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_of_key_values() {
        assert_eq!(
            take_tls_params(
                "host=h sslmode = verify-full password='a b\\'c' sslrootcert='/tmp/my ca.pem' dbname=d"
            ),
            taken("host=h  password='a b\\'c'  dbname=d", Some("verify-full"), Some("/tmp/my ca.pem"))
        );
        assert_eq!(take_tls_params("host=h sslmode=req\\ uire"), taken("host=h ", Some("req uire"), None));
        // Not well formed: left for tokio-postgres to refuse.
        assert_eq!(take_tls_params("host=h sslmode='open"), taken("host=h sslmode='open", None, None));
        assert_eq!(take_tls_params("host sslmode=require"), taken("host sslmode=require", None, None));
    }

    #[test]
    fn the_mode_comes_from_the_builder_then_the_url_then_a_root_then_prefer() {
        let mode =
            |url: &str, given: Option<PgSslMode>| PgTls::from_url(url, given, None).map(|(_, t)| t.mode());
        assert_eq!(mode("postgres://h/d", None), Ok(PgSslMode::Prefer));
        assert_eq!(mode("postgres://h/d?sslmode=disable", None), Ok(PgSslMode::Disable));
        assert_eq!(mode("postgres://h/d?sslmode=require", None), Ok(PgSslMode::Require));
        assert_eq!(mode("postgres://h/d?sslmode=require", Some(PgSslMode::Disable)), Ok(PgSslMode::Disable));
        let e = mode("postgres://h/d?sslmode=verify-ca", None).unwrap_err();
        assert!(e.contains("sslmode \"verify-ca\"") && e.contains("verify-full"), "{e}");
        let e = mode("postgres://h/d?sslmode=require&sslrootcert=/nonexistent.pem", None).unwrap_err();
        assert!(e.contains("sslrootcert is for sslmode=verify-full") && e.contains("require"), "{e}");
        let e = mode("postgres://h/d?sslrootcert=/nonexistent/ca.pem", None).unwrap_err();
        assert!(e.contains("sslrootcert /nonexistent/ca.pem: cannot read it"), "{e}");
    }
}
