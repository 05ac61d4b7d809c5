//! Who sends an HTTP request: Basic credentials, a bearer token, or the console's session
//! cookie, checked against the user store before any handler runs.
//!
//! ```text
//!  request ─▶ authenticate ─┬─ /ping, /health, /login, /logout, console files: pass
//!                           ├─ Authorization: Basic u:p | Bearer t | Token t | Token u:p
//!                           ├─ Cookie: sundial_session=<id>      (made by POST /login)
//!                           ├─ none: 401 + WWW-Authenticate (--auth off: all trusted)
//!                           └─ wrong: throttled, counted, delayed → 401
//!           ─▶ Extension<Caller> ─▶ route needs: /write, /api/v2/write, /imp → write;
//!                                    /metrics, /status → read; /exec, /exp → per statement
//! ```
//!
//! Invariants: no handler but the exempt ones runs without a [`Caller`] extension; a session
//! cookie is HttpOnly, SameSite=Strict (and Secure when TLS is on), and lives at most
//! [`SESSION_TTL`], and ends when its user's credentials change (password, role, DROP USER);
//! at most [`SESSIONS_MAX`] sessions are kept (the oldest goes first); every credential check
//! takes a turn of its address (a queue past [`sundial_auth::ATTEMPTS_IN_PROGRESS_MAX`], 429
//! past its bound); every failed login costs the client [`sundial_auth::FAILURE_DELAY`] plus
//! its (address, user) throttle delay, and counts in
//! `sundial_auth_failures_total{protocol="http"}`.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sundial_auth::{Caller, FAILURE_DELAY, Role, Throttle, Users};
use sundial_metrics::{Connection, metrics};

/// The console's session cookie.
pub const SESSION_COOKIE: &str = "sundial_session";
/// How long a console session lasts after its login.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 60 * 60);
/// Sessions kept at most.
pub const SESSIONS_MAX: usize = 10_000;
/// The header the console sends with its requests: a 401 to it carries no Basic challenge,
/// which would make the browser ask for credentials itself.
pub const CONSOLE_HEADER: &str = "x-sundial-console";
/// The longest Authorization or Cookie header read, in bytes.
const CREDENTIALS_BYTES_MAX: usize = 4096;

/// Whether credentials are required, and what checks them.
pub struct HttpAuth {
    users: Arc<Users>,
    required: bool,
    throttle: Arc<Throttle>,
    /// Mark session cookies `Secure` (the server speaks TLS).
    secure_cookie: bool,
    sessions: Mutex<HashMap<String, Session>>,
}

struct Session {
    user: String,
    /// The user's credential version at login (see `sundial_auth::Users::credential`).
    credential: u64,
    started: Instant,
}

impl std::fmt::Debug for HttpAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpAuth")
            .field("required", &self.required)
            .field("secure_cookie", &self.secure_cookie)
            .finish_non_exhaustive()
    }
}

/// How long a request waits for its address's turn to have its credentials checked (see
/// `sundial_auth::Throttle::attempt`).
const ATTEMPT_WAIT: Duration = Duration::from_secs(30);

/// Too many logins from the request's address are in progress (HTTP 429); the message says so.
struct Busy(String);

impl Busy {
    fn response(self) -> Response {
        error(StatusCode::TOO_MANY_REQUESTS, &self.0)
    }
}

/// What a request presented.
enum Credentials {
    Password { user: String, password: String },
    Token(String),
    Session(String),
}

impl HttpAuth {
    pub fn new(
        users: Arc<Users>,
        required: bool,
        throttle: Arc<Throttle>,
        secure_cookie: bool,
    ) -> Arc<HttpAuth> {
        Arc::new(HttpAuth {
            users,
            required,
            throttle,
            secure_cookie,
            sessions: Mutex::new(HashMap::new()),
        })
    }

    pub fn users(&self) -> &Arc<Users> {
        &self.users
    }

