// Values as a table: one page (at most 100 rows by 50 columns) of the
// displayed 2-D slice, read as JSON, with each cell's full index on it.

import { el, formatValue } from "./format.js";

export const PAGE_ROWS = 100;
export const PAGE_COLS = 50;

/** Field names of a structured dtype (from the meta answer's numpy form). */
export function fieldsOf(meta) {
  const np = meta && meta.dtype && meta.dtype.numpy;
  return Array.isArray(np) ? np.map((f) => f[0]) : null;
}

export class TableView {
  constructor({ provider, table, info, message, controls, onOffset }) {
    this.provider = provider;
    this.table = table;
    this.info = info;
    this.message = message;
    this.controls = controls; // {prev, next, left, right, row, col}
    this.onOffset = onOffset;
    this.view = null;
    this.requested = "";
    this.controller = null;
    const c = controls;
    c.prev.addEventListener("click", () => this.move(-PAGE_ROWS, 0));
    c.next.addEventListener("click", () => this.move(PAGE_ROWS, 0));
    c.left.addEventListener("click", () => this.move(0, -this.pageCols()));
    c.right.addEventListener("click", () => this.move(0, this.pageCols()));
    const jump = () => {
      const r = parseInt(c.row.value, 10);
      const k = parseInt(c.col.value, 10);
      this.setOffset(Number.isFinite(r) ? r : 0, Number.isFinite(k) ? k : 0);
    };
    c.row.addEventListener("change", jump);
    c.col.addEventListener("change", jump);
  }

  /** view: {path, meta, shape, dims, index, offset: [row, col]} */
  show(view) {
    this.view = view;
    this.fields = fieldsOf(view.meta);
    this.dtype = typeof view.meta.dtype.zarr === "string" ? view.meta.dtype.zarr : "";
    this.load();
  }

  clear() {
    if (this.controller) this.controller.abort();
    this.controller = null;
    this.view = null;
    this.requested = "";
    this.table.replaceChildren();
    this.table.removeAttribute("data-select");
    this.message.textContent = "";
  }

  // Shape of the paged window: [rows, cols] along the displayed dims.
  extent(v = this.view) {
    const nd = v.shape.length;
    if (nd === 0) return [1, 1];
    if (nd === 1) return [v.shape[0], 1];
    return [v.shape[v.dims[0]], v.shape[v.dims[1]]];
  }

  pageCols(v = this.view) {
    const nd = v ? v.shape.length : 2;
    if (nd < 2) return 1;
    const fields = v ? fieldsOf(v.meta) : null;
    return fields ? Math.max(1, Math.floor(PAGE_COLS / fields.length)) : PAGE_COLS;
  }

  move(dr, dc) {
    if (!this.view) return;
    const [r, c] = this.view.offset || [0, 0];
    this.setOffset(r + dr, c + dc);
  }

  setOffset(r, c) {
    if (!this.view) return;
    const [nr, nc] = this.extent();
    r = Math.max(0, Math.min(r, Math.max(0, nr - 1)));
    c = Math.max(0, Math.min(c, Math.max(0, nc - 1)));
    this.view.offset = [r, c];
    this.onOffset(r === 0 && c === 0 ? null : [r, c]);
    this.load();
  }

  selection(v = this.view) {
    const nd = v.shape.length;
    const [nr, nc] = this.extent(v);
    const r0 = Math.max(0, Math.min((v.offset || [0, 0])[0], nr - 1));
    const c0 = Math.max(0, Math.min((v.offset || [0, 0])[1], nc - 1));
    const r1 = Math.min(nr, r0 + PAGE_ROWS);
    const c1 = Math.min(nc, c0 + this.pageCols(v));
    if (nd === 0) return { select: null, r0: 0, r1: 1, c0: 0, c1: 1 };
    if (nd === 1) return { select: `${r0}:${r1}`, r0, r1, c0: 0, c1: 1 };
    const [R, C] = v.dims;
    const items = v.shape.map((_, d) => (d === R ? `${r0}:${r1}` : d === C ? `${c0}:${c1}` : String(v.index[d])));
    return { select: items.join(","), r0, r1, c0, c1 };
  }

  async load() {
    const v = this.view;
    if (!v) return;
    const sel = this.selection();
    const key = JSON.stringify([v.path, sel.select]);
    this.updateControls(sel);
    if (key === this.requested) return;
    this.requested = key;
    if (this.controller) this.controller.abort();
    const controller = new AbortController();
    this.controller = controller;
    this.table.dataset.state = "loading";
    try {
      const doc = await this.provider.values(v.path, sel.select, { signal: controller.signal, primary: true });
      if (controller.signal.aborted) return;
      this.render(doc, sel);
      this.table.dataset.select = sel.select ?? "";
      this.table.dataset.state = "ready";
      this.message.textContent = "";
    } catch (e) {
      if (this.provider.isAbort(e) || controller.signal.aborted) return;
      this.requested = "";
      this.table.dataset.state = "error";
      this.table.replaceChildren();
      this.message.textContent = `These values could not be read: ${e.message}`;
    } finally {
      if (this.controller === controller) this.controller = null;
    }
  }

