//! ILP over TCP authentication, as QuestDB's clients do it (their `username` and `token`
//! settings): the client names its key, signs a challenge with it, and only then sends lines.
//!
//! ```text
//!  client ── "<key id>\n" ────────────────▶ server   (a user with an ILP key and write role)
//!  client ◀──────────────── "<challenge>\n" ── server   (512 random letters and digits)
//!  client ── "<base64 ECDSA P-256 signature>\n" ─▶ server ── verified: lines follow
//! ```
//!
//! Invariants: the exchange is bounded in bytes (key id and signature lines) and in time
//! ([`HANDSHAKE_TIMEOUT`] for the key id, again for the signature; the throttle's delay for the
//! key id, served in the address's turn, comes between); a failure is counted, delayed,
//! remembered for the address and key id (the shared throttle) and closes the connection, which then has
//! sent nothing the database took. Bytes a client sent after its signature line are lines and
//! are handed back.

use std::net::SocketAddr;
use std::time::Duration;

use sundial_auth::{Caller, FAILURE_DELAY, Role, Throttle, Users, ilp_challenge};
use sundial_metrics::{Connection, metrics};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Time a client has from connecting to the end of its signature line.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// What a sender without a key is told (in the server's log).
const NO_KEY_HINT: &str = "ILP over TCP needs a signed key while --auth is required (QuestDB \
     clients' username=<key id>;token=<private key>; `ALTER USER name CREATE TOKEN TYPE JWK` \
     makes one); nothing it sent was stored. Start the server with --auth off to take lines \
     without credentials";
/// The longest key id line.
const KEY_ID_BYTES_MAX: usize = 256;
/// The longest signature line.
const SIGNATURE_BYTES_MAX: usize = 512;

/// Runs the exchange on `stream`. Returns the authenticated user and the bytes read past the
/// signature line (the first lines); `None` when the client closed without sending a byte (a
/// port check, not a failed login); or why the client is refused.
pub(crate) async fn authenticate<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    peer: SocketAddr,
    users: &Users,
    throttle: &Throttle,
) -> Result<Option<(String, Vec<u8>)>, String> {
    let timed_out = || {
        format!(
            "did not authenticate within {} s",
            HANDSHAKE_TIMEOUT.as_secs()
        )
    };
    let mut buf = Vec::with_capacity(1024);
    let key_id = match tokio::time::timeout(HANDSHAKE_TIMEOUT, read_key_id(stream, &mut buf)).await
    {
        Ok(Ok(Some(key_id))) => key_id,
        Ok(Ok(None)) => return Ok(None),
        Ok(Err(why)) => return Err(refuse(peer, "", throttle, why).await),
        Err(_) => return Err(refuse(peer, "", throttle, timed_out()).await),
    };
    // A key id is a user name: never a space, comma or '='; an ILP line always has them. No
    // challenge for a sender that sends lines without a key (`nc`, a client without `username`
    // and `token`).
    if key_id.contains([' ', ',', '=']) {
        let why = format!("sent lines but no key id and no signature: {NO_KEY_HINT}");
        return Err(refuse(peer, "", throttle, why).await);
    }
    // The delay is served within the address's turn: parallel guesses queue.
    let _turn = match tokio::time::timeout(HANDSHAKE_TIMEOUT, throttle.attempt(peer.ip())).await {
        Ok(Ok(turn)) => turn,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err(timed_out()),
    };
    let wait = throttle.delay(peer.ip(), &key_id);
    if !wait.is_zero() {
        tokio::time::sleep(wait).await;
    }
    let exchange = async {
        let mut challenge = ilp_challenge();
        challenge.push(b'\n');
        stream
            .write_all(&challenge)
            .await
            .map_err(|e| format!("cannot send the challenge: {e}"))?;
        challenge.pop();
        let signature = read_line(stream, &mut buf, SIGNATURE_BYTES_MAX, "signature").await?;
        if !users.verify_ilp(&key_id, &challenge, &signature) {
            return Err(format!(
                "key '{}' is unknown or did not sign the challenge",
                key_id.escape_default()
            ));
        }
        Ok(())
    };
    let outcome = match tokio::time::timeout(HANDSHAKE_TIMEOUT, exchange).await {
        Ok(outcome) => outcome,
        Err(_) => Err(timed_out()),
    };
    let refused = match outcome {
        Ok(()) => match users.authorize(&Caller::user(key_id.as_str()), Role::Write) {
            Ok(()) => {
                throttle.succeeded(peer.ip(), &key_id);
                return Ok(Some((key_id, buf)));
            }
            Err(e) => e.to_string(),
        },
        Err(why) => why,
    };
    Err(refuse(peer, &key_id, throttle, refused).await)
}

/// Reads the key id line; `None` when the client closed without sending a byte.
async fn read_key_id<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
) -> Result<Option<String>, String> {
    let mut first = [0u8; 1];
    let n = stream
        .read(&mut first)
        .await
        .map_err(|e| format!("cannot read the key id: {e}"))?;
    if n == 0 {
        return Ok(None);
    }
    buf.push(first[0]);
    let key_id = read_line(stream, buf, KEY_ID_BYTES_MAX, "key id").await?;
    let key_id =
        String::from_utf8(key_id).map_err(|_| "the key id is not UTF-8 text".to_string())?;
    Ok(Some(key_id.trim_end_matches('\r').to_string()))
}

/// Counts and remembers a failed login as `key_id` from `peer`, and delays its answer.
async fn refuse(peer: SocketAddr, key_id: &str, throttle: &Throttle, why: String) -> String {
    throttle.failed(peer.ip(), key_id);
    metrics().auth_failed(Connection::IlpTcp);
    tokio::time::sleep(FAILURE_DELAY).await;
    why
}

