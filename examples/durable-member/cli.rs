//! The desk's command line, parsed by hand: a dozen long options do not
//! need a parser crate.

use std::ffi::OsString;
use std::path::PathBuf;

use durable_sdk::Caps;

pub(crate) const USAGE: &str = "\
desk — the support desk: a durable agent with tickets, refunds and questions

USAGE:
    cargo run --example desk -- [OPTIONS]

WHERE IT SERVES (one of):
    --socket PATH            the private Unix socket (default: $COLLIE_DURABLE_SOCKET,
                             else $XDG_RUNTIME_DIR/durable-desk/app.sock,
                             else /tmp/durable-<uid>/durable-desk/app.sock)
    --listen ADDR            HTTPS on ADDR (e.g. 127.0.0.1:8443), with a bearer token from
                             COLLIE_TOKEN (and COLLIE_TOKEN_NEXT during a rotation)
      --cert FILE --key FILE   the certificate chain and key (PEM)
      --self-signed            a certificate made at start-up (its fingerprint goes to stderr)
      --plain-http             plain HTTP, only on 127.0.0.1 or localhost with a port

STORE:
    --data DIR               the desk's store and receipts (default: $XDG_STATE_HOME/durable-desk,
                             else ~/.local/state/durable-desk)
    --receipts URL           keep receipts, acknowledged sends, open cards and conversations in
                             PostgreSQL instead of receipts.sqlite3 in the data folder:
                             postgres://user:password@host/db
                             (`?host=/run/postgresql` for a Unix socket). Also read from
                             $DESK_RECEIPTS_URL, the better place for a password (a command line
                             is visible to other users). Desks sharing one database and schema
                             are one agent: another machine takes over its promises.
    --receipts-schema NAME   the PostgreSQL schema for them (default durable_receipts)

KNOBS (for tests):
    --caps LIST              comma-separated caps to declare (default: all)
    --turn-ms N              how long a reply takes to stream (default 1500)
    --accept-delay-ms N      every write handler but stop's waits N ms before accepting
    --hold-ms N              how long an answer to an unknown ask is held (default 600000)
    --receipts-per-group N   receipts kept per group (default 1000)
    --raise-delay-ms N       serve first, raise the stored undecided asks N ms later
    --max-connections N      connections held at once (default 64; `cargo xtask soak`
                             raises it above its pollers)

    -h, --help               this text

It prints `listening <address>` once it serves. In a ticket, send
`/ask choice|multi|text|form|approve [Ns]` to raise a question.
";

/// How the desk serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Transport {
    /// The private socket at this path (`None`: the default).
    Socket(Option<PathBuf>),
    /// HTTPS (or loopback plain HTTP) on this address.
    Https { listen: String, tls: Tls },
}

/// Where the HTTPS certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tls {
    Files { cert: PathBuf, key: PathBuf },
    SelfSigned,
    PlainHttp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Args {
    pub(crate) transport: Transport,
    pub(crate) data: Option<PathBuf>,
    pub(crate) caps: Option<Caps>,
    pub(crate) turn_ms: u64,
    pub(crate) accept_delay_ms: u64,
    pub(crate) hold_ms: Option<u64>,
    pub(crate) receipts_per_group: Option<usize>,
    pub(crate) raise_delay_ms: u64,
    /// The transport's cap on connections held at once (`None`: its
    /// default, 64).
    pub(crate) max_connections: Option<usize>,
    /// A PostgreSQL URL for the receipts (`--receipts`; the desk also reads
    /// `DESK_RECEIPTS_URL`). Its `Debug` hides it: it may hold a password.
    pub(crate) receipts: Option<Secret>,
    pub(crate) receipts_schema: Option<String>,
}

/// A value that may hold a password: shown as `<hidden>`.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(pub(crate) String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<hidden>")
    }
}

/// The env variable the desk reads a receipts URL from.
pub(crate) const RECEIPTS_URL_ENV: &str = "DESK_RECEIPTS_URL";

/// `--receipts`, else a non-empty `DESK_RECEIPTS_URL`; it must be a
/// PostgreSQL URL.
pub(crate) fn receipts_url(flag: Option<Secret>, env: Option<String>) -> Result<Option<Secret>, String> {
    let Some(url) = flag.or_else(|| env.filter(|v| !v.trim().is_empty()).map(Secret)) else {
        return Ok(None);
    };
    if !(url.0.starts_with("postgres://") || url.0.starts_with("postgresql://")) {
        return Err(format!(
            "--receipts (or ${RECEIPTS_URL_ENV}) takes a postgres:// or postgresql:// URL; without it the receipts stay in the data folder"
        ));
    }
    Ok(Some(url))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    Run(Box<Args>),
    Help,
}

