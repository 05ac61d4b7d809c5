//! Password authentication: cleartext, MD5 and SCRAM-SHA-256 (RFC 5802 / 7677, without
//! channel binding since the server does not speak TLS).
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
//! Users' SCRAM secrets (salt, StoredKey, ServerKey) are derived once when the server starts,
//! so a login costs two HMACs, not 4096.

use std::collections::HashMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, KeyInit, Mac};
use md5::Md5;
use rand::Rng;
use sha2::{Digest, Sha256};

use crate::codec::{Reader, Writer};
use crate::error::PgError;

const SCRAM_ITERATIONS: u32 = 4096;
const SCRAM_MECHANISM: &str = "SCRAM-SHA-256";
const AUTH_OK: i32 = 0;
const AUTH_CLEARTEXT: i32 = 3;
const AUTH_MD5: i32 = 5;
const AUTH_SASL: i32 = 10;
const AUTH_SASL_CONTINUE: i32 = 11;
const AUTH_SASL_FINAL: i32 = 12;

/// How clients prove who they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    /// The password travels in clear text (only sensible on a trusted network).
    Password,
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

struct Secret {
    password: String,
    salt: [u8; 16],
    stored_key: [u8; 32],
    server_key: [u8; 32],
}

/// The configured users and the method they log in with.
pub struct Users {
    method: AuthMethod,
    users: HashMap<String, Secret>,
}

impl Users {
    pub fn new(method: AuthMethod, credentials: &[(String, String)]) -> Users {
        let mut rng = rand::rng();
        let users = credentials
            .iter()
            .map(|(user, password)| {
                let salt: [u8; 16] = rng.random();
                let salted = salted_password(password, &salt);
                let client_key = hmac(&salted, b"Client Key");
                (
                    user.clone(),
                    Secret {
                        password: password.clone(),
                        salt,
                        stored_key: Sha256::digest(client_key).into(),
                        server_key: hmac(&salted, b"Server Key"),
                    },
                )
            })
            .collect();
        Users { method, users }
    }

    /// Sends the first authentication request for `user`.
    pub fn begin(&self, user: &str, out: &mut Writer) -> Exchange {
        let user = user.to_string();
        match self.method {
            AuthMethod::Password => {
                out.authentication(AUTH_CLEARTEXT, &[]);
                Exchange::Password { user }
            }
            AuthMethod::Md5 => {
                let salt: [u8; 4] = rand::rng().random();
                out.authentication(AUTH_MD5, &salt);
                Exchange::Md5 { user, salt }
            }
            AuthMethod::ScramSha256 => {
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
    Md5 {
        user: String,
        salt: [u8; 4],
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
                let ok = users
                    .users
                    .get(&user)
                    .is_some_and(|s| equal(s.password.as_bytes(), given.as_bytes()));
                finish(ok, user, out)
            }
            Exchange::Md5 { user, salt } => {
                let given = Reader::new(body).cstr()?;
                let ok = users.users.get(&user).is_some_and(|s| {
                    equal(
                        md5_answer(&user, &s.password, &salt).as_bytes(),
                        given.as_bytes(),
                    )
                });
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
    // An unknown user gets a plausible salt and fails at the proof, like a wrong password.
    let salt = users
        .users
        .get(&user)
        .map_or_else(|| rand::rng().random(), |s| s.salt);
    let server_first = format!("r={nonce},s={},i={SCRAM_ITERATIONS}", BASE64.encode(salt));
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
    let Some(secret) = users.users.get(&user) else {
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

fn salted_password(password: &str, salt: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), salt, SCRAM_ITERATIONS, &mut out);
    out
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    // HMAC accepts keys of any length, so construction cannot fail.
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// `"md5" + md5hex(md5hex(password + user) + salt)`, what an MD5 client sends.
fn md5_answer(user: &str, password: &str, salt: &[u8; 4]) -> String {
    let inner = hex(&Md5::digest(format!("{password}{user}").as_bytes()));
    let mut outer = Md5::new();
    outer.update(inner.as_bytes());
    outer.update(salt);
    format!("md5{}", hex(&outer.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// Compares without stopping at the first difference.
fn equal(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_matches_postgres_formula() {
        // md5(md5("questadmin") + salt), as libpq computes it.
        let answer = md5_answer("admin", "quest", &[1, 2, 3, 4]);
        assert!(answer.starts_with("md5"));
        assert_eq!(answer.len(), 35);
        assert_eq!(
            hex(&Md5::digest(b"abc")),
            "900150983cd24fb0d6963f7d28e17f72"
        );
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
        let salted = salted_password("quest", &salt);
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
