//! `PgReceiptStore` over TLS, against real PostgreSQL servers started by
//! the test (see `pg_support`) on 127.0.0.1: one with `ssl = on` and a
//! self-signed certificate for `localhost` made here (rcgen), one without
//! TLS. Each `sslmode` is driven as an agent would: through the URL (or the
//! builder), then receipts stored and read back.
#![cfg(feature = "postgres")]

mod pg_support;

use std::path::PathBuf;
use std::sync::OnceLock;

use durable_runtime::{Lookup, Receipt, ReceiptStore};
use durable_sdk::stores::{PgReceiptOptions, PgReceiptStore, PgSslMode, StoreError};
use pg_support::{PASSWORD, PgServer, fresh_schema};
use serde_json::json;

/// A server on 127.0.0.1, its port, and the certificates the tests hand
/// the store.
struct TcpServer {
    server: PgServer,
    port: u16,
}

impl TcpServer {
    /// A URL to `host` on this server's port, with the password and `query`.
    fn url(&self, host: &str, query: &str) -> String {
        let url = format!("postgres://postgres:{PASSWORD}@{host}:{}/postgres", self.port);
        if query.is_empty() { url } else { format!("{url}?{query}") }
    }

    /// The server's own PEM file of its certificate (the root that
    /// `verify-full` is given).
    fn certificate(&self) -> PathBuf {
        self.server.dir.join("root.pem")
    }

    /// A PEM file of another issuer's self-signed certificate for `localhost`.
    fn other_certificate(&self) -> PathBuf {
        self.server.dir.join("other.pem")
    }

    /// A connection over the server's Unix socket (no TLS there), to look at
    /// the store's sessions.
    async fn admin(&self) -> tokio_postgres::Client {
        let url = format!(
            "postgres://postgres:{PASSWORD}@/postgres?host={}&port={}",
            self.server.socket_dir().display(),
            self.port
        );
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        client
    }

    /// Whether every session of the store named `application` is
    /// encrypted, and how many there are.
    async fn sessions_encrypted(&self, application: &str) -> (bool, i64) {
        let row = self
            .admin()
            .await
            .query_one(
                "SELECT coalesce(bool_and(s.ssl), false), count(*) FROM pg_stat_ssl s \
                 JOIN pg_stat_activity a USING (pid) WHERE a.application_name = $1",
                &[&application],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    }
}

/// A port nobody listens on right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts a server listening on 127.0.0.1 with `settings` and `data_files`,
/// on a thread that lives as long as the process (the server shuts down
/// when the process ends: see `pg_support`).
fn start_tcp(settings: &[&str], data_files: Vec<(&'static str, Vec<u8>)>) -> TcpServer {
    let port = free_port();
    let mut all = vec!["listen_addresses=127.0.0.1".to_owned(), format!("port={port}")];
    all.extend(settings.iter().map(|s| (*s).to_owned()));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("pg-keeper".into())
        .spawn(move || {
            let files: Vec<(&str, &[u8])> = data_files.iter().map(|(n, b)| (*n, b.as_slice())).collect();
            tx.send(PgServer::start_with(&all, &files)).unwrap();
            loop {
                std::thread::park();
            }
        })
        .unwrap();
    TcpServer { server: rx.recv().expect("the test server started"), port }
}

/// The server with `ssl = on`, its certificate self-signed for `localhost`.
fn tls_server() -> &'static TcpServer {
    static SERVER: OnceLock<TcpServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        let own = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        // Another issuer's certificate for the same name.
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, "another issuer");
        let other = params.self_signed(&rcgen::KeyPair::generate().unwrap()).unwrap();
        let server = start_tcp(
            &["ssl=on"],
            vec![
                ("server.crt", own.cert.pem().into_bytes()),
                ("server.key", own.key_pair.serialize_pem().into_bytes()),
            ],
        );
        std::fs::write(server.certificate(), own.cert.pem()).unwrap();
        std::fs::write(server.other_certificate(), other.pem()).unwrap();
        server
    })
}

/// A server on TCP without TLS.
fn plain_server() -> &'static TcpServer {
    static SERVER: OnceLock<TcpServer> = OnceLock::new();
    SERVER.get_or_init(|| start_tcp(&["ssl=off"], Vec::new()))
}

fn receipt(n: u64) -> Receipt {
    Receipt::of_json(200, &json!({"ok": true, "result": "sent", "n": n, "replayed": false}))
}

/// The URL's `application_name`: each test's sessions told apart.
fn app(name: &str) -> String {
    format!("application_name=tls_{name}_{}", std::process::id())
}

async fn connect(options: Result<PgReceiptOptions, StoreError>) -> Result<PgReceiptStore, StoreError> {
    PgReceiptStore::connect(options?).await
}

/// The options of `url` on a schema of its own.
fn options(url: String, name: &str) -> Result<PgReceiptOptions, StoreError> {
    PgReceiptOptions::builder().url(url).schema(fresh_schema(name)).build()
}

