//! The user store: every user's role and credentials, kept in `<data-dir>/.users.json`.
//!
//! ```json
//! {"format": 1, "users": [
//!   {"name": "bob", "role": "write",
//!    "password": "SCRAM-SHA-256$4096:<salt>$<StoredKey>:<ServerKey>",
//!    "rest_tokens": ["<sha256 hex>", ...],
//!    "ilp_key": {"x": "<base64url>", "y": "<base64url>"}}]}
//! ```
//!
//! Crash safety: a change writes the whole store to `.users.json.tmp`, fsyncs it, renames it
//! over `.users.json` and fsyncs the directory, then answers. A crash before the rename leaves
//! the old file (and a temporary file that opening deletes); after it, the new one. Changes
//! are serialised, and readers see the old state until the new one is on disk.
//!
//! A file that cannot be read as written here stops the server from starting rather than
//! losing its users silently. The built-in admin (from the server's flags) is never stored.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use p256::ecdsa::VerifyingKey;
use serde_json::{Value, json};

use crate::error::{AuthError, Result};
use crate::ilp_key::{self, IlpKey};
use crate::role::{Caller, Role};
use crate::secret::{self, ScramSecret, check_password, credentials_digest, token_digest};

/// The store's file in the data directory.
pub const USERS_FILE: &str = ".users.json";
const TEMP_FILE: &str = ".users.json.tmp";
const FORMAT: u64 = 1;
/// The longest user name, in bytes.
pub const NAME_BYTES_MAX: usize = 63;
/// Users the store holds at most.
pub const USERS_MAX: usize = 10_000;
/// Bearer tokens one user holds at most.
pub const TOKENS_PER_USER_MAX: usize = 100;
/// The largest user file accepted, in bytes.
const FILE_BYTES_MAX: u64 = 64 << 20;
/// Verified Basic credentials remembered, so a client sending them with each request pays the
/// password derivation once.
const VERIFIED_MAX: usize = 4096;

/// One user, as stored.
#[derive(Debug, Clone)]
struct User {
    /// The version of the user's credentials: drawn at random when the user is made (or the
    /// store opened), drawn again at each password or role change. Sessions and connections
    /// remember it at login and end when it differs (see [`Users::credential`]); a user made
    /// again under a dropped one's name draws a new one. Kept in memory only, as sessions are.
    credential: u64,
    role: Option<Role>,
    password: Option<ScramSecret>,
    /// SHA-256 digests (hex) of the user's bearer tokens.
    tokens: Vec<String>,
    ilp_key: Option<PublicKey>,
}

#[derive(Debug, Clone)]
struct PublicKey {
    x: String,
    y: String,
    key: VerifyingKey,
}

#[derive(Debug, Clone, Default)]
struct State {
    users: BTreeMap<String, User>,
    /// Token digest → user.
    tokens: HashMap<String, String>,
    /// Bumped by every change: verified credentials of an older generation are checked again.
    generation: u64,
}

/// One user, as `SHOW USERS` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub role: Option<Role>,
    pub password: bool,
    pub rest_tokens: usize,
    pub ilp_key: bool,
    pub builtin: bool,
}

struct Builtin {
    name: String,
    password: ScramSecret,
    /// Its credential version: SQL cannot change the built-in admin, so this never changes.
    credential: u64,
}

/// Every user; shared by all listeners.
pub struct Users {
    /// `None`: kept in memory only.
    dir: Option<PathBuf>,
    builtin: Option<Builtin>,
    state: RwLock<Arc<State>>,
    /// Held by a change from reading the state to installing the new one.
    changing: Mutex<()>,
    /// Digests of Basic credentials verified at a generation.
    verified: Mutex<HashMap<[u8; 32], u64>>,
}

