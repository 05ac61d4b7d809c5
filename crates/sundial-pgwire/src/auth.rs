//! Password authentication: cleartext and SCRAM-SHA-256 (RFC 5802 / 7677, without channel
//! binding), against the server's user store (`sundial-auth`).
//!
//! ```text
//!  server                                   client
//!  AuthenticationSASL [SCRAM-SHA-256]  ──▶
//!                                      ◀──  SASLInitialResponse  n,,n=,r=<client nonce>
//!  SASLContinue r=<nonce>,s=<salt>,i=N ──▶
//!                                      ◀──  SASLResponse  c=biws,r=<nonce>,p=<proof>
//!  SASLFinal v=<server signature>      ──▶  (then AuthenticationOk)
//! ```
//!
//! The store keeps SCRAM verifiers (salt, StoredKey, ServerKey), never passwords, so a login
//! costs two HMACs. As in PostgreSQL, the `md5` method is served as SCRAM-SHA-256: an MD5
//! answer can only be checked against the password itself. The cleartext method derives the
//! verifier from the password sent.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rand::Rng;
use sha2::{Digest, Sha256};
use sundial_auth::{equal, hmac};

use crate::codec::{Reader, Writer};
use crate::error::PgError;

const SCRAM_MECHANISM: &str = "SCRAM-SHA-256";
const AUTH_OK: i32 = 0;
const AUTH_CLEARTEXT: i32 = 3;
const AUTH_SASL: i32 = 10;
const AUTH_SASL_CONTINUE: i32 = 11;
const AUTH_SASL_FINAL: i32 = 12;

/// How clients prove who they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    /// The password travels in clear text: taken only over TLS or from a loopback peer (a
    /// plain login from another host is refused with SQLSTATE 28000).
    Password,
    /// Asked for as MD5, served as SCRAM-SHA-256 (see the module docs).
    Md5,
    ScramSha256,
}

impl AuthMethod {
    pub fn parse(s: &str) -> Option<AuthMethod> {
        match s.to_ascii_lowercase().as_str() {
            "password" | "cleartext" => Some(AuthMethod::Password),
            "md5" => Some(AuthMethod::Md5),
            "scram-sha-256" | "scram" => Some(AuthMethod::ScramSha256),
            _ => None,
        }
    }
}

/// Whether a login by `method` may go on over this connection: a cleartext password only
/// over TLS or from a loopback peer (an unknown peer counts as remote).
pub(crate) fn password_may_travel(
    method: AuthMethod,
    over_tls: bool,
    peer: Option<std::net::SocketAddr>,
) -> bool {
    method != AuthMethod::Password || over_tls || peer.is_some_and(|p| p.ip().is_loopback())
}

/// The user store and the method clients log in with.
pub struct Users {
    method: AuthMethod,
    store: Arc<sundial_auth::Users>,
    /// Failed logins by address, shared with the server's other listeners.
    throttle: Arc<sundial_auth::Throttle>,
}

impl Users {
    /// Users in memory: the first credential is the built-in admin, the others admins too
    /// (tests, and tools without a data directory).
    pub fn new(method: AuthMethod, credentials: &[(String, String)]) -> Users {
        let store = sundial_auth::Users::in_memory(credentials.first().cloned());
        for (user, password) in credentials.iter().skip(1) {
            let made = store
                .create_user(user, Some(password), true)
                .and_then(|()| store.grant(user, sundial_auth::Role::Admin));
            if let Err(e) = made {
                panic!("test user {user}: {e}");
            }
        }
        Users::with_store(method, store, Arc::new(sundial_auth::Throttle::new(1024)))
    }

    /// The server's store and login throttle.
    pub fn with_store(
        method: AuthMethod,
        store: Arc<sundial_auth::Users>,
        throttle: Arc<sundial_auth::Throttle>,
    ) -> Users {
        Users {
            method,
            store,
            throttle,
        }
    }

    pub fn method(&self) -> AuthMethod {
        self.method
    }

    pub fn store(&self) -> &Arc<sundial_auth::Users> {
        &self.store
    }

    pub fn throttle(&self) -> &sundial_auth::Throttle {
        &self.throttle
    }

