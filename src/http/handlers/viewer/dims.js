// The dimension mapper: which dimensions are displayed (two for a
// heatmap, one for a line), and a slider for every other one, labelled with
// the dimension's name and, where a coordinate array exists, the
// coordinate at the chosen index (times as dates, as the server labels
// them); or a reduction of all of them (a time-mean map, an area-mean
// series), computed by the server.

import { el, formatValue } from "./format.js";
import { REDUCTIONS } from "./state.js";

// Coordinate arrays up to this length are read whole, once.
const WHOLE_COORDS = 100000;

/** The dimensions' names: v3's `dimension_names`, or what the server read (v2's `_ARRAY_DIMENSIONS`). */
export function dimNames(meta) {
  return meta.dimension_names || meta.dimensions || [];
}

export function dimLabel(meta, d) {
  return dimNames(meta)[d] || `dim ${d}`;
}

/** The dimensions a view does not display: sliders, or reduced. */
export function hiddenDims(meta, state, tab, rgb) {
  const n = meta.shape.length;
  const shown = tab === "line" ? (n === 1 ? [0] : [state.dims[1]]) : state.dims;
  const out = [];
  for (let d = 0; d < n; d++) {
    if (shown.includes(d)) continue;
    if (rgb && d === n - 1) continue;
    out.push(d);
  }
  return out;
}

export class DimControls {
  constructor({ provider, container, onChange }) {
    this.provider = provider;
    this.container = container;
    this.onChange = onChange;
    this.coords = {}; // dim -> {path, values: array|null, cache: Map}
    this.meta = null;
    this.rows = el("select", { id: "dim-rows" });
    this.cols = el("select", { id: "dim-cols" });
    this.swap = el("button", { type: "button", id: "dim-swap", class: "icon-button", title: "Swap rows and columns", "aria-label": "Swap rows and columns" }, "⇅");
    this.sliders = el("div", { class: "sliders" });
    this.reduce = el(
      "select",
      { id: "dim-reduce", title: "What the dimensions not displayed show: the sliders' positions, or a reduction over all of them (computed by the server)" },
      el("option", { value: "" }, "at the sliders"),
      ...REDUCTIONS.map((op) => el("option", { value: op }, op))
    );
    this.rowsLabel = el("label", { for: "dim-rows" }, "Rows");
    this.colsLabel = el("label", { for: "dim-cols" }, "Columns");
    this.pick = el(
      "div",
      { class: "dim-pick" },
      this.rowsLabel,
      this.rows,
      this.swap,
      this.colsLabel,
      this.cols,
      el("label", { for: "dim-reduce" }, "Others"),
      this.reduce
    );
    container.replaceChildren(this.pick, this.sliders);
    this.reduce.addEventListener("change", () => this.onChange({ reduce: this.reduce.value || null }, "push"));
    this.rows.addEventListener("change", () => this.pickDims("rows"));
    this.cols.addEventListener("change", () => this.pickDims("cols"));
    this.swap.addEventListener("click", () => {
      const [r, c] = this.state.dims;
      this.onChange({ dims: [c, r] }, "push");
    });
  }

  /** A new array: builds the controls; coordinates load in the background. */
  setArray(path, meta, { rgb, infos }) {
    this.path = path;
    this.meta = meta;
    this.rgb = rgb;
    this.coords = {};
    const n = meta.shape.length;
    const choices = rgb ? n - 1 : n;
    this.rows.replaceChildren();
    this.cols.replaceChildren();
    for (let d = 0; d < choices; d++) {
      const text = `${dimLabel(meta, d)} (${meta.shape[d]})`;
      this.rows.append(el("option", { value: d }, text));
      this.cols.append(el("option", { value: d }, text));
    }
    this.sliders.replaceChildren();
    this.sliderEls = {};
    this.built = "";
    this.findCoords(meta, infos);
  }