/// Reads up to the next newline, keeping what follows it in `buf`; returns the line without
/// its newline.
async fn read_line<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
    max: usize,
    what: &str,
) -> Result<Vec<u8>, String> {
    loop {
        if let Some(end) = buf.iter().position(|&b| b == b'\n') {
            let line = buf[..end].to_vec();
            buf.drain(..=end);
            return Ok(line);
        }
        if buf.len() > max {
            return Err(format!("the {what} line is longer than {max} bytes"));
        }
        let mut chunk = [0u8; 1024];
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|e| format!("cannot read the {what}: {e}"))?;
        if n == 0 {
            return Err(format!("closed before sending its {what}: {NO_KEY_HINT}"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    use p256::ecdsa::signature::Signer;
    use p256::ecdsa::{Signature, SigningKey};
    use tokio::io::{AsyncBufReadExt, BufReader};

    fn peer() -> SocketAddr {
        "127.0.0.1:5000".parse().unwrap()
    }

    /// A client as QuestDB's: key id, read the challenge, sign it.
    async fn client(
        mut side: tokio::io::DuplexStream,
        key_id: &str,
        d: Option<String>,
    ) -> tokio::io::DuplexStream {
        side.write_all(format!("{key_id}\n").as_bytes())
            .await
            .unwrap();
        let mut reader = BufReader::new(&mut side);
        let mut challenge = String::new();
        reader.read_line(&mut challenge).await.unwrap();
        let challenge = challenge.trim_end_matches('\n');
        let signature = match d {
            Some(d) => {
                let d = URL_SAFE_NO_PAD.decode(d).unwrap();
                let key = SigningKey::from_bytes(d.as_slice().into()).unwrap();
                let sig: Signature = key.sign(challenge.as_bytes());
                STANDARD.encode(sig.to_der().as_bytes())
            }
            None => STANDARD.encode([7u8; 64]),
        };
        side.write_all(format!("{signature}\ncpu v=1 1\n").as_bytes())
            .await
            .unwrap();
        side
    }

    #[tokio::test]
    async fn a_signed_challenge_lets_a_writer_in() {
        let users = Users::in_memory(None);
        users.create_user("bob", None, false).unwrap();
        users.grant("bob", Role::Write).unwrap();
        let key = users.create_ilp_key("bob").unwrap();
        let throttle = Throttle::new(16);
        let (mut server, client_side) = tokio::io::duplex(4096);
        let client = tokio::spawn(client(client_side, "bob", Some(key.private_d.clone())));
        let (user, rest) = authenticate(&mut server, peer(), &users, &throttle)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(user, "bob");
        let _client = client.await.unwrap();
        // What followed the signature is lines (it may not all have arrived yet).
        assert!(b"cpu v=1 1\n".starts_with(&rest), "{rest:?}");
    }

    #[tokio::test]
    async fn wrong_keys_and_readers_are_refused() {
        let users = Users::in_memory(None);
        users.create_user("reader", None, false).unwrap();
        users.grant("reader", Role::Read).unwrap();
        let key = users.create_ilp_key("reader").unwrap();
        let throttle = Throttle::new(16);
        // A forged signature.
        let (mut server, side) = tokio::io::duplex(4096);
        let c = tokio::spawn(client(side, "reader", None));
        let e = authenticate(&mut server, peer(), &users, &throttle)
            .await
            .unwrap_err();
        assert!(e.contains("did not sign"), "{e}");
        drop(c.await);
        // The right signature, but a reader may not write.
        let (mut server, side) = tokio::io::duplex(4096);
        let c = tokio::spawn(client(side, "reader", Some(key.private_d)));
        let e = authenticate(&mut server, peer(), &users, &throttle)
            .await
            .unwrap_err();
        assert!(e.contains("needs write"), "{e}");
        drop(c.await);
        // An unknown key.
        let (mut server, side) = tokio::io::duplex(4096);
        let c = tokio::spawn(client(side, "nobody", None));
        assert!(
            authenticate(&mut server, peer(), &users, &throttle)
                .await
                .is_err()
        );
        drop(c.await);
        // A key id line that never ends.
        let (mut server, mut side) = tokio::io::duplex(1 << 16);
        side.write_all(&[b'a'; 2000]).await.unwrap();
        let e = authenticate(&mut server, peer(), &users, &throttle)
            .await
            .unwrap_err();
        assert!(e.contains("longer than"), "{e}");
        // The failures of one address under several key ids: (address, id) pairs and the address.
        assert!(throttle.entries() >= 2);
        // A client that closes at once is no failed login.
        let (mut server, side) = tokio::io::duplex(64);
        drop(side);
        assert!(matches!(
            authenticate(&mut server, peer(), &users, &throttle).await,
            Ok(None)
        ));
        // Lines without a key (`nc`): refused without a challenge, saying what to do.
        let (mut server, mut side) = tokio::io::duplex(4096);
        side.write_all(b"cpu,host=a v=1 1\n").await.unwrap();
        let e = authenticate(&mut server, peer(), &users, &throttle)
            .await
            .unwrap_err();
        assert!(e.contains("no key id and no signature"), "{e}");
        assert!(
            e.contains("--auth off") && e.contains("CREATE TOKEN"),
            "{e}"
        );
        let mut got = [0u8; 1];
        use futures::FutureExt;
        assert!(side.read(&mut got).now_or_never().is_none(), "no challenge");
    }
}