    /// Sends the first authentication request for `user`.
    pub fn begin(&self, user: &str, out: &mut Writer) -> Exchange {
        let user = user.to_string();
        match self.method {
            AuthMethod::Password => {
                out.authentication(AUTH_CLEARTEXT, &[]);
                Exchange::Password { user }
            }
            AuthMethod::Md5 | AuthMethod::ScramSha256 => {
                let mut list = Vec::new();
                list.extend_from_slice(SCRAM_MECHANISM.as_bytes());
                list.extend_from_slice(&[0, 0]);
                out.authentication(AUTH_SASL, &list);
                Exchange::ScramFirst { user }
            }
        }
    }
}

/// Where a login stands between password messages.
pub enum Exchange {
    Password {
        user: String,
    },
    ScramFirst {
        user: String,
    },
    ScramFinal {
        user: String,
        /// `client-first-message-bare + "," + server-first-message`, the start of AuthMessage.
        transcript: String,
        nonce: String,
    },
}

impl Exchange {
    /// Handles one password message (`p`). Returns the next step, or `None` once the user is
    /// authenticated (AuthenticationOk has then been written).
    pub fn step(
        self,
        users: &Users,
        body: &[u8],
        out: &mut Writer,
    ) -> Result<Option<Exchange>, PgError> {
        match self {
            Exchange::Password { user } => {
                let given = Reader::new(body).cstr()?;
                let ok = users.store.verify_password(&user, given);
                finish(ok, user, out)
            }
            Exchange::ScramFirst { user } => scram_first(users, user, body, out).map(Some),
            Exchange::ScramFinal {
                user,
                transcript,
                nonce,
            } => scram_final(users, user, &transcript, &nonce, body, out),
        }
    }
}

fn finish(ok: bool, user: String, out: &mut Writer) -> Result<Option<Exchange>, PgError> {
    if !ok {
        return Err(PgError::Auth(user));
    }
    out.authentication(AUTH_OK, &[]);
    Ok(None)
}

fn scram_first(
    users: &Users,
    user: String,
    body: &[u8],
    out: &mut Writer,
) -> Result<Exchange, PgError> {
    let mut r = Reader::new(body);
    let mechanism = r.cstr()?;
    if mechanism != SCRAM_MECHANISM {
        return Err(PgError::Protocol(format!(
            "SASL mechanism {mechanism} is not offered; use {SCRAM_MECHANISM}"
        )));
    }
    let message = r.value()?.unwrap_or_default();
    let message = std::str::from_utf8(message)
        .map_err(|_| PgError::Protocol("SCRAM message is not UTF-8".into()))?;
    // gs2 header: "n,," (no channel binding) or "y,," (client could but server cannot).
    let bare = message
        .strip_prefix("n,,")
        .or_else(|| message.strip_prefix("y,,"))
        .ok_or_else(|| PgError::Protocol("SCRAM channel binding is not supported".into()))?;
    let client_nonce = attribute(bare, 'r')
        .ok_or_else(|| PgError::Protocol("SCRAM first message without a nonce".into()))?;
    let server_nonce: [u8; 18] = rand::rng().random();
    let nonce = format!("{client_nonce}{}", BASE64.encode(server_nonce));
    // An unknown user (or one without a password) gets a plausible salt and fails at the
    // proof, like a wrong password.
    let (salt, iterations) = users.store.scram_secret(&user).map_or_else(
        || {
            let salt: [u8; 16] = rand::rng().random();
            (salt.to_vec(), sundial_auth::SCRAM_ITERATIONS)
        },
        |s| (s.salt, s.iterations),
    );
    let server_first = format!("r={nonce},s={},i={iterations}", BASE64.encode(salt));
    out.authentication(AUTH_SASL_CONTINUE, server_first.as_bytes());
    Ok(Exchange::ScramFinal {
        user,
        transcript: format!("{bare},{server_first}"),
        nonce,
    })
}

