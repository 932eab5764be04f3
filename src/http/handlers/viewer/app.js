// The page's state lives here and in the URL: every view is a link, and
// reloading or going back restores it. The modules draw; this file decides
// what is shown and keeps the address in step.

import * as api from "./api.js";
import { httpProvider } from "./provider.js";
import { Tree, viewHref } from "./tree.js";
import { renderMeta, renderChunkGrid } from "./meta.js";
import { Heatmap } from "./heatmap.js";
import { LinePlot } from "./lineplot.js";
import { TableView } from "./table.js";
import { MapView } from "./map.js";
import { renderSnippets } from "./snippets.js";
import { DimControls, dimLabel, dimNames, hiddenDims } from "./dims.js";
import { Hover } from "./hover.js";
import { el, dtypeName, formatBytes, formatTick } from "./format.js";
import { env, state, readURL, writeURL, applyParams } from "./state.js";

const $ = (id) => document.getElementById(id);
const TABS = ["heatmap", "map", "line", "table", "meta", "code"];
const NARROW = window.matchMedia("(max-width: 760px)");

let infos = new Map();
let nodeController = null;
let chunkController = null;
// Square pixels unless the slice is very elongated, until the user picks.
let aspectChoice = null;

// ---- modules ----------------------------------------------------------------

// Every view reads through this one data source (provider.js).
const provider = httpProvider;
const hover = new Hover($("hover"), provider);
const dims = new DimControls({ provider, container: $("selection-bar"), onChange: (patch, mode) => setState(patch, mode) });
// Coordinate labels arrive after the view is drawn: the axes take them then.
dims.onCoords = () => {
  if (state.meta && state.meta.node_type === "array") render();
};
let heatmap;
let line;
const mapView = new MapView({
  container: $("map"),
  legend: $("map-legend"),
  provider,
  onMove: (at) => {
    state.at = at;
    writeURL("replace");
  },
});
const table = new TableView({
  provider,
  table: $("values"),
  info: $("table-info"),
  message: $("table-message"),
  controls: {
    prev: $("table-prev"),
    next: $("table-next"),
    left: $("table-left"),
    right: $("table-right"),
    row: $("table-row"),
    col: $("table-col"),
  },
  onOffset: (offset) => {
    state.offset = offset;
    writeURL("replace");
  },
});

const tree = new Tree({
  provider,
  root: $("tree"),
  search: $("search"),
  status: $("tree-status"),
  onSelect: (path) => {
    if (NARROW.matches) setTreeOpen(false);
    navigate(path);
  },
});

function onHover(index, skip) {
  const m = state.meta;
  // A line of an N-D array hovers one index of its dimension: the others
  // are the sliders'.
  let full = index;
  if (state.tab === "line" && m.shape.length > 1) {
    full = state.index.slice();
    full[lineDim()] = index[0];
  }
  // A reduced view's value under the cursor is the reduction's, read from
  // the server as the view's own values are.
  const reduce = reduceParam(state.tab);
  let query = null;
  if (reduce) {
    const hidden = hiddenDims(m, state, state.tab, state.kind.rgb);
    query = { select: full.map((i, d) => (hidden.includes(d) ? ":" : String(i))).join(","), reduce };
  }
  hover.request(state.path, full, skip, dtypeName(m), query);
}

// ---- errors -----------------------------------------------------------------

function showError(e) {
  const box = $("error");
  const status = e.status ? `${e.status} ` : "";
  const close = el("button", { type: "button", class: "icon-button dismiss", "aria-label": "Dismiss the error" }, "×");
  close.addEventListener("click", () => clearError());
  box.replaceChildren(
    el("span", { class: "error-code" }, `${status}${e.code}`),
    el("span", { class: "error-message" }, e.message),
    e.requestId && e.status >= 500 ? el("span", { class: "error-id muted" }, `request ${e.requestId}`) : "",
    close
  );
  box.dataset.status = String(e.status);
  box.dataset.code = e.code;
  box.hidden = false;
  if (e.isAuth) revealToken();
}

