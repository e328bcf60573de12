//! The servers the bench measures, each in a process of its own so that its
//! CPU time can be read from `/proc/<pid>/stat`:
//!
//! - `agent`: a durable agent (`durable_sdk::create_core` + `Collie::serve`) with
//!   `--panes N` idle panes; pane `p0` holds `--events E` items; the last
//!   change writes one item on the middle pane, so `?since=<seq − 1>` is a
//!   delta of one pane. With `--asks N`, pane `p0` also keeps four choice
//!   asks open per answer slot `0..N` (tool call ids `t<slot>-<n>`): each
//!   answered one resolves its `ask()`, and the slot's task raises the
//!   next, so a client answering `t<slot>-0, t<slot>-1, …` always finds
//!   its ask open. It prints `hash <h>` (every such ask has the same hash:
//!   the id is not part of it) after `seq`.
//! - `bare`: hyper 1.x alone, serving the bytes of `--body FILE` to every
//!   `GET` (with an `ETag`, and `304` for a matching `If-None-Match`) and,
//!   once it has read the body, a small JSON to every `POST`: what serving
//!   those bytes costs at least.
//!
//! Both take `--socket PATH` or `--https 127.0.0.1:0` (a self-signed
//! certificate; the agent checks the bearer token in `COLLIE_TOKEN`, the
//! bare server checks that a bearer header is there), and print
//! `listening <address>` then `seq <n>` (the agent's) on stdout.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use bytes::Bytes;
use durable_sdk::{AskOption, AskSpec, CoreOptions, Item, PaneOptions, Transport, create_core};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

pub(crate) struct ServeArgs {
    kind: String,
    socket: Option<PathBuf>,
    https: Option<String>,
    panes: usize,
    events: usize,
    body: Option<PathBuf>,
    asks: usize,
}

/// Asks a slot keeps open at once: a client's next ask is raised three
/// round trips before it is answered.
const ASKS_AHEAD: u64 = 4;

/// The tool call id of a bench ask.
pub(crate) fn ask_call_id(slot: usize, n: u64) -> String {
    format!("t{slot}-{n}")
}

