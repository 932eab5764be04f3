// The metadata tab: one row per field of the meta answer, the attributes,
// and a map of which stored chunks (or shards) exist.

import { el, formatBytes, formatCount } from "./format.js";
import { viewHref } from "./tree.js";

const ARRAY_FIELDS = [
  ["path", "Path"],
  ["node_type", "Node type"],
  ["zarr_format", "Zarr format"],
  ["shape", "Shape"],
  ["chunks", "Chunks"],
  ["shard_shape", "Shard shape"],
  ["dtype", "Data type"],
  ["fill_value", "Fill value"],
  ["order", "Order"],
  ["codecs", "Codecs"],
  ["dimension_names", "Dimension names"],
  ["nbytes", "Size"],
  ["stored_bytes", "Stored size"],
  ["ratio", "Compression ratio"],
  ["chunks_initialized", "Chunks stored"],
];

const GROUP_FIELDS = [
  ["path", "Path"],
  ["node_type", "Node type"],
  ["zarr_format", "Zarr format"],
];

function tuple(list) {
  return Array.isArray(list) ? `(${list.join(", ")}${list.length === 1 ? "," : ""})` : "—";
}

function code(value) {
  return el("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

function codecSummary(codecs) {
  // v3: a list of {name, configuration}; v2: {filters, compressor}.
  if (Array.isArray(codecs)) {
    const names = [];
    const walk = (list) => {
      for (const c of list) {
        names.push(c.name);
        if (c.name === "sharding_indexed" && c.configuration && Array.isArray(c.configuration.codecs)) {
          names.push("[");
          walk(c.configuration.codecs);
          names.push("]");
        }
      }
    };
    walk(codecs);
    return names.join(" → ").replace(/\[ → /g, "[").replace(/ → \]/g, "]");
  }
  if (codecs && typeof codecs === "object") {
    const parts = [];
    for (const f of codecs.filters || []) parts.push(f.id);
    if (codecs.compressor) parts.push(codecs.compressor.id);
    return parts.length ? parts.join(" → ") : "none";
  }
  return "—";
}

function fieldValue(name, meta) {
  const v = meta[name];
  switch (name) {
    case "path":
      return meta.path === "" ? "/ (root)" : `/${meta.path}`;
    case "shape":
    case "chunks":
      return tuple(v);
    case "shard_shape":
      return v ? tuple(v) : "— (not sharded)";
    case "dtype": {
      const d = v || {};
      const zarr = typeof d.zarr === "string" ? d.zarr : d.zarr && d.zarr.name;
      const numpy = typeof d.numpy === "string" ? d.numpy : JSON.stringify(d.numpy);
      const wrap = el("div", {}, el("strong", {}, zarr || "?"), ` numpy ${numpy}`);
      if (d.itemsize) wrap.append(`, ${d.itemsize} byte${d.itemsize === 1 ? "" : "s"} per element`);
      if (typeof d.zarr === "object" || Array.isArray(d.numpy)) wrap.append(code(d.zarr));
      return wrap;
    }
    case "fill_value":
      return JSON.stringify(v);
    case "codecs": {
      const details = el("details", {}, el("summary", {}, codecSummary(v)), code(v));
      return details;
    }
    case "dimension_names":
      return Array.isArray(v) ? tuple(v.map((n) => (n === null ? "None" : n))) : "— (none)";
    case "nbytes":
      return v === null || v === undefined ? "— (variable-length elements)" : `${formatBytes(v)} (${formatCount(v)} bytes)`;
    case "stored_bytes":
      return v === null || v === undefined ? "—" : `${formatBytes(v)} (${formatCount(v)} bytes)`;
    case "ratio": {
      if (!meta.nbytes || !meta.stored_bytes) return "—";
      const r = meta.nbytes / meta.stored_bytes;
      return `${r.toFixed(r >= 100 ? 0 : 2)}×`;
    }
    case "chunks_initialized": {
      const unit = meta.shard_shape ? "shards" : "chunks";
      return `${formatCount(v)} of ${formatCount(meta.chunks_total)} ${unit}`;
    }
    default:
      return v === null || v === undefined ? "—" : String(v);
  }
}

/** Fills `container` with the fields of `meta` and `attributes` with its attributes. */
export function renderMeta(container, attributes, meta) {
  const fields = meta.node_type === "array" ? ARRAY_FIELDS : GROUP_FIELDS;
  const table = el("table", { class: "meta-table" });
  const body = el("tbody");
  for (const [name, label] of fields) {
    const value = fieldValue(name, meta);
    body.append(
      el(
        "tr",
        { "data-field": name },
        el("th", { scope: "row" }, label),
        el("td", {}, value instanceof Node ? value : String(value))
      )
    );
  }
  if (meta.node_type === "array" && meta.metadata_key) {
    body.append(
      el(
        "tr",
        { "data-field": "metadata_key" },
        el("th", { scope: "row" }, "Metadata document"),
        el("td", {}, el("code", {}, meta.metadata_key))
      )
    );
  }
  if (meta.node_type === "group") {
    const members = meta.members || [];
    const list = el("ul", { class: "members" });
    for (const m of members) {
      const path = meta.path ? `${meta.path}/${m.name}` : m.name;
      list.append(
        el(
          "li",
          {},
          el("a", { href: viewHref(path), "data-nav": path }, m.name),
          el("span", { class: "muted" }, ` ${m.node_type}`),
          m.error ? el("span", { class: "node-error" }, ` ${m.error.status} ${m.error.code}: ${m.error.message}`) : null
        )
      );
    }
    body.append(
      el(
        "tr",
        { "data-field": "members" },
        el("th", { scope: "row" }, "Members"),
        el("td", {}, members.length ? list : "none")
      )
    );
    if (meta.implicit) {
      body.append(
        el("tr", { "data-field": "implicit" }, el("th", { scope: "row" }, "Implicit"), el("td", {}, "yes (no metadata document)"))
      );
    }
  }
  table.append(body);
  container.replaceChildren(table);
  attributes.textContent = JSON.stringify(meta.attributes || {}, null, 2);
}

const MAX_GRID_CELLS = 4096;
const MAX_LISTINGS = 256;

/** The stored key of grid position `idx` for the array's key encoding. */
function keyEncoder(doc, zarrFormat) {
  if (zarrFormat === 3) {
    const enc = doc.chunk_key_encoding || { name: "default" };
    const conf = enc.configuration || {};
    if (enc.name === "v2") {
      const sep = conf.separator || ".";
      return (idx) => (idx.length ? idx.join(sep) : "0");
    }
    const sep = conf.separator || "/";
    return (idx) => ["c", ...idx].join(sep);
  }
  const sep = (doc && doc.dimension_separator) || ".";
  return (idx) => (idx.length ? idx.join(sep) : "0");
}



/**
 * Draws which stored chunks exist in `el`: for 2+-D arrays the last two grid
 * dimensions at index 0 of the others. Listings walk down from the array's
 * folder and only into folders that exist, so nothing is asked twice and no
 * listing is answered 404.
 */
export async function renderChunkGrid(container, meta, signal, provider) {
  container.replaceChildren();
  if (meta.node_type !== "array") return;
  const grid = meta.shape.map((n, i) => Math.ceil(n / (meta.shard_shape || meta.chunks)[i]));
  const unit = meta.shard_shape ? "shard" : "chunk";
  if (meta.chunks_total > MAX_GRID_CELLS) {
    container.append(el("p", { class: "muted" }, `${formatCount(meta.chunks_total)} ${unit}s: too many to map.`));
    return;
  }
  const shown = grid.length >= 2 ? grid.slice(-2) : grid.length === 1 ? [1, grid[0]] : [1, 1];
  const lead = grid.length >= 2 ? grid.slice(0, -2).map(() => 0) : [];
  const cells = [];
  for (let i = 0; i < shown[0]; i++) {
    for (let j = 0; j < shown[1]; j++) {
      const idx = grid.length >= 2 ? [...lead, i, j] : grid.length === 1 ? [j] : [];
      const label = grid.length >= 2 ? `${i}.${j}` : grid.length === 1 ? `${j}` : "0";
      cells.push({ idx, label });
    }
  }
  if (cells.length === 0) {
    container.append(el("p", { class: "muted" }, "The array is empty: no chunks."));
    return;
  }
  let present = new Set();
  let unknown = false;
  if (meta.chunks_initialized > 0) {
    let doc = {};
    try {
      doc = await provider.document(meta.metadata_key, { signal });
    } catch (e) {
      if (provider.isAbort(e)) throw e;
      unknown = true;
    }
    if (!unknown) {
      const encode = keyEncoder(doc, meta.zarr_format);
      const base = meta.path ? `${meta.path}/` : "";
      for (const c of cells) c.key = encode(c.idx);
      const result = await existing(base, cells.map((c) => c.key), signal, provider);
      if (result === null) unknown = true;
      else present = result;
    }
  }
  const size = Math.max(4, Math.min(22, Math.floor(360 / Math.max(shown[0], shown[1]))));
  const gridEl = el("div", {
    class: "chunk-cells",
    role: "img",
    "aria-label": `${unit}s stored: a ${shown[0]} by ${shown[1]} map`,
    style: `grid-template-columns: repeat(${shown[1]}, ${size}px); grid-auto-rows: ${size}px;`,
  });
  let count = 0;
  for (const c of cells) {
    const has = present.has(c.key);
    if (has) count += 1;
    gridEl.append(
      el("div", {
        class: `cell ${unknown ? "unknown" : has ? "present" : "missing"}`,
        "data-chunk": c.label,
        title: `${unit} ${c.idx.join(",") || "0"}: ${unknown ? "unknown" : has ? "stored" : "not stored (reads give the fill value)"}`,
      })
    );
  }
  const what =
    grid.length > 2 ? ` (last two grid dimensions at ${grid.slice(0, -2).map(() => "0").join(", ")} of the others)` : "";
  const caption = unknown
    ? `Which ${unit}s are stored could not be listed.`
    : `${count} of ${cells.length} ${unit}s shown are stored${what}.`;
  container.append(
    el("p", { class: "muted" }, caption),
    gridEl,
    el(
      "p",
      { class: "legend" },
      el("span", { class: "cell present" }),
      " stored ",
      el("span", { class: "cell missing" }),
      " missing"
    )
  );
}

/** The subset of `keys` (relative to `base`) that the store lists, or null. */
async function existing(base, keys, signal, provider) {
  const dirs = new Map(); // dir (relative, with trailing slash or "") -> names wanted
  for (const k of keys) {
    const i = k.lastIndexOf("/");
    const dir = i < 0 ? "" : k.slice(0, i + 1);
    if (!dirs.has(dir)) dirs.set(dir, new Set());
    dirs.get(dir).add(k.slice(i + 1));
  }
  const found = new Set();
  const listed = new Map(); // dir -> {keys:Set, prefixes:Set} or null (absent)
  let budget = MAX_LISTINGS;
  async function list(dir) {
    if (listed.has(dir)) return listed.get(dir);
    // Only list a folder its parent showed, so absent ones cost nothing.
    if (dir !== "") {
      const trimmed = dir.slice(0, -1);
      const j = trimmed.lastIndexOf("/");
      const parent = j < 0 ? "" : trimmed.slice(0, j + 1);
      const name = trimmed.slice(j + 1);
      const up = await list(parent);
      if (!up || !up.prefixes.has(name)) {
        listed.set(dir, null);
        return null;
      }
    }
    if (budget-- <= 0) throw new Error("too many listings");
    const prefix = `${base}${dir}`.replace(/\/$/, "");
    const answer = await provider.listing(prefix, { signal, report: true });
    const entry = {
      keys: new Set(answer.keys || []),
      prefixes: new Set((answer.prefixes || []).map((p) => p.replace(/\/$/, ""))),
    };
    listed.set(dir, entry);
    return entry;
  }
  try {
    for (const [dir, names] of [...dirs].sort()) {
      const entry = await list(dir);
      if (!entry) continue;
      for (const n of names) if (entry.keys.has(n)) found.add(`${dir}${n}`);
    }
  } catch (e) {
    if (provider.isAbort(e)) throw e;
    return null;
  }
  return found;
}