  updateControls(sel) {
    const [nr, nc] = this.extent();
    const c = this.controls;
    const nd = this.view.shape.length;
    c.prev.disabled = sel.r0 <= 0;
    c.next.disabled = sel.r1 >= nr;
    c.left.disabled = nd < 2 || sel.c0 <= 0;
    c.right.disabled = nd < 2 || sel.c1 >= nc;
    c.row.value = String(sel.r0);
    c.row.max = String(Math.max(0, nr - 1));
    c.col.value = String(sel.c0);
    c.col.max = String(Math.max(0, nc - 1));
    c.col.disabled = nd < 2;
    c.left.hidden = c.right.hidden = nd < 2;
    c.col.closest("label").hidden = nd < 2;
    if (nd === 0) this.info.textContent = "A single value.";
    else if (nd === 1) this.info.textContent = `Rows ${sel.r0}–${sel.r1 - 1} of ${nr}`;
    else this.info.textContent = `Rows ${sel.r0}–${sel.r1 - 1} of ${nr}, columns ${sel.c0}–${sel.c1 - 1} of ${nc}`;
  }

  cell(value, index, field) {
    const text = formatValue(value, this.dtype);
    const numeric = typeof value === "number" || typeof value === "bigint" || value === "NaN" || /Infinity$/.test(String(value));
    return el("td", { "data-index": index.join(","), "data-field": field, class: numeric ? "num" : null, title: text.length > 40 ? text : null }, text);
  }

  render(doc, sel) {
    const v = this.view;
    const nd = v.shape.length;
    const fields = this.fields;
    const thead = el("thead");
    const tbody = el("tbody");
    const fullIndex = (r, c) => {
      if (nd === 0) return [];
      if (nd === 1) return [r];
      const idx = v.index.slice();
      idx[v.dims[0]] = r;
      idx[v.dims[1]] = c;
      return idx;
    };
    const cellsFor = (value, index) =>
      fields ? fields.map((f) => this.cell(value && typeof value === "object" ? value[f] : value, index, f)) : [this.cell(value, index)];
    if (nd <= 1) {
      const head = el("tr", {}, el("th", { scope: "col" }, nd === 1 ? this.rowLabel() : ""));
      if (fields) for (const f of fields) head.append(el("th", { scope: "col" }, f));
      else head.append(el("th", { scope: "col" }, "value"));
      thead.append(head);
      const rows = nd === 0 ? [doc.data] : doc.data;
      rows.forEach((value, k) => {
        const r = sel.r0 + k;
        tbody.append(el("tr", {}, el("th", { scope: "row" }, nd === 0 ? "()" : String(r)), ...cellsFor(value, fullIndex(r, 0))));
      });
    } else {
      const [R, C] = v.dims;
      const transposed = R > C;
      const data = doc.data;
      const nr = sel.r1 - sel.r0;
      const nc = sel.c1 - sel.c0;
      const at = (i, j) => (transposed ? data[j][i] : data[i][j]);
      const head = el("tr", {}, el("th", { scope: "col", class: "corner" }, `${this.rowLabel()} \\ ${this.colLabel()}`));
      for (let j = 0; j < nc; j++) {
        head.append(el("th", { scope: "col", colspan: fields ? fields.length : null }, String(sel.c0 + j)));
      }
      thead.append(head);
      if (fields) {
        const sub = el("tr", {}, el("th", {}));
        for (let j = 0; j < nc; j++) for (const f of fields) sub.append(el("th", { scope: "col", class: "field" }, f));
        thead.append(sub);
      }
      for (let i = 0; i < nr; i++) {
        const tr = el("tr", {}, el("th", { scope: "row" }, String(sel.r0 + i)));
        for (let j = 0; j < nc; j++) tr.append(...cellsFor(at(i, j), fullIndex(sel.r0 + i, sel.c0 + j)));
        tbody.append(tr);
      }
    }
    this.table.replaceChildren(thead, tbody);
  }

  rowLabel() {
    const v = this.view;
    const d = v.shape.length === 1 ? 0 : v.dims[0];
    return v.labels ? v.labels[d] : `dim ${d}`;
  }

  colLabel() {
    const v = this.view;
    const d = v.dims[1];
    return v.labels ? v.labels[d] : `dim ${d}`;
  }
}
