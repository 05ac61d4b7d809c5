//! The listener: admits each connection as pending ([`crate::admission`]) and hands it to a
//! [`Session`], which logs it in, takes a session slot and serves it.
//!
//! ```text
//!  accept ─▶ Admission::arrive (Ticket) ─▶ task: Session::run(ticket) ─▶ ends, slot freed
//!  stop   ─▶ no more accepts; serve returns once every session task has ended
//! ```
//!
//! Invariants:
//! - every accepted connection runs in its own task of a [`JoinSet`], so a panic ends only
//!   that connection and is counted ([`Shared::note_ended`]);
//! - [`PgServer::serve`] returns only after all its sessions have ended.
//!
//! Modules depend one way: `server` ─▶ `session` ─▶ `shared`, `cancel`, `admission`; none of
//! these imports `server`.

use std::net::SocketAddr;
use std::sync::Arc;

use sundial_query::Engine;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::admission::Ticket;
use crate::auth::{AuthMethod, Users};
use crate::session::Session;
use crate::shared::{PgOptions, Shared, stopped};

/// A PostgreSQL protocol server over an [`Engine`].
pub struct PgServer {
    pub(crate) shared: Arc<Shared>,
}

impl PgServer {
    /// Sessions run their statements themselves, so the runtime that polls
    /// [`serve`](Self::serve) is the one queries (and COPY loaders) run on.
    pub fn new(engine: Arc<Engine>, users: Users, options: PgOptions) -> PgServer {
        PgServer {
            shared: Arc::new(Shared::new(engine, users, options)),
        }
    }

    /// Accepts connections until `stop` turns true, then waits for open sessions to end their
    /// current round trip.
    pub async fn serve(&self, listener: TcpListener, stop: watch::Receiver<bool>) {
        if let Ok(addr) = listener.local_addr() {
            self.warn_of_cleartext(addr);
        }
        let threads = tokio::runtime::Handle::current().metrics().num_workers();
        self.shared.spinners.set_threads(threads);
        let mut sessions = JoinSet::new();
        let stopping = stopped(stop.clone());
        tokio::pin!(stopping);
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let ticket = self.shared.admission.arrive();
                        let shared = self.shared.clone();
                        let stop = stop.clone();
                        sessions.spawn(connection(shared, stream, peer, ticket, stop));
                    }
                    Err(e) => {
                        tracing::warn!("PG accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    }
                },
                Some(ended) = sessions.join_next(), if !sessions.is_empty() => {
                    self.shared.note_ended(ended);
                }
                _ = &mut stopping => break,
            }
        }
        while let Some(ended) = sessions.join_next().await {
            self.shared.note_ended(ended);
        }
    }
}

impl PgServer {
    /// Says at start what `--pg-auth-method password` means on a listener other hosts reach:
    /// their plain logins are refused (the password would cross the network in clear).
    fn warn_of_cleartext(&self, addr: SocketAddr) {
        if self.shared.users.method() != AuthMethod::Password || addr.ip().is_loopback() {
            return;
        }
        if self.shared.options.tls.is_none() {
            tracing::warn!(
                "PostgreSQL on {addr} takes passwords in clear text (--pg-auth-method password) \
                 and has no TLS certificate: only loopback clients can log in; configure TLS or \
                 use --pg-auth-method scram-sha-256"
            );
        } else {
            tracing::warn!(
                "PostgreSQL on {addr} takes passwords in clear text (--pg-auth-method password): \
                 clients on other hosts must connect with TLS (sslmode=require); their plain \
                 logins are refused"
            );
        }
    }
}

async fn connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    ticket: Ticket,
    stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let _open = sundial_metrics::metrics().connection(sundial_metrics::Connection::Pg);
    let session = Session::new(shared, stream, stop);
    if let Err(e) = session.run(ticket).await {
        tracing::debug!("PG session from {peer} ended: {e}");
    }
}