fn parse(args: &[String]) -> Result<ServeArgs, String> {
    let mut out = ServeArgs {
        kind: String::new(),
        socket: None,
        https: None,
        panes: 10,
        events: 0,
        body: None,
        asks: 0,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().cloned().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--kind" => out.kind = value()?,
            "--socket" => out.socket = Some(value()?.into()),
            "--https" => out.https = Some(value()?),
            "--panes" => out.panes = value()?.parse().map_err(|e| format!("--panes: {e}"))?,
            "--events" => out.events = value()?.parse().map_err(|e| format!("--events: {e}"))?,
            "--body" => out.body = Some(value()?.into()),
            "--asks" => out.asks = value()?.parse().map_err(|e| format!("--asks: {e}"))?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if out.socket.is_some() == out.https.is_some() {
        return Err("give one of --socket PATH and --https ADDR".into());
    }
    Ok(out)
}

pub fn main(args: &[String]) -> ExitCode {
    let args = match parse(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bench-serve: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build();
    let result = rt.map_err(|e| e.to_string()).and_then(|rt| {
        rt.block_on(async {
            match args.kind.as_str() {
                "agent" => agent(&args).await,
                "bare" => bare(&args).await,
                other => Err(format!("--kind agent|bare, not {other:?}")),
            }
        })
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench-serve: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn agent(args: &ServeArgs) -> Result<(), String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    // `RUST_LOG=info cargo xtask bench`: the agent logs as the examples do,
    // so the figures say what a poll costs with a subscriber whose level
    // leaves its request span off. Unset: no subscriber.
    if std::env::var_os("RUST_LOG").is_some() {
        let filter = tracing_subscriber::EnvFilter::from_default_env();
        let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
    }
    // Over HTTPS, serving turns allow-always off.
    let collie = create_core(CoreOptions::builder().host_name("bench")).map_err(|x| e(&x))?;
    let core = collie.driver().clone();
    let tab =
        collie.workspace("bench", "Bench").map_err(|x| e(&x))?.tab("main", "Main").map_err(|x| e(&x))?;
    let mut panes = Vec::with_capacity(args.panes);
    for i in 0..args.panes {
        panes.push(
            tab.pane(&format!("p{i}"), PaneOptions::new(format!("Pane {i}")).harness("bench"))
                .map_err(|x| e(&x))?,
        );
    }
    // A full pane: items of 200 bytes.
    let text = "x".repeat(200);
    for n in 0..args.events {
        let item = Item::reply(&format!("i{n}"), text.clone()).map_err(|x| e(&x))?;
        panes[0].write(item).map_err(|x| e(&x))?;
    }
    collie.ready();
    // The last change: one pane, so a delta since the seq before it carries one pane.
    let middle = &panes[args.panes / 2];
    middle.write(Item::reply("last", "changed").map_err(|x| e(&x))?).map_err(|x| e(&x))?;
    let transport = match (&args.socket, &args.https) {
        (Some(path), _) => Transport::socket_at(path.clone()),
        (_, Some(addr)) => Transport::https(addr.clone()).self_signed(),
        _ => unreachable!("parse checked"),
    };
    collie.serve(transport).await.map_err(|x| e(&x))?;
    for slot in 0..args.asks {
        let pane = panes[0].clone();
        tokio::spawn(async move {
            let raise = |n: u64| {
                let options = [AskOption::new("yes", "Yes"), AskOption::new("no", "No")];
                pane.ask(AskSpec::choice(ask_call_id(slot, n), "Go on?", options))
            };
            let mut open = std::collections::VecDeque::new();
            for n in 0..ASKS_AHEAD {
                open.push_back(raise(n).expect("a valid ask"));
            }
            for n in ASKS_AHEAD.. {
                let Some(ask) = open.pop_front() else { break };
                if ask.await.is_err() {
                    break;
                }
                open.push_back(raise(n).expect("a valid ask"));
            }
        });
    }
    let seq = core_seq(&core).await;
    println!("listening {}", collie.address());
    println!("seq {seq}");
    if args.asks > 0 {
        println!("hash {}", ask_hash_of(&core).await.ok_or("no open ask in the state")?);
    }
    std::future::pending::<()>().await;
    Ok(())
}

/// The agent's state answer, read through its own route, as `T` (only the
/// fields `T` names: a `serde_json::Value` of a 10,000-pane answer would
/// leave the allocator holding some 20 MiB that the memory figures would
/// then count against the agent).
async fn read_state<T: serde::de::DeserializeOwned>(core: &durable_sdk::driver::Driver) -> Option<T> {
    use durable_sdk::driver::exchange::{Caller, Request};
    let resp = core.handle(Request::get("/v1/state", Caller::OtherProcess)).await;
    serde_json::from_slice(&resp.body).ok()
}

/// The agent's current change sequence.
async fn core_seq(core: &durable_sdk::driver::Driver) -> u64 {
    #[derive(serde::Deserialize)]
    struct Seq {
        seq: u64,
    }
    read_state::<Seq>(core).await.map_or(0, |s| s.seq)
}

/// The hash of the first open ask in the agent's state.
async fn ask_hash_of(core: &durable_sdk::driver::Driver) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Asks {
        asks: Vec<Hash>,
    }
    #[derive(serde::Deserialize)]
    struct Hash {
        hash: String,
    }
    // The slots' tasks raise their first asks once this runtime's one
    // worker gets to them.
    for _ in 0..100 {
        if let Some(a) = read_state::<Asks>(core).await?.asks.into_iter().next() {
            return Some(a.hash);
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    None
}

async fn bare(args: &ServeArgs) -> Result<(), String> {
    let body = match &args.body {
        Some(path) => Bytes::from(std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?),
        None => Bytes::from_static(b"{\"ok\":true}"),
    };
    let body = Arc::new(body);
    let tls = args.https.is_some();
    let handler = move |req: Request<Incoming>| {
        let body = body.clone();
        async move {
            let etag = "\"bench-1\"";
            let authorized = !tls || req.headers().contains_key(hyper::header::AUTHORIZATION);
            let post = req.method() == hyper::Method::POST;
            let if_none_match = req.headers().get(hyper::header::IF_NONE_MATCH).cloned();
            if post {
                // A server that answers a write has read its body first.
                let _ = http_body_util::BodyExt::collect(req.into_body()).await;
            }
            let mut resp = if !authorized {
                Response::builder().status(401).body(Full::new(Bytes::from_static(b"{\"ok\":false}")))
            } else if post {
                Response::builder()
                    .status(200)
                    .body(Full::new(Bytes::from_static(b"{\"ok\":true,\"result\":\"answered\"}")))
            } else if if_none_match.is_some_and(|v| v.as_bytes() == etag.as_bytes()) {
                Response::builder().status(304).body(Full::new(Bytes::new()))
            } else {
                Response::builder().status(200).body(Full::new((*body).clone()))
            }
            .expect("a valid response");
            resp.headers_mut().insert(hyper::header::ETAG, hyper::header::HeaderValue::from_static(etag));
            resp.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/json"),
            );
            Ok::<_, std::convert::Infallible>(resp)
        }
    };
    match (&args.socket, &args.https) {
        (Some(path), _) => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
            }
            let _ = std::fs::remove_file(path);
            let listener = tokio::net::UnixListener::bind(path).map_err(|e| e.to_string())?;
            println!("listening {}", path.display());
            println!("seq 0");
            loop {
                let (stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
                let handler = handler.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(handler);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        }
        (_, Some(addr)) => {
            let cert =
                rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
                    .map_err(|e| e.to_string())?;
            let key = rustls::pki_types::PrivateKeyDer::try_from(cert.key_pair.serialize_der())
                .map_err(|e| e.to_string())?;
            let config = rustls::ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(vec![cert.cert.der().clone()], key)
            .map_err(|e| e.to_string())?;
            let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
            let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| e.to_string())?;
            println!("listening https://{}", listener.local_addr().map_err(|e| e.to_string())?);
            println!("seq 0");
            loop {
                let (stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
                let (handler, acceptor) = (handler.clone(), acceptor.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else { return };
                    let service = hyper::service::service_fn(handler);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        }
        _ => unreachable!("parse checked"),
    }
}