fn number<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, String> {
    v.parse().map_err(|_| format!("{flag} takes a whole number, not {v:?}"))
}

pub(crate) fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Command, String> {
    let mut socket = None;
    let mut listen = None;
    let mut cert = None;
    let mut key = None;
    let mut self_signed = false;
    let mut plain_http = false;
    let mut out = Args {
        transport: Transport::Socket(None),
        data: None,
        caps: None,
        turn_ms: 1500,
        accept_delay_ms: 0,
        hold_ms: None,
        receipts_per_group: None,
        raise_delay_ms: 0,
        max_connections: None,
        receipts: None,
        receipts_schema: None,
    };
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let arg = arg.into_string().map_err(|a| format!("an argument is not UTF-8: {a:?}"))?;
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let switch = |inline: &Option<String>| match inline {
            Some(_) => Err(format!("{flag} takes no value")),
            None => Ok(true),
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--self-signed" => self_signed = switch(&inline)?,
            "--plain-http" => plain_http = switch(&inline)?,
            "--socket"
            | "--listen"
            | "--cert"
            | "--key"
            | "--data"
            | "--caps"
            | "--turn-ms"
            | "--accept-delay-ms"
            | "--hold-ms"
            | "--receipts-per-group"
            | "--receipts"
            | "--receipts-schema"
            | "--max-connections"
            | "--raise-delay-ms" => {
                let value = match inline {
                    Some(v) => v,
                    None => it
                        .next()
                        .ok_or_else(|| format!("{flag} needs a value"))?
                        .into_string()
                        .map_err(|a| format!("the value of {flag} is not UTF-8: {a:?}"))?,
                };
                match flag.as_str() {
                    "--socket" => socket = Some(PathBuf::from(value)),
                    "--listen" => listen = Some(value),
                    "--cert" => cert = Some(PathBuf::from(value)),
                    "--key" => key = Some(PathBuf::from(value)),
                    "--data" => out.data = Some(PathBuf::from(value)),
                    "--caps" => out.caps = Some(Caps::parse_list(&value).map_err(|e| e.to_string())?),
                    "--turn-ms" => out.turn_ms = number(&flag, &value)?,
                    "--accept-delay-ms" => out.accept_delay_ms = number(&flag, &value)?,
                    "--hold-ms" => out.hold_ms = Some(number(&flag, &value)?),
                    "--receipts-per-group" => {
                        let n: usize = number(&flag, &value)?;
                        if n == 0 {
                            return Err("--receipts-per-group is at least 1".into());
                        }
                        out.receipts_per_group = Some(n);
                    }
                    "--max-connections" => {
                        let n: usize = number(&flag, &value)?;
                        if n == 0 {
                            return Err("--max-connections is at least 1".into());
                        }
                        out.max_connections = Some(n);
                    }
                    "--receipts" => out.receipts = Some(Secret(value)),
                    "--receipts-schema" => out.receipts_schema = Some(value),
                    _ => out.raise_delay_ms = number(&flag, &value)?,
                }
            }
            _ => return Err(format!("unknown argument {arg:?} (see --help)")),
        }
    }
    out.transport = match (socket, listen) {
        (Some(_), Some(_)) => return Err("--socket and --listen exclude each other".into()),
        (socket, None) => {
            if cert.is_some() || key.is_some() || self_signed || plain_http {
                return Err("--cert, --key, --self-signed and --plain-http go with --listen".into());
            }
            Transport::Socket(socket)
        }
        (None, Some(listen)) => {
            let tls = match (cert, key, self_signed, plain_http) {
                (Some(cert), Some(key), false, false) => Tls::Files { cert, key },
                (None, None, true, false) => Tls::SelfSigned,
                (None, None, false, true) => Tls::PlainHttp,
                (None, None, false, false) => {
                    return Err(
                        "--listen needs --cert and --key, or --self-signed (or --plain-http on loopback)"
                            .into(),
                    );
                }
                (Some(_), None, ..) | (None, Some(_), ..) => {
                    return Err("--cert and --key go together".into());
                }
                _ => return Err("choose one of --cert/--key, --self-signed and --plain-http".into()),
            };
            Transport::Https { listen, tls }
        }
    };
    out.receipts = receipts_url(out.receipts, std::env::var(RECEIPTS_URL_ENV).ok())?;
    Ok(Command::Run(Box::new(out)))
}