function clearError() {
  const box = $("error");
  if (box.hidden) return;
  box.hidden = true;
  box.replaceChildren();
  delete box.dataset.status;
  delete box.dataset.code;
}

api.on("error", showError);
api.on("success", clearError);

// ---- token ------------------------------------------------------------------

function revealToken() {
  document.body.classList.add("token-open");
  $("token-toggle").setAttribute("aria-expanded", "true");
  const input = $("token");
  input.focus();
  input.select();
}

function setupToken() {
  const input = $("token");
  input.value = api.getToken();
  $("token-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    api.setToken(input.value.trim());
    $("token-status").textContent = input.value.trim() ? "Saved" : "Cleared";
    setTimeout(() => ($("token-status").textContent = ""), 2000);
    if (NARROW.matches) {
      document.body.classList.remove("token-open");
      $("token-toggle").setAttribute("aria-expanded", "false");
    }
    await reloadAll();
  });
  $("token-toggle").addEventListener("click", () => {
    const open = !document.body.classList.contains("token-open");
    document.body.classList.toggle("token-open", open);
    $("token-toggle").setAttribute("aria-expanded", String(open));
    if (open) input.focus();
  });
}

// ---- sign-in ----------------------------------------------------------------

/**
 * Who the browser is signed in as (its session cookie), with a way out;
 * or, where the server offers a provider, a way in that returns here.
 */
async function setupSignIn() {
  let info;
  try {
    info = await api.getJSON("/auth/session", { report: false });
  } catch {
    return;
  }
  const box = $("signin");
  if (info.signed_in) {
    const who = document.createElement("span");
    who.id = "signin-user";
    who.textContent = info.user;
    who.title = `Signed in at ${info.issuer}`;
    const out = document.createElement("button");
    out.type = "button";
    out.id = "signout";
    out.textContent = "Sign out";
    out.addEventListener("click", async () => {
      // The session's CSRF token: no other page can sign the user out.
      await fetch("/auth/logout", { method: "POST", headers: { "X-CSRF-Token": info.csrf } });
      window.location.reload();
    });
    box.replaceChildren(who, out);
  } else if (info.providers && info.providers.length) {
    const here = window.location.pathname + window.location.search + window.location.hash;
    const link = document.createElement("a");
    link.id = "signin-link";
    link.href = `${info.providers[0].login}&next=${encodeURIComponent(here)}`;
    link.textContent = "Sign in";
    box.replaceChildren(link);
  } else {
    return;
  }
  box.hidden = false;
}

async function reloadAll() {
  const loaded = loadTree();
  // The URL holds the view, also when the last attempt failed before
  // the node's metadata arrived.
  await openNode(state.path, readURL(), null, false, true);
  await loaded;
}

// ---- sidebar ----------------------------------------------------------------

function setTreeOpen(open) {
  document.body.classList.toggle("tree-open", open);
  document.body.classList.toggle("tree-closed", !open);
  $("tree-toggle").setAttribute("aria-expanded", String(open));
}

async function loadTree() {
  try {
    infos = await tree.load();
    tree.select(state.path);
  } catch (e) {
    if (!api.isAbort(e)) infos = new Map();
  }
}

// ---- navigation -------------------------------------------------------------

function navigate(path) {
  if (path === state.path && state.meta) {
    tree.select(path);
    return;
  }
  openNode(path, {}, "push", true);
}

