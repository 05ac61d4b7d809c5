//! Password verifiers and token digests: what is stored instead of secrets.
//!
//! A password becomes PostgreSQL's SCRAM-SHA-256 verifier (RFC 5802/7677): a random salt,
//! `StoredKey = SHA-256(HMAC(SaltedPassword, "Client Key"))` and
//! `ServerKey = HMAC(SaltedPassword, "Server Key")`, with `SaltedPassword = PBKDF2(password,
//! salt, 4096)`. A PostgreSQL SCRAM login needs nothing more, and a password given in clear
//! (HTTP Basic, PostgreSQL's cleartext method) is checked by deriving StoredKey again.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD as BASE64, URL_SAFE_NO_PAD as BASE64URL};
use hmac::{Hmac, KeyInit, Mac};
use rand::Rng;
use sha2::{Digest, Sha256};

use crate::error::{AuthError, Result};

/// PBKDF2 rounds of new verifiers (PostgreSQL's default).
pub const SCRAM_ITERATIONS: u32 = 4096;
/// Rounds a stored verifier may claim: more would let a crafted user file stall logins.
pub(crate) const SCRAM_ITERATIONS_MAX: u32 = 1 << 20;
const SALT_BYTES: usize = 16;
/// The longest accepted password, in bytes.
pub const PASSWORD_BYTES_MAX: usize = 1024;
/// Bytes of randomness in a bearer token.
const TOKEN_BYTES: usize = 32;
/// What every bearer token starts with, so it is recognisable in a leaked config file.
pub(crate) const TOKEN_PREFIX: &str = "sdt_";

/// A password's SCRAM-SHA-256 verifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramSecret {
    pub salt: Vec<u8>,
    pub iterations: u32,
    pub stored_key: [u8; 32],
    pub server_key: [u8; 32],
}

impl ScramSecret {
    /// A verifier of `password` with a fresh random salt.
    pub fn new(password: &str) -> ScramSecret {
        let salt: [u8; SALT_BYTES] = rand::rng().random();
        ScramSecret::with_salt(password, &salt, SCRAM_ITERATIONS)
    }

    pub fn with_salt(password: &str, salt: &[u8], iterations: u32) -> ScramSecret {
        let salted = salted_password(password, salt, iterations);
        let client_key = hmac(&salted, b"Client Key");
        ScramSecret {
            salt: salt.to_vec(),
            iterations,
            stored_key: Sha256::digest(client_key).into(),
            server_key: hmac(&salted, b"Server Key"),
        }
    }

    /// Whether `password` is the one this verifier was made from (constant time in the
    /// comparison; the derivation costs `iterations` HMACs).
    pub fn verify(&self, password: &str) -> bool {
        let salted = salted_password(password, &self.salt, self.iterations);
        let stored: [u8; 32] = Sha256::digest(hmac(&salted, b"Client Key")).into();
        equal(&stored, &self.stored_key)
    }

    /// `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`, PostgreSQL's text form.
    pub(crate) fn to_text(&self) -> String {
        format!(
            "SCRAM-SHA-256${}:{}${}:{}",
            self.iterations,
            BASE64.encode(&self.salt),
            BASE64.encode(self.stored_key),
            BASE64.encode(self.server_key)
        )
    }

    pub(crate) fn from_text(text: &str) -> Result<ScramSecret> {
        let bad = || AuthError::Corrupt(format!("holds a malformed password verifier '{text}'"));
        let rest = text.strip_prefix("SCRAM-SHA-256$").ok_or_else(bad)?;
        let (params, keys) = rest.split_once('$').ok_or_else(bad)?;
        let (iterations, salt) = params.split_once(':').ok_or_else(bad)?;
        let (stored, server) = keys.split_once(':').ok_or_else(bad)?;
        let iterations: u32 = iterations.parse().map_err(|_| bad())?;
        if iterations == 0 || iterations > SCRAM_ITERATIONS_MAX {
            return Err(bad());
        }
        let salt = BASE64.decode(salt).map_err(|_| bad())?;
        let key = |s: &str| -> Result<[u8; 32]> {
            BASE64
                .decode(s)
                .ok()
                .and_then(|k| <[u8; 32]>::try_from(k).ok())
                .ok_or_else(bad)
        };
        if salt.is_empty() || salt.len() > 64 {
            return Err(bad());
        }
        Ok(ScramSecret {
            salt,
            iterations,
            stored_key: key(stored)?,
            server_key: key(server)?,
        })
    }
}