impl Users {
    /// Opens the store of a data directory (none there: no users but the built-in admin).
    pub fn open(data_dir: &Path, builtin_admin: Option<(String, String)>) -> Result<Arc<Users>> {
        let temp = data_dir.join(TEMP_FILE);
        match std::fs::remove_file(&temp) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(AuthError::Io(format!("{}: {e}", temp.display()))),
        }
        let path = data_dir.join(USERS_FILE);
        let state = match std::fs::metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => State::default(),
            Err(e) => return Err(AuthError::Io(format!("{}: {e}", path.display()))),
            Ok(meta) if meta.len() > FILE_BYTES_MAX => {
                return Err(AuthError::Corrupt(format!(
                    "{} is {} bytes, more than a user store can be",
                    path.display(),
                    meta.len()
                )));
            }
            Ok(_) => {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| AuthError::Io(format!("{}: {e}", path.display())))?;
                decode(&text).map_err(|e| AuthError::Corrupt(format!("{}: {e}", path.display())))?
            }
        };
        Users::with_state(Some(data_dir.to_path_buf()), builtin_admin, state)
    }

    /// A store in memory only (tests, and engines without a data directory of their own).
    pub fn in_memory(builtin_admin: Option<(String, String)>) -> Arc<Users> {
        match Users::with_state(None, builtin_admin, State::default()) {
            Ok(users) => users,
            Err(e) => panic!("in-memory user store: {e}"),
        }
    }

    fn with_state(
        dir: Option<PathBuf>,
        builtin_admin: Option<(String, String)>,
        state: State,
    ) -> Result<Arc<Users>> {
        let builtin = match builtin_admin {
            Some((name, password)) => {
                check_name(&name)?;
                check_password(&password).map_err(|e| {
                    AuthError::Invalid(format!("the built-in admin's password: {e}"))
                })?;
                if state.users.contains_key(&name) {
                    return Err(AuthError::Invalid(format!(
                        "the built-in admin '{name}' has the name of a stored user; choose \
                         another --admin-user"
                    )));
                }
                Some(Builtin {
                    password: ScramSecret::new(&password),
                    name,
                    credential: rand::random(),
                })
            }
            None => None,
        };
        Ok(Arc::new(Users {
            dir,
            builtin,
            state: RwLock::new(Arc::new(state)),
            changing: Mutex::new(()),
            verified: Mutex::new(HashMap::new()),
        }))
    }

    fn state(&self) -> Arc<State> {
        self.state.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether any user can log in as an admin (the built-in one or a stored one).
    pub fn has_admin(&self) -> bool {
        self.builtin.is_some()
            || self
                .state()
                .users
                .values()
                .any(|u| u.role == Some(Role::Admin) && u.password.is_some())
    }

    /// The user's current role (`None` for an unknown user or one without a role).
    pub fn role(&self, user: &str) -> Option<Role> {
        if self.is_builtin(user) {
            return Some(Role::Admin);
        }
        self.state().users.get(user).and_then(|u| u.role)
    }

    pub fn exists(&self, user: &str) -> bool {
        self.is_builtin(user) || self.state().users.contains_key(user)
    }

    fn is_builtin(&self, user: &str) -> bool {
        self.builtin.as_ref().is_some_and(|b| b.name == user)
    }

    /// The version of the user's credentials now (`None` for an unknown user): it changes
    /// with the user's password or role and when the user is dropped, so a session that
    /// remembers it from its login ([`Caller::session`]) can tell it is out of date.
    pub fn credential(&self, user: &str) -> Option<u64> {
        if let Some(b) = self.builtin.as_ref().filter(|b| b.name == user) {
            return Some(b.credential);
        }
        self.state().users.get(user).map(|u| u.credential)
    }

    /// Whether `caller` may do what needs `needed`, by its role now; a session whose user's
    /// credentials changed since its login is refused ([`AuthError::Expired`]).
    pub fn authorize(&self, caller: &Caller, needed: Role) -> Result<()> {
        let Some(user) = caller.name() else {
            return Ok(());
        };
        if let Some(logged_in) = caller.credential()
            && self.credential(user) != Some(logged_in)
        {
            let user = user.to_string();
            return Err(if self.exists(&user) {
                AuthError::Expired(user)
            } else {
                AuthError::Gone(user)
            });
        }
        if self.is_builtin(user) {
            return Ok(());
        }
        let state = self.state();
        let Some(stored) = state.users.get(user) else {
            return Err(AuthError::Gone(user.to_string()));
        };
        match stored.role {
            Some(role) if role >= needed => Ok(()),
            has => Err(AuthError::Denied {
                user: user.to_string(),
                has,
                needed,
            }),
        }
    }

    /// The user's password verifier, for a SCRAM login.
    pub fn scram_secret(&self, user: &str) -> Option<ScramSecret> {
        if let Some(b) = self.builtin.as_ref().filter(|b| b.name == user) {
            return Some(b.password.clone());
        }
        self.state().users.get(user)?.password.clone()
    }

    /// Whether `password` is known to be `user`'s without deriving anything: the pair was
    /// verified since the last change to the store. A cheap first try before
    /// [`Users::verify_password`].
    pub fn verified_before(&self, user: &str, password: &str) -> bool {
        let digest = credentials_digest(user, password);
        let generation = self.state().generation;
        let verified = self.verified.lock().unwrap_or_else(|e| e.into_inner());
        verified.get(&digest) == Some(&generation)
    }

    /// Whether `password` is `user`'s. Costs one password derivation the first time a pair is
    /// seen since the last change to the store.
    pub fn verify_password(&self, user: &str, password: &str) -> bool {
        if self.verified_before(user, password) {
            return true;
        }
        let digest = credentials_digest(user, password);
        // Read before the verifier: a change in between leaves an entry of an older
        // generation, which is never taken.
        let generation = self.state().generation;
        let ok = self
            .scram_secret(user)
            .is_some_and(|secret| secret.verify(password));
        if ok {
            let mut verified = self.verified.lock().unwrap_or_else(|e| e.into_inner());
            if verified.len() >= VERIFIED_MAX {
                verified.clear();
            }
            verified.insert(digest, generation);
        }
        ok
    }

    /// The user a bearer token belongs to.
    pub fn verify_token(&self, token: &str) -> Option<String> {
        if !token.starts_with(secret::TOKEN_PREFIX) || token.len() > 128 {
            return None;
        }
        self.state().tokens.get(&token_digest(token)).cloned()
    }

    /// Whether `signature` signs `challenge` with the ILP key `key_id`.
    pub fn verify_ilp(&self, key_id: &str, challenge: &[u8], signature: &[u8]) -> bool {
        let state = self.state();
        let Some(key) = state.users.get(key_id).and_then(|u| u.ilp_key.as_ref()) else {
            return false;
        };
        ilp_key::verify(&key.key, challenge, signature)
    }

    /// Every user, the built-in admin first.
    pub fn list(&self) -> Vec<UserInfo> {
        let mut out = Vec::new();
        if let Some(b) = &self.builtin {
            out.push(UserInfo {
                name: b.name.clone(),
                role: Some(Role::Admin),
                password: true,
                rest_tokens: 0,
                ilp_key: false,
                builtin: true,
            });
        }
        for (name, u) in &self.state().users {
            out.push(UserInfo {
                name: name.clone(),
                role: u.role,
                password: u.password.is_some(),
                rest_tokens: u.tokens.len(),
                ilp_key: u.ilp_key.is_some(),
                builtin: false,
            });
        }
        out
    }

    pub fn create_user(
        &self,
        name: &str,
        password: Option<&str>,
        if_not_exists: bool,
    ) -> Result<()> {
        check_name(name)?;
        if let Some(p) = password {
            check_password(p)?;
        }
        if self.is_builtin(name) {
            return if if_not_exists {
                Ok(())
            } else {
                Err(AuthError::UserExists(name.into()))
            };
        }
        let secret = password.map(ScramSecret::new);
        self.change(|state| {
            if state.users.contains_key(name) {
                return if if_not_exists {
                    Ok(false)
                } else {
                    Err(AuthError::UserExists(name.into()))
                };
            }
            if state.users.len() >= USERS_MAX {
                return Err(AuthError::Invalid(format!(
                    "there are already {USERS_MAX} users, the most a server keeps"
                )));
            }
            state.users.insert(
                name.to_string(),
                User {
                    credential: rand::random(),
                    role: None,
                    password: secret,
                    tokens: Vec::new(),
                    ilp_key: None,
                },
            );
            Ok(true)
        })
    }

    pub fn drop_user(&self, name: &str, if_exists: bool) -> Result<()> {
        self.not_builtin(name)?;
        self.change(|state| match state.users.remove(name) {
            Some(_) => Ok(true),
            None if if_exists => Ok(false),
            None => Err(AuthError::NoSuchUser(name.into())),
        })
    }

    /// Sets (or with `None` removes) a user's password.
    pub fn set_password(&self, name: &str, password: Option<&str>) -> Result<()> {
        self.not_builtin(name)?;
        if let Some(p) = password {
            check_password(p)?;
        }
        let secret = password.map(ScramSecret::new);
        self.change_user(name, |user| {
            user.password = secret;
            user.credential = rand::random();
            Ok(())
        })
    }

    /// Raises the user's role to at least `role`.
    pub fn grant(&self, name: &str, role: Role) -> Result<()> {
        self.not_builtin(name)?;
        self.change_user(name, |user| {
            let new = Some(user.role.map_or(role, |r| r.max(role)));
            if user.role != new {
                user.role = new;
                user.credential = rand::random();
            }
            Ok(())
        })
    }

    /// Takes `role` away: a user holding it or more is left with the role below it.
    pub fn revoke(&self, name: &str, role: Role) -> Result<()> {
        self.not_builtin(name)?;
        self.change_user(name, |user| {
            if user.role.is_some_and(|r| r >= role) {
                user.role = role.below();
                user.credential = rand::random();
            }
            Ok(())
        })
    }

    /// A new bearer token for the user; only its digest is kept.
    pub fn create_rest_token(&self, name: &str) -> Result<String> {
        self.not_builtin(name)?;
        let token = secret::new_token();
        let digest = token_digest(&token);
        self.change_user(name, |user| {
            if user.tokens.len() >= TOKENS_PER_USER_MAX {
                return Err(AuthError::Invalid(format!(
                    "user '{name}' already has {TOKENS_PER_USER_MAX} tokens; DROP TOKEN TYPE \
                     REST removes them"
                )));
            }
            user.tokens.push(digest);
            Ok(())
        })?;
        Ok(token)
    }

    pub fn drop_rest_tokens(&self, name: &str) -> Result<()> {
        self.not_builtin(name)?;
        self.change_user(name, |user| {
            user.tokens.clear();
            Ok(())
        })
    }

    /// A new ILP key pair for the user (replacing any); only the public point is kept.
    pub fn create_ilp_key(&self, name: &str) -> Result<IlpKey> {
        self.not_builtin(name)?;
        let key = ilp_key::generate(name);
        let public = ilp_key::public_key(&key.public_x, &key.public_y)?;
        self.change_user(name, |user| {
            user.ilp_key = Some(PublicKey {
                x: key.public_x.clone(),
                y: key.public_y.clone(),
                key: public,
            });
            Ok(())
        })?;
        Ok(key)
    }

    pub fn drop_ilp_key(&self, name: &str) -> Result<()> {
        self.not_builtin(name)?;
        self.change_user(name, |user| {
            user.ilp_key = None;
            Ok(())
        })
    }

    /// Writes the stored users into `dir` (a backup), crash-safely as a change would.
    pub fn copy_to(&self, dir: &Path) -> Result<()> {
        let _changing = self.changing.lock().unwrap_or_else(|e| e.into_inner());
        save(dir, &self.state())
    }

    fn not_builtin(&self, name: &str) -> Result<()> {
        if self.is_builtin(name) {
            return Err(AuthError::Builtin(name.into()));
        }
        Ok(())
    }

    fn change_user(&self, name: &str, f: impl FnOnce(&mut User) -> Result<()>) -> Result<()> {
        self.change(|state| {
            let user = state
                .users
                .get_mut(name)
                .ok_or_else(|| AuthError::NoSuchUser(name.into()))?;
            f(user)?;
            Ok(true)
        })
    }

    /// Applies `f` to a copy of the state; when it reports a change, saves the copy and only
    /// then installs it.
    fn change(&self, f: impl FnOnce(&mut State) -> Result<bool>) -> Result<()> {
        let _changing = self.changing.lock().unwrap_or_else(|e| e.into_inner());
        let mut state = (*self.state()).clone();
        if !f(&mut state)? {
            return Ok(());
        }
        state.generation += 1;
        state.tokens = state
            .users
            .iter()
            .flat_map(|(name, u)| u.tokens.iter().map(move |t| (t.clone(), name.clone())))
            .collect();
        if let Some(dir) = &self.dir {
            save(dir, &state)?;
        }
        *self.state.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(state);
        Ok(())
    }
}