function renderHead() {
  const path = state.path;
  const crumbs = $("breadcrumbs");
  const parts = path ? path.split("/") : [];
  const items = [el("a", { href: "/", "data-nav": "" }, "/")];
  parts.forEach((name, i) => {
    const sub = parts.slice(0, i + 1).join("/");
    if (i > 0) items.push(el("span", { class: "sep", "aria-hidden": "true" }, "/"));
    items.push(
      i === parts.length - 1
        ? el("span", { "aria-current": "page" }, name)
        : el("a", { href: viewHref(sub), "data-nav": sub }, name)
    );
  });
  crumbs.replaceChildren(...items);
  $("node-title").textContent = path ? path.slice(path.lastIndexOf("/") + 1) : "/";
  document.title = `${path || "/"} · zarrd`;
  const m = state.meta;
  const summary = $("node-summary");
  if (!m) {
    summary.textContent = document.body.classList.contains("node-loading") ? "" : "This node could not be opened: its metadata could not be read.";
    return;
  }
  if (m.node_type === "array") {
    const names = m.dimension_names && m.dimension_names.some(Boolean) ? ` [${m.dimension_names.map((n, d) => n || `dim ${d}`).join(", ")}]` : "";
    const attrs = m.attributes || {};
    const about = attrs.long_name || attrs.description || attrs.title || "";
    const units = attrs.units ? ` in ${attrs.units}` : "";
    summary.textContent = `Array · ${dtypeName(m) || "?"} · shape (${m.shape.join(", ")}${m.shape.length === 1 ? "," : ""})${names} · ${formatBytes(m.nbytes)} · Zarr v${m.zarr_format}${about ? ` · ${about}` : ""}${units}`;
  } else {
    const count = (m.members || []).length;
    const image = (m.multiscales || [])[0];
    const ome = image ? ` · OME-Zarr ${image.version || ""} image, ${image.levels.length} levels` : "";
    summary.textContent = `Group · ${count} member${count === 1 ? "" : "s"} · Zarr v${m.zarr_format ?? "?"}${m.implicit ? " · implicit" : ""}${ome}`;
  }
}

/**
 * Opens the node at `path`; `params` come from a URL (validated here).
 * `keepPrefs` carries the colormap, scale and data tab over from the node
 * shown before; `reload` redraws even an unchanged view (a new token).
 */
async function openNode(path, params, mode, keepPrefs = false, reload = false) {
  if (nodeController) nodeController.abort();
  const controller = new AbortController();
  nodeController = controller;
  const changed = reload || path !== state.path || !state.meta;
  state.path = path;
  tree.select(path);
  if (changed) {
    heatmap.clear();
    line.clear();
    table.clear();
    mapView.clear();
    hover.reset();
    dims.clear();
    aspectChoice = null;
    $("meta").replaceChildren();
    $("attributes").textContent = "";
    $("chunk-grid").replaceChildren();
    $("code").replaceChildren();
  }
  document.body.classList.add("node-loading");
  let meta;
  try {
    meta = await provider.meta(path, { signal: controller.signal, primary: true, report: path !== "" });
  } catch (e) {
    if (api.isAbort(e)) return;
    if (path === "" && e.status === 404) {
      // A store without a root group: list what the tree found below it.
      const members = [...infos.keys()].filter((p) => p && !p.includes("/")).map((name) => ({ name, node_type: infos.get(name).node_type }));
      meta = { path: "", node_type: "group", zarr_format: null, attributes: {}, members, implicit: true };
    } else {
      if (path === "") showError(e);
      state.meta = null;
      state.kind = { tabs: [], ndim: 0 };
      document.body.classList.remove("node-loading");
      renderHead();
      render();
      return;
    }
  } finally {
    if (nodeController === controller) nodeController = null;
  }
  if (controller.signal.aborted) return;
  document.body.classList.remove("node-loading");
  state.prevKind = state.kind;
  state.meta = meta;
  applyParams(params || {}, keepPrefs);
  if (meta.node_type === "array") {
    dims.setArray(path, meta, { rgb: state.kind.rgb, infos });
    hover.setDescriber((index) => dims.describe(index));
    hover.setHint(state.kind.tabs.includes("heatmap") || state.kind.tabs.includes("line") ? "Point at the data to read a value." : "");
  }
  renderMeta($("meta"), $("attributes"), meta);
  renderHead();
  if (mode) writeURL(mode);
  render();
}

