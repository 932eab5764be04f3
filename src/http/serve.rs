//! Accepting connections. axum's own `serve` gives hyper no timer, so a
//! client that sends half a request head (or opens a connection and sends
//! nothing) would hold its socket forever; a few hundred such clients use
//! up the process's file descriptors. Here every connection gets a deadline
//! for each request head, which also closes idle keep-alive connections, and
//! SIGTERM lets in-flight requests finish.

use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;

use super::{router, AppState};

/// Serve until SIGTERM or Ctrl-C, then let in-flight requests finish.
pub async fn serve(state: AppState) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(state.config.listen).await?;
    let addr = listener.local_addr()?;
    tracing::info!(
        "serving {} at http://{addr}/ (raw keys at /zarr/, API at /api/v1/)",
        state.store.description()
    );
    println!("zarrd listening on http://{addr}/");
    let deadline = state.config.shutdown_timeout;
    let header_timeout = state.config.header_timeout;
    let app = router(state);
    let graceful = GracefulShutdown::new();
    let signal = shutdown_signal();
    tokio::pin!(signal);
    loop {
        let (stream, _) = tokio::select! {
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
        let service = TowerToHyperService::new(app.clone());
        let connection = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout)
            .keep_alive(true)
            .serve_connection(TokioIo::new(stream), service);
        let watched = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = watched.await {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
    drop(listener);
    tracing::info!("shutting down: finishing in-flight requests");
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(deadline) => {
            tracing::warn!("shutdown deadline of {deadline:?} passed with requests still in flight");
        }
    }
    Ok(())
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
