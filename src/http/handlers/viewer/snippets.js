// Code that reads exactly what is on screen, for each client a user might
// take it to. Every snippet uses the same selection items, so they agree.

import { el } from "./format.js";
import { encodePath } from "./api.js";

const CLIENTS = [
  ["zarrd", "zarrd (notebook client)", "python"],
  ["zarr-python", "zarr-python", "python"],
  ["xarray", "xarray", "python"],
  ["tensorstore", "TensorStore", "python"],
  ["curl", "curl", "shell"],
  ["zarrita", "zarrita.js", "javascript"],
];

function str(s) {
  return JSON.stringify(s);
}

function shellQuote(s) {
  return `'${s.replace(/'/g, "'\\''")}'`;
}

function parseItem(item) {
  if (/^-?\d+$/.test(item)) return { int: Number(item) };
  const [a = "", b = "", s = ""] = item.split(":");
  return { start: a === "" ? null : Number(a), stop: b === "" ? null : Number(b), step: s === "" ? null : Number(s) };
}

function pyItem(item) {
  return item;
}

function pySlice(item) {
  const p = parseItem(item);
  if ("int" in p) return String(p.int);
  const args = [p.start, p.stop].map((v) => (v === null ? "None" : String(v)));
  if (p.step !== null) args.push(String(p.step));
  return `slice(${args.join(", ")})`;
}

function jsItem(item) {
  const p = parseItem(item);
  if ("int" in p) return String(p.int);
  if (p.start === null && p.stop === null && p.step === null) return "null";
  const args = [p.start, p.stop].map((v) => (v === null ? "null" : String(v)));
  if (p.step !== null) args.push(String(p.step));
  return `zarr.slice(${args.join(", ")})`;
}

/** The Python index expression of the items, as `arr[...]` takes it. */
export function pythonIndex(items) {
  return items.length ? items.map(pyItem).join(", ") : "...";
}

function zarrPython(c) {
  const opts = c.token ? `, storage_options={"headers": {"Authorization": ${str(`Bearer ${c.token}`)}}}` : "";
  return [
    "import zarr",
    "",
    `arr = zarr.open_array(${str(c.storeURL)}, mode="r"${opts})`,
    `data = arr[${pythonIndex(c.items)}]`,
    ...numpyReduction(c),
  ].join("\n");
}

/** The view's reduction in numpy, over the result's axes it reduces. */
function numpyReduction(c) {
  if (!c.reduce) return [];
  const axes = c.reducedAxes.join(", ");
  return ["", "import numpy as np", `data = np.nan${c.reduce.op}(data, axis=(${axes}${c.reducedAxes.length === 1 ? "," : ""}))`];
}

/** A label as Python writes it. */
function pyLabel(label) {
  return typeof label === "string" ? str(label) : String(label);
}

function zarrdClient(c) {
  const names = c.dimNames;
  if (c.shape.length && !c.shape.every((_, d) => names[d])) {
    return "# The notebook client selects by dimension name; this array does not name its dimensions.\n# Use zarr-python.";
  }
  const token = c.token ? `, token=${str(c.token)}` : "";
  const sel = [];
  const isel = [];
  c.items.forEach((it, d) => {
    if (it === ":" || it === "...") return;
    const label = /^-?\d+$/.test(it) && c.label ? c.label(d, Number(it)) : undefined;
    if (label !== undefined && label !== null) sel.push(`${names[d]}=${pyLabel(label)}`);
    else isel.push(`${names[d]}=${pySlice(it)}`);
  });
  const lines = ["import zarrd", "", `client = zarrd.Client(${str(c.origin)}${token})`, `data = (`, `    client[${str(c.path)}]`];
  if (isel.length) lines.push(`    .isel(${isel.join(", ")})`);
  if (sel.length) lines.push(`    .sel(${sel.join(", ")})`);
  if (c.reduce) lines.push(`    .${c.reduce.op}([${c.reduce.dims.map(str).join(", ")}])  # on the server`);
  lines.push("    .load()  # an xarray.DataArray, with its coordinates", ")");
  return lines.join("\n");
}