function setState(patch, mode = "push") {
  // A heatmap's zoom is of two dimensions, a line's of one: going from
  // one to the other starts unzoomed (the code tab keeps the last's).
  const drawn = ["heatmap", "line"];
  const otherDrawn = "tab" in patch && drawn.includes(patch.tab) && drawn.includes(state.lastData) && patch.tab !== state.lastData;
  if ("dims" in patch || otherDrawn) {
    patch.zoom = null;
    patch.offset = null;
  }
  Object.assign(state, patch);
  if (["heatmap", "line", "table"].includes(state.tab)) state.lastData = state.tab;
  writeURL(mode);
  render();
}

// ---- rendering --------------------------------------------------------------

function labelsOf(meta) {
  return meta.shape.map((_, d) => dimLabel(meta, d));
}

/** `reduce=` of a drawn view: its op over the dimensions it does not display. */
function reduceParam(tab) {
  const m = state.meta;
  if (!state.reduce || !m || m.shape.length < 2 || !(tab === "heatmap" || tab === "line")) return null;
  const names = hiddenDims(m, state, tab, state.kind.rgb).map((d) => dimNames(m)[d]);
  if (names.length === 0 || names.some((n) => !n)) return null;
  return `${state.reduce}:${names.join(",")}`;
}

/** The dimension a line displays. */
function lineDim() {
  return state.meta.shape.length === 1 ? 0 : state.dims[1];
}

function keepAspect(view) {
  const ratio = view.shape[view.dims[0]] / Math.max(1, view.shape[view.dims[1]]);
  return aspectChoice ?? (ratio <= 8 && ratio >= 1 / 8);
}

/** The positions of a map's y and x dimensions. */
function mapDims(m) {
  const names = m.dimensions || [];
  return [names.indexOf(m.map.y), names.indexOf(m.map.x)];
}

function heatmapView() {
  const m = state.meta;
  const labels = labelsOf(m);
  return {
    path: state.path,
    shape: m.shape,
    dims: state.dims,
    index: state.index,
    rgb: state.kind.rgb,
    cmap: state.cmap,
    scale: state.scale,
    vmin: state.vmin,
    vmax: state.vmax,
    zoom: state.zoom,
    labels: [labels[state.dims[0]], labels[state.dims[1]]],
    reduce: reduceParam("heatmap"),
    tick: (d, i) => dims.tick(d, i),
    // An OME-Zarr image's levels, when this array is one: the heatmap reads
    // the coarsest that fills the screen.
    levels: m.multiscale ? m.multiscale.levels.map((l, index) => ({ ...l, index })) : null,
  };
}

function lineView() {
  const m = state.meta;
  const a = m.attributes || {};
  const name = a.long_name || a.standard_name || "";
  const units = a.units ? `${name ? " " : ""}(${a.units})` : "";
  const x = lineDim();
  const reduce = reduceParam("line");
  const hidden = hiddenDims(m, state, "line", false);
  const what = reduce ? `${state.reduce} of ` : "";
  return {
    path: state.path,
    n: m.shape[x],
    zoom: state.zoom,
    scale: state.scale,
    vmin: state.vmin,
    vmax: state.vmax,
    xLabel: dimLabel(m, x),
    yLabel: `${what}${name}${units}`,
    // An N-D array's line: the other dimensions at the sliders, or reduced.
    items: (slice) => m.shape.map((_, d) => (d === x ? slice : hidden.includes(d) && reduce ? ":" : String(state.index[d]))).join(","),
    extra: reduce ? { reduce } : {},
    tick: (i) => dims.tick(x, i),
  };
}

function tableView() {
  const m = state.meta;
  return {
    path: state.path,
    meta: m,
    shape: m.shape,
    dims: state.dims,
    index: state.index,
    offset: state.offset ? state.offset.slice() : [0, 0],
    labels: labelsOf(m),
  };
}

