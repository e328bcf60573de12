//! `durable phone --web`: the agent in a browser. A small HTTP server on
//! `127.0.0.1` serves the page (`crates/durable-cli/web/`, embedded) and
//! passes its wire requests on to the agent with the CLI's own link, so
//! the token stays here. The address printed on stdout holds a secret
//! drawn for the run; without it the server answers `404` and nothing
//! else (`guard`).

mod assets;
mod guard;
mod proxy;
mod serve;

use std::io::Write;
use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::json;
use tokio::net::TcpListener;

use crate::link::{Link, Target, Token};

/// What the page's `about` says of the agent, which the wire does not.
#[derive(Debug)]
pub(crate) struct About {
    /// The socket path or URL as given on the command line.
    pub(crate) target: String,
}

/// Serves the page on `127.0.0.1:port` (0: any free port) for the agent
/// behind `link` until SIGTERM or SIGINT (then exit 0).
pub(crate) fn main(link: Link, about: About, port: u16) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("phone: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(run(link, about, port));
    runtime.shutdown_background();
    code
}

async fn run(link: Link, about: About, port: u16) -> ExitCode {
    // Registered before the address is printed: a stop from then on is a
    // clean exit.
    let stop = match Stop::new() {
        Ok(stop) => stop,
        Err(e) => {
            eprintln!("phone: cannot watch for SIGTERM and SIGINT: {e}");
            return ExitCode::FAILURE;
        }
    };
    let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("phone: cannot listen on 127.0.0.1:{port}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let port = match listener.local_addr() {
        Ok(a) => a.port(),
        Err(e) => {
            eprintln!("phone: cannot read the port listened on: {e}");
            return ExitCode::FAILURE;
        }
    };
    let secret = match secret() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("phone: no randomness for the page's secret: {e}");
            return ExitCode::FAILURE;
        }
    };
    let transport = match link.target() {
        Target::Socket(_) => "socket",
        Target::Url(u) if u.https => "https",
        Target::Url(_) => "http",
    };
    let token = match link.target() {
        Target::Url(_) => Token::from_env(),
        Target::Socket(_) => None,
    };
    let about = json!({
        "target": about.target,
        "transport": transport,
        "cli": concat!("durable ", env!("CARGO_PKG_VERSION")),
    });
    let where_ = link.target().to_string();
    let state = Arc::new(serve::State {
        guard: guard::Guard::new(secret.clone(), port),
        agent: proxy::Agent::new(link, token),
        about,
    });
    let mut out = std::io::stdout().lock();
    if writeln!(out, "http://127.0.0.1:{port}/{secret}/").and_then(|()| out.flush()).is_err() {
        eprintln!("phone: cannot print the page's address");
        return ExitCode::FAILURE;
    }
    drop(out);
    eprintln!(
        "phone: {where_} in your browser at the address above (this computer only; Ctrl-C stops the server)"
    );
    tokio::select! {
        () = serve::accept(listener, state) => ExitCode::FAILURE,
        () = stop.wait() => ExitCode::SUCCESS,
    }
}

/// 32 random bytes as 64 hex digits (256 bits; URL-safe as they are).
fn secret() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// SIGTERM or SIGINT (Ctrl-C elsewhere than on Unix).
struct Stop {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Stop {
    #[cfg(unix)]
    fn new() -> std::io::Result<Stop> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Stop { term: signal(SignalKind::terminate())?, int: signal(SignalKind::interrupt())? })
    }

    #[cfg(not(unix))]
    fn new() -> std::io::Result<Stop> {
        Ok(Stop {})
    }

    #[cfg(unix)]
    async fn wait(mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }

    #[cfg(not(unix))]
    async fn wait(self) {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_long_url_safe_and_fresh() {
        let a = secret().unwrap();
        let b = secret().unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
    }
}
