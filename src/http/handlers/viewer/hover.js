// The value under the cursor, read exactly from the server (never guessed
// from image colours): one small JSON read per resting position, with a
// cache so moving back and forth costs nothing.

import { formatValue, debounce } from "./format.js";

const CACHE_SIZE = 256;
const DELAY_MS = 90;

export class Hover {
  constructor(element, provider) {
    this.provider = provider;
    this.element = element;
    this.cache = new Map();
    this.controller = null;
    this.pending = null;
    this.fetchSoon = debounce(() => this.fetch(), DELAY_MS);
    this.describe = () => "";
  }

  /** `describe(index)` labels an index (dimension names, coordinates). */
  setDescriber(fn) {
    this.describe = fn;
  }

  reset() {
    this.fetchSoon.cancel();
    if (this.controller) this.controller.abort();
    this.pending = null;
    this.element.replaceChildren();
    this.element.removeAttribute("data-index");
    this.element.removeAttribute("data-value");
    this.element.replaceChildren(span("hv-hint", this.hint || ""));
  }

  setHint(text) {
    this.hint = text;
    if (!this.element.hasAttribute("data-index") && !this.pending) {
      this.element.replaceChildren(span("hv-hint", text));
    }
  }

  /**
   * Shows `index` of the array at `path` now and its value once read. A
   * dimension `skip` (the channels of an RGB image) is read whole.
   */
  request(path, index, skip = -1, dtype = "", query = null) {
    const idx = skip >= 0 ? index.slice(0, skip) : index.slice();
    // A reduced view reads its value with the view's selection and reduction.
    const key = `${path}\u0000${idx.join(",")}\u0000${query ? `${query.select}&${query.reduce}` : ""}`;
    if (this.pending && this.pending.key === key) return;
    this.pending = { key, path, index: idx, dtype, query };
    const cached = this.cache.get(key);
    if (cached) {
      this.fetchSoon.cancel();
      this.show(this.pending, cached);
      return;
    }
    this.showIndex(idx, "…");
    this.fetchSoon();
  }

  async fetch() {
    const p = this.pending;
    if (!p) return;
    if (this.controller) this.controller.abort();
    const controller = new AbortController();
    this.controller = controller;
    try {
      const answer = p.query
        ? await this.reduced(p, controller.signal)
        : await this.provider.element(p.path, p.index.join(","), { signal: controller.signal });
      this.cache.set(p.key, answer);
      if (this.cache.size > CACHE_SIZE) this.cache.delete(this.cache.keys().next().value);
      if (this.pending === p) this.show(p, answer);
    } catch (e) {
      if (this.provider.isAbort(e)) return;
      if (this.pending === p) this.showIndex(p.index, "unreadable");
    }
  }

  async reduced(p, signal) {
    const doc = await this.provider.values(p.path, p.query.select, { signal }, { reduce: p.query.reduce });
    return { value: doc.data, raw: JSON.stringify(doc.data), dtype: doc.dtype };
  }

  showIndex(index, valueText) {
    const where = this.describe(index);
    this.element.replaceChildren(
      span("hv-index", `[${index.join(", ")}]`),
      " ",
      where ? span("hv-where", where) : "",
      where ? " " : "",
      span("hv-value", valueText)
    );
  }

  show(p, answer) {
    const text = formatValue(answer.value, answer.dtype || p.dtype);
    this.showIndex(p.index, text);
    // Strings as themselves, everything else as the JSON text the server wrote.
    const attr = typeof answer.value === "string" ? answer.value : answer.raw;
    this.element.setAttribute("data-index", p.index.join(","));
    this.element.setAttribute("data-value", attr);
  }
}

function span(cls, text) {
  const s = document.createElement("span");
  s.className = cls;
  s.textContent = text;
  return s;
}