/// `$XDG_STATE_HOME/durable-desk`, else `~/.local/state/durable-desk`.
pub(crate) fn default_data_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join("durable-desk"));
    }
    let home = std::env::var_os("HOME").filter(|d| !d.is_empty()).ok_or(
        "no --data, no $XDG_STATE_HOME and no $HOME: say where the desk keeps its store with --data DIR",
    )?;
    Ok(PathBuf::from(home).join(".local/state/durable-desk"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Args, String> {
        match parse(args.iter().map(OsString::from))? {
            Command::Run(a) => Ok(*a),
            Command::Help => Err("help".into()),
        }
    }

    #[test]
    fn defaults_and_knobs() {
        let a = run(&[]).unwrap();
        assert_eq!(a.transport, Transport::Socket(None));
        assert_eq!((a.turn_ms, a.accept_delay_ms, a.raise_delay_ms), (1500, 0, 0));
        let a = run(&[
            "--socket",
            "/tmp/x.sock",
            "--turn-ms=200",
            "--caps",
            "asks,send",
            "--receipts-per-group",
            "3",
        ])
        .unwrap();
        assert_eq!(a.transport, Transport::Socket(Some("/tmp/x.sock".into())));
        assert_eq!(a.turn_ms, 200);
        assert_eq!(a.receipts_per_group, Some(3));
        assert!(a.caps.unwrap().has(durable_sdk::Cap::Send));
        assert!(!a.caps.unwrap().has(durable_sdk::Cap::Steer));
    }

    #[test]
    fn max_connections_is_a_positive_count() {
        assert_eq!(run(&[]).unwrap().max_connections, None);
        assert_eq!(run(&["--max-connections", "1500"]).unwrap().max_connections, Some(1500));
        let a = run(&["--listen", "127.0.0.1:0", "--self-signed", "--max-connections=300"]).unwrap();
        assert_eq!(a.max_connections, Some(300));
        assert!(run(&["--max-connections", "0"]).is_err());
        assert!(run(&["--max-connections", "many"]).is_err());
        assert!(run(&["--max-connections"]).is_err());
        assert!(USAGE.contains("--max-connections N"));
    }

    #[test]
    fn receipts_go_to_postgres_from_the_flag_or_the_env_and_the_url_is_never_shown() {
        let a =
            run(&["--receipts", "postgres://desk:hunter2@db/agents", "--receipts-schema", "desk_1"]).unwrap();
        assert_eq!(a.receipts, Some(Secret("postgres://desk:hunter2@db/agents".into())));
        assert_eq!(a.receipts_schema.as_deref(), Some("desk_1"));
        assert!(!format!("{a:?}").contains("hunter2"));
        let env = |v: &str| Some(v.to_owned());
        assert_eq!(
            receipts_url(None, env("postgresql://h/d")).unwrap(),
            Some(Secret("postgresql://h/d".into()))
        );
        assert_eq!(receipts_url(None, env(" ")).unwrap(), None, "an empty variable is no URL");
        assert_eq!(receipts_url(None, None).unwrap(), None);
        let flag = Some(Secret("postgres://flag/d".into()));
        assert_eq!(receipts_url(flag.clone(), env("postgres://env/d")).unwrap(), flag, "the flag wins");
        let e = receipts_url(None, env("mysql://h/d")).unwrap_err();
        assert!(e.contains("postgres://") && !e.contains("mysql://h/d"), "{e}");
        assert!(USAGE.contains("--receipts URL") && USAGE.contains("DESK_RECEIPTS_URL"));
    }

    #[test]
    fn https_needs_a_certificate_source() {
        assert!(run(&["--listen", "127.0.0.1:8443"]).is_err());
        assert!(run(&["--listen", "127.0.0.1:8443", "--cert", "c.pem"]).is_err());
        assert!(run(&["--socket", "/x", "--listen", "127.0.0.1:1"]).is_err());
        assert!(run(&["--self-signed"]).is_err());
        let a = run(&["--listen", "127.0.0.1:8443", "--self-signed"]).unwrap();
        assert_eq!(a.transport, Transport::Https { listen: "127.0.0.1:8443".into(), tls: Tls::SelfSigned });
        assert!(matches!(parse([OsString::from("--help")]), Ok(Command::Help)));
        assert!(run(&["--turn-ms", "soon"]).is_err());
        assert!(run(&["--caps", "asks,teleport"]).is_err());
    }
}
