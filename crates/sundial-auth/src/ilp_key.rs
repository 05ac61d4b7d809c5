//! ILP-over-TCP keys: ECDSA P-256, as QuestDB's clients authenticate.
//!
//! ```text
//!  client ── "<key id>\n" ──▶ server
//!  client ◀── "<challenge>\n" ── server      (random printable bytes, no newline inside)
//!  client ── "<base64 signature of the challenge>\n" ──▶ server (ECDSA P-256, SHA-256)
//! ```
//!
//! The server keeps only the public point; the private scalar is shown once, when the key is
//! made, in the JWK form (`d`, `x`, `y`, base64url) the clients' `token`, `token_x`,
//! `token_y` settings take. Signatures are accepted DER-encoded or as 64 bytes `r || s`.

use base64::Engine as _;
use base64::engine::general_purpose::{
    STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD as BASE64URL,
};
use p256::EncodedPoint;
use p256::ecdsa::signature::Verifier;
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use rand::Rng;

use crate::error::{AuthError, Result};

/// Length of a challenge, in bytes.
pub const CHALLENGE_BYTES: usize = 512;
/// The longest signature line accepted (a base64 DER signature is under 100 bytes).
pub const SIGNATURE_LINE_BYTES_MAX: usize = 512;

/// A key made for a user, with its private part (shown once, never stored).
#[derive(Debug, Clone)]
pub struct IlpKey {
    /// What the client sends first (the user's name).
    pub key_id: String,
    /// The private scalar `d`, base64url: the clients' `token`.
    pub private_d: String,
    /// The public point, base64url: the clients' `token_x` and `token_y`.
    pub public_x: String,
    pub public_y: String,
}

/// A new key pair for `key_id`.
pub(crate) fn generate(key_id: &str) -> IlpKey {
    let mut rng = rand::rng();
    let signing = loop {
        let bytes: [u8; 32] = rng.random();
        // Fails only for zero or a scalar past the group order: vanishingly rare.
        if let Ok(key) = SigningKey::from_bytes(&bytes.into()) {
            break key;
        }
    };
    let point = signing.verifying_key().to_encoded_point(false);
    let (Some(x), Some(y)) = (point.x(), point.y()) else {
        unreachable!("an uncompressed point has both coordinates")
    };
    IlpKey {
        key_id: key_id.to_string(),
        private_d: BASE64URL.encode(signing.to_bytes()),
        public_x: BASE64URL.encode(x),
        public_y: BASE64URL.encode(y),
    }
}

/// The public key of base64url coordinates, checked to be a point of the curve.
pub(crate) fn public_key(x: &str, y: &str) -> Result<VerifyingKey> {
    let bad = |what: &str| AuthError::Invalid(format!("ILP public key: {what}"));
    let coordinate = |c: &str| -> Result<[u8; 32]> {
        let bytes = BASE64URL
            .decode(c.trim_end_matches('='))
            .map_err(|_| bad("a coordinate is not base64url"))?;
        <[u8; 32]>::try_from(bytes).map_err(|_| bad("a coordinate is not 32 bytes"))
    };
    let (x, y) = (coordinate(x)?, coordinate(y)?);
    let point = EncodedPoint::from_affine_coordinates(&x.into(), &y.into(), false);
    VerifyingKey::from_encoded_point(&point).map_err(|_| bad("not a point of the P-256 curve"))
}

/// Whether `signature` (base64 text, DER or `r || s`) signs `challenge` with `key`.
pub(crate) fn verify(key: &VerifyingKey, challenge: &[u8], signature: &[u8]) -> bool {
    if signature.len() > SIGNATURE_LINE_BYTES_MAX {
        return false;
    }
    let text = signature.trim_ascii();
    let decoded = [STANDARD, STANDARD_NO_PAD, URL_SAFE, BASE64URL]
        .iter()
        .find_map(|engine| engine.decode(text).ok());
    let Some(bytes) = decoded else {
        return false;
    };
    let parsed = Signature::from_der(&bytes).or_else(|_| Signature::from_slice(&bytes));
    parsed.is_ok_and(|sig| key.verify(challenge, &sig).is_ok())
}

/// A fresh challenge: random letters and digits (never a newline).
pub fn ilp_challenge() -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..CHALLENGE_BYTES)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use p256::ecdsa::signature::Signer;

    fn signer(key: &IlpKey) -> SigningKey {
        let d = BASE64URL.decode(&key.private_d).unwrap();
        SigningKey::from_bytes(d.as_slice().into()).unwrap()
    }

    #[test]
    fn signed_challenges_verify_in_both_encodings() {
        let key = generate("bob");
        let public = public_key(&key.public_x, &key.public_y).unwrap();
        let challenge = ilp_challenge();
        assert_eq!(challenge.len(), CHALLENGE_BYTES);
        assert!(!challenge.contains(&b'\n'));
        let sig: Signature = signer(&key).sign(&challenge);
        let der = STANDARD.encode(sig.to_der().as_bytes());
        let fixed = STANDARD.encode(sig.to_bytes());
        assert!(verify(&public, &challenge, der.as_bytes()));
        assert!(verify(&public, &challenge, fixed.as_bytes()));
        assert!(verify(&public, &challenge, format!("{der}\r").as_bytes()));
        // Another challenge, another key, or junk: refused.
        assert!(!verify(&public, &ilp_challenge(), der.as_bytes()));
        let other = generate("eve");
        let other_public = public_key(&other.public_x, &other.public_y).unwrap();
        assert!(!verify(&other_public, &challenge, der.as_bytes()));
        for junk in [&b""[..], b"!!!", b"AAAA", &[b'A'; 4096]] {
            assert!(!verify(&public, &challenge, junk));
        }
    }

    #[test]
    fn bad_public_keys_are_refused() {
        let key = generate("bob");
        assert!(public_key(&key.public_x, &key.public_x).is_err());
        assert!(public_key("", &key.public_y).is_err());
        assert!(public_key("not base64!", &key.public_y).is_err());
        assert!(public_key(&BASE64URL.encode([0u8; 31]), &key.public_y).is_err());
    }
}
