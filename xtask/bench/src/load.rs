//! The closed-loop load client: `conns` keep-alive connections, one request
//! in flight on each, for a measured window after a warm-up; and the
//! server's CPU time and memory from `/proc`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;

/// Where a server listens.
#[derive(Clone)]
pub enum Target {
    Unix(PathBuf),
    Https { addr: String, token: String, config: Arc<rustls::ClientConfig> },
}

/// The address only: the bearer token stays out of `Debug` output.
impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Unix(path) => f.debug_tuple("Unix").field(path).finish(),
            Target::Https { addr, .. } => f.debug_struct("Https").field("addr", addr).finish_non_exhaustive(),
        }
    }
}

impl Target {
    /// From a server's `listening` line.
    pub fn from_address(address: &str, token: &str) -> Target {
        match address.strip_prefix("https://") {
            Some(addr) => {
                Target::Https { addr: addr.to_owned(), token: token.to_owned(), config: any_cert() }
            }
            None => Target::Unix(PathBuf::from(address)),
        }
    }
}

/// One request, sent again and again.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: hyper::Method,
    pub path: String,
    pub if_none_match: Option<String>,
    pub body: Option<Bytes>,
}

impl Call {
    pub fn get(path: impl Into<String>) -> Call {
        Call { method: hyper::Method::GET, path: path.into(), if_none_match: None, body: None }
    }

    /// A `POST` of a JSON body.
    pub fn post(path: impl Into<String>, body: impl Into<Bytes>) -> Call {
        Call { method: hyper::Method::POST, path: path.into(), if_none_match: None, body: Some(body.into()) }
    }
}

/// What a window of load gave.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    pub rps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// Server CPU (user + system) per request, µs.
    pub cpu_us: f64,
    /// Requests that did not get the expected status.
    pub errors: u64,
}

/// A kept-alive HTTP/1.1 connection's sending half.
pub type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// A new keep-alive connection to `target` (over HTTPS, with any certificate).
pub async fn connect(target: &Target) -> Result<Sender, String> {
    macro_rules! handshake {
        ($io:expr) => {{
            let (sender, conn) =
                hyper::client::conn::http1::handshake(TokioIo::new($io)).await.map_err(|e| e.to_string())?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(sender)
        }};
    }
    match target {
        Target::Unix(path) => {
            handshake!(tokio::net::UnixStream::connect(path).await.map_err(|e| e.to_string())?)
        }
        Target::Https { addr, config, .. } => {
            let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
            tcp.set_nodelay(true).map_err(|e| e.to_string())?;
            let name = rustls::pki_types::ServerName::try_from("localhost").map_err(|e| e.to_string())?;
            let tls = tokio_rustls::TlsConnector::from(config.clone())
                .connect(name, tcp)
                .await
                .map_err(|e| e.to_string())?;
            handshake!(tls)
        }
    }
}

/// `call` as a request to `target` (with the bearer token over HTTPS).
pub fn request(target: &Target, call: &Call) -> Request<Full<Bytes>> {
    let mut b = Request::builder().method(call.method.clone()).uri(&call.path).header("host", "collie");
    if let Target::Https { token, .. } = target {
        b = b.header("authorization", format!("Bearer {token}"));
    }
    if let Some(tag) = &call.if_none_match {
        b = b.header("if-none-match", tag);
    }
    if call.body.is_some() {
        b = b.header("content-type", "application/json");
    }
    b.body(Full::new(call.body.clone().unwrap_or_default())).expect("a valid request")
}

/// One request on a kept-alive connection, its body read to the end:
/// whether it got `expect`.
async fn send(sender: &mut Sender, target: &Target, call: &Call, expect: u16) -> bool {
    match sender.send_request(request(target, call)).await {
        Ok(resp) => {
            let status = resp.status().as_u16();
            resp.into_body().collect().await.is_ok() && status == expect
        }
        Err(_) => false,
    }
}

/// One request on a fresh connection: its status and body.
pub async fn once(target: &Target, call: &Call) -> Result<(u16, Bytes), String> {
    let mut sender = connect(target).await?;
    let resp = sender.send_request(request(target, call)).await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok((status, body))
}

/// Runs `call` on `conns` connections for `warmup + window`; counts and
/// times the requests in the window, and the server's CPU over it.
pub async fn run(
    target: &Target,
    call: &Call,
    expect: u16,
    server_pid: u32,
    conns: usize,
    warmup: Duration,
    window: Duration,
) -> Result<Figures, String> {
    let call = call.clone();
    let calls: Calls = Arc::new(move |_, _| call.clone());
    run_each(target, calls, expect, server_pid, conns, warmup, window).await
}

/// What connection `c` sends as its `n`th request.
pub type Calls = Arc<dyn Fn(usize, u64) -> Call + Send + Sync>;

