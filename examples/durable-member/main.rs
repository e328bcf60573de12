//! The support desk: a deterministic durable agent (no model) that
//! assembles every component, and the fixture conformance suites drive.
//!
//! `cargo run --example desk` serves it on the private socket (its path is
//! printed as `listening <path>`); `--listen 127.0.0.1:8443 --self-signed`
//! serves it over HTTPS with the token in `COLLIE_TOKEN`. See `--help`.
//!
//! - Workspace `support`: tab `main` ("Tickets") holds one pane per ticket
//!   of the desk's store (a fresh store has `ticket-1`, "Maria Lopez"); tab
//!   `board` ("Board") holds `announcements`, a pane with no handlers.
//! - Each ticket has the `refund` action (an approval card), replies
//!   `Got it: <text>` streamed over `--turn-ms`, takes steer and stop, and
//!   raises `/ask choice|multi|text|form|approve [Ns]`, echoing the answer.
//! - The starter `new-ticket` opens the next ticket. Renames, closes and
//!   reopens are kept in the desk's store (`desk.sqlite3` in the data
//!   folder: the tickets, what is the desk's own); the receipts, the
//!   acknowledged sends, the undecided asks and every conversation in the
//!   SDK's `SqliteReceiptStore` (`receipts.sqlite3`), which history serves:
//!   a restart keeps them all, and raises each undecided ask again by its
//!   id. With `--receipts postgres://…` (or `DESK_RECEIPTS_URL`) the
//!   receipts, sends, asks and conversations go to PostgreSQL (`PgReceiptStore`) instead:
//!   a desk started on another machine with the same database replays the
//!   first one's answers, delivers its queued sends and raises its cards.

mod asks;
mod cli;
mod desk;
mod history;
mod store;

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use durable_sdk::stores::{PgReceiptOptions, PgReceiptStore, SqliteReceiptStore};
use durable_sdk::transport::socket_path_for;
use durable_sdk::{CoreOptions, Limits, Transport, create_core};

use crate::cli::{Args, Command, Tls};
use crate::desk::{Desk, DeskHooks, Knobs};
use crate::history::DeskHistory;
use crate::store::Store;