    /// The user the credentials name, after the throttle's delay; a failure is counted,
    /// remembered for the address and delayed.
    async fn check(&self, credentials: Credentials, ip: IpAddr) -> Result<Option<String>, Busy> {
        // Tokens and session ids name no user: their failures count under the empty name.
        let name = match &credentials {
            Credentials::Password { user, .. } => user.clone(),
            Credentials::Token(_) | Credentials::Session(_) => String::new(),
        };
        // The delay is served within the address's turn: parallel guesses queue.
        let turn = tokio::time::timeout(ATTEMPT_WAIT, self.throttle.attempt(ip)).await;
        let _turn = match turn {
            Ok(Ok(turn)) => turn,
            Ok(Err(e)) => return Err(Busy(e.to_string())),
            Err(_) => {
                return Err(Busy(format!(
                    "too many logins in progress from {ip}; none could be checked within {} s",
                    ATTEMPT_WAIT.as_secs()
                )));
            }
        };
        let wait = self.throttle.delay(ip, &name);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        let user = match credentials {
            Credentials::Password { user, password }
                if self.users.verified_before(&user, &password) =>
            {
                Some(user)
            }
            Credentials::Password { user, password } => {
                let users = self.users.clone();
                // The first check of a pair derives the password's key: off the async threads.
                tokio::task::spawn_blocking(move || {
                    users.verify_password(&user, &password).then_some(user)
                })
                .await
                .ok()
                .flatten()
            }
            Credentials::Token(token) => self.users.verify_token(&token),
            Credentials::Session(id) => self.session_user(&id),
        };
        match &user {
            Some(_) => self.throttle.succeeded(ip, &name),
            None => {
                self.throttle.failed(ip, &name);
                metrics().auth_failed(Connection::Http);
                tokio::time::sleep(FAILURE_DELAY).await;
            }
        }
        Ok(user)
    }

    fn session_user(&self, id: &str) -> Option<String> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let session = sessions.get(id)?;
        // A session ends with its time, or with its user's credentials: a password or role
        // change, or a DROP USER (a user created again under the name has new ones).
        if session.started.elapsed() > SESSION_TTL
            || self.users.credential(&session.user) != Some(session.credential)
        {
            sessions.remove(id);
            return None;
        }
        Some(session.user.clone())
    }

    /// A new session for `user`, logged in with the credentials of version `credential`;
    /// returns its id.
    fn start_session(&self, user: String, credential: u64) -> String {
        let id = sundial_auth::new_session_id();
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if sessions.len() >= SESSIONS_MAX {
            sessions.retain(|_, s| s.started.elapsed() <= SESSION_TTL);
            if sessions.len() >= SESSIONS_MAX
                && let Some(oldest) = sessions
                    .iter()
                    .min_by_key(|(_, s)| s.started)
                    .map(|(id, _)| id.clone())
            {
                sessions.remove(&oldest);
            }
        }
        sessions.insert(
            id.clone(),
            Session {
                user,
                credential,
                started: Instant::now(),
            },
        );
        id
    }

    fn end_session(&self, id: &str) {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }

    fn cookie(&self, id: &str, max_age_s: u64) -> HeaderValue {
        let secure = if self.secure_cookie { "; Secure" } else { "" };
        let text = format!(
            "{SESSION_COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_s}{secure}"
        );
        HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
    }
}

/// Paths anyone may request: liveness, the login itself, the console's files, and
/// `/settings`, which QuestDB's clients ask without credentials (Sundial answers 404, and
/// they use the first line protocol version).
fn exempt(path: &str) -> bool {
    matches!(
        path,
        "/ping" | "/health" | "/login" | "/logout" | "/settings"
    ) || crate::console::is_console_path(path)
}

/// The role a route needs before its handler runs (`/exec` and `/exp` check each statement).
fn route_needs(path: &str) -> Option<Role> {
    match path {
        "/write" | "/api/v2/write" | "/imp" => Some(Role::Write),
        "/metrics" | "/status" => Some(Role::Read),
        _ => None,
    }
}

/// The middleware: authenticates the request and hands its [`Caller`] to the handlers.
pub async fn authenticate(
    State(auth): State<Arc<HttpAuth>>,
    mut request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_string();
    if exempt(&path) {
        return next.run(request).await;
    }
    if !auth.required {
        // `--auth off`: nothing is checked. Clients that must send something (InfluxDB's ask
        // for a token) may send anything.
        request.extensions_mut().insert(Caller::trusted());
        return next.run(request).await;
    }
    let console = request.headers().contains_key(CONSOLE_HEADER);
    let caller = match credentials(request.headers()) {
        Err(why) => return unauthorized(&why, console),
        Ok(None) => {
            return unauthorized(
                "authentication required: send a user and password (Basic), a token (Bearer), \
                 or log in to the web console",
                console,
            );
        }
        Ok(Some(credentials)) => {
            let ip = peer_ip(&request);
            match auth.check(credentials, ip).await {
                Ok(Some(user)) => Caller::user(user),
                Ok(None) => {
                    return unauthorized("wrong user name, password, token or session", console);
                }
                Err(busy) => return busy.response(),
            }
        }
    };
    if let Some(needed) = route_needs(&path)
        && let Err(e) = auth.users.authorize(&caller, needed)
    {
        return error(
            StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::FORBIDDEN),
            &e.to_string(),
        );
    }
    request.extensions_mut().insert(caller);
    next.run(request).await
}

