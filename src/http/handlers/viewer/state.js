// The view's state and its URL: what is open and how it is shown, read
// from the address on load and written back on every change, so every view
// is a link and reloading restores it.

import { viewHref } from "./tree.js";
import { isDrawable, dtypeName } from "./format.js";

/** What the server says about itself (colormaps, limits); set once at start. */
export const env = { settings: { colormaps: {}, max_pixels: 16777216, version: "" } };

export const state = {
  path: "",
  meta: null,
  kind: { tabs: ["meta"], ndim: 0 },
  tab: "meta",
  dims: [0, 1],
  index: [],
  cmap: "viridis",
  scale: "linear",
  vmin: null,
  vmax: null,
  zoom: null,
  offset: null,
  lastData: null, // the data tab shown last: what the code tab reproduces
  reduce: null, // a reduction of the dimensions not displayed (mean, max, …)
  at: null, // the map's [zoom, lon, lat]
};

/** The reductions the viewer offers over the dimensions not displayed. */
export const REDUCTIONS = ["mean", "min", "max", "sum", "std"];

// ---- URL ------------------------------------------------------------------

function intList(s) {
  if (s === null || s === "") return null;
  const v = s.split(",").map((x) => Number(x));
  return v.every((x) => Number.isInteger(x)) ? v : null;
}

function number(s) {
  if (s === null || s.trim() === "") return null;
  const v = Number(s);
  return Number.isFinite(v) ? v : null;
}

// `zoom/lon/lat`, as web maps write a place.
function parseAt(s) {
  if (!s) return null;
  const v = s.split("/").map(Number);
  if (v.length !== 3 || !v.every(Number.isFinite)) return null;
  const [z, lon, lat] = v;
  return z >= 0 && z <= 24 && Math.abs(lat) <= 85 && Math.abs(lon) <= 540 ? v : null;
}

function parseZoom(s) {
  if (!s) return null;
  const out = [];
  for (const part of s.split(",")) {
    const m = /^(\d+):(\d+)$/.exec(part.trim());
    if (!m) return null;
    out.push(Number(m[1]), Number(m[2]));
  }
  return out;
}

export function readURL() {
  let path = "";
  const p = location.pathname;
  if (p.startsWith("/view/")) {
    try {
      path = p.slice(6).split("/").filter(Boolean).map(decodeURIComponent).join("/");
    } catch {
      path = p.slice(6);
    }
  }
  const q = new URLSearchParams(location.search);
  return {
    path,
    tab: q.get("tab"),
    dims: intList(q.get("dims")),
    index: intList(q.get("index")),
    cmap: q.get("cmap"),
    scale: q.get("scale"),
    vmin: number(q.get("vmin")),
    vmax: number(q.get("vmax")),
    zoom: parseZoom(q.get("zoom")),
    offset: intList(q.get("offset")),
    reduce: REDUCTIONS.includes(q.get("reduce")) ? q.get("reduce") : null,
    at: parseAt(q.get("at")),
  };
}

function defaultDims(kind) {
  const n = kind.ndim - (kind.rgb ? 1 : 0);
  return [n - 2, n - 1];
}

function urlOf() {
  const k = state.kind;
  const q = [];
  const isArray = state.meta && state.meta.node_type === "array";
  if (isArray) q.push(["tab", state.tab]);
  if (k.ndim >= 2) {
    const [dr, dc] = defaultDims(k);
    if (state.dims[0] !== dr || state.dims[1] !== dc) q.push(["dims", state.dims.join(",")]);
    if (state.index.some((i) => i !== 0)) q.push(["index", state.index.join(",")]);
    if (state.reduce) q.push(["reduce", state.reduce]);
  }
  if (isArray && k.canDraw) {
    if (state.cmap !== defaultCmap()) q.push(["cmap", state.cmap]);
    if (state.scale !== "linear") q.push(["scale", state.scale]);
    if (state.vmin !== null) q.push(["vmin", String(state.vmin)]);
    if (state.vmax !== null) q.push(["vmax", String(state.vmax)]);
  }
  if (state.zoom) {
    const z = state.zoom;
    q.push(["zoom", z.length === 4 ? `${z[0]}:${z[1]},${z[2]}:${z[3]}` : `${z[0]}:${z[1]}`]);
  }
  if (state.offset) q.push(["offset", state.offset.join(",")]);
  if (state.tab === "map" && state.at) q.push(["at", state.at.join("/")]);
  const search = q.map(([key, v]) => `${key}=${encodeURIComponent(v).replace(/%3A/g, ":").replace(/%2C/g, ",").replace(/%2F/g, "/")}`).join("&");
  return `${viewHref(state.path)}${search ? `?${search}` : ""}`;
}