function renderTabs() {
  const k = state.kind;
  for (const t of TABS) {
    const b = $(`tab-${t}`);
    const on = t === state.tab;
    b.hidden = !k.tabs.includes(t);
    b.setAttribute("aria-selected", String(on));
    b.tabIndex = on ? 0 : -1;
    $(`panel-${t}`).hidden = !on || !k.tabs.includes(t);
  }
}

function renderToolbar() {
  const t = state.tab;
  const k = state.kind;
  const isHeat = t === "heatmap";
  const isLine = t === "line";
  const isMap = t === "map";
  $("view-toolbar").hidden = !(isHeat || isLine || isMap);
  $("color-tools").hidden = !(isHeat || isMap) || k.rgb;
  $("aspect-tools").hidden = !isHeat;
  // The map zooms itself (its own buttons, the wheel, pinches).
  document.querySelector("#view-toolbar .zoom-tools").hidden = isMap;
  for (const id of ["scale", "vmin", "vmax", "auto-range"]) $(id).disabled = isHeat && k.rgb;
  $("vmin-label").textContent = isLine ? "Y min" : "Min";
  $("vmax-label").textContent = isLine ? "Y max" : "Max";
  $("cmap").value = state.cmap;
  $("scale").value = state.scale;
  const vmin = $("vmin");
  const vmax = $("vmax");
  if (isLine) vmin.placeholder = vmax.placeholder = "auto";
  vmin.value = state.vmin === null ? "" : String(state.vmin);
  vmax.value = state.vmax === null ? "" : String(state.vmax);
  const dataTab = isHeat || isLine || isMap || t === "table" || t === "code";
  $("selection-bar").hidden = !(k.ndim >= 2 && dataTab);
  $("statusbar").hidden = !(isHeat || isLine);
}

function render() {
  renderTabs();
  const k = state.kind;
  const m = state.meta;
  if (!m) {
    $("view-toolbar").hidden = true;
    $("selection-bar").hidden = true;
    $("statusbar").hidden = true;
    return;
  }
  renderToolbar();
  if (m.node_type === "array" && k.ndim >= 1) {
    // A map shows its x and y: the sliders are the other dimensions'.
    dims.update(state.tab === "map" ? { ...state, dims: mapDims(m) } : state, { tab: state.tab });
  }
  switch (state.tab) {
    case "heatmap": {
      const view = heatmapView();
      $("keep-aspect").checked = heatmap.keepAspect = keepAspect(view);
      heatmap.show(view);
      break;
    }
    case "map":
      mapView.show({ path: state.path, meta: m, index: state.index, cmap: state.cmap, scale: state.scale, vmin: state.vmin, vmax: state.vmax, at: state.at });
      break;
    case "line":
      line.show(lineView());
      break;
    case "table":
      table.show(tableView());
      break;
    case "meta":
      loadChunks();
      break;
    case "code":
      renderCode();
      break;
  }
}

let chunksFor = null;

function loadChunks() {
  const m = state.meta;
  $("chunk-section").hidden = m.node_type !== "array";
  if (m.node_type !== "array" || chunksFor === m) return;
  chunksFor = m;
  if (chunkController) chunkController.abort();
  chunkController = new AbortController();
  renderChunkGrid($("chunk-grid"), m, chunkController.signal, provider).catch((e) => {
    if (!api.isAbort(e)) $("chunk-grid").textContent = `The chunks could not be listed: ${e.message}`;
  });
}