fn scram_final(
    users: &Users,
    user: String,
    transcript: &str,
    nonce: &str,
    body: &[u8],
    out: &mut Writer,
) -> Result<Option<Exchange>, PgError> {
    let message = std::str::from_utf8(body)
        .map_err(|_| PgError::Protocol("SCRAM message is not UTF-8".into()))?;
    let (without_proof, proof) = message
        .rsplit_once(",p=")
        .ok_or_else(|| PgError::Protocol("SCRAM final message without a proof".into()))?;
    if attribute(without_proof, 'r') != Some(nonce) {
        return Err(PgError::Protocol("SCRAM nonce mismatch".into()));
    }
    let proof = BASE64
        .decode(proof)
        .map_err(|_| PgError::Protocol("SCRAM proof is not base64".into()))?;
    let Some(secret) = users.store.scram_secret(&user) else {
        return Err(PgError::Auth(user));
    };
    let auth_message = format!("{transcript},{without_proof}");
    let signature = hmac(&secret.stored_key, auth_message.as_bytes());
    if proof.len() != signature.len() {
        return Err(PgError::Auth(user));
    }
    let client_key: Vec<u8> = proof.iter().zip(signature).map(|(p, s)| p ^ s).collect();
    let stored: [u8; 32] = Sha256::digest(&client_key).into();
    if !equal(&stored, &secret.stored_key) {
        return Err(PgError::Auth(user));
    }
    let server_signature = hmac(&secret.server_key, auth_message.as_bytes());
    let final_message = format!("v={}", BASE64.encode(server_signature));
    out.authentication(AUTH_SASL_FINAL, final_message.as_bytes());
    out.authentication(AUTH_OK, &[]);
    Ok(None)
}

/// The value of `name=` in a comma-separated SCRAM message.
fn attribute(message: &str, name: char) -> Option<&str> {
    message.split(',').find_map(|part| {
        let mut chars = part.chars();
        (chars.next() == Some(name) && chars.next() == Some('=')).then(|| &part[2..])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleartext_passwords_travel_only_over_tls_or_loopback() {
        let remote = Some("10.1.2.3:5000".parse().unwrap());
        let local = Some("127.0.0.1:5000".parse().unwrap());
        let local6 = Some("[::1]:5000".parse().unwrap());
        assert!(!password_may_travel(AuthMethod::Password, false, remote));
        assert!(!password_may_travel(AuthMethod::Password, false, None));
        assert!(password_may_travel(AuthMethod::Password, true, remote));
        assert!(password_may_travel(AuthMethod::Password, false, local));
        assert!(password_may_travel(AuthMethod::Password, false, local6));
        assert!(password_may_travel(AuthMethod::ScramSha256, false, remote));
        assert!(password_may_travel(AuthMethod::Md5, false, remote));
    }

    #[test]
    fn scram_round_trip_with_a_client_computation() {
        let users = Users::new(AuthMethod::ScramSha256, &[("admin".into(), "quest".into())]);
        let mut out = Writer::default();
        let exchange = users.begin("admin", &mut out);
        let mut first = Vec::new();
        first.extend_from_slice(b"SCRAM-SHA-256\0");
        let client_first = b"n,,n=,r=abcdef";
        first.extend_from_slice(&(client_first.len() as i32).to_be_bytes());
        first.extend_from_slice(client_first);
        out.buf.clear();
        let exchange = exchange.step(&users, &first, &mut out).unwrap().unwrap();
        let server_first = std::str::from_utf8(&out.buf[9..]).unwrap().to_string();
        let nonce = attribute(&server_first, 'r').unwrap();
        let salt = BASE64
            .decode(attribute(&server_first, 's').unwrap())
            .unwrap();
        // The client's side of the exchange.
        let mut salted = [0u8; 32];
        pbkdf2::pbkdf2_hmac::<Sha256>(b"quest", &salt, sundial_auth::SCRAM_ITERATIONS, &mut salted);
        let client_key = hmac(&salted, b"Client Key");
        let stored: [u8; 32] = Sha256::digest(client_key).into();
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("n=,r=abcdef,{server_first},{without_proof}");
        let signature = hmac(&stored, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let final_message = format!("{without_proof},p={}", BASE64.encode(proof));
        out.buf.clear();
        assert!(
            exchange
                .step(&users, final_message.as_bytes(), &mut out)
                .unwrap()
                .is_none()
        );

        // A wrong password fails.
        let exchange = users.begin("admin", &mut out);
        let exchange = exchange.step(&users, &first, &mut out).unwrap().unwrap();
        let bad = format!(
            "c=biws,r={},p={}",
            match &exchange {
                Exchange::ScramFinal { nonce, .. } => nonce.clone(),
                _ => unreachable!(),
            },
            BASE64.encode([0u8; 32])
        );
        assert!(matches!(
            exchange.step(&users, bad.as_bytes(), &mut out),
            Err(PgError::Auth(_))
        ));
    }
}