  // Sliders exist only for the dimensions not displayed (and not for the
  // colour channels of an RGB picture while it is drawn as one).
  buildSliders(list) {
    const meta = this.meta;
    this.sliders.replaceChildren();
    this.sliderEls = {};
    for (const d of list) {
      const id = `dim-index-${d}`;
      const input = el("input", {
        type: "range",
        id,
        min: 0,
        max: Math.max(0, meta.shape[d] - 1),
        step: 1,
        value: 0,
        "data-dim": d,
        disabled: meta.shape[d] <= 1 ? true : null,
      });
      const output = el("output", { for: id, id: `dim-value-${d}`, "data-dim": d }, "0");
      const label = el(
        "label",
        { for: id },
        el("span", { class: "dim-name" }, dimLabel(meta, d)),
        el("span", { class: "muted" }, ` (${meta.shape[d]})`)
      );
      const box = el("div", { class: "slider", "data-dim": d }, label, input, output);
      input.addEventListener("input", () => {
        const index = this.state.index.slice();
        index[d] = Number(input.value);
        this.showIndex(d, index[d]);
        this.onChange({ index }, "replace");
      });
      this.sliderEls[d] = { box, input, output };
      this.sliders.append(box);
    }
  }

  clear() {
    this.meta = null;
    this.coords = {};
    this.sliders.replaceChildren();
    this.sliderEls = {};
    this.built = "";
  }

  pickDims(which) {
    let r = Number(this.rows.value);
    let c = Number(this.cols.value);
    const [or, oc] = this.state.dims;
    if (r === c) {
      // Picking the other axis's dimension swaps the two.
      if (which === "rows") c = or;
      else r = oc;
    }
    this.onChange({ dims: [r, c] }, "push");
  }

  /** Syncs the controls with the view state. */
  update(state, { tab }) {
    this.state = state;
    const [r, c] = state.dims;
    this.rows.value = String(r);
    this.cols.value = String(c);
    const line = tab === "line";
    const map = tab === "map";
    // A line displays one dimension: the columns' one, on its x axis; a
    // map its own x and y.
    for (const e of [this.rows, this.rowsLabel, this.swap]) e.hidden = line || map;
    this.cols.hidden = this.colsLabel.hidden = map;
    this.colsLabel.textContent = line ? "X axis" : "Columns";
    this.reduce.value = state.reduce || "";
    // The server reduces dimensions by name.
    this.reduce.disabled = !dimNames(this.meta).some(Boolean);
    const drawn = tab === "heatmap" || line;
    this.reduce.hidden = !drawn;
    this.reduce.previousSibling.hidden = !drawn;
    const n = this.meta.shape.length;
    const list = n >= 2 ? hiddenDims(this.meta, state, tab, this.rgb && tab === "heatmap") : [];
    const key = list.join(",");
    if (key !== this.built) {
      this.buildSliders(list);
      this.built = key;
    }
    const reduced = drawn && state.reduce;
    for (const d of list) {
      const s = this.sliderEls[d];
      s.input.value = String(state.index[d]);
      s.input.disabled = reduced || this.meta.shape[d] <= 1 ? true : null;
      s.box.classList.toggle("reduced", Boolean(reduced));
      if (reduced) s.output.textContent = `${state.reduce} over all`;
      else this.showIndex(d, state.index[d]);
    }
    this.sliders.hidden = list.length === 0;
    this.pick.hidden = n < 2;
  }

  showIndex(d, i) {
    const s = this.sliderEls[d];
    if (!s) return;
    const coord = this.coords[d];
    s.input.setAttribute("aria-valuetext", `${i}${coord ? ` (${this.coordText(d, i) || "…"})` : ""}`);
    if (!coord) {
      s.output.textContent = String(i);
      return;
    }
    const text = this.coordText(d, i);
    if (text !== null) {
      s.output.textContent = `${i} (${text})`;
      return;
    }
    s.output.textContent = `${i} (…)`;
    this.coordAt(d, i).then(() => {
      if (this.state && this.state.index[d] === i && this.coords[d] === coord) this.showIndex(d, i);
    });
  }