/// Stores a receipt and reads it back: the connection works end to end.
async fn round_trip(store: &PgReceiptStore) {
    store.put("r-1", receipt(1), "pane:ticket-1").await.unwrap();
    assert_eq!(store.get("r-1").await.unwrap(), Lookup::Found(receipt(1)));
}

fn assert_refused(e: &StoreError, wanted: &[&str]) {
    let text = e.to_string();
    for w in wanted {
        assert!(text.contains(w), "{w:?} is not in: {text}");
    }
    assert!(!text.contains(PASSWORD), "the password is in: {text}");
}

#[tokio::test]
async fn require_encrypts_without_checking_the_certificate() {
    let server = tls_server();
    let url = server.url("127.0.0.1", &format!("sslmode=require&{}", app("require")));
    let options = options(url, "require").unwrap();
    assert_eq!(options.ssl_mode(), PgSslMode::Require);
    let store = connect(Ok(options)).await.unwrap();
    round_trip(&store).await;
    let (encrypted, sessions) =
        server.sessions_encrypted(&format!("tls_require_{}", std::process::id())).await;
    assert!(sessions >= 2, "the owner session and a pooled one: {sessions}");
    assert!(encrypted, "a session of the store is not encrypted");
}

#[tokio::test]
async fn verify_full_with_the_certificate_as_root_and_the_right_host_stores_and_reads_receipts() {
    let server = tls_server();
    let root = server.certificate();
    let url = server
        .url("localhost", &format!("sslmode=verify-full&sslrootcert={}&{}", root.display(), app("verified")));
    let store = connect(options(url, "verified")).await.unwrap();
    round_trip(&store).await;
    let (encrypted, sessions) =
        server.sessions_encrypted(&format!("tls_verified_{}", std::process::id())).await;
    assert!(encrypted && sessions >= 2, "encrypted {encrypted}, {sessions} sessions");

    // The same through the builder: a root given without a mode is
    // verify-full, and the other process reads what the first stored.
    let options = PgReceiptOptions::builder()
        .url(server.url("localhost", ""))
        .schema(store.schema())
        .ssl_root_cert(&root)
        .build()
        .unwrap();
    assert_eq!(options.ssl_mode(), PgSslMode::VerifyFull);
    let again = connect(Ok(options)).await.unwrap();
    assert_eq!(again.get("r-1").await.unwrap(), Lookup::Found(receipt(1)));
}

#[tokio::test]
async fn verify_full_refuses_a_certificate_of_no_given_root_or_for_another_host() {
    let server = tls_server();
    // No root given: the system's roots, which do not know this certificate.
    // (A machine without CA certificates refuses sooner, saying so.)
    let e = connect(options(server.url("localhost", "sslmode=verify-full"), "system")).await.unwrap_err();
    if e.to_string().contains("none usable in the system's store") {
        assert_refused(&e, &["sslmode=verify-full needs roots"]);
    } else {
        assert_refused(
            &e,
            &["sslmode=verify-full, the system's roots", "invalid peer certificate", "UnknownIssuer"],
        );
    }
    // Another issuer's certificate as the root.
    let other = server.other_certificate();
    let other_root = PgReceiptOptions::builder()
        .url(server.url("localhost", ""))
        .ssl_mode(PgSslMode::VerifyFull)
        .ssl_root_cert(&other)
        .build();
    let e = connect(other_root).await.unwrap_err();
    let roots = format!("roots from {}", other.display());
    assert_refused(&e, &["sslmode=verify-full", &roots, "invalid peer certificate", "UnknownIssuer"]);
    // The right root, but the certificate is for localhost, not 127.0.0.1.
    let query = format!("sslmode=verify-full&sslrootcert={}", server.certificate().display());
    let e = connect(options(server.url("127.0.0.1", &query), "name")).await.unwrap_err();
    assert_refused(&e, &["sslmode=verify-full", "invalid peer certificate", "not valid for name"]);
}

#[tokio::test]
async fn require_fails_against_a_server_without_tls_and_prefer_goes_plain() {
    let server = plain_server();
    let e = connect(options(server.url("127.0.0.1", "sslmode=require"), "plain")).await.unwrap_err();
    assert_refused(&e, &["sslmode=require", "server does not support TLS"]);
    // The default, prefer, takes what the server offers: plain here, TLS
    // on the other.
    let store =
        connect(options(server.url("127.0.0.1", &app("prefer_plain")), "prefer_plain")).await.unwrap();
    round_trip(&store).await;
    let (encrypted, sessions) =
        server.sessions_encrypted(&format!("tls_prefer_plain_{}", std::process::id())).await;
    assert!(!encrypted && sessions >= 2, "encrypted {encrypted}, {sessions} sessions");
    let tls = tls_server();
    let store = connect(options(tls.url("127.0.0.1", &app("prefer_tls")), "prefer_tls")).await.unwrap();
    round_trip(&store).await;
    let (encrypted, sessions) =
        tls.sessions_encrypted(&format!("tls_prefer_tls_{}", std::process::id())).await;
    assert!(encrypted && sessions >= 2, "encrypted {encrypted}, {sessions} sessions");
}