/** The selection of the last data view, as select items and a description. */
function codeSelection() {
  const m = state.meta;
  const k = state.kind;
  const n = m.shape.length;
  if (n === 0) return { items: [], what: null };
  let source = state.lastData;
  if (source !== "table" && !k.tabs.includes(source)) source = k.tabs.includes("heatmap") ? "heatmap" : k.tabs.includes("line") ? "line" : "table";
  if (source === "heatmap") {
    // The snippets read this array itself, never a coarser level of it.
    const v = { ...heatmapView(), levels: null };
    const full = [0, m.shape[v.dims[0]], 0, m.shape[v.dims[1]]];
    heatmap.keepAspect = keepAspect(v);
    const sel = heatmap.selection(v, v.zoom || full);
    if (sel) {
      const image = ["format=png", `cmap=${state.cmap}`, `scale=${state.scale}`];
      if (state.vmin !== null) image.push(`vmin=${state.vmin}`);
      if (state.vmax !== null) image.push(`vmax=${state.vmax}`);
      const reduce = reduceParam("heatmap");
      if (reduce) image.push(`reduce=${reduce}`);
      return { items: sel.select.split(","), what: "heatmap", image: k.rgb ? "format=png" : image.join("&"), reduce };
    }
  }
  if (source === "line") {
    const v = lineView();
    const sel = line.selection(v.zoom || [0, v.n]);
    if (sel) return { items: v.items(sel.select).split(","), what: "line plot", image: null, reduce: reduceParam("line") };
  }
  const sel = table.selection(tableView());
  return { items: sel.select ? sel.select.split(",") : [], what: "table", image: null };
}

/** The result's shape, without the dimensions a reduction removes. */
function reducedShape(sel, meta) {
  const shape = resultShape(sel.items, meta.shape);
  if (!sel.reduce) return shape;
  const reduced = sel.reduce.split(":")[1].split(",");
  const names = dimNames(meta);
  const kept = sel.items.map((it, d) => [it, d]).filter(([it]) => !/^-?\d+$/.test(it));
  return shape.filter((_, k) => !reduced.includes(names[kept[k][1]]));
}

function resultShape(items, shape) {
  const out = [];
  items.forEach((it, d) => {
    if (/^-?\d+$/.test(it)) return;
    const [a = "", b = "", s = ""] = it.split(":");
    const lo = a === "" ? 0 : Number(a);
    const hi = b === "" ? shape[d] : Number(b);
    const step = s === "" ? 1 : Number(s);
    out.push(Math.max(0, Math.ceil((hi - lo) / step)));
  });
  return out;
}

function renderCode() {
  const m = state.meta;
  const sel = codeSelection();
  renderSnippets($("code"), {
    origin: location.origin,
    path: state.path,
    meta: m,
    token: api.getToken(),
    items: sel.items,
    what: sel.what,
    image: sel.image,
    coords: dims.coordPaths(),
    resultShape: reducedShape(sel, m),
    reduce: sel.reduce || null,
    label: (d, i) => {
      const labels = dims.labelsOf(d);
      return labels ? labels[i] : undefined;
    },
  });
}

// ---- controls ---------------------------------------------------------------