// jemalloc with its background thread: after a flood (4,000 connections and
// 264 bodies of 1 MB) it gives the memory back to the system within 15 s,
// where glibc's malloc kept 163 of its 280 MiB (docs/reliability.md,
// "Memory after a flood"). Not on Windows, where the desk is not run and
// the allocator's C build would be most of CI's Windows compile check.
#[cfg(not(windows))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> ExitCode {
    durable_examples::logs(); // on standard error, filtered by RUST_LOG (lib.rs)
    let args = match cli::parse(std::env::args_os().skip(1)) {
        Ok(Command::Help) => {
            print!("{}", cli::USAGE);
            return ExitCode::SUCCESS;
        }
        Ok(Command::Run(args)) => args,
        Err(why) => {
            eprintln!("desk: {why}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("desk: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(*args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("desk: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Creates the data folder, private to the user: it holds what the phone
/// sent. An existing folder of the user's is narrowed to 0700; one owned by
/// someone else is refused.
fn data_folder(dir: &Path) -> Result<(), BoxError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create the data folder {}: {e}", dir.display()))?;
    let meta = std::fs::symlink_metadata(dir)?;
    // The effective user: the one whose files these are.
    let uid = nix::unistd::geteuid().as_raw();
    if !meta.is_dir() || meta.uid() != uid {
        return Err(format!("the data folder {} must be a folder owned by this user", dir.display()).into());
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

async fn run(args: Args) -> Result<(), BoxError> {
    durable_examples::report_file_size_limit()?; // a write past `ulimit -f` is an error, not a silent death (lib.rs)
    let data = match &args.data {
        Some(d) => d.clone(),
        None => cli::default_data_dir()?,
    };
    data_folder(&data)?;
    let store =
        Arc::new(Store::open(&data.join("desk.sqlite3")).map_err(|e| format!("the desk's store: {e}"))?);
    let per_group = args.receipts_per_group.unwrap_or(durable_sdk::types::RECEIPTS_PER_GROUP);

    // Over HTTPS the token is the only barrier: no allow-always options.
    // (Serving there would turn them off; the desk says so from the start,
    // as it raises its stored asks before it serves.)
    let https = matches!(args.transport, cli::Transport::Https { .. });
    let mut options = CoreOptions::builder().host_name("desk").allow_always(!https);
    options = match &args.receipts {
        // Shared by every desk on this database and schema (a failover).
        Some(url) => {
            let mut pg = PgReceiptOptions::builder().url(url.0.clone()).per_group(per_group);
            if let Some(schema) = &args.receipts_schema {
                pg = pg.schema(schema.clone());
            }
            let store = PgReceiptStore::connect(pg.build()?)
                .await
                .map_err(|e| format!("the receipts database: {e}"))?;
            options.receipts(store)
        }
        None => {
            if args.receipts_schema.is_some() {
                return Err("--receipts-schema goes with --receipts (or $DESK_RECEIPTS_URL)".into());
            }
            options
                .receipts(SqliteReceiptStore::open_with_capacity(data.join("receipts.sqlite3"), per_group)?)
        }
    };
    if let Some(caps) = args.caps {
        options = options.caps(caps);
    }
    if let Some(ms) = args.hold_ms {
        options = options.hold_ms(ms);
    }
    let collie = create_core(options)?;
    store.seed_if_empty(collie.now().as_millis())?;
    let unread = store.items_left_unread().unwrap_or(0);
    if unread > 0 {
        collie.warn(&format!(
            "desk: desk.sqlite3 holds {unread} item(s) an older desk kept for history; they are left unread (the receipt store keeps conversations now, from this start on)"
        ));
    }

    let desk = Desk::new(
        collie.clone(),
        store.clone(),
        Knobs { turn_ms: args.turn_ms, accept_delay_ms: args.accept_delay_ms },
    );
    desk.build_layout()?;
    // Until the receipt store has kept it once (a start that died before
    // writes it again: the same id, replaced in place).
    let welcome = !store.welcomed()?;
    if welcome {
        desk.welcome();
    }
    collie.starter("new-ticket", "New ticket")?;
    // The SDK's history, each ticket's row with its order. (The provider
    // holds the handle it asks: both live as long as the process.)
    collie.history(DeskHistory { collie: collie.clone(), store: store.clone() });
    collie.set_hooks(DeskHooks { desk: desk.clone() });
    // The asks open at the last stop: raised again now, or held to raise
    // after --raise-delay-ms (an answer sent meanwhile is held, then lands).
    let later = desk.take_up_kept(args.raise_delay_ms > 0).await?;
    collie.ready();

    let transport = match &args.transport {
        cli::Transport::Socket(path) => {
            Transport::socket_at(path.clone().unwrap_or_else(|| socket_path_for("durable-desk")))
        }
        // The token from COLLIE_TOKEN (and COLLIE_TOKEN_NEXT); with
        // --self-signed the server writes the certificate's fingerprint on stderr.
        cli::Transport::Https { listen, tls } => match tls {
            Tls::Files { cert, key } => Transport::https(listen.clone()).cert_pem_files(cert, key),
            Tls::SelfSigned => Transport::https(listen.clone()).self_signed(),
            Tls::PlainHttp => Transport::https(listen.clone()).plain_http(),
        },
    };
    let transport = match args.max_connections {
        Some(n) => transport.limits(Limits::new().max_connections(n)),
        None => transport,
    };
    collie.serve(transport).await?;
    // What the desk wrote at start is kept (and so shown) before it says
    // it listens: a phone's first poll sees a settled state.
    collie.conversations_kept().await;
    if welcome {
        store.set_welcomed()?;
    }
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening {}", collie.address())?;
        out.flush()?;
    }
    if !later.is_empty() {
        let desk = desk.clone();
        let delay = Duration::from_millis(args.raise_delay_ms);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            desk.raise_kept(later);
        });
    }

    durable_examples::shutdown_signal().await?; // SIGINT or SIGTERM (lib.rs)
    collie.close().await;
    Ok(())
}