fn peer_ip(request: &Request) -> IpAddr {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip())
}

/// The credentials a request carries (the Authorization header before the cookie), or why
/// they cannot be read.
fn credentials(headers: &HeaderMap) -> Result<Option<Credentials>, String> {
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        let text = value
            .to_str()
            .ok()
            .filter(|t| t.len() <= CREDENTIALS_BYTES_MAX)
            .ok_or("the Authorization header is not readable text")?;
        let (scheme, rest) = text.trim().split_once(' ').unwrap_or((text, ""));
        let rest = rest.trim();
        return match scheme.to_ascii_lowercase().as_str() {
            "basic" => {
                let decoded = base64_decode(rest)
                    .and_then(|b| String::from_utf8(b).ok())
                    .ok_or("Basic credentials are not base64 of UTF-8 text")?;
                let (user, password) = decoded
                    .split_once(':')
                    .ok_or("Basic credentials are not user:password")?;
                Ok(Some(Credentials::Password {
                    user: user.to_string(),
                    password: password.to_string(),
                }))
            }
            // InfluxDB's clients send `Token <token>`, and InfluxDB 1.x's `Token user:password`.
            "bearer" | "token" => Ok(Some(match rest.split_once(':') {
                Some((user, password)) => Credentials::Password {
                    user: user.to_string(),
                    password: password.to_string(),
                },
                None => Credentials::Token(rest.to_string()),
            })),
            _ => Err(format!(
                "unsupported authorization scheme '{}': use Basic, Bearer or Token",
                scheme.chars().take(32).collect::<String>()
            )),
        };
    }
    Ok(session_cookie(headers).map(Credentials::Session))
}

fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter(|v| v.len() <= CREDENTIALS_BYTES_MAX)
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == SESSION_COOKIE && !value.is_empty()).then(|| value.to_string())
        })
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

fn unauthorized(message: &str, console: bool) -> Response {
    let mut response = error(StatusCode::UNAUTHORIZED, message);
    if !console {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"sundial\", charset=\"UTF-8\""),
        );
    }
    response
}

fn error(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({ "error": message }).to_string();
    (
        status,
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        body,
    )
        .into_response()
}

/// `GET /login`: whether credentials are required, and who the request's credentials (if
/// any) name. The console asks this first.
pub async fn whoami(
    State(auth): State<Arc<HttpAuth>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    let user = match credentials(&headers) {
        Ok(Some(c)) => match auth.check(c, peer.ip()).await {
            Ok(user) => user,
            Err(busy) => return busy.response(),
        },
        _ => None,
    };
    let role = user.as_deref().and_then(|u| auth.users.role(u));
    let body = serde_json::json!({
        "auth": if auth.required { "required" } else { "off" },
        "user": user,
        "role": role.map(Role::name),
    });
    (
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        body.to_string(),
    )
        .into_response()
}

/// `POST /login` with `{"user": .., "password": ..}`: starts a console session (a cookie).
pub async fn login(
    State(auth): State<Arc<HttpAuth>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    body: Bytes,
) -> Response {
    let parsed: Option<(String, String)> = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| {
            let user = v.get("user")?.as_str()?.to_string();
            let password = v.get("password")?.as_str()?.to_string();
            Some((user, password))
        });
    let Some((user, password)) = parsed else {
        return error(
            StatusCode::BAD_REQUEST,
            "send {\"user\": \"...\", \"password\": \"...\"} as JSON",
        );
    };
    // Read before the password is checked: a change in between ends the session at once.
    let credential = auth.users.credential(&user);
    let checked = auth
        .check(Credentials::Password { user, password }, peer.ip())
        .await;
    let (user, credential) = match (checked, credential) {
        (Ok(Some(user)), Some(credential)) => (user, credential),
        (Err(busy), _) => return busy.response(),
        _ => return unauthorized("wrong user name or password", true),
    };
    let role = auth.users.role(&user);
    let id = auth.start_session(user.clone(), credential);
    let body = serde_json::json!({ "user": user, "role": role.map(Role::name) });
    let mut response = (
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        body.to_string(),
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, auth.cookie(&id, SESSION_TTL.as_secs()));
    response
}

