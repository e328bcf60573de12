//! A stream whose writes must make progress: a write, flush or shutdown
//! that stays pending (the client reads nothing, so its buffers and ours are
//! full) for longer than the write timeout fails with
//! [`io::ErrorKind::TimedOut`], and the connection closes.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use crate::header_clock::HeaderClock;
use crate::server::later_by;

/// `io` with the write-progress timeout.
pub(crate) struct WriteTimeout<I> {
    io: I,
    timeout: Duration,
    /// The stall timer: made at the connection's first stall, then moved to
    /// `now + timeout` at the start of each later one, so that a large
    /// answer written through many stalls does not allocate and register a
    /// timer each time.
    timer: Option<Pin<Box<Sleep>>>,
    /// Whether the write is stalled now: set when a write first stays
    /// pending, cleared by any progress. While it is clear, the timer's
    /// deadline means nothing (if it passes, the task is woken once and
    /// polls nothing).
    stalled: bool,
    /// Told of each write's progress: the wait for the next request runs
    /// from the end of an answer's write.
    clock: Option<Arc<HeaderClock>>,
}

impl<I> fmt::Debug for WriteTimeout<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteTimeout")
            .field("timeout", &self.timeout)
            .field("stalled", &self.stalled)
            .finish_non_exhaustive()
    }
}

impl<I> WriteTimeout<I> {
    pub(crate) fn new(io: I, timeout: Duration) -> Self {
        WriteTimeout { io, timeout, timer: None, stalled: false, clock: None }
    }

    /// Tells `clock` of every write that makes progress.
    pub(crate) fn with_clock(mut self, clock: Arc<HeaderClock>) -> Self {
        self.clock = Some(clock);
        self
    }

    fn wrote(&self, polled: &Poll<io::Result<usize>>) {
        if let (Poll::Ready(Ok(n)), Some(clock)) = (polled, &self.clock) {
            if *n > 0 {
                clock.wrote();
            }
        }
    }

    /// Passes on a write's outcome: a completed one ends the stall, a
    /// pending one starts one (the timer runs from now) or goes on with it,
    /// and fails when the timer has run out.
    fn progress<T>(&mut self, cx: &mut Context<'_>, polled: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match polled {
            Poll::Ready(done) => {
                self.stalled = false;
                Poll::Ready(done)
            }
            Poll::Pending => {
                let timeout = self.timeout;
                let deadline = (!self.stalled).then(|| later_by(tokio::time::Instant::now(), timeout));
                self.stalled = true;
                let timer = match (&mut self.timer, deadline) {
                    (Some(timer), Some(deadline)) => {
                        timer.as_mut().reset(deadline);
                        timer
                    }
                    (Some(timer), None) => timer,
                    (timer @ None, _) => timer.insert(Box::pin(tokio::time::sleep(timeout))),
                };
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("the client read nothing for {timeout:?}: the write made no progress"),
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for WriteTimeout<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for WriteTimeout<I> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        self.wrote(&polled);
        self.progress(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.wrote(&polled);
        self.progress(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.io).poll_flush(cx);
        self.progress(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.io).poll_shutdown(cx);
        self.progress(cx, polled)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Reads up to 16 bytes every `every` until the end; returns them all.
    fn read_slowly(mut client: tokio::io::DuplexStream, every: Duration) -> tokio::task::JoinHandle<Vec<u8>> {
        tokio::spawn(async move {
            let mut got = Vec::new();
            let mut chunk = [0u8; 16];
            loop {
                tokio::time::sleep(every).await;
                match client.read(&mut chunk).await.unwrap() {
                    0 => return got,
                    n => got.extend_from_slice(&chunk[..n]),
                }
            }
        })
    }

    #[tokio::test]
    async fn a_write_the_peer_never_reads_fails_after_the_timeout() {
        let (server, _client) = tokio::io::duplex(16);
        let mut io = WriteTimeout::new(server, Duration::from_millis(50));
        let e = tokio::time::timeout(Duration::from_secs(5), io.write_all(&[0u8; 1024]))
            .await
            .expect("the write was never cut off")
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(e.to_string().contains("made no progress"), "{e}");
    }

    #[tokio::test]
    async fn a_slow_but_steady_reader_is_served_whole() {
        let (server, client) = tokio::io::duplex(16);
        let mut io = WriteTimeout::new(server, Duration::from_millis(200));
        let reader = read_slowly(client, Duration::from_millis(10));
        // 1 KiB at 16 bytes every 10 ms: longer than the timeout in all,
        // but never without progress for that long.
        io.write_all(&[7u8; 1024]).await.unwrap();
        io.shutdown().await.unwrap();
        drop(io);
        assert_eq!(reader.await.unwrap(), vec![7u8; 1024]);
    }

    /// The timer is made once and moved at each stall: a stall that starts
    /// after an earlier stall's deadline has passed still gets the whole
    /// timeout, and one that outlasts it still fails.
    #[tokio::test(start_paused = true)]
    async fn each_stall_gets_the_whole_timeout_from_its_own_start() {
        use tokio::time::{Instant, sleep};
        let ms = Duration::from_millis;
        let (server, mut client) = tokio::io::duplex(16);
        let mut io = WriteTimeout::new(server, ms(100));
        let start = Instant::now();
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 16];
            // Relieves the first stall (from 0 ms) at 60 ms, the second
            // (from 150 ms) at 230 ms, then reads nothing more.
            for at in [60, 230] {
                sleep(ms(at).saturating_sub(start.elapsed())).await;
                client.read_exact(&mut buf).await.unwrap();
            }
            client
        });
        io.write_all(&[1u8; 32]).await.unwrap();
        assert_eq!(start.elapsed(), ms(60), "the first stall lasted until the reader read");
        // Not stalled while the first stall's deadline (100 ms) passes.
        sleep(ms(90)).await;
        io.write_all(&[2u8; 16]).await.unwrap();
        assert_eq!(start.elapsed(), ms(230), "a stall from 150 ms was cut off at the old deadline");
        let e = io.write_all(&[3u8; 16]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(start.elapsed(), ms(330), "the third stall got the whole timeout, no more");
        drop(reader.await.unwrap());
    }

    /// `Duration::MAX` means "never": the second stall moves the timer to
    /// a deadline past what the clock can hold, which must not panic.
    #[tokio::test]
    async fn an_endless_timeout_survives_every_stall() {
        let (server, client) = tokio::io::duplex(16);
        let mut io = WriteTimeout::new(server, Duration::MAX);
        let reader = read_slowly(client, Duration::from_millis(5));
        // 64 writes of 16 bytes into a 16-byte pipe: a stall at each.
        for i in 0..64u8 {
            io.write_all(&[i; 16]).await.unwrap();
        }
        io.shutdown().await.unwrap();
        drop(io);
        let got = reader.await.unwrap();
        assert_eq!(got.len(), 64 * 16);
        assert!(got.chunks(16).enumerate().all(|(i, c)| c.iter().all(|&b| usize::from(b) == i)));
    }

    #[tokio::test]
    async fn reads_pass_through() {
        let (server, mut client) = tokio::io::duplex(64);
        let mut io = WriteTimeout::new(server, Duration::from_millis(50));
        client.write_all(b"hello").await.unwrap();
        let mut buf = [0u8; 5];
        io.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hello");
        assert!(format!("{io:?}").contains("WriteTimeout"));
    }
}
