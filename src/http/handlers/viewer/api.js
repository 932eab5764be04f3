// Every request the page makes goes through here, so the token is sent on
// all of them and every failure becomes the same kind of error object.

const TOKEN_KEY = "zarrd-token";

export function getToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  } catch {
    return "";
  }
}

export function setToken(token) {
  try {
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // Storage can be disabled; the token then lasts until the page closes.
  }
  memoryToken = token;
}

// Used when sessionStorage throws (private modes, sandboxed frames).
let memoryToken = "";

function currentToken() {
  return getToken() || memoryToken;
}

/** A failed request, with what the server said about it. */
export class ApiError extends Error {
  constructor({ status, code, message, requestId = null, url = "" }) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.requestId = requestId;
    this.url = url;
  }

  get isAuth() {
    return this.status === 401 || this.status === 403;
  }
}

export function isAbort(error) {
  return error && error.name === "AbortError";
}

const listeners = { error: new Set(), success: new Set() };

/**
 * kind "error" gets every reported failure; "success" gets the successes of
 * primary requests (the ones whose success means an earlier error is over).
 */
export function on(kind, fn) {
  listeners[kind].add(fn);
}

function emit(kind, value) {
  for (const fn of listeners[kind]) fn(value);
}

/** Encodes each segment of a node path, keeping the slashes. */
// `.` and `..` are escaped so the browser sends them as names, not as
// steps up the URL (the server refuses them as store keys).
export function encodeSegment(segment) {
  return segment === "." || segment === ".." ? segment.replace(/\./g, "%2E") : encodeURIComponent(segment);
}

export function encodePath(path) {
  return path
    .split("/")
    .filter((s) => s !== "")
    .map(encodeSegment)
    .join("/");
}

// Selections stay readable in URLs: ':' and ',' are legal in a query.
function encodeParam(value) {
  return encodeURIComponent(String(value)).replace(/%3A/gi, ":").replace(/%2C/gi, ",");
}

export function query(params) {
  const parts = [];
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === "") continue;
    parts.push(`${encodeURIComponent(k)}=${encodeParam(v)}`);
  }
  return parts.length ? `?${parts.join("&")}` : "";
}

function withPath(base, path) {
  const p = encodePath(path);
  return p ? `${base}/${p}` : base;
}

export const urls = {
  tree: (after) => (after === null || after === undefined ? "/api/v1/tree" : `/api/v1/tree?after=${encodeParam(after)}`),
  meta: (path) => withPath("/api/v1/meta", path),
  data: (path, params) => `${withPath("/api/v1/data", path)}${query(params)}`,
  preview: (path) => withPath("/api/v1/preview", path),
  tiles: (path, params) => `${withPath("/tiles", path)}/WebMercatorQuad/{z}/{x}/{y}.png${query(params)}`,
  legend: (path, params) => `${withPath("/tiles", path)}/legend.png${query(params)}`,
  key: (key) => `/zarr/${encodePath(key)}`,
  listing: (prefix) => {
    const p = encodePath(prefix);
    return p ? `/zarr/${p}/` : "/zarr/";
  },
  settings: () => "/viewer/settings.json",
};

async function errorFrom(response, url) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    // Not JSON: a proxy in between, or a body cut short.
  }
  const e = body && body.error;
  return new ApiError({
    status: response.status,
    code: (e && e.code) || `http_${response.status}`,
    message: (e && e.message) || response.statusText || "request failed",
    requestId: (e && e.request_id) || response.headers.get("x-request-id"),
    url,
  });
}

/**
 * fetch() with the token. Resolves to the Response when it is a success;
 * otherwise throws an ApiError, which is reported to the page unless
 * `report` is false. `primary` successes clear the page's error.
 */
export async function request(url, { signal, report = true, primary = false, accept } = {}) {
  const headers = {};
  const token = currentToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  if (accept) headers.Accept = accept;
  let response;
  try {
    response = await fetch(url, { headers, signal });
  } catch (err) {
    if (isAbort(err)) throw err;
    const e = new ApiError({
      status: 0,
      code: "network_error",
      message: `the server could not be reached (${err.message})`,
      url,
    });
    if (report) emit("error", e);
    throw e;
  }
  if (!response.ok) {
    const e = await errorFrom(response, url);
    if (report) emit("error", e);
    throw e;
  }
  if (primary) emit("success", url);
  return response;
}

// Integers beyond 2^53 keep their digits: the reviver sees the source text
// where the browser supports it (JSON.parse source access).
function reviver(_key, value, context) {
  if (typeof value === "number" && !Number.isSafeInteger(value) && Number.isInteger(value)) {
    if (context && typeof context.source === "string") return BigInt(context.source);
  }
  return value;
}

export async function getJSON(url, options = {}) {
  const response = await request(url, { accept: "application/json", ...options });
  const text = await response.text();
  return JSON.parse(text, reviver);
}

/**
 * A single element: the parsed value and its text exactly as the server
 * wrote it (so 64-bit integers and float spellings survive).
 */
export async function getElement(path, select, options = {}) {
  const url = urls.data(path, { select, format: "json" });
  const response = await request(url, { accept: "application/json", ...options });
  const text = await response.text();
  const doc = JSON.parse(text, reviver);
  // The data is written last; coordinates before it have `data` keys too.
  const at = text.lastIndexOf('"data":');
  const raw = at >= 0 ? text.slice(at + 7, text.lastIndexOf("}")).trim() : JSON.stringify(doc.data);
  return { value: doc.data, raw, dtype: doc.dtype };
}

/** Fetches an image and answers a blob URL the caller must revoke. */
export async function getBlobURL(url, options = {}) {
  const response = await request(url, options);
  const blob = await response.blob();
  return { url: URL.createObjectURL(blob), headers: response.headers };
}
