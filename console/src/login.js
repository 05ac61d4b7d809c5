// The login form: user name and password, POST /login, and the error line of a refused login.
// The server answers with a session cookie (HttpOnly: this page never sees it) that the
// browser then sends with every request.
//
// Invariants: one login request at a time (the button is disabled while it waits, and Enter
// does nothing meanwhile); the password field is emptied after every attempt; the error line is
// a live region, so screen readers say why a login failed.

import { login } from './api.js';
import { el, fill } from './dom.js';
import { loginFailure } from './session.js';

/** The form in `parent`; `onLoggedIn({user, role})` runs after a successful login. */
export function createLogin(parent, onLoggedIn) {
  const user = el('input', {
    type: 'text', id: 'login-user', name: 'username', autocomplete: 'username',
    autocapitalize: 'none', spellcheck: 'false', required: true, maxlength: '256',
  });
  const password = el('input', {
    type: 'password', id: 'login-password', name: 'password', autocomplete: 'current-password',
    maxlength: '4096',
  });
  const submit = el('button', { type: 'submit', id: 'login-submit', class: 'primary' }, 'Log in');
  const note = el('p', { class: 'login-note', id: 'login-note', 'aria-live': 'polite' });
  const error = el('p', { class: 'login-error error', id: 'login-error', role: 'alert' });
  let busy = false;

  const form = el('form', {
    class: 'login-form', id: 'login-form', method: 'post', 'aria-labelledby': 'login-title',
    onsubmit: (e) => {
      e.preventDefault();
      attempt();
    },
  },
  el('h1', { id: 'login-title' }, 'Log in to Sundial'),
  note,
  el('label', { for: 'login-user' }, 'User name'), user,
  el('label', { for: 'login-password' }, 'Password'), password,
  error,
  submit);
  fill(parent, form);

  async function attempt() {
    if (busy) return;
    busy = true;
    submit.disabled = true;
    submit.textContent = 'Logging in…';
    form.setAttribute('aria-busy', 'true');
    fill(error);
    const answer = await login(user.value.trim(), password.value);
    busy = false;
    submit.disabled = false;
    submit.textContent = 'Log in';
    form.removeAttribute('aria-busy');
    password.value = '';
    if (!answer.ok) {
      fill(error, loginFailure(answer.status, answer.error));
      password.focus();
      return;
    }
    fill(note);
    onLoggedIn({ user: answer.user, role: answer.role });
  }

  return {
    /** Shows `message` above the fields (or none) and puts the cursor where typing starts. */
    show(message) {
      fill(note, message ?? '');
      fill(error);
      (user.value ? password : user).focus();
    },
  };
}