function setupControls() {
  const cmap = $("cmap");
  cmap.replaceChildren(...Object.keys(env.settings.colormaps).map((name) => el("option", { value: name }, name)));
  if (!cmap.options.length) cmap.append(el("option", { value: "viridis" }, "viridis"));
  cmap.addEventListener("change", () => setState({ cmap: cmap.value }));
  $("scale").addEventListener("change", () => setState({ scale: $("scale").value }));
  for (const id of ["vmin", "vmax"]) {
    const input = $(id);
    const commit = () => {
      const text = input.value.trim();
      const v = text === "" ? null : Number(text);
      if (v !== null && !Number.isFinite(v)) {
        input.setAttribute("aria-invalid", "true");
        input.title = "Not a number";
        return;
      }
      input.removeAttribute("aria-invalid");
      input.title = "";
      if (v !== state[id]) setState({ [id]: v });
    };
    input.addEventListener("change", commit);
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") commit();
    });
  }
  $("auto-range").addEventListener("click", () => {
    $("vmin").value = "";
    $("vmax").value = "";
    setState({ vmin: null, vmax: null });
  });
  $("keep-aspect").addEventListener("change", () => {
    aspectChoice = $("keep-aspect").checked;
    heatmap.setKeepAspect(aspectChoice);
  });
  const active = () => (state.tab === "heatmap" ? heatmap : state.tab === "line" ? line : null);
  $("zoom-in").addEventListener("click", () => active() && active().zoomIn());
  $("zoom-out").addEventListener("click", () => active() && active().zoomOut());
  $("zoom-reset").addEventListener("click", () => active() && active().reset());

  const tabs = $("tabs");
  tabs.addEventListener("click", (e) => {
    const b = e.target.closest('[role="tab"]');
    if (b) selectTab(b.id.slice(4));
  });
  tabs.addEventListener("keydown", (e) => {
    const visible = TABS.filter((t) => state.kind.tabs.includes(t));
    const i = visible.indexOf(state.tab);
    let next = null;
    if (e.key === "ArrowRight") next = visible[(i + 1) % visible.length];
    else if (e.key === "ArrowLeft") next = visible[(i - 1 + visible.length) % visible.length];
    else if (e.key === "Home") next = visible[0];
    else if (e.key === "End") next = visible[visible.length - 1];
    if (next) {
      e.preventDefault();
      selectTab(next);
      $(`tab-${next}`).focus();
    }
  });

  $("tree-toggle").addEventListener("click", () => setTreeOpen(!isTreeOpen()));

  // Links to nodes anywhere on the page open in place.
  document.addEventListener("click", (e) => {
    const a = e.target.closest("a[data-nav]");
    if (!a || e.defaultPrevented || e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(a.dataset.nav);
  });

  window.addEventListener("popstate", () => {
    const p = readURL();
    if (p.path !== state.path || !state.meta) openNode(p.path, p, null);
    else {
      // The URL is the whole truth here: absent parameters are defaults.
      applyParams(p, false);
      render();
    }
  });

  NARROW.addEventListener("change", () => setTreeOpen(!NARROW.matches));
}

function isTreeOpen() {
  return NARROW.matches ? document.body.classList.contains("tree-open") : !document.body.classList.contains("tree-closed");
}

function selectTab(tab) {
  if (!state.kind.tabs.includes(tab) || tab === state.tab) return;
  setState({ tab });
}

// ---- start ------------------------------------------------------------------

async function start() {
  setupToken();
  setupSignIn();
  setTreeOpen(!NARROW.matches);
  try {
    env.settings = await provider.settings({ report: false });
  } catch {
    // An older server without the settings document: the defaults do.
  }
  $("server-version").textContent = env.settings.version ? `zarrd ${env.settings.version}` : "";
  heatmap = new Heatmap({
    provider,
    container: $("heatmap"),
    image: $("heatmap-image"),
    message: $("heatmap-message"),
    colorbar: $("colorbar"),
    settings: env.settings,
    onZoom: (zoom) => {
      state.zoom = zoom;
      writeURL("replace");
    },
    onHover,
    onLoad: ({ vmin, vmax }) => {
      const auto = (v) => (v === null || v === "" ? "auto" : `auto ${formatTick(Number(v))}`);
      $("vmin").placeholder = auto(vmin);
      $("vmax").placeholder = auto(vmax);
    },
  });
  line = new LinePlot({
    provider,
    container: $("lineplot-box"),
    plot: $("lineplot"),
    message: $("lineplot-message"),
    onZoom: (zoom) => {
      state.zoom = zoom;
      writeURL("replace");
    },
    onHover,
  });
  setupControls();
  const p = readURL();
  state.path = p.path;
  // The node opens while the tree loads; coordinate arrays are looked up in
  // the tree once it is there.
  const treeLoaded = loadTree().then(() => {
    if (state.meta && state.meta.node_type === "array" && dims.findCoords(state.meta, infos)) {
      if (state.tab === "code") renderCode();
    }
  });
  await openNode(p.path, p, "replace");
  await treeLoaded;
}

start();
