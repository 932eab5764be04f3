// 1-D arrays as an SVG line: the visible range is read strided to the plot's
// width in pixels, so a million-element series costs one screenful of values.

import { svg, formatTick, niceTicks, logTicks, indexTicks, toNumber, debounce, zoomKeys, attachPlot } from "./format.js";

const M = { left: 66, right: 18, top: 14, bottom: 44 };
const ZOOM_STEP = 1.5;

export class LinePlot {
  constructor({ provider, container, plot, message, onZoom, onHover }) {
    this.provider = provider;
    this.container = container;
    this.plot = plot;
    this.message = message;
    this.onZoom = onZoom;
    this.onHover = onHover;
    this.view = null;
    this.region = null;
    this.live = null;
    this.data = null; // {a, step, values, url}
    this.requested = "";
    this.controller = null;
    this.drag = null;
    this.commitSoon = debounce(() => this.commit(), 220);
    this.reloadSoon = debounce(() => this.load(), 150);
    attachPlot(container, this, () => this.draw());
    container.addEventListener("keydown", (e) => this.onKey(e));
  }

  /** view: {path, n, zoom: [a, b] | null, scale, vmin, vmax, xLabel, yLabel} */
  show(view) {
    this.view = view;
    const region = view.zoom || [0, view.n];
    if (!this.region || this.region[0] !== region[0] || this.region[1] !== region[1]) {
      this.region = region.slice();
      this.live = region.slice();
    }
    this.draw();
    this.load();
  }

  clear() {
    if (this.controller) this.controller.abort();
    this.controller = null;
    this.view = null;
    this.data = null;
    this.region = null;
    this.live = null;
    this.requested = "";
    this.plot.replaceChildren();
    this.plot.removeAttribute("data-select");
    this.plot.removeAttribute("data-state");
    this.message.textContent = "";
  }

  // While hidden, the size it had when last shown (for the code tab).
  size() {
    let w = this.container.clientWidth;
    let h = this.container.clientHeight;
    if (w > 0 && h > 0) this.lastSize = { w, h };
    else if (this.lastSize) ({ w, h } = this.lastSize);
    else {
      const panels = this.container.closest(".panels");
      w = Math.max(200, panels ? panels.clientWidth : 800);
      h = Math.max(200, panels ? panels.clientHeight : 400);
    }
    return { w, h, pw: Math.max(0, w - M.left - M.right), ph: Math.max(0, h - M.top - M.bottom) };
  }

  visible() {
    return this.container.clientWidth > 0 && this.container.clientHeight > 0;
  }

  selection(region = this.region) {
    const { pw } = this.size();
    if (pw < 1) return null;
    const [a, b] = region;
    const step = Math.max(1, Math.ceil((b - a) / Math.max(1, Math.floor(pw))));
    return { a, b, step, select: `${a}:${b}${step > 1 ? `:${step}` : ""}` };
  }

  async load() {
    if (!this.view || !this.visible()) return;
    const sel = this.selection();
    if (!sel) return;
    const v = this.view;
    // An N-D array's line: the full selection and its reduction.
    const select = v.items ? v.items(sel.select) : sel.select;
    const extra = v.extra || {};
    const key = JSON.stringify([v.path, select, extra]);
    if (key === this.requested) return;
    this.requested = key;
    if (this.controller) this.controller.abort();
    const controller = new AbortController();
    this.controller = controller;
    this.plot.dataset.state = "loading";
    try {
      const doc = await this.provider.values(v.path, select, { signal: controller.signal, primary: true }, extra);
      if (controller.signal.aborted) return;
      const values = Array.isArray(doc.data) ? doc.data.map(toNumber) : [toNumber(doc.data)];
      this.data = { a: sel.a, step: sel.step, values };
      this.plot.dataset.select = sel.select;
      this.message.textContent = "";
      this.draw();
      this.plot.dataset.state = "ready";
    } catch (e) {
      if (this.provider.isAbort(e) || controller.signal.aborted) return;
      this.requested = "";
      this.plot.dataset.state = "error";
      this.message.textContent = `This range could not be read: ${e.message}`;
    } finally {
      if (this.controller === controller) this.controller = null;
    }
  }

  // x of element i for the live region.
  xScale() {
    const { pw } = this.size();
    const [a, b] = this.live;
    const lo = a;
    const hi = Math.max(b - 1, a + 1e-9);
    return {
      lo,
      hi,
      x: (i) => M.left + ((i - lo) / (hi - lo)) * pw,
      inv: (x) => lo + ((x - M.left) / pw) * (hi - lo),
    };
  }

