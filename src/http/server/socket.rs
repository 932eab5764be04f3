//! An accepted connection's socket, as hyper (or TLS) sees it: writes fail
//! once the client has taken nothing for a while, and closing lingers for
//! what the client is still sending.
//!
//! Lingering is the "lingering close" of RFC 9112 §9.6 (nginx's
//! `lingering_close`). When a socket is closed with bytes from the client
//! still unread, or bytes arrive after it was closed, the kernel answers with
//! a reset, and the reset throws away what the client had not yet read.
//! Two everyday cases lost their answer that way:
//! - An upload refused before its body was read (413 over `--max-body-size`,
//!   401 without a token). Clients such as `requests` and `http.client` send
//!   the whole body before they read, so they saw "broken pipe", not the
//!   JSON error.
//! - An HTTP/2 connection closed at shutdown while the client was still
//!   granting window for the end of a large answer. The answer was cut off.
//!
//! So closing sends FIN first and then reads and discards what comes. It
//! stops at the client's own FIN, after [`QUIET`] with nothing arriving, or
//! after [`LINGER`] in all ([`AT_SHUTDOWN`] once the server is shutting
//! down, so a client that keeps sending cannot hold up its exit). Only
//! connections whose client may still be sending linger: HTTP/2 ones,
//! HTTP/1.1 ones whose last request body was left unread
//! ([`NotingUnread`]), and any with bytes already waiting. An idle HTTP/1.1
//! keep-alive connection is closed at once.

use std::future::Future;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};
use tower::Service;

/// How long a closing connection waits for the client's next bytes.
pub const QUIET: Duration = Duration::from_secs(1);
/// How long a closing connection reads at most, however steadily its client sends.
pub const LINGER: Duration = Duration::from_secs(30);
/// How much longer a closing connection reads once the server shuts down:
/// enough for a client to read what is already on its way to it.
pub const AT_SHUTDOWN: Duration = Duration::from_secs(5);

/// A client's connection: see the module's documentation.
pub struct ClientSocket<T> {
    inner: T,
    /// How long a write may wait for the client to take something.
    stall_timeout: Duration,
    /// Set while a write waits for the client.
    stalled: Option<Pin<Box<Sleep>>>,
    /// Whether closing waits for the client's next bytes even when none
    /// have come yet.
    sending: ClientSending,
    /// Turns true when the server begins to shut down.
    shutdown: watch::Receiver<bool>,
    closing: Closing,
}

enum Closing {
    Open,
    /// FIN sent; reading until the client's FIN.
    Draining {
        /// Bytes came after FIN, or the client is expected to send more.
        lingering: bool,
        quiet: Pin<Box<Sleep>>,
        until: Instant,
        /// `until` has been brought forward for the server's shutdown.
        cut: bool,
    },
    Closed,
}

impl<T> ClientSocket<T> {
    pub fn new(inner: T, stall_timeout: Duration, shutdown: watch::Receiver<bool>) -> Self {
        ClientSocket {
            inner,
            stall_timeout,
            stalled: None,
            sending: ClientSending::default(),
            shutdown,
            closing: Closing::Open,
        }
    }

    /// What tells this socket, when it closes, that its client may still
    /// be sending.
    pub fn sending(&self) -> ClientSending {
        self.sending.clone()
    }

    /// After a write that could not proceed: an error once it has waited too long.
    fn waited<R>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        let timeout = self.stall_timeout;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped reading the response",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progressed<R>(&mut self, result: io::Result<R>) -> Poll<io::Result<R>> {
        self.stalled = None;
        Poll::Ready(result)
    }
}

