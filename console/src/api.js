// Requests to the server: /exec (QuestDB's JSON), /imp (CSV upload), /status, and the login
// (GET/POST /login, POST /logout). Every function returns a plain object and never throws for an
// HTTP error: the caller shows it.
//
// Every request goes through `send`, which adds the `X-Sundial-Console: 1` header (the server's
// 401 to it carries no `WWW-Authenticate: Basic` challenge, so the browser does not ask for a
// password itself) and tells the handler given to `onUnauthorized` about any 401 outside the
// login requests: the session ended, and the page goes back to its login form.

/** The header the server knows the console's requests by. */
export const CONSOLE_HEADER = 'X-Sundial-Console';

let unauthorized = () => {};
/** Logins and logouts so far: a 401 to a request sent before the latest one is stale (its
 * session was the old one) and is not reported. */
let changes = 0;

/** `handler()` runs whenever a request (other than the login's own) is answered 401. */
export function onUnauthorized(handler) {
  unauthorized = handler;
}

/** fetch(`path`) with the console's header and the session cookie; a 401 is reported. */
async function send(path, init = {}, { exempt = false } = {}) {
  const headers = new Headers(init.headers);
  headers.set(CONSOLE_HEADER, '1');
  const sentAfter = changes;
  const response = await fetch(path, { ...init, headers, credentials: 'same-origin' });
  if (response.status === 401 && !exempt && sentAfter === changes) unauthorized();
  return response;
}

/** Runs `query` through GET /exec. `limit` is QuestDB's "lo,hi" (1-based, inclusive).
 * Resolves to {ok, json, ms} or {ok:false, error, position, ms}. */
export async function exec(query, { limit, count = false, signal } = {}) {
  const params = new URLSearchParams({ query, timings: 'true' });
  if (limit) params.set('limit', limit);
  if (count) params.set('count', 'true');
  const started = performance.now();
  let response;
  try {
    response = await send(`exec?${params}`, { signal, headers: { Accept: 'application/json' } });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    return { ok: false, error: `request failed: ${e.message}`, position: -1, ms: performance.now() - started };
  }
  const text = await response.text();
  const ms = performance.now() - started;
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    return { ok: false, error: text.trim() || `HTTP ${response.status}`, position: -1, ms };
  }
  if (!response.ok || json.error !== undefined) {
    const position = Number.isInteger(json.position) ? json.position : -1;
    return { ok: false, error: String(json.error ?? `HTTP ${response.status}`), position, ms };
  }
  return { ok: true, json, ms };
}

/** A SQL identifier, double-quoted. */
export function quoteIdent(name) {
  return `"${String(name).replaceAll('"', '""')}"`;
}

/** The rows of a statement whose answer is small (schema queries), or throws with its error. */
export async function rows(query) {
  const r = await exec(query, { limit: '1,10000' });
  if (!r.ok) throw new Error(r.error);
  return r.json.dataset ?? [];
}

/** POST /imp with the CSV `file`; `params` are /imp's query parameters.
 * Resolves to {ok, json} or {ok:false, error}. */
export async function importCsv(file, params) {
  const form = new FormData();
  form.append('data', file, file.name);
  const query = new URLSearchParams({ ...params, fmt: 'json' });
  let response;
  try {
    response = await send(`imp?${query}`, { method: 'POST', body: form });
  } catch (e) {
    return { ok: false, error: `upload failed: ${e.message}` };
  }
  const text = await response.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    return { ok: false, error: text.trim() || `HTTP ${response.status}` };
  }
  if (!response.ok || json.status !== 'OK') {
    return { ok: false, error: String(json.status ?? json.error ?? `HTTP ${response.status}`) };
  }
  return { ok: true, json };
}

/** GET /status as JSON, or null when the server has none (or answers something else). */
export async function status() {
  try {
    const response = await send('status', { headers: { Accept: 'application/json' } });
    if (!response.ok) return null;
    const json = await response.json();
    return json && typeof json === 'object' ? json : null;
  } catch {
    return null;
  }
}

/** GET /login: {auth, user, role}, or null when the server has no login or cannot be reached. */
export async function whoami() {
  try {
    const response = await send('login', { headers: { Accept: 'application/json' } }, { exempt: true });
    if (!response.ok) return null;
    const json = await response.json();
    return json && typeof json === 'object' ? json : null;
  } catch {
    return null;
  }
}

/** POST /login with `user` and `password`. Resolves to {ok, user, role} or
 * {ok:false, status, error} (status 0: the request failed). */
export async function login(user, password) {
  let response;
  try {
    response = await send('login', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify({ user, password }),
    }, { exempt: true });
  } catch (e) {
    return { ok: false, status: 0, error: e.message };
  }
  let json = null;
  try {
    json = await response.json();
  } catch {
    // Not JSON: the status says enough.
  }
  if (!response.ok) return { ok: false, status: response.status, error: json?.error };
  changes++;
  return { ok: true, user: json?.user ?? user, role: json?.role ?? null };
}

/** POST /logout: ends the session (the server clears its cookie). Never throws. */
export async function logout() {
  changes++;
  try {
    await send('logout', { method: 'POST' }, { exempt: true });
  } catch {
    // The form shows anyway; the cookie ends with its Max-Age.
  }
}
