//! Accepting connections. axum's own `serve` gives hyper no timer, so a
//! client that sends half a request head (or opens a connection and sends
//! nothing) would hold its socket forever; a few hundred such clients use
//! up the process's file descriptors. Here every connection gets a deadline
//! for each request head (and for its TLS handshake), which also closes
//! idle keep-alive connections, and SIGTERM lets in-flight requests finish.
//!
//! Each connection speaks HTTP/1.1 or HTTP/2: over TLS as ALPN agreed, in
//! cleartext HTTP/2 when the client opens with its preface (h2c with prior
//! knowledge, as proxies use it).

use std::sync::Arc;
use std::time::Duration;

use tokio::io::Interest;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;

use super::app::App;
use super::idle;
use super::socket::{ClientSending, ClientSocket, NotingUnread};
use crate::http::state::AppState;

/// Serve until SIGTERM or Ctrl-C, then let in-flight requests finish.
pub async fn serve(state: AppState, app: App) -> std::io::Result<()> {
    let tls = match (&state.config.tls_cert, &state.config.tls_key) {
        (Some(cert), Some(key)) => {
            Some(super::tls::acceptor(cert, key).map_err(std::io::Error::other)?)
        }
        _ => None,
    };
    let listener = tokio::net::TcpListener::bind(state.config.listen).await?;
    let addr = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(
        "serving {} at {scheme}://{addr}/ (raw keys at /zarr/, API at /api/v1/)",
        state.store.description()
    );
    println!("zarrd listening on {scheme}://{addr}/");
    let deadline = state.config.shutdown_timeout;
    let header_timeout = state.config.header_timeout;
    let send_timeout = state.config.body_timeout;
    let header_list =
        u32::try_from(state.config.max_header_bytes.saturating_mul(2)).unwrap_or(u32::MAX);
    let closing = state.clone();
    // One builder per protocol, chosen before hyper reads a byte: its own
    // detection of the protocol would wait for the first bytes without a
    // deadline, and hold the connection of a client that sends nothing.
    let mut h1 = auto::Builder::new(TokioExecutor::new()).http1_only();
    h1.http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true);
    let mut h2 = auto::Builder::new(TokioExecutor::new()).http2_only();
    const MAX_STREAMS: u32 = 100;
    // An HTTP/2 connection is pinged, and closed when a ping goes
    // unanswered (idle ones are closed by `close_when_idle`). Headers past
    // `--max-header-bytes` get the JSON 431 of the check in
    // `limits::headers`; hyper refuses (with a bare 431) only those far past.
    h2.http2()
        .max_header_list_size(header_list)
        // Each stream buffers up to hyper's send buffer (400 KiB) of its
        // response: streams at once bound what one connection holds.
        .max_concurrent_streams(MAX_STREAMS)
        .timer(TokioTimer::new())
        .keep_alive_interval(header_timeout)
        .keep_alive_timeout(header_timeout);
    let builders = std::sync::Arc::new((h1, h2));
    let graceful = GracefulShutdown::new();
    // HTTP/2 connections are closed with GOAWAY (idle, or at shutdown), so
    // they are not handed to `graceful`: it would own the connection. Each
    // holds a sender of `h2_open`; the receiver ends when all are gone.
    let (shutting_down, shutdown) = tokio::sync::watch::channel(false);
    let (h2_open, mut h2_closed) = tokio::sync::mpsc::channel::<()>(1);
    let signal = shutdown_signal();
    tokio::pin!(signal);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors, or the peer gave up: keep serving
                    // the connections already open and try again shortly.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut signal => break,
        };
        // Without TCP_NODELAY a response whose headers and body go out in two
        // writes waits for the client's delayed ACK (~40 ms) on every request.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("could not set TCP_NODELAY: {e}");
        }
        let app = app.for_peer(peer.ip());
        let (builders, watcher, tls) = (builders.clone(), graceful.watcher(), tls.clone());
        let (shutdown, h2_open) = (shutdown.clone(), h2_open.clone());
        tokio::spawn(async move {
            let socket_shutdown = shutdown.clone();
            let connection = Connection {
                app,
                builders,
                watcher,
                shutdown,
                h2_open,
                idle: header_timeout,
            };
            let served = match tls {
                None => {
                    let Some(h2) = cleartext_h2(&stream, header_timeout).await else {
                        return;
                    };
                    let io = ClientSocket::new(stream, send_timeout, socket_shutdown);
                    let sending = io.sending();
                    connection.serve(TokioIo::new(io), h2, sending).await
                }
                Some(acceptor) => {
                    let io = ClientSocket::new(stream, send_timeout, socket_shutdown);
                    let stream =
                        match tokio::time::timeout(header_timeout, acceptor.accept(io)).await {
                            Ok(Ok(stream)) => stream,
                            Ok(Err(e)) => return tracing::debug!("TLS handshake failed: {e}"),
                            Err(_) => return tracing::debug!("TLS handshake timed out"),
                        };
                    let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
                    let sending = stream.get_ref().0.sending();
                    connection.serve(TokioIo::new(stream), h2, sending).await
                }
            };
            if let Err(e) = served {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
    drop(listener);
    tracing::info!("shutting down: finishing in-flight requests");
    closing.begin_shutdown();
    let _ = shutting_down.send(true);
    drop(h2_open);
    let drained = async {
        graceful.shutdown().await;
        h2_closed.recv().await;
    };
    tokio::select! {
        _ = drained => {}
        _ = tokio::time::sleep(deadline) => {
            tracing::warn!("shutdown deadline of {deadline:?} passed with requests still in flight");
        }
    }
    Ok(())
}

/// What serving one accepted connection needs.
struct Connection {
    app: App,
    /// HTTP/1.1 and HTTP/2.
    builders: Arc<(auto::Builder<TokioExecutor>, auto::Builder<TokioExecutor>)>,
    /// HTTP/1.1 connections' part in the graceful shutdown.
    watcher: hyper_util::server::graceful::Watcher,
    /// Turns true when the server begins to shut down.
    shutdown: tokio::sync::watch::Receiver<bool>,
    /// Held while an HTTP/2 connection is open.
    h2_open: tokio::sync::mpsc::Sender<()>,
    /// How long an HTTP/2 connection may carry no request.
    idle: Duration,
}

impl Connection {
    /// Serve `io` in HTTP/2 or HTTP/1.1 until it ends. An HTTP/2
    /// connection also ends once it has carried no request for `idle` (as
    /// hyper closes an HTTP/1.1 connection that sends no request head in
    /// time), or once its client stops taking a response (as `ClientSocket`
    /// closes an HTTP/1.1 connection).
    async fn serve<I>(
        self,
        io: I,
        h2: bool,
        sending: ClientSending,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>>
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        if !h2 {
            let service = TowerToHyperService::new(NotingUnread {
                app: self.app,
                sending,
            });
            let served = self.builders.0.serve_connection(io, service).into_owned();
            return self.watcher.watch(served).await;
        }
        // Window updates and pings keep coming until the client has read
        // the last frame.
        sending.set(true);
        let activity = idle::Activity::new();
        let service = TowerToHyperService::new(idle::Tracked {
            app: self.app,
            activity: activity.clone(),
        });
        let served = self.builders.1.serve_connection(io, service).into_owned();
        tokio::pin!(served);
        let _open = self.h2_open;
        let mut shutdown = self.shutdown;
        let idle = self.idle;
        let quiet = activity.idle_for(idle);
        tokio::pin!(quiet);
        // Idle or shutting down: GOAWAY, so a request the client sends
        // meanwhile is refused and retried elsewhere, not lost with the
        // socket; the connection ends once its streams have.
        let closing = tokio::select! {
            done = served.as_mut() => return done,
            _ = &mut quiet => "idle",
            _ = shutdown.wait_for(|down| *down) => "shutting down",
            // Its client takes nothing more, GOAWAY included.
            _ = activity.until_stalled() => {
                tracing::debug!("closed an HTTP/2 connection whose client stopped taking a response");
                return Ok(());
            }
        };
        tracing::debug!("closing an HTTP/2 connection: {closing}");
        // hyper ends the connection once every stream has been sent, which
        // `activity` cannot tell (a response counts as ended once its last
        // piece is queued); a client that stops answering is closed by the
        // stall watchdog or by hyper's unanswered keep-alive ping, and at
        // shutdown by the server's deadline.
        served.as_mut().graceful_shutdown();
        tokio::select! {
            done = served.as_mut() => done,
            _ = activity.until_stalled() => Ok(()),
        }
    }
}

/// The first bytes of an HTTP/2 connection with prior knowledge.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Whether a cleartext connection opens with HTTP/2's preface, from its
/// first bytes, left unread for hyper; `None` when the client sends nothing
/// before `wait` passes, or leaves.
async fn cleartext_h2(stream: &tokio::net::TcpStream, wait: Duration) -> Option<bool> {
    let mut seen = [0u8; 24];
    let sniff = async {
        let mut pause = Duration::from_millis(2);
        loop {
            let n = stream.peek(&mut seen).await.ok()?;
            if n == 0 {
                return None;
            }
            if seen[..n] != H2_PREFACE[..n] {
                return Some(false);
            }
            if n == H2_PREFACE.len() {
                return Some(true);
            }
            // Part of the preface has come: the rest follows within a packet
            // or two. Peeking finds the same bytes after the client has
            // gone, so look for its end of stream, and wait longer each
            // time (thousands of clients that send three bytes and leave
            // would otherwise keep a core busy until the deadline).
            if stream
                .ready(Interest::READABLE)
                .await
                .ok()?
                .is_read_closed()
            {
                return None;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(250));
        }
    };
    tokio::time::timeout(wait, sniff).await.ok().flatten()
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}