function xarray(c) {
  const opts = c.token ? `, storage_options={"headers": {"Authorization": ${str(`Bearer ${c.token}`)}}}` : "";
  const names = c.shape.map((_, d) => c.dimNames[d] || `dim_${d}`);
  const kept = c.items.map((it, d) => [it, d]).filter(([it]) => !/^-?\d+$/.test(it));
  const dims = kept.map(([, d]) => str(names[d]));
  const lines = ["import xarray as xr", "import zarr", ""];
  lines.push(`arr = zarr.open_array(${str(c.storeURL)}, mode="r"${opts})`);
  const coordLines = [];
  for (const [it, d] of kept) {
    const coord = c.coords[d];
    if (!coord) continue;
    coordLines.push(`        ${str(names[d])}: zarr.open_array(${str(coord.url)}, mode="r"${opts})[${it}],`);
  }
  lines.push("data = xr.DataArray(");
  lines.push(`    arr[${pythonIndex(c.items)}],`);
  lines.push(`    dims=(${dims.join(", ")}${dims.length === 1 ? "," : ""}),`);
  if (coordLines.length) lines.push("    coords={", ...coordLines, "    },");
  lines.push("    attrs=arr.attrs.asdict(),");
  lines.push(")");
  if (c.reduce) lines.push(`data = data.${c.reduce.op}([${c.reduce.dims.map(str).join(", ")}])`);
  if (c.group !== null && c.dimNames.some(Boolean)) {
    const isel = c.items.map((it, d) => `${str(names[d])}: ${pySlice(it)}`);
    lines.push(
      "",
      "# When every array of the group has dimension names, the group also opens as a Dataset:",
      `# ds = xr.open_zarr(${str(c.groupURL)}, consolidated=False${opts})`,
      `# data = ds[${str(c.name)}].isel({${isel.join(", ")}})`
    );
  }
  return lines.join("\n");
}

function tensorstore(c) {
  if (c.zarrFormat !== 2 && c.zarrFormat !== 3) {
    return `# TensorStore reads Zarr v2 and v3; this array is Zarr v${c.zarrFormat}.`;
  }
  const kv = [`"driver": "http"`, `"base_url": ${str(c.storeURL)}`];
  if (c.token) kv.push(`"headers": [${str(`Authorization: Bearer ${c.token}`)}]`);
  const spec = [`    "driver": ${str(c.zarrFormat === 3 ? "zarr3" : "zarr")},`, `    "kvstore": {${kv.join(", ")}},`];
  if (c.fields) spec.push(`    "field": ${str(c.fields[0])},  # structured arrays open one field at a time`);
  return [
    "import tensorstore as ts",
    "",
    "arr = ts.open({",
    ...spec,
    "}, read=True).result()",
    `data = arr[${pythonIndex(c.items)}].read().result()`,
    ...numpyReduction(c),
  ].join("\n");
}