  yDomain() {
    const v = this.view;
    const log = v.scale === "log";
    let lo = Infinity;
    let hi = -Infinity;
    if (this.data) {
      for (const y of this.data.values) {
        if (!Number.isFinite(y) || (log && y <= 0)) continue;
        if (y < lo) lo = y;
        if (y > hi) hi = y;
      }
    }
    if (v.vmin !== null && v.vmin !== undefined) lo = v.vmin;
    if (v.vmax !== null && v.vmax !== undefined) hi = v.vmax;
    if (!Number.isFinite(lo) || !Number.isFinite(hi)) return log ? [1, 10] : [0, 1];
    if (log) {
      lo = Math.max(lo, Number.MIN_VALUE);
      hi = Math.max(hi, lo);
      if (lo === hi) return [lo / 10, hi * 10];
      const pad = (Math.log10(hi) - Math.log10(lo)) * 0.05;
      const manual = v.vmin !== null && v.vmin !== undefined && v.vmax !== null && v.vmax !== undefined;
      return manual ? [lo, hi] : [10 ** (Math.log10(lo) - pad), 10 ** (Math.log10(hi) + pad)];
    }
    if (lo === hi) return [lo - 1, hi + 1];
    const manual = v.vmin !== null && v.vmin !== undefined && v.vmax !== null && v.vmax !== undefined;
    if (manual) return [lo, hi];
    const pad = (hi - lo) * 0.05;
    return [lo - pad, hi + pad];
  }

  draw() {
    const v = this.view;
    if (!v || !this.visible()) return;
    const { w, h, pw, ph } = this.size();
    const p = this.plot;
    p.setAttribute("width", w);
    p.setAttribute("height", h);
    p.setAttribute("viewBox", `0 0 ${w} ${h}`);
    if (pw < 1 || ph < 1) return;
    const log = v.scale === "log";
    const [ylo, yhi] = this.yDomain();
    const t = (y) => (log ? Math.log10(y) : y);
    const Y = (y) => M.top + ph - ((t(y) - t(ylo)) / (t(yhi) - t(ylo))) * ph;
    const xs = this.xScale();
    const parts = [];
    const bottom = M.top + ph;
    const right = M.left + pw;
    const yticks = log ? logTicks(ylo, yhi, Math.max(2, Math.floor(ph / 50))) : niceTicks(ylo, yhi, Math.max(2, Math.floor(ph / 50)));
    for (const tv of yticks) {
      const y = Y(tv);
      if (y < M.top - 0.5 || y > bottom + 0.5) continue;
      parts.push(svg("line", { class: "grid", x1: M.left, x2: right, y1: y, y2: y }));
      parts.push(svg("line", { class: "tick", x1: M.left - 5, x2: M.left, y1: y, y2: y }));
      parts.push(svg("text", { class: "tick-label", x: M.left - 8, y: y + 4, "text-anchor": "end", text: formatTick(tv) }));
    }
    const xticks = indexTicks(Math.ceil(xs.lo), Math.floor(xs.hi), Math.max(2, Math.floor(pw / 90)));
    for (const tv of xticks) {
      const x = xs.x(tv);
      if (x < M.left - 0.5 || x > right + 0.5) continue;
      parts.push(svg("line", { class: "grid", x1: x, x2: x, y1: M.top, y2: bottom }));
      parts.push(svg("line", { class: "tick", x1: x, x2: x, y1: bottom, y2: bottom + 5 }));
      parts.push(svg("text", { class: "tick-label", x, y: bottom + 18, "text-anchor": "middle", text: v.tick ? v.tick(tv) : String(tv) }));
    }
    parts.push(svg("rect", { class: "frame", x: M.left, y: M.top, width: pw, height: ph }));
    parts.push(svg("text", { class: "axis-title", x: M.left + pw / 2, y: h - 6, "text-anchor": "middle", text: v.xLabel || "index" }));
    if (v.yLabel) {
      const cy = M.top + ph / 2;
      parts.push(svg("text", { class: "axis-title", x: 14, y: cy, "text-anchor": "middle", transform: `rotate(-90 14 ${cy})`, text: v.yLabel }));
    }
    const clip = svg("clipPath", { id: "lineplot-clip" }, svg("rect", { x: M.left, y: M.top, width: pw, height: ph }));
    parts.push(svg("defs", {}, clip));
    if (this.data) {
      const { a, step, values } = this.data;
      let d = "";
      let pen = false;
      const few = values.length <= Math.max(2, pw / 8);
      const dots = [];
      for (let k = 0; k < values.length; k++) {
        const y = values[k];
        if (!Number.isFinite(y) || (log && y <= 0)) {
          pen = false;
          continue;
        }
        const x = xs.x(a + k * step);
        const yy = Math.max(-1e6, Math.min(1e6, Y(y)));
        d += `${pen ? "L" : "M"}${x.toFixed(2)},${yy.toFixed(2)}`;
        pen = true;
        if (few) dots.push(svg("circle", { class: "dot", cx: x.toFixed(2), cy: yy.toFixed(2), r: 2.5 }));
      }
      parts.push(svg("g", { "clip-path": "url(#lineplot-clip)" }, svg("path", { class: "series", d }), ...dots));
    } else {
      // The series' element exists from the first frame; its points follow.
      parts.push(svg("path", { class: "series", d: "" }));
    }
    this.crosshair = svg("g", { class: "crosshair", visibility: "hidden" }, svg("line", { y1: M.top, y2: bottom }), svg("circle", { r: 4 }));
    parts.push(this.crosshair);
    p.replaceChildren(...parts);
    this.Y = Y;
  }

