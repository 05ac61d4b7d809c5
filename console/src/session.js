// The console's login state, without the DOM (console/test tests it): what GET /login's answer
// means for the page, and what a failed POST /login tells the person at the form.
//
// Invariants: the login form shows only when the server says credentials are required and names
// no user; an answer the console cannot read (no /login on an older server, a network failure)
// shows the app, whose own requests then show their errors; the log-out button shows only for a
// logged-in user of a server that requires credentials.

/** The roles a user may have, weakest first. */
export const ROLES = ['read', 'write', 'admin'];

/** Longest user name and role shown in the header, in characters. */
const NAME_CHARS_MAX = 64;

/** What the page shows for GET /login's answer `answer` (its JSON, or null when there was none):
 * {view: 'form' | 'app', user: string | null, role: string | null, logout: boolean}. */
export function sessionView(answer) {
  if (!answer || typeof answer !== 'object' || Array.isArray(answer)) {
    return { view: 'app', user: null, role: null, logout: false };
  }
  const user = typeof answer.user === 'string' && answer.user !== '' ? answer.user.slice(0, NAME_CHARS_MAX) : null;
  const role = ROLES.includes(answer.role) ? answer.role : null;
  if (answer.auth !== 'required') return { view: 'app', user, role, logout: false };
  if (user === null) return { view: 'form', user: null, role: null, logout: false };
  return { view: 'app', user, role, logout: true };
}

/** The header's label of a logged-in user: "bob (read)", or "bob (no role)". */
export function userLabel(user, role) {
  return `${user} (${role ?? 'no role'})`;
}

/** The line the form shows after a failed POST /login: `status` is the HTTP status (0: the
 * request failed), `error` the server's JSON error or the network error's message. */
export function loginFailure(status, error) {
  const said = typeof error === 'string' && error.trim() ? error.trim().slice(0, 500) : '';
  if (status === 401) return 'wrong user name or password';
  if (status === 0) return `cannot reach the server${said ? `: ${said}` : ''}`;
  if (status === 404) return 'this server has no login (GET /login is missing)';
  return said || `login failed: HTTP ${status}`;
}

/** The message above the form when a request was refused (401) while the console was in use. */
export const SESSION_ENDED = 'Your session has ended (or your user was removed): log in again.';
