// Number and value formatting shared by axes, colorbar, tables and metadata.

/** Short label for an axis tick or a range end. */
export function formatTick(v) {
  if (typeof v !== "number") return String(v);
  if (!Number.isFinite(v)) return String(v);
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1e6 || a < 1e-3) return v.toExponential(2).replace(/\.?0+e/, "e");
  if (Number.isInteger(v)) return String(v);
  return String(Number(v.toPrecision(4)));
}

/** A value in running text: a few significant digits, not every one. */
export function formatNumber(v, digits = 6) {
  if (typeof v === "bigint") return v.toString();
  if (typeof v !== "number") return String(v);
  if (!Number.isFinite(v) || Number.isInteger(v)) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e9 || a < 1e-4)) return v.toExponential(digits - 1);
  return String(Number(v.toPrecision(digits)));
}

export function formatBytes(n) {
  if (n === null || n === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let v = Number(n);
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u += 1;
  }
  const text = u === 0 ? String(v) : v.toFixed(v < 10 ? 2 : 1);
  return `${text} ${units[u]}`;
}

export function formatCount(n) {
  return Number(n).toLocaleString("en-US");
}

/** Evenly spaced round values covering [lo, hi], about `count` of them. */
export function niceTicks(lo, hi, count = 5) {
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return [];
  if (lo === hi) return [lo];
  if (lo > hi) [lo, hi] = [hi, lo];
  const raw = (hi - lo) / Math.max(1, count);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const norm = raw / mag;
  const step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
  const start = Math.ceil(lo / step - 1e-9) * step;
  const ticks = [];
  for (let v = start; v <= hi + step * 1e-9; v += step) {
    ticks.push(Math.abs(v) < step * 1e-9 ? 0 : Number(v.toPrecision(12)));
    if (ticks.length > 50) break;
  }
  return ticks;
}

/** Integer ticks (array indices): never fractional steps. */
export function indexTicks(lo, hi, count = 5) {
  return niceTicks(lo, hi, count)
    .filter((v) => Number.isInteger(v))
    .filter((v) => v >= lo && v <= hi);
}

/** Ticks of a log axis: powers of ten, or nice ticks of the exponent. */
export function logTicks(lo, hi, count = 5) {
  if (!(lo > 0) || !(hi > 0)) return [];
  const a = Math.log10(lo);
  const b = Math.log10(hi);
  if (b - a < 1) return niceTicks(lo, hi, count);
  const exps = niceTicks(Math.ceil(a), Math.floor(b), count).filter(Number.isInteger);
  return exps.map((e) => 10 ** e);
}

function isComplexDtype(dtype) {
  return typeof dtype === "string" && /complex/.test(dtype);
}

/**
 * An element as the table and hover show it. `dtype` is the data type name
 * the JSON answer gives (complex values come as [re, im]).
 */
export function formatValue(value, dtype) {
  if (value === null || value === undefined) return "null";
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "number") return String(value);
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "string") return value;
  if (Array.isArray(value) && isComplexDtype(dtype) && value.length === 2) {
    const [re, im] = value.map((v) => (typeof v === "string" ? v : Number(v)));
    if (typeof im === "string") return `${re}+${im}j`;
    const sign = im < 0 || Object.is(im, -0) ? "-" : "+";
    return `${re}${sign}${Math.abs(im)}j`;
  }
  return JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? v.toString() : v));
}

/** A JSON value as a number for plotting; NaN for what cannot be drawn. */
export function toNumber(v) {
  if (typeof v === "number") return v;
  if (typeof v === "bigint") return Number(v);
  if (typeof v === "boolean") return v ? 1 : 0;
  if (v === "Infinity") return Infinity;
  if (v === "-Infinity") return -Infinity;
  return NaN;
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

const SVG_NS = "http://www.w3.org/2000/svg";

export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null) continue;
    if (k === "text") node.textContent = v;
    else node.setAttribute(k, String(v));
  }
  for (const c of children.flat()) if (c) node.append(c);
  return node;
}

/** Runs `fn` once calls have paused for `ms`. */
export function debounce(fn, ms) {
  let timer = 0;
  const wrapped = (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
  wrapped.cancel = () => clearTimeout(timer);
  return wrapped;
}

const DRAWABLE = new Set([
  "bool",
  "int8",
  "int16",
  "int32",
  "int64",
  "uint8",
  "uint16",
  "uint32",
  "uint64",
  "float16",
  "bfloat16",
  "float32",
  "float64",
]);

/** Whether the server can draw this data type (images, plots, previews). */
export function isDrawable(dtypeName) {
  return DRAWABLE.has(dtypeName);
}

/** The data type name of a meta answer (the v3 name, or "structured"…). */
export function dtypeName(meta) {
  const z = meta && meta.dtype && meta.dtype.zarr;
  if (typeof z === "string") return z;
  if (z && typeof z === "object" && z.name) return z.name;
  return "";
}

/**
 * The zoom and pan keys every plot answers: +/- zoom, 0/Home reset, arrows
 * pan by a tenth of the view. `view` has zoomIn, zoomOut, reset, and
 * pan(dx, dy) in screen pixels (dy is 0 for plots that only pan sideways).
 * Returns whether the key was one of them.
 */
export function zoomKeys(e, view, stepX, stepY = 0) {
  if (e.altKey || e.ctrlKey || e.metaKey) return false;
  const pans = { ArrowLeft: [stepX, 0], ArrowRight: [-stepX, 0], ArrowUp: [0, stepY], ArrowDown: [0, -stepY] };
  if (e.key === "+" || e.key === "=") view.zoomIn();
  else if (e.key === "-" || e.key === "_") view.zoomOut();
  else if (e.key === "0" || e.key === "Home") view.reset();
  else if (pans[e.key] && (pans[e.key][0] || pans[e.key][1])) view.pan(...pans[e.key]);
  else return false;
  e.preventDefault();
  return true;
}

/**
 * Wires a plot to its container: wheel and pointer events go to the plot's
 * onWheel/onPointerDown/onPointerMove/onPointerUp, and a resize of a shown
 * plot calls `resized` at once and reloads it a moment later.
 */
export function attachPlot(container, plot, resized) {
  new ResizeObserver(() => {
    if (!plot.view) return;
    resized();
    plot.reloadSoon();
  }).observe(container);
  container.addEventListener("wheel", (e) => plot.onWheel(e), { passive: false });
  container.addEventListener("pointerdown", (e) => plot.onPointerDown(e));
  container.addEventListener("pointermove", (e) => plot.onPointerMove(e));
  container.addEventListener("pointerup", (e) => plot.onPointerUp(e));
  container.addEventListener("pointercancel", (e) => plot.onPointerUp(e));
}