/// A name is 1 to [`NAME_BYTES_MAX`] bytes of letters, digits, `_`, `-`, `.` and `@`,
/// starting with a letter or `_`.
fn check_name(name: &str) -> Result<()> {
    let first_ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let ok = first_ok
        && name.len() <= NAME_BYTES_MAX
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '@'));
    if ok {
        return Ok(());
    }
    let shown: String = name.chars().take(NAME_BYTES_MAX + 1).collect();
    Err(AuthError::Invalid(format!(
        "invalid user name '{}': a name has 1 to {NAME_BYTES_MAX} letters, digits, '_', '-', \
         '.' or '@' and starts with a letter or '_'",
        shown.escape_default()
    )))
}

fn encode(state: &State) -> String {
    let users: Vec<Value> = state
        .users
        .iter()
        .map(|(name, u)| {
            json!({
                "name": name,
                "role": u.role.map(Role::name),
                "password": u.password.as_ref().map(ScramSecret::to_text),
                "rest_tokens": u.tokens,
                "ilp_key": u.ilp_key.as_ref().map(|k| json!({"x": k.x, "y": k.y})),
            })
        })
        .collect();
    let doc = json!({"format": FORMAT, "users": users});
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    text
}

fn decode(text: &str) -> std::result::Result<State, String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("is not JSON: {e}"))?;
    let format = doc.get("format").and_then(Value::as_u64);
    if format != Some(FORMAT) {
        return Err(format!(
            "has format {}, and this Sundial reads format {FORMAT} (a newer Sundial wrote it?)",
            doc.get("format").map_or("none".into(), |f| f.to_string())
        ));
    }
    let list = doc
        .get("users")
        .and_then(Value::as_array)
        .ok_or("has no user list")?;
    let mut state = State::default();
    for entry in list {
        let name = entry
            .get("name")
            .and_then(Value::as_str)
            .ok_or("has a user without a name")?;
        check_name(name).map_err(|e| e.to_string())?;
        let text_of = |key: &str| -> std::result::Result<Option<&str>, String> {
            match entry.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.as_str())),
                Some(other) => Err(format!("user '{name}': {key} is {other}, not text")),
            }
        };
        let role = match text_of("role")? {
            None => None,
            Some(r) => Some(Role::parse(r).ok_or(format!("user '{name}': unknown role '{r}'"))?),
        };
        let password = text_of("password")?
            .map(ScramSecret::from_text)
            .transpose()
            .map_err(|e| format!("user '{name}': {e}"))?;
        let mut tokens = Vec::new();
        if let Some(list) = entry.get("rest_tokens").and_then(Value::as_array) {
            for t in list {
                let digest = t
                    .as_str()
                    .filter(|d| d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit()));
                tokens.push(
                    digest
                        .ok_or(format!("user '{name}': a token digest is malformed"))?
                        .to_string(),
                );
            }
        }
        let ilp_key = match entry.get("ilp_key") {
            None | Some(Value::Null) => None,
            Some(key) => {
                let (Some(x), Some(y)) = (
                    key.get("x").and_then(Value::as_str),
                    key.get("y").and_then(Value::as_str),
                ) else {
                    return Err(format!("user '{name}': the ILP key lacks x or y"));
                };
                let verifying =
                    ilp_key::public_key(x, y).map_err(|e| format!("user '{name}': {e}"))?;
                Some(PublicKey {
                    x: x.into(),
                    y: y.into(),
                    key: verifying,
                })
            }
        };
        for t in &tokens {
            state.tokens.insert(t.clone(), name.to_string());
        }
        let user = User {
            credential: rand::random(),
            role,
            password,
            tokens,
            ilp_key,
        };
        if state.users.insert(name.to_string(), user).is_some() {
            return Err(format!("lists user '{name}' twice"));
        }
    }
    Ok(state)
}