impl<T: AsyncRead + Unpin> ClientSocket<T> {
    /// Read and discard until the client's FIN, a quiet spell or the end
    /// of the linger; never an error, since the connection is over anyway.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Closing::Draining {
            lingering,
            quiet,
            until,
            cut,
        } = &mut self.closing
        else {
            return Poll::Ready(());
        };
        let mut scratch = [MaybeUninit::<u8>::uninit(); 8192];
        loop {
            // Looked at whenever bytes come: only a client that keeps
            // sending keeps the socket past `QUIET`.
            if !*cut && *self.shutdown.borrow() {
                *until = (*until).min(Instant::now() + AT_SHUTDOWN);
                *cut = true;
            }
            let mut buf = ReadBuf::uninit(&mut scratch);
            match Pin::new(&mut self.inner).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if !buf.filled().is_empty() => {
                    if Instant::now() >= *until {
                        return Poll::Ready(());
                    }
                    *lingering = true;
                    quiet.as_mut().reset(Instant::now() + QUIET);
                }
                // The client's FIN, or a reset: nothing is left to lose.
                Poll::Ready(_) => return Poll::Ready(()),
                Poll::Pending if !*lingering => return Poll::Ready(()),
                Poll::Pending => {
                    ready!(quiet.as_mut().poll(cx));
                    return Poll::Ready(());
                }
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for ClientSocket<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for ClientSocket<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Ready(r) => self.progressed(r),
            Poll::Pending => self.waited(cx),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(r) => self.progressed(r),
            Poll::Pending => self.waited(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Ready(r) => self.progressed(r),
            Poll::Pending => self.waited(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Closing::Open = this.closing {
            // FIN goes out as soon as the last response has, whatever the
            // client still sends.
            match Pin::new(&mut this.inner).poll_shutdown(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => {
                    this.closing = Closing::Closed;
                    return Poll::Ready(Err(e));
                }
                Poll::Pending => return this.waited(cx),
            }
            this.stalled = None;
            let now = Instant::now();
            this.closing = Closing::Draining {
                lingering: this.sending.0.load(Ordering::Acquire),
                quiet: Box::pin(tokio::time::sleep_until(now + QUIET)),
                until: now + LINGER,
                cut: false,
            };
        }
        ready!(this.poll_drain(cx));
        this.closing = Closing::Closed;
        Poll::Ready(Ok(()))
    }
}

/// Whether a connection's client may still be sending when the server
/// closes it: always for HTTP/2 (window updates and pings keep coming until
/// the client has read the last frame), and for HTTP/1.1 after a request
/// whose body was left unread (a refused upload).
#[derive(Clone, Default)]
pub struct ClientSending(Arc<AtomicBool>);

impl ClientSending {
    pub fn set(&self, sending: bool) {
        self.0.store(sending, Ordering::Release);
    }
}

/// An HTTP/1.1 connection's service: notes in [`ClientSending`] whether the
/// request's body was dropped before its end. Requests on one HTTP/1.1
/// connection come one after another, and hyper reads the next one only once
/// the last body is through, so each request starts with nothing unread.
#[derive(Clone)]
pub struct NotingUnread<S> {
    pub app: S,
    pub sending: ClientSending,
}

impl<S, B> Service<Request<B>> for NotingUnread<S>
where
    S: Service<Request<Body>>,
    B: http_body::Body<Data = axum::body::Bytes> + Send + Unpin + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.app.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        self.sending.set(false);
        let sending = self.sending.clone();
        self.app.call(request.map(|body| {
            Body::new(Noted {
                body,
                sending,
                ended: false,
            })
        }))
    }
}

/// A request body that tells its connection, when dropped before its end,
/// that the client is still sending it.
struct Noted<B: http_body::Body> {
    body: B,
    sending: ClientSending,
    /// Its last frame has been read: a chunked body does not say so
    /// through `is_end_stream`.
    ended: bool,
}

impl<B: http_body::Body> Drop for Noted<B> {
    fn drop(&mut self) {
        if !self.ended && !self.body.is_end_stream() {
            self.sending.set(true);
        }
    }
}

impl<B: http_body::Body + Unpin> http_body::Body for Noted<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        let frame = ready!(Pin::new(&mut self.body).poll_frame(cx));
        match &frame {
            None => self.ended = true,
            Some(Ok(frame)) if frame.is_trailers() => self.ended = true,
            // After an error nothing more is read from the client anyway.
            Some(Err(_)) => self.ended = true,
            Some(Ok(_)) => {}
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body of `left` one-byte frames that, like a chunked request body,
    /// does not tell its end before its last frame has been asked for.
    struct Chunked {
        left: usize,
    }

    impl http_body::Body for Chunked {
        type Data = axum::body::Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
            if self.left == 0 {
                return Poll::Ready(None);
            }
            self.left -= 1;
            Poll::Ready(Some(Ok(http_body::Frame::data(
                axum::body::Bytes::from_static(b"x"),
            ))))
        }
    }

    #[tokio::test]
    async fn bodies_dropped_before_their_end_are_noted() {
        let sending = ClientSending::default();
        let noted = |left| Noted {
            body: Chunked { left },
            sending: sending.clone(),
            ended: false,
        };
        let unread = || sending.0.load(Ordering::Acquire);
        let read = axum::body::to_bytes(Body::new(noted(3)), usize::MAX)
            .await
            .unwrap();
        assert_eq!(&read[..], b"xxx");
        assert!(!unread(), "a body read to its end");

        let mut partly = noted(3);
        std::future::poll_fn(|cx| http_body::Body::poll_frame(Pin::new(&mut partly), cx)).await;
        drop(partly);
        assert!(unread(), "a body left after one frame");

        sending.set(false);
        drop(noted(0));
        assert!(unread(), "a chunked body never asked for a frame");
    }
}
