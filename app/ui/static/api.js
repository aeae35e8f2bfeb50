// The public HTTP API, with the signed-in key as an Authorization: Bearer header. The key
// lives in sessionStorage only: gone when the tab closes, never in a URL or a cookie.

const STORAGE_KEY = "spamsift.key";

export const session = {
  get key() {
    return sessionStorage.getItem(STORAGE_KEY);
  },
  set key(value) {
    if (value) sessionStorage.setItem(STORAGE_KEY, value);
    else sessionStorage.removeItem(STORAGE_KEY);
  },
};

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// The page is served at <base>/ui/: the API sits at <base>/, also behind a path prefix.
const base = new URL("../", document.baseURI);

/** Call the API; return the parsed JSON answer (null for 204) or throw ApiError. */
export async function call(method, path, body, { key = session.key } = {}) {
  const headers = { Accept: "application/json" };
  if (key) headers.Authorization = `Bearer ${key}`;
  const init = { method, headers, cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(new URL(path.replace(/^\//, ""), base), init);
  } catch (error) {
    throw new ApiError(0, "network", `the server did not answer (${error.message})`);
  }
  if (response.status === 204) return null;
  let answer = null;
  try {
    answer = await response.json();
  } catch {
    answer = null;
  }
  if (!response.ok) {
    const error = answer && answer.error;
    const code = error ? error.code : "http_" + response.status;
    const message = error ? error.message : `HTTP ${response.status}`;
    if (response.status === 401 && key && key === session.key) {
      window.dispatchEvent(new CustomEvent("spamsift:refused", { detail: message }));
    }
    throw new ApiError(response.status, code, message);
  }
  return answer;
}

export const get = (path, options) => call("GET", path, undefined, options);
export const post = (path, body, options) => call("POST", path, body, options);
export const patch = (path, body, options) => call("PATCH", path, body, options);
export const del = (path, options) => call("DELETE", path, undefined, options);

export const modelPath = (name) => `v1/models/${encodeURIComponent(name)}`;
