//! Serving the HTTP listener's connections with hyper (HTTP/1.1): each connection in a task of
//! its own, with a bound on how long a request's head may take, and a graceful stop.
//!
//! ```text
//!  CountedListener::next ─▶ task per connection: hyper http1 ─▶ Router (ConnectInfo = peer)
//!                             head of each request within --http-header-timeout-ms,
//!                             counted from accept or from the end of the previous answer
//!  stop ─▶ no more accepts; each connection finishes the request under way, then closes
//! ```
//!
//! Invariants: a connection that sends no complete request head within the header timeout
//! (a slowloris, or a keep-alive connection left idle) is closed; the time a request's body
//! and its answer take is not counted (long queries and uploads are bounded by their own
//! limits). Every connection task ends at stop, once its request under way is answered, or is
//! dropped with the caller's task after the shutdown grace period.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use axum::response::Response;
use axum::routing::future::RouteFuture;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::ops::{Counted, CountedListener};

/// Serves `app` on the connections of `listener` until `stop`, then waits for the open ones
/// to finish their requests.
pub(crate) async fn serve(
    mut listener: CountedListener,
    app: Router,
    header_timeout: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true);
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let (io, peer) = tokio::select! {
            accepted = listener.next() => accepted,
            _ = stop.wait_for(|s| *s) => break,
        };
        connections.spawn(connection(
            builder.clone(),
            io,
            peer,
            app.clone(),
            stop.clone(),
        ));
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

/// One connection's requests, until the client closes, the header timeout, an error, or stop.
async fn connection(
    builder: hyper::server::conn::http1::Builder,
    io: Counted,
    peer: SocketAddr,
    app: Router,
    mut stop: watch::Receiver<bool>,
) {
    let service = TowerToHyperService::new(WithPeer { app, peer });
    let conn = builder.serve_connection(TokioIo::new(io), service);
    let mut conn = std::pin::pin!(conn);
    let mut stopping = false;
    loop {
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(e) = served {
                    // Header timeouts, resets, malformed requests: the client's doing.
                    tracing::debug!("HTTP {peer}: connection closed: {e}");
                }
                return;
            }
            _ = stop.wait_for(|s| *s), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// The router, with the peer's address in every request's extensions (what axum's
/// `ConnectInfo<SocketAddr>` extractor reads).
#[derive(Clone)]
struct WithPeer {
    app: Router,
    peer: SocketAddr,
}

impl tower_service::Service<Request<Incoming>> for WithPeer {
    type Response = Response;
    type Error = Infallible;
    type Future = RouteFuture<Infallible>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        tower_service::Service::<Request<Body>>::poll_ready(&mut self.app, cx)
    }

    fn call(&mut self, request: Request<Incoming>) -> Self::Future {
        let mut request = request.map(Body::new);
        request.extensions_mut().insert(ConnectInfo(self.peer));
        tower_service::Service::call(&mut self.app, request)
    }
}