function curl(c) {
  const auth = c.token ? ` -H ${shellQuote(`Authorization: Bearer ${c.token}`)}` : "";
  const reduce = c.reduce ? `&reduce=${c.reduce.op}:${c.reduce.dims.join(",")}` : "";
  const q = c.items.length ? `?select=${c.items.join(",")}${reduce}` : "";
  const base = `${c.origin}/api/v1/data/${encodePath(c.path)}`.replace(/'/g, "%27");
  const lines = [
    "# the selection as .npy (numpy.load reads it)",
    `curl${auth} -o data.npy ${shellQuote(`${base}${q}`)}`,
    "",
    "# the same values as JSON",
    `curl${auth} ${shellQuote(`${base}${q}${q ? "&" : "?"}format=json`)}`,
  ];
  if (c.image) {
    lines.push("", "# the picture on screen", `curl${auth} -o image.png ${shellQuote(`${base}${q}${q ? "&" : "?"}${c.image}`)}`);
  }
  return lines.join("\n");
}

function zarrita(c) {
  const opts = c.token ? `, { overrides: { headers: { Authorization: ${str(`Bearer ${c.token}`)} } } }` : "";
  const sel = c.items.length ? `, [${c.items.map(jsItem).join(", ")}]` : "";
  return [
    'import * as zarr from "zarrita";',
    "",
    `const store = new zarr.FetchStore(${str(c.storeURL)}${opts});`,
    'const arr = await zarr.open(store, { kind: "array" });',
    `const data = await zarr.get(arr${sel});`,
    "console.log(data.shape, data.data);",
    ...(c.reduce ? [`// The view shows the ${c.reduce.op} over ${c.reduce.dims.join(", ")}: reduce data's axes ${c.reducedAxes.join(", ")}, or ask the server (the curl snippet).`] : []),
  ].join("\n");
}

const WRITERS = { zarrd: zarrdClient, "zarr-python": zarrPython, xarray, tensorstore, curl, zarrita };

async function copy(text, button) {
  let ok = false;
  try {
    await navigator.clipboard.writeText(text);
    ok = true;
  } catch {
    // Without the clipboard API (plain http on another host): select and copy.
    const area = el("textarea", { class: "visually-hidden" });
    area.value = text;
    document.body.append(area);
    area.select();
    try {
      ok = document.execCommand("copy");
    } catch {
      ok = false;
    }
    area.remove();
  }
  const label = button.textContent;
  button.textContent = ok ? "Copied" : "Copy failed";
  setTimeout(() => {
    button.textContent = label;
  }, 1500);
}

/** `mean:time,lat` as {op, dims}. */
function parseReduce(text) {
  const [op, dims = ""] = text.split(":");
  return { op, dims: dims.split(",").filter(Boolean) };
}

/** The positions, in the selection's result, of the dimensions reduced. */
function reducedAxes(items, meta, dims) {
  const names = meta.dimension_names || meta.dimensions || [];
  const out = [];
  let at = 0;
  items.forEach((it, d) => {
    if (/^-?\d+$/.test(it)) return;
    if (dims.includes(names[d])) out.push(at);
    at += 1;
  });
  return out;
}

/**
 * ctx: {origin, path, meta, token, items (select items), what (which view
 * the selection comes from), coords: {dim: {path}}, image (png query part)}
 */
export function renderSnippets(container, ctx) {
  const { origin, path, meta } = ctx;
  const slash = path.lastIndexOf("/");
  const group = path === "" ? null : slash < 0 ? "" : path.slice(0, slash);
  const storeURL = `${origin}/zarr${path ? `/${encodePath(path)}` : ""}`;
  const coords = {};
  for (const [d, c] of Object.entries(ctx.coords || {})) {
    coords[d] = { url: `${origin}/zarr/${encodePath(c.path)}` };
  }
  const np = meta.dtype && meta.dtype.numpy;
  const c = {
    origin,
    path,
    name: path.slice(slash + 1),
    group,
    groupURL: group === null ? "" : `${origin}/zarr${group ? `/${encodePath(group)}` : ""}`,
    storeURL,
    token: ctx.token,
    items: ctx.items,
    shape: meta.shape,
    dimNames: meta.dimension_names || meta.dimensions || meta.shape.map(() => null),
    label: ctx.label,
    reduce: ctx.reduce ? parseReduce(ctx.reduce) : null,
    reducedAxes: ctx.reduce ? reducedAxes(ctx.items, meta, parseReduce(ctx.reduce).dims) : [],
    coords,
    zarrFormat: meta.zarr_format,
    fields: Array.isArray(np) ? np.map((f) => f[0]) : null,
    image: ctx.image,
  };
  const expr = `${path || "/"}[${pythonIndex(ctx.items)}]`;
  const intro = el(
    "p",
    { class: "code-intro" },
    `The selection ${ctx.what ? `shown in the ${ctx.what}` : "on screen"}: `,
    el("code", { "data-selection": ctx.items.join(",") }, expr),
    ctx.resultShape ? `, shape (${ctx.resultShape.join(", ")}${ctx.resultShape.length === 1 ? "," : ""})` : "",
    ". Each snippet reads exactly these values from this server."
  );
  const sections = CLIENTS.map(([lang, title, syntax]) => {
    const text = WRITERS[lang](c);
    const pre = el("pre", { "data-lang": lang, class: `snippet lang-${syntax}`, tabindex: "0", "aria-label": `${title} code` });
    pre.textContent = text;
    const button = el("button", { type: "button", class: "copy", "aria-label": `Copy the ${title} code` }, "Copy");
    button.addEventListener("click", () => copy(pre.textContent, button));
    return el("section", { class: "snippet-block" }, el("header", {}, el("h3", {}, title), button), pre);
  });
  container.replaceChildren(intro, ...sections);
}