/// Writes the store crash-safely (see the module docs).
fn save(dir: &Path, state: &State) -> Result<()> {
    let io = |what: &Path, e: std::io::Error| AuthError::Io(format!("{}: {e}", what.display()));
    let temp = dir.join(TEMP_FILE);
    let path = dir.join(USERS_FILE);
    {
        use std::io::Write as _;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            // Only the server's user reads credentials' verifiers.
            options.mode(0o600);
        }
        let mut file = options.open(&temp).map_err(|e| io(&temp, e))?;
        file.write_all(encode(state).as_bytes())
            .map_err(|e| io(&temp, e))?;
        file.sync_all().map_err(|e| io(&temp, e))?;
    }
    std::fs::rename(&temp, &path).map_err(|e| io(&path, e))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io(dir, e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admin() -> Option<(String, String)> {
        Some(("admin".into(), "quest".into()))
    }

    #[test]
    fn roles_grant_revoke_and_authorize() {
        let users = Users::in_memory(admin());
        users.create_user("bob", Some("pw"), false).unwrap();
        let bob = Caller::user("bob");
        assert!(matches!(
            users.authorize(&bob, Role::Read),
            Err(AuthError::Denied { has: None, .. })
        ));
        users.grant("bob", Role::Read).unwrap();
        users.authorize(&bob, Role::Read).unwrap();
        let e = users.authorize(&bob, Role::Write).unwrap_err();
        assert_eq!(e.sqlstate(), "42501");
        assert!(e.to_string().contains("GRANT WRITE TO bob"), "{e}");
        users.grant("bob", Role::Admin).unwrap();
        users.grant("bob", Role::Read).unwrap();
        assert_eq!(users.role("bob"), Some(Role::Admin));
        users.revoke("bob", Role::Admin).unwrap();
        assert_eq!(users.role("bob"), Some(Role::Write));
        users.revoke("bob", Role::Read).unwrap();
        assert_eq!(users.role("bob"), None);
        users.drop_user("bob", false).unwrap();
        assert!(matches!(
            users.authorize(&bob, Role::Read),
            Err(AuthError::Gone(_))
        ));
        users.authorize(&Caller::trusted(), Role::Admin).unwrap();
        users
            .authorize(&Caller::user("admin"), Role::Admin)
            .unwrap();
    }

    #[test]
    fn mistakes_are_clear_errors() {
        let users = Users::in_memory(admin());
        users.create_user("bob", None, false).unwrap();
        assert!(matches!(
            users.create_user("bob", None, false),
            Err(AuthError::UserExists(_))
        ));
        users.create_user("bob", None, true).unwrap();
        assert!(matches!(
            users.drop_user("carol", false),
            Err(AuthError::NoSuchUser(_))
        ));
        users.drop_user("carol", true).unwrap();
        assert!(matches!(
            users.set_password("admin", Some("x")),
            Err(AuthError::Builtin(_))
        ));
        assert!(matches!(
            users.drop_user("admin", true),
            Err(AuthError::Builtin(_))
        ));
        for bad in ["", "1abc", "a b", "a'b", "a\nb", "ü", &"x".repeat(64)] {
            let e = users.create_user(bad, None, false).unwrap_err();
            assert!(e.to_string().contains("invalid user name"), "{e}");
        }
        assert!(users.create_user("eve", Some(""), false).is_err());
    }

    #[test]
    fn credentials_verify() {
        let users = Users::in_memory(admin());
        assert!(users.verify_password("admin", "quest"));
        assert!(!users.verify_password("admin", "guess"));
        users.create_user("bob", Some("s3cret"), false).unwrap();
        assert!(!users.verified_before("bob", "s3cret"));
        assert!(users.verify_password("bob", "s3cret"));
        assert!(users.verified_before("bob", "s3cret"));
        assert!(users.verify_password("bob", "s3cret"));
        users.set_password("bob", Some("other")).unwrap();
        assert!(!users.verify_password("bob", "s3cret"));
        assert!(users.verify_password("bob", "other"));
        users.set_password("bob", None).unwrap();
        assert!(!users.verify_password("bob", "other"));
        assert!(!users.verify_password("nobody", ""));

        let token = users.create_rest_token("bob").unwrap();
        assert_eq!(users.verify_token(&token).as_deref(), Some("bob"));
        assert_eq!(users.verify_token("sdt_forged"), None);
        users.drop_rest_tokens("bob").unwrap();
        assert_eq!(users.verify_token(&token), None);
    }

    #[test]
    fn the_store_survives_reopening_and_holds_no_secret() {
        let dir = tempfile::tempdir().unwrap();
        let users = Users::open(dir.path(), admin()).unwrap();
        users
            .create_user("bob", Some("hunter2-secret"), false)
            .unwrap();
        users.grant("bob", Role::Write).unwrap();
        let token = users.create_rest_token("bob").unwrap();
        let key = users.create_ilp_key("bob").unwrap();
        drop(users);
        let text = std::fs::read_to_string(dir.path().join(USERS_FILE)).unwrap();
        for secret in ["hunter2-secret", "quest", &token, &key.private_d] {
            assert!(!text.contains(secret), "{secret} stored in clear");
        }
        let users = Users::open(dir.path(), admin()).unwrap();
        assert_eq!(users.role("bob"), Some(Role::Write));
        assert!(users.verify_password("bob", "hunter2-secret"));
        assert_eq!(users.verify_token(&token).as_deref(), Some("bob"));
        assert!(users.list().iter().any(|u| u.name == "bob" && u.ilp_key));
        // A copy (a backup) opens with the same users.
        let copy = tempfile::tempdir().unwrap();
        users.copy_to(copy.path()).unwrap();
        let copied = Users::open(copy.path(), None).unwrap();
        assert!(copied.verify_password("bob", "hunter2-secret"));
        // The built-in admin's name may not shadow a stored user.
        drop(users);
        assert!(Users::open(dir.path(), Some(("bob".into(), "x".into()))).is_err());
    }

    #[test]
    fn a_crash_before_the_rename_keeps_the_old_store() {
        let dir = tempfile::tempdir().unwrap();
        let users = Users::open(dir.path(), None).unwrap();
        users.create_user("bob", None, false).unwrap();
        drop(users);
        std::fs::write(dir.path().join(TEMP_FILE), "{half a fi").unwrap();
        let users = Users::open(dir.path(), None).unwrap();
        assert!(users.exists("bob"));
        assert!(!dir.path().join(TEMP_FILE).exists());
    }

    #[test]
    fn damaged_files_stop_the_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(USERS_FILE);
        for (text, says) in [
            ("", "not JSON"),
            ("[]", "format"),
            ("{\"format\": 2, \"users\": []}", "format 2"),
            ("{\"format\": 1}", "no user list"),
            ("{\"format\": 1, \"users\": [{}]}", "without a name"),
            (
                "{\"format\": 1, \"users\": [{\"name\": \"a\", \"role\": \"god\"}]}",
                "unknown role",
            ),
            (
                "{\"format\": 1, \"users\": [{\"name\": \"a\"}, {\"name\": \"a\"}]}",
                "twice",
            ),
            (
                "{\"format\": 1, \"users\": [{\"name\": \"a\", \"password\": \"plain\"}]}",
                "malformed password",
            ),
        ] {
            std::fs::write(&path, text).unwrap();
            let e = Users::open(dir.path(), None).err().expect(text);
            assert!(e.to_string().contains(says), "{text}: {e}");
        }
    }
}