export function writeURL(mode) {
  const url = urlOf();
  if (url === location.pathname + location.search) return;
  if (mode === "push") history.pushState(null, "", url);
  else history.replaceState(null, "", url);
}

// ---- node kinds and validated state ------------------------------------------

export function defaultCmap() {
  return Object.keys(env.settings.colormaps)[0] || "viridis";
}

export function kindOf(meta) {
  if (!meta || meta.node_type !== "array") return { tabs: ["meta"], ndim: 0 };
  // Indices past 2^53 cannot be held by JavaScript numbers: such arrays
  // are described, not browsed.
  if (meta.shape.some((d) => typeof d === "bigint")) return { tabs: ["meta"], ndim: 0, huge: true };
  const n = meta.shape.length;
  const name = dtypeName(meta);
  const empty = meta.shape.includes(0);
  const numeric = isDrawable(name);
  const rgb = name === "uint8" && n >= 3 && (meta.shape[n - 1] === 3 || meta.shape[n - 1] === 4);
  const tabs = [];
  if (n >= 2 && numeric && !empty) tabs.push("heatmap");
  // Arrays the server places on Earth (`map` in their metadata).
  if (n >= 2 && numeric && !empty && meta.map && meta.map.georeferenced) tabs.push("map");
  // A line of one dimension: of a 1-D array, or of an N-D one with the
  // others at the sliders' positions or reduced (an area-mean series).
  if (n >= 1 && numeric && !empty && !rgb) tabs.push("line");
  if (!empty) tabs.push("table");
  tabs.push("meta", "code");
  return { tabs, ndim: n, numeric, rgb, canDraw: tabs.includes("heatmap") || tabs.includes("line") || tabs.includes("map") };
}

function clampInt(v, lo, hi) {
  return Math.max(lo, Math.min(hi, Math.trunc(v)));
}

/** State for a freshly opened node from URL parameters (or none). */
export function applyParams(p, keepPrefs) {
  const meta = state.meta;
  const k = kindOf(meta);
  state.kind = k;
  // A data tab carries over from array to array; groups only have "meta".
  const keepTab = keepPrefs && state.prevKind && state.prevKind.tabs.length > 1;
  const tab = p.tab && k.tabs.includes(p.tab) ? p.tab : keepTab && k.tabs.includes(state.tab) ? state.tab : k.tabs[0];
  state.tab = tab;
  const shape = meta && meta.node_type === "array" && !k.huge ? meta.shape : [];
  const n = shape.length;
  state.index = shape.map((s, d) => (p.index && d < p.index.length ? clampInt(p.index[d], 0, Math.max(0, s - 1)) : 0));
  state.dims = n >= 2 ? defaultDims(k) : [0, 1];
  if (n >= 2 && p.dims && p.dims.length === 2) {
    const [r, c] = p.dims;
    const limit = k.rgb ? n - 1 : n;
    if (r !== c && r >= 0 && c >= 0 && r < limit && c < limit) state.dims = [r, c];
  }
  if (p.cmap && env.settings.colormaps[p.cmap]) state.cmap = p.cmap;
  else if (!keepPrefs || !env.settings.colormaps[state.cmap]) state.cmap = defaultCmap();
  if (p.scale === "linear" || p.scale === "log") state.scale = p.scale;
  else if (!keepPrefs) state.scale = "linear";
  state.vmin = p.vmin ?? null;
  state.vmax = p.vmax ?? null;
  state.zoom = null;
  if (p.zoom && n >= 2 && p.zoom.length === 4) {
    const [r0, r1, c0, c1] = p.zoom;
    const R = shape[state.dims[0]];
    const C = shape[state.dims[1]];
    if (r0 < r1 && r1 <= R && c0 < c1 && c1 <= C && !(r0 === 0 && r1 === R && c0 === 0 && c1 === C)) state.zoom = p.zoom;
  } else if (p.zoom && n === 1 && p.zoom.length === 2) {
    const [a, b] = p.zoom;
    if (a < b && b <= shape[0] && !(a === 0 && b === shape[0])) state.zoom = p.zoom;
  }
  state.reduce = n >= 2 && p.reduce ? p.reduce : null;
  state.at = p.at || null;
  state.offset = p.offset && p.offset.length === 2 && p.offset.every((v) => v >= 0) && p.offset.some((v) => v > 0) ? p.offset : null;
  if (["heatmap", "line", "table"].includes(state.tab)) state.lastData = state.tab;
  else state.lastData = k.tabs[0] === "table" ? "table" : k.tabs[0];
}
