// Requests to the server: /exec (QuestDB's JSON), /imp (CSV upload) and /status.
// Every function returns a plain object and never throws for an HTTP error: the caller shows it.

/** Runs `query` through GET /exec. `limit` is QuestDB's "lo,hi" (1-based, inclusive).
 * Resolves to {ok, json, ms} or {ok:false, error, position, ms}. */
export async function exec(query, { limit, count = false, signal } = {}) {
  const params = new URLSearchParams({ query, timings: 'true' });
  if (limit) params.set('limit', limit);
  if (count) params.set('count', 'true');
  const started = performance.now();
  let response;
  try {
    response = await fetch(`exec?${params}`, { signal, headers: { Accept: 'application/json' } });
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
    response = await fetch(`imp?${query}`, { method: 'POST', body: form });
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
    const response = await fetch('status', { headers: { Accept: 'application/json' } });
    if (!response.ok) return null;
    const json = await response.json();
    return json && typeof json === 'object' ? json : null;
  } catch {
    return null;
  }
}
