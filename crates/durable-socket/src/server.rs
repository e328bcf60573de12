//! `serve`: bind the private socket and serve the core on it; `SocketServer`:
//! the running server and its `close`.

use std::fmt;
use std::fs;
use std::io::{self, ErrorKind};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use tokio::net::{UnixListener, UnixStream};

use durable_http::{Accepted, CallerSource, Listen, Server};
use durable_runtime::{CallerCheckMode, Driver};

use crate::SOCKET_ENV;
use crate::error::SocketError;
use crate::options::{CallerObserver, SocketOptions};
use crate::path;
use crate::peer::PeerCheck;

/// Serves `core` on a private Unix socket (the socket half of the seed's
/// `openCollie`).
///
/// The path is `options`' path, else `$COLLIE_DURABLE_SOCKET`. It is checked
/// (absolute, at most 103 bytes), its folder created with mode 0700 when
/// missing, the whole path checked private, a stale socket replaced; the
/// socket is bound with mode 0600. The core is told the caller-check mode
/// (`on`, `off` or `unavailable`); where the platform cannot tell the peer,
/// one warn line says so through the core's warn sink. Then connections are
/// served, and the core's deadlines and jobs driven, until
/// [`SocketServer::close`].
///
/// Must be awaited inside a tokio runtime (it spawns the server's tasks).
pub async fn serve(core: Driver, options: SocketOptions) -> Result<SocketServer, SocketError> {
    let path = path::resolve(options.path.as_deref(), std::env::var_os(SOCKET_ENV))?;
    path::check_shape(&path)?;
    let uid = nix::unistd::geteuid().as_raw();
    let (_, lock) = path::prepare(&path, uid)?;
    let listener = UnixListener::bind(&path).map_err(|e| match e.kind() {
        ErrorKind::AddrInUse => SocketError::InUse { path: path.clone() },
        _ => SocketError::io("bind the socket", &path, e),
    })?;
    let meta = match path::seal_socket(&path, uid) {
        Ok(meta) => meta,
        Err(e) => {
            drop(listener);
            let _ = fs::remove_file(&path);
            return Err(e);
        }
    };
    let (check, mode, warning) = PeerCheck::for_platform(options.caller_check);
    core.set_caller_check(mode);
    if let Some(line) = warning {
        core.collie().warn(line);
    }
    let listen = SocketListen { listener, check, observer: options.observer };
    let server = Server::start(core, listen, options.http);
    Ok(SocketServer {
        path,
        identity: (meta.dev(), meta.ino()),
        caller_check: mode,
        server: Some(server),
        lock: Some(lock),
    })
}

/// A running socket server. [`close`](Self::close) it to stop; dropping it
/// stops accepting and removes the socket file without waiting for requests
/// in flight.
#[must_use = "dropping a SocketServer stops it"]
pub struct SocketServer {
    path: PathBuf,
    identity: (u64, u64),
    caller_check: CallerCheckMode,
    server: Option<Server>,
    /// Held until the socket file is removed, so that an agent starting
    /// meanwhile waits for nothing and finds the path free or in use.
    lock: Option<path::PathLock>,
}

impl fmt::Debug for SocketServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SocketServer")
            .field("address", &self.path)
            .field("caller_check", &self.caller_check)
            .finish_non_exhaustive()
    }
}

/// `collie.serve(options)`: [`Collie::serve`](durable_runtime::Collie::serve)
/// starts [`serve`] with these options, and `close` stops it.
impl durable_runtime::Serve for SocketOptions {
    type Error = SocketError;

    fn shutdown_grace(&self) -> std::time::Duration {
        self.limits().shutdown_grace_value()
    }

    async fn serve(self, driver: Driver) -> Result<Box<dyn durable_runtime::Served>, SocketError> {
        Ok(Box::new(serve(driver, self).await?))
    }
}

impl durable_runtime::Served for SocketServer {
    fn address(&self) -> String {
        self.path.display().to_string()
    }

    fn caller_check(&self) -> CallerCheckMode {
        self.caller_check
    }

    fn close(self: Box<Self>) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        Box::pin(SocketServer::close(*self))
    }
}

impl SocketServer {
    /// The socket's path (the seed's `collie.address`).
    pub fn address(&self) -> &Path {
        &self.path
    }

    /// The caller check in force, as `GET /hello` reports it.
    pub fn caller_check(&self) -> CallerCheckMode {
        self.caller_check
    }

    /// Stops accepting, lets the requests in flight and the core's work on
    /// them finish, stops driving the core, and removes the socket file.
    /// The wait lasts at most the shutdown grace (10 s by default,
    /// [`Limits::shutdown_grace`](crate::Limits::shutdown_grace)):
    /// past it, connections still open (a client stalling its body) are
    /// dropped. Open asks stay open: a shutdown is not an answer.
    pub async fn close(mut self) {
        if let Some(server) = self.server.take() {
            server.close().await;
        }
        self.remove_socket();
        self.lock.take();
    }

    /// Removes the socket file if it is still the one this server bound.
    fn remove_socket(&self) {
        let ours =
            fs::symlink_metadata(&self.path).is_ok_and(|meta| (meta.dev(), meta.ino()) == self.identity);
        if ours {
            let _ = fs::remove_file(&self.path);
        }
    }
}

impl Drop for SocketServer {
    fn drop(&mut self) {
        if self.server.take().is_some() {
            self.remove_socket();
        }
        // The lock goes after the socket file: a field drops after `drop`.
    }
}

/// The accept side: a Unix listener whose connections are classified by the
/// caller check on their own task.
struct SocketListen {
    listener: UnixListener,
    check: PeerCheck,
    observer: Option<CallerObserver>,
}

impl Listen for SocketListen {
    type Io = UnixStream;

    async fn accept(&mut self) -> io::Result<Accepted<UnixStream>> {
        let (stream, _) = self.listener.accept().await?;
        let check = self.check;
        // Taken now: a peer process that started later is not the one that
        // connected (its pid was reused), and the check fails closed.
        let accepted = check.accepted();
        let observer = self.observer.clone();
        Ok(Accepted::new(Box::pin(async move {
            let caller = check.caller_of(&stream, accepted);
            if let Some(observe) = observer {
                observe(caller);
            }
            Ok((stream, CallerSource::Fixed(caller)))
        })))
    }

    fn transport(&self) -> &'static str {
        "socket"
    }
}
