// The dimension mapper: which two dimensions are displayed, and a slider
// for every other one, labelled with the dimension's name and, where a
// coordinate array exists, the coordinate at the chosen index.

import { el, formatValue } from "./format.js";

// Coordinate arrays up to this length are read whole, once.
const WHOLE_COORDS = 100000;

export function dimLabel(meta, d) {
  const n = meta.dimension_names && meta.dimension_names[d];
  return n || `dim ${d}`;
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
    this.pick = el(
      "div",
      { class: "dim-pick" },
      el("label", { for: "dim-rows" }, "Rows"),
      this.rows,
      this.swap,
      el("label", { for: "dim-cols" }, "Columns"),
      this.cols
    );
    container.replaceChildren(this.pick, this.sliders);
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
    const n = this.meta.shape.length;
    const list = [];
    for (let d = 0; n >= 2 && d < n; d++) {
      const channel = this.rgb && d === n - 1;
      if (d === r || d === c) continue;
      if (channel && tab === "heatmap") continue;
      list.push(d);
    }
    const key = list.join(",");
    if (key !== this.built) {
      this.buildSliders(list);
      this.built = key;
    }
    for (const d of list) {
      const s = this.sliderEls[d];
      s.input.value = String(state.index[d]);
      this.showIndex(d, state.index[d]);
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
    if (c.values) return i < c.values.length ? formatValue(c.values[i], c.dtype) : "";
    return c.cache.has(i) ? c.cache.get(i) : null;
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
      const name = this.meta.dimension_names && this.meta.dimension_names[d];
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
    const names = meta.dimension_names || [];
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