/// Refuses passwords that cannot be right: empty, over [`PASSWORD_BYTES_MAX`], or holding a
/// NUL (which PostgreSQL's protocol cannot carry).
pub(crate) fn check_password(password: &str) -> Result<()> {
    if password.is_empty() {
        return Err(AuthError::Invalid(
            "a password must not be empty (WITH NO PASSWORD removes it)".into(),
        ));
    }
    if password.len() > PASSWORD_BYTES_MAX {
        return Err(AuthError::Invalid(format!(
            "a password may have at most {PASSWORD_BYTES_MAX} bytes"
        )));
    }
    if password.contains('\0') {
        return Err(AuthError::Invalid(
            "a password must not contain a NUL character".into(),
        ));
    }
    Ok(())
}

/// A new bearer token: the prefix and 32 random bytes, base64url.
pub(crate) fn new_token() -> String {
    let bytes: [u8; TOKEN_BYTES] = rand::rng().random();
    format!("{TOKEN_PREFIX}{}", BASE64URL.encode(bytes))
}

/// A new console session id: 32 random bytes, base64url.
pub fn new_session_id() -> String {
    let bytes: [u8; TOKEN_BYTES] = rand::rng().random();
    BASE64URL.encode(bytes)
}

/// What is stored of a token: its SHA-256, hex. Tokens carry 256 random bits, so no salt or
/// slow hash is needed.
pub(crate) fn token_digest(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// SHA-256 of a user name and password, the key of verified Basic credentials.
pub(crate) fn credentials_digest(user: &str, password: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(user.as_bytes());
    hasher.update([0]);
    hasher.update(password.as_bytes());
    hasher.finalize().into()
}

fn salted_password(password: &str, salt: &[u8], iterations: u32) -> [u8; 32] {
    let mut out = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), salt, iterations, &mut out);
    out
}

/// HMAC-SHA-256.
pub fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// Compares without stopping at the first difference.
pub fn equal(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifier_round_trips_and_checks() {
        let secret = ScramSecret::new("correct horse");
        assert!(secret.verify("correct horse"));
        assert!(!secret.verify("correct hors"));
        assert!(!secret.verify(""));
        let text = secret.to_text();
        assert!(!text.contains("correct"));
        assert_eq!(ScramSecret::from_text(&text).unwrap(), secret);
    }

    #[test]
    fn malformed_verifiers_are_refused() {
        for bad in [
            "",
            "md5abc",
            "SCRAM-SHA-256$",
            "SCRAM-SHA-256$4096:AAAA$x:y",
            "SCRAM-SHA-256$0:AAAA$AAAA:AAAA",
            "SCRAM-SHA-256$99999999999:AAAA$AAAA:AAAA",
            "SCRAM-SHA-256$4096:$AAAA:AAAA",
        ] {
            assert!(ScramSecret::from_text(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn passwords_are_checked() {
        assert!(check_password("").is_err());
        assert!(check_password("a\0b").is_err());
        assert!(check_password(&"x".repeat(PASSWORD_BYTES_MAX + 1)).is_err());
        assert!(check_password("ünïcødé 🔑").is_ok());
    }

    #[test]
    fn tokens_are_random_and_digested() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        assert!(a.starts_with(TOKEN_PREFIX));
        assert_eq!(token_digest(&a).len(), 64);
        assert_ne!(token_digest(&a), token_digest(&b));
    }
}
