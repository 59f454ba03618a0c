//! --close-after-stream: llama-server's habit of announcing `Connection: keep-alive` on a
//! stream, ending the stream properly, then closing the socket a fraction of a millisecond
//! later without reading another request.
//!
//! A client that reuses the connection at once (as a connection pool does) sends its next
//! request into a socket that is about to close, and sees "connection closed before message
//! completed". The stream marks its [`StreamEnd`] when it hands over its last frame; the
//! connection's I/O ([`CloseAfterStream`]) then stops reading and, once hyper has flushed those
//! bytes to the socket, wakes the connection task, which waits [`LINGER`] and drops the
//! connection (closing the socket). This file knows nothing of requests or the record.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::rt::{Read, ReadBufCursor, Write};
use tokio::sync::Notify;

use super::timer;

/// How long after a stream's last byte the socket is closed: within the 0.5–1 ms that
/// llama-server takes, long enough for a client to believe the connection is idle and reuse it.
pub const LINGER: Duration = Duration::from_micros(750);

/// Shared by one connection's I/O, its task and the stream answered on it.
#[derive(Clone, Debug, Default)]
pub struct StreamEnd(Arc<Inner>);

#[derive(Debug, Default)]
struct Inner {
    /// The stream has handed hyper its last frame.
    ended: AtomicBool,
    /// Those bytes have been flushed to the socket.
    flushed: Notify,
}

impl StreamEnd {
    /// The stream's last frame has been handed over.
    pub fn mark(&self) {
        self.0.ended.store(true, Ordering::Release);
    }

    fn ended(&self) -> bool {
        self.0.ended.load(Ordering::Acquire)
    }

    /// Resolves [`LINGER`] after the end of the stream reached the socket: the moment to drop
    /// the connection.
    pub async fn closing(&self) {
        // `notify_one` keeps a permit when nobody waits yet, so a flush is never missed.
        self.0.flushed.notified().await;
        timer::sleep_until(Instant::now() + LINGER).await;
    }
}

/// A connection's I/O that reports when the end of a stream is flushed, and reads nothing
/// after it.
pub struct CloseAfterStream<T> {
    inner: T,
    end: Option<StreamEnd>,
}

impl<T> CloseAfterStream<T> {
    /// Without `end`, a plain pass-through.
    pub fn new(inner: T, end: Option<StreamEnd>) -> Self {
        Self { inner, end }
    }

    fn ended(&self) -> bool {
        self.end.as_ref().is_some_and(StreamEnd::ended)
    }
}

impl<T: Read + Unpin> Read for CloseAfterStream<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.ended() {
            // A request sent now is never read, as with llama-server. No waker is kept: the
            // connection task drops this connection within LINGER of the flush.
            return Poll::Pending;
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for CloseAfterStream<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let flushed = Pin::new(&mut this.inner).poll_flush(cx);
        // hyper flushes after writing out everything it buffered, so once the stream has
        // ended, a completed flush means its last chunk and the terminator are on the socket.
        if let (Poll::Ready(Ok(())), Some(end)) = (&flushed, &this.end)
            && end.ended()
        {
            end.0.flushed.notify_one();
        }
        flushed
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