  /** The coordinate of index i along d as text, or null when not read yet. */
  coordText(d, i) {
    const c = this.coords[d];
    if (!c) return "";
    if (c.labels) return i < c.labels.length ? labelText(c.labels[i]) : "";
    if (c.values) return i < c.values.length ? formatValue(c.values[i], c.dtype) : "";
    return c.cache.has(i) ? c.cache.get(i) : null;
  }

  /** An axis tick at index i along d: its coordinate once read, else the index. */
  tick(d, i) {
    const text = this.coordText(d, i);
    return text ? text : String(i);
  }

  /** Coordinate labels of d, as the server wrote them (null until read). */
  labelsOf(d) {
    const c = this.coords[d];
    return c && c.labels ? c.labels : null;
  }

  async coordAt(d, i) {
    const c = this.coords[d];
    if (!c || c.values || c.cache.has(i)) return;
    try {
      const answer = await this.provider.element(c.path, String(i), { report: false });
      c.cache.set(i, formatValue(answer.value, answer.dtype));
    } catch (e) {
      if (!this.provider.isAbort(e)) c.cache.set(i, "?");
    }
  }

  /** Labels of every dimension, for axes and tables. */
  labels() {
    return this.meta.shape.map((_, d) => dimLabel(this.meta, d));
  }

  /** "time=3 (2020-01-04), …" for the dims of an index, for the hover line. */
  describe(index) {
    if (!this.meta) return "";
    const parts = [];
    index.forEach((i, d) => {
      const name = dimNames(this.meta)[d];
      const text = this.coordText(d, i);
      if (name && this.coords[d] && text) parts.push(`${name} = ${text}`);
    });
    return parts.join(", ");
  }

  /**
   * Finds coordinate arrays (1-D, named like a dimension, same length, in
   * the same group) at once from the tree; their values load afterwards.
   */
  findCoords(meta, infos) {
    const names = dimNames(meta);
    const slash = this.path.lastIndexOf("/");
    const parent = slash < 0 ? "" : this.path.slice(0, slash);
    const path = this.path;
    const found = [];
    names.forEach((name, d) => {
      if (!name) return;
      const candidate = parent ? `${parent}/${name}` : name;
      const info = infos && infos.get(candidate);
      if (!info || candidate === path || info.node_type !== "array") return;
      if (!info.shape || info.shape.length !== 1 || info.shape[0] !== meta.shape[d]) return;
      const coord = { path: candidate, values: null, cache: new Map(), dtype: info.dtype };
      this.coords[d] = coord;
      found.push([d, coord]);
    });
    for (const [d, coord] of found) this.loadCoord(path, d, coord);
    return found.length > 0;
  }

  async loadCoord(path, d, coord) {
    if (this.meta.shape[d] <= WHOLE_COORDS) {
      try {
        const doc = await this.provider.values(coord.path, undefined, { report: false });
        if (this.path !== path) return;
        coord.values = Array.isArray(doc.data) ? doc.data : null;
        coord.dtype = doc.dtype;
        // The server's labels of its own dimension: dates for CF times.
        const own = doc.coords && doc.dims && doc.coords[doc.dims[0]];
        coord.labels = own && Array.isArray(own.data) ? own.data : null;
        if (this.onCoords) this.onCoords();
      } catch (e) {
        if (this.provider.isAbort(e)) return;
      }
    }
    if (this.state && this.path === path && this.sliderEls[d]) this.showIndex(d, this.state.index[d]);
  }

  /** Coordinate arrays found, as {dim: {path}}. */
  coordPaths() {
    const out = {};
    for (const [d, c] of Object.entries(this.coords)) out[d] = { path: c.path };
    return out;
  }
}

/** A label as shown: ISO times without a midnight's zeros, numbers as numbers. */
export function labelText(label) {
  if (typeof label === "string") return label.replace(/T00:00:00$/, "");
  return formatValue(label, "float64");
}