/// [`run`] with a request of its own for each connection and turn.
pub async fn run_each(
    target: &Target,
    calls: Calls,
    expect: u16,
    server_pid: u32,
    conns: usize,
    warmup: Duration,
    window: Duration,
) -> Result<Figures, String> {
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for conn in 0..conns {
        let mut sender = connect(target).await?;
        let (target, calls, measuring, stop) =
            (target.clone(), calls.clone(), measuring.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies: Vec<u32> = Vec::new();
            let mut errors = 0u64;
            for n in 0.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let started = Instant::now();
                let ok = send(&mut sender, &target, &calls(conn, n), expect).await;
                if measuring.load(Ordering::Relaxed) {
                    latencies.push(started.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
                    if !ok {
                        errors += 1;
                    }
                }
                if !ok {
                    match connect(&target).await {
                        Ok(s) => sender = s,
                        Err(_) => break,
                    }
                }
            }
            (latencies, errors)
        }));
    }
    tokio::time::sleep(warmup).await;
    let cpu_before = cpu_ticks(server_pid)?;
    let started = Instant::now();
    measuring.store(true, Ordering::Relaxed);
    tokio::time::sleep(window).await;
    measuring.store(false, Ordering::Relaxed);
    let elapsed = started.elapsed();
    let cpu_after = cpu_ticks(server_pid)?;
    stop.store(true, Ordering::Relaxed);
    let mut all: Vec<u32> = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (l, e) = t.await.map_err(|e| e.to_string())?;
        all.extend(l);
        errors += e;
    }
    all.sort_unstable();
    let pct = |p: f64| all.get(((all.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(0) as f64;
    let requests = all.len() as u64;
    let cpu_us = (cpu_after - cpu_before) as f64 * 1e6 / clock_ticks_per_second() as f64;
    Ok(Figures {
        rps: requests as f64 / elapsed.as_secs_f64(),
        p50_us: pct(0.5),
        p99_us: pct(0.99),
        cpu_us: if requests == 0 { f64::NAN } else { cpu_us / requests as f64 },
        errors,
    })
}

/// Opens `conns` keep-alive connections, for [`count`] to use again and
/// again: what a new connection costs the server (its accept, the socket's
/// peer check) is then paid before any count, as it is before the measured
/// window of [`run`].
pub async fn connect_all(target: &Target, conns: usize) -> Result<Vec<Sender>, String> {
    let mut senders = Vec::with_capacity(conns);
    for _ in 0..conns {
        senders.push(connect(target).await?);
    }
    Ok(senders)
}

/// Sends exactly `per_conn` requests on each of `senders`, one in flight
/// on each: connection `c` sends `calls(c, from)`, `calls(c, from + 1)`,
/// …. Returns how many did not get `expect`. A connection that fails is
/// opened again (and its new connection is counted with the requests).
pub async fn count(
    target: &Target,
    calls: &Calls,
    expect: u16,
    senders: &mut Vec<Sender>,
    from: u64,
    per_conn: u64,
) -> Result<u64, String> {
    let mut tasks = Vec::new();
    for (conn, mut sender) in senders.drain(..).enumerate() {
        let (target, calls) = (target.clone(), calls.clone());
        tasks.push(tokio::spawn(async move {
            let mut errors = 0u64;
            for n in from..from + per_conn {
                if !send(&mut sender, &target, &calls(conn, n), expect).await {
                    errors += 1;
                    sender = connect(&target).await?;
                }
            }
            Ok::<_, String>((errors, sender))
        }));
    }
    let mut errors = 0;
    for t in tasks {
        let (failed, sender) = t.await.map_err(|e| e.to_string())??;
        errors += failed;
        senders.push(sender);
    }
    Ok(errors)
}

/// utime + stime of a process, in clock ticks.
pub fn cpu_ticks(pid: u32) -> Result<u64, String> {
    let stat =
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    // `pid (comm) state ppid …`: fields after the command's `)`; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).ok_or("a malformed /proc stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).ok_or("a malformed /proc stat");
    Ok(num(11)? + num(12)?)
}

/// The resident memory of a process, in KiB.
pub fn rss_kib(pid: u32) -> Result<u64, String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("/proc/{pid}/status: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| "no VmRSS".to_owned())
}

/// `getconf CLK_TCK` (100 on Linux unless told otherwise).
fn clock_ticks_per_second() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100)
    })
}

/// A client that takes any certificate: the bench talks to its own
/// self-signed servers on loopback, nothing else.
fn any_cert() -> Arc<rustls::ClientConfig> {
    #[derive(Debug)]
    struct AnyCert(Arc<rustls::crypto::CryptoProvider>);
    impl rustls::client::danger::ServerCertVerifier for AnyCert {
        fn verify_server_cert(
            &self,
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &[rustls::pki_types::CertificateDer<'_>],
            _: &rustls::pki_types::ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
        ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &rustls::pki_types::CertificateDer<'_>,
            dss: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }
        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &rustls::pki_types::CertificateDer<'_>,
            dss: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(
                message,
                cert,
                dss,
                &self.0.signature_verification_algorithms,
            )
        }
        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        .with_no_client_auth();
    Arc::new(config)
}

#[cfg(test)]
mod tests {
    use super::Target;

    #[test]
    fn a_target_debugs_its_address_but_never_its_token() {
        let https = format!("{:?}", Target::from_address("https://127.0.0.1:8443", "bench-secret-token"));
        assert!(https.contains("127.0.0.1:8443") && !https.contains("bench-secret-token"), "{https}");
        let unix = format!("{:?}", Target::from_address("/tmp/s/app.sock", "bench-secret-token"));
        assert!(unix.contains("/tmp/s/app.sock") && !unix.contains("bench-secret-token"), "{unix}");
    }
}