  // x within the padding box, where the plot is drawn.
  localX(e) {
    return e.clientX - this.container.getBoundingClientRect().left - this.container.clientLeft;
  }

  onWheel(e) {
    if (!this.view) return;
    e.preventDefault();
    const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? 400 : 1;
    const delta = Math.max(-300, Math.min(300, e.deltaY * unit));
    const x = this.localX(e);
    this.zoomAt(x, Math.exp(delta * 0.002));
    this.commitSoon();
  }

  zoomAt(x, factor) {
    const { pw } = this.size();
    if (pw < 1) return;
    const n = this.view.n;
    const [a, b] = this.live;
    const anchor = this.xScale().inv(x);
    let ext = (b - a) * factor;
    if (ext < 2) {
      if (factor < 1) return;
      ext = 2;
    }
    if (ext >= n) {
      this.live = [0, n];
    } else {
      const f = Math.min(1, Math.max(0, (x - M.left) / pw));
      let lo = anchor - f * (ext - 1);
      lo = Math.min(Math.max(0, lo), n - ext);
      this.live = [lo, lo + ext];
    }
    this.draw();
  }

  panBy(dx) {
    const { pw } = this.size();
    const n = this.view.n;
    const [a, b] = this.live;
    const ext = b - a;
    const per = (Math.max(b - 1, a + 1) - a) / Math.max(1, pw);
    let lo = a - dx * per;
    lo = Math.min(Math.max(0, lo), n - ext);
    this.live = [lo, lo + ext];
    this.draw();
  }

  commit() {
    if (!this.view) return;
    const n = this.view.n;
    let a = Math.max(0, Math.round(this.live[0]));
    let b = Math.min(n, Math.max(a + 1, Math.round(this.live[1])));
    if (b - a < 1) a = Math.max(0, b - 1);
    this.live = [a, b];
    this.region = [a, b];
    this.draw();
    this.onZoom(a === 0 && b === n ? null : [a, b]);
    this.load();
  }

  zoomIn() {
    const { pw } = this.size();
    this.zoomAt(M.left + pw / 2, 1 / ZOOM_STEP);
    this.commit();
  }

  zoomOut() {
    const { pw } = this.size();
    this.zoomAt(M.left + pw / 2, ZOOM_STEP);
    this.commit();
  }

  reset() {
    this.live = [0, this.view.n];
    this.commit();
  }

  onPointerDown(e) {
    if (!this.view || (e.pointerType === "mouse" && e.button !== 0)) return;
    this.container.setPointerCapture(e.pointerId);
    const x = this.localX(e);
    this.drag = { id: e.pointerId, x, start: x, moved: false };
  }

  onPointerMove(e) {
    if (!this.view) return;
    const x = this.localX(e);
    if (this.drag && this.drag.id === e.pointerId) {
      if (!this.drag.moved && Math.abs(x - this.drag.start) < 3) return;
      this.drag.moved = true;
      this.container.classList.add("dragging");
      this.panBy(x - this.drag.x);
      this.drag.x = x;
      return;
    }
    this.hoverAt(x);
  }

  onPointerUp(e) {
    if (!this.drag || this.drag.id !== e.pointerId) return;
    const moved = this.drag.moved;
    this.drag = null;
    this.container.classList.remove("dragging");
    if (moved) this.commit();
    else this.hoverAt(this.localX(e));
  }

  hoverAt(x) {
    const { pw } = this.size();
    if (pw < 1 || x < M.left - 4 || x > M.left + pw + 4) return;
    const xs = this.xScale();
    const n = this.view.n;
    const [a, b] = this.live;
    let i = Math.round(xs.inv(x));
    i = Math.max(Math.ceil(a), Math.min(Math.min(n, Math.ceil(b)) - 1, i));
    if (i < 0 || i >= n) return;
    const cx = xs.x(i);
    const ch = this.crosshair;
    if (ch) {
      ch.setAttribute("visibility", "visible");
      ch.querySelector("line").setAttribute("x1", cx);
      ch.querySelector("line").setAttribute("x2", cx);
      const dot = ch.querySelector("circle");
      const d = this.data;
      const k = d ? (i - d.a) / d.step : -1;
      const y = d && Number.isInteger(k) && k >= 0 && k < d.values.length ? d.values[k] : NaN;
      if (Number.isFinite(y) && this.Y) {
        dot.setAttribute("cx", cx);
        dot.setAttribute("cy", this.Y(y));
        dot.setAttribute("visibility", "visible");
      } else {
        dot.setAttribute("visibility", "hidden");
      }
    }
    this.onHover([i], -1);
  }

  onKey(e) {
    if (!this.view) return;
    const pan = (dx) => {
      this.panBy(dx);
      this.commit();
    };
    zoomKeys(e, { zoomIn: () => this.zoomIn(), zoomOut: () => this.zoomOut(), reset: () => this.reset(), pan },
      this.size().pw * 0.1);
  }
}