/// `POST /logout`: ends the request's console session.
pub async fn logout(State(auth): State<Arc<HttpAuth>>, headers: HeaderMap) -> Response {
    if let Some(id) = session_cookie(&headers) {
        auth.end_session(&id);
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, auth.cookie("", 0));
    response
}

/// The login routes, to be merged under the origin check.
pub fn routes(auth: Arc<HttpAuth>) -> axum::Router {
    use axum::routing::{get, post};
    axum::Router::new()
        .route("/login", get(whoami).post(login))
        .route("/logout", post(logout))
        .with_state(auth)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn credentials_are_read_from_every_form() {
        let basic = headers(&[("authorization", "Basic YWRtaW46cXU6ZXN0")]);
        assert!(matches!(
            credentials(&basic),
            Ok(Some(Credentials::Password { user, password })) if user == "admin" && password == "qu:est"
        ));
        let bearer = headers(&[("authorization", "Bearer sdt_abc")]);
        assert!(matches!(credentials(&bearer), Ok(Some(Credentials::Token(t))) if t == "sdt_abc"));
        let influx = headers(&[("authorization", "Token bob:pw")]);
        assert!(matches!(
            credentials(&influx),
            Ok(Some(Credentials::Password { user, .. })) if user == "bob"
        ));
        let cookie = headers(&[("cookie", "a=b; sundial_session=xyz; c=d")]);
        assert!(matches!(credentials(&cookie), Ok(Some(Credentials::Session(s))) if s == "xyz"));
        assert!(matches!(credentials(&headers(&[])), Ok(None)));
        for bad in ["Basic !!!", "Basic YWRtaW4=", "Digest x", "Negotiate"] {
            assert!(
                credentials(&headers(&[("authorization", bad)])).is_err(),
                "{bad}"
            );
        }
        let long = format!("Basic {}", "A".repeat(10_000));
        assert!(credentials(&headers(&[("authorization", &long)])).is_err());
    }

    #[test]
    fn sessions_end_with_their_users_credentials() {
        let users = Users::in_memory(Some(("admin".into(), "quest".into())));
        users.create_user("s", Some("first-pass"), false).unwrap();
        let auth = HttpAuth::new(users.clone(), true, Arc::new(Throttle::new(16)), false);
        let session = || auth.start_session("s".into(), users.credential("s").unwrap());
        let id = session();
        assert_eq!(auth.session_user(&id).as_deref(), Some("s"));
        users.set_password("s", Some("second-pass")).unwrap();
        assert_eq!(auth.session_user(&id), None, "a password change ends it");
        let id = session();
        users.grant("s", Role::Read).unwrap();
        assert_eq!(auth.session_user(&id), None, "a role change ends it");
        let id = session();
        users.drop_user("s", false).unwrap();
        users.create_user("s", Some("first-pass"), false).unwrap();
        users.grant("s", Role::Admin).unwrap();
        assert_eq!(auth.session_user(&id), None, "a user made again is another");
    }

    #[test]
    fn sessions_expire_and_are_bounded() {
        let users = Users::in_memory(Some(("admin".into(), "quest".into())));
        let auth = HttpAuth::new(users, true, Arc::new(Throttle::new(16)), false);
        let credential = auth.users.credential("admin").unwrap();
        let id = auth.start_session("admin".into(), credential);
        assert_eq!(auth.session_user(&id).as_deref(), Some("admin"));
        auth.end_session(&id);
        assert_eq!(auth.session_user(&id), None);
        for _ in 0..SESSIONS_MAX + 10 {
            auth.start_session("admin".into(), credential);
        }
        assert_eq!(auth.sessions.lock().unwrap().len(), SESSIONS_MAX);
        let cookie = auth.cookie("abc", 60);
        let text = cookie.to_str().unwrap();
        assert!(
            text.contains("HttpOnly") && text.contains("SameSite=Strict"),
            "{text}"
        );
    }

    #[test]
    fn exempt_paths_and_route_roles() {
        assert!(exempt("/ping") && exempt("/health") && exempt("/") && exempt("/app.js"));
        assert!(!exempt("/exec") && !exempt("/metrics") && !exempt("/status"));
        assert_eq!(route_needs("/write"), Some(Role::Write));
        assert_eq!(route_needs("/imp"), Some(Role::Write));
        assert_eq!(route_needs("/metrics"), Some(Role::Read));
        assert_eq!(route_needs("/exec"), None);
    }
}
