//! A two-way select over futures, so the core needs no runtime's macro.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;

/// Which of two futures finished first.
pub(crate) enum Either<A, B> {
    /// The first.
    Left(A),
    /// The second.
    Right(B),
}

/// Polls both futures; returns the first output (the first future wins ties).
pub(crate) async fn select<A: Future, B: Future>(a: A, b: B) -> Either<A::Output, B::Output> {
    let mut a = pin!(a);
    let mut b = pin!(b);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = a.as_mut().poll(cx) {
            return Poll::Ready(Either::Left(v));
        }
        if let Poll::Ready(v) = b.as_mut().poll(cx) {
            return Poll::Ready(Either::Right(v));
        }
        Poll::Pending
    })
    .await
}
