// The heatmap: the server draws the visible region as a PNG, strided to the
// screen's resolution, so zooming asks for detail instead of scaling up a
// picture of the whole slice. Between loads the current picture is moved and
// scaled at once, so dragging and wheeling feel immediate.

import { svg, formatTick, indexTicks, niceTicks, logTicks, debounce, zoomKeys, attachPlot } from "./format.js";

const AXIS_LEFT = 60;
const AXIS_BOTTOM = 40;
const PAD = 10;
const WHEEL_COMMIT_MS = 220;
const ZOOM_STEP = 1.5;

function sameRegion(a, b) {
  return a && b && a.length === b.length && a.every((v, i) => v === b[i]);
}

export class Heatmap {
  constructor({ provider, container, image, message, colorbar, settings, onZoom, onHover, onLoad }) {
    this.provider = provider;
    this.container = container;
    this.image = image;
    this.message = message;
    this.colorbar = colorbar;
    this.settings = settings;
    this.onZoom = onZoom;
    this.onHover = onHover;
    this.onLoad = onLoad || (() => {});
    this.lastSize = null;
    this.view = null;
    this.region = null; // committed [r0, r1, c0, c1], integers
    this.live = null; // shown while interacting, floats
    this.loaded = null; // what the current picture covers
    this.requested = "";
    this.controller = null;
    this.blobURL = null;
    this.keepAspect = true;
    this.pointers = new Map();

    this.axes = svg("svg", { class: "hm-axes", "aria-hidden": "true" });
    this.frame = document.createElement("div");
    this.frame.className = "hm-frame";
    this.cursor = document.createElement("div");
    this.cursor.className = "hm-cursor";
    this.cursor.hidden = true;
    image.draggable = false;
    this.frame.append(image, this.cursor);
    container.prepend(this.axes, this.frame);

    this.commitSoon = debounce(() => this.commit(), WHEEL_COMMIT_MS);
    this.reloadSoon = debounce(() => this.load(), 150);
    attachPlot(container, this, () => this.place());
    container.addEventListener("pointerleave", () => {
      this.cursor.hidden = true;
    });
    container.addEventListener("keydown", (e) => this.onKey(e));
    container.addEventListener("dblclick", (e) => {
      const p = this.point(e);
      this.zoomAt(p.x, p.y, 1 / ZOOM_STEP);
      this.commit();
    });
  }

  /**
   * view: {path, shape, dims: [R, C], index, rgb, cmap, scale, vmin, vmax,
   * zoom: [r0, r1, c0, c1] | null, labels: [rowLabel, colLabel]}
   */
  show(view) {
    const [R, C] = view.dims;
    const full = [0, view.shape[R], 0, view.shape[C]];
    const region = view.zoom || full;
    this.view = view;
    this.full = full;
    if (!sameRegion(region, this.region)) {
      this.region = region.slice();
      this.live = region.slice();
    }
    this.place();
    this.load();
  }

  /** Stops showing anything: another node or tab took over. */
  clear() {
    if (this.controller) this.controller.abort();
    this.controller = null;
    this.view = null;
    this.requested = "";
    this.loaded = null;
    this.image.removeAttribute("src");
    if (this.blobURL) URL.revokeObjectURL(this.blobURL);
    this.blobURL = null;
    for (const a of ["data-select", "data-vmin", "data-vmax", "data-cmap", "data-scale", "data-stride", "data-source", "data-state"]) {
      this.image.removeAttribute(a);
    }
    this.region = null;
    this.live = null;
    this.axes.replaceChildren();
    this.frame.style.width = this.frame.style.height = "0";
    this.message.textContent = "";
  }

  setKeepAspect(keep) {
    this.keepAspect = keep;
    if (this.view) {
      this.place();
      this.load();
    }
  }

  // The container's size; while hidden, the size it had when last shown
  // (the code tab describes the selection the heatmap would show).
  size() {
    const cw = this.container.clientWidth;
    const ch = this.container.clientHeight;
    if (cw > 0 && ch > 0) {
      this.lastSize = { cw, ch };
      return this.lastSize;
    }
    if (this.lastSize) return this.lastSize;
    const panels = this.container.closest(".panels");
    const w = panels ? panels.clientWidth - 110 : 800;
    const h = panels ? panels.clientHeight - 10 : 500;
    return { cw: Math.max(200, w), ch: Math.max(200, h) };
  }

  visible() {
    return this.container.clientWidth > 0 && this.container.clientHeight > 0;
  }

  // The plot area, and where and how large the region's elements are in it.
  geometry(region = this.live) {
    const { cw, ch } = this.size();
    const W = Math.max(0, cw - AXIS_LEFT - PAD);
    const H = Math.max(0, ch - AXIS_BOTTOM - PAD);
    const [r0, r1, c0, c1] = region;
    const eh = Math.max(r1 - r0, 1e-9);
    const ew = Math.max(c1 - c0, 1e-9);
    let sx = W / ew;
    let sy = H / eh;
    if (this.keepAspect) sx = sy = Math.min(sx, sy);
    const ox = AXIS_LEFT + (W - ew * sx) / 2;
    const oy = PAD + (H - eh * sy) / 2;
    return { W, H, sx, sy, ox, oy, ew, eh, r0, r1, c0, c1 };
  }

  /** The select string and strides for the committed region at screen resolution. */
  selection(v = this.view, region = this.region) {
    const [R, C] = v.dims;
    const g = this.geometry(region);
    if (g.W < 1 || g.H < 1) return null;
    const dpr = window.devicePixelRatio || 1;
    const [r0, r1, c0, c1] = region;
    const pw = Math.max(1, Math.floor(g.ew * g.sx * dpr + 1e-6));
    const ph = Math.max(1, Math.floor(g.eh * g.sy * dpr + 1e-6));
    let sc = Math.max(1, Math.ceil(g.ew / pw));
    let sr = Math.max(1, Math.ceil(g.eh / ph));
    const max = this.settings.max_pixels || 16777216;
    while (Math.ceil(g.eh / sr) * Math.ceil(g.ew / sc) > max) {
      sr += 1;
      sc += 1;
    }
    const slice = (a, b, s) => `${a}:${b}${s > 1 ? `:${s}` : ""}`;
    // A reduction reads this array itself (levels are for pictures of one slice).
    const level = v.reduce ? null : this.coarsestLevel(v, sr, sc);
    if (level) {
      // Read the level's elements that cover the region, at the stride left
      // over once the level's own downsampling is counted; the picture is
      // placed in this array's coordinates.
      const f = v.shape.map((n, d) => n / level.shape[d]);
      const [lr0, lr1] = [Math.floor(r0 / f[R]), Math.min(level.shape[R], Math.ceil(r1 / f[R]))];
      const [lc0, lc1] = [Math.floor(c0 / f[C]), Math.min(level.shape[C], Math.ceil(c1 / f[C]))];
      const lsr = Math.max(1, Math.floor(sr / f[R] + 1e-9));
      const lsc = Math.max(1, Math.floor(sc / f[C] + 1e-9));
      const items = level.shape.map((n, d) => {
        if (d === R) return slice(lr0, lr1, lsr);
        if (d === C) return slice(lc0, lc1, lsc);
        if (v.rgb && d === v.shape.length - 1) return ":";
        return String(Math.min(n - 1, Math.floor(v.index[d] / f[d])));
      });
      return {
        select: items.join(","), path: level.path, level: level.index,
        r0: lr0 * f[R], c0: lc0 * f[C], sr: lsr * f[R], sc: lsc * f[C],
        rows: Math.ceil((lr1 - lr0) / lsr), cols: Math.ceil((lc1 - lc0) / lsc),
      };
    }
    const items = v.shape.map((_, d) => {
      if (d === R) return slice(r0, r1, sr);
      if (d === C) return slice(c0, c1, sc);
      if (v.rgb && d === v.shape.length - 1) return ":";
      return v.reduce ? ":" : String(v.index[d]);
    });
    return { select: items.join(","), r0, c0, sr, sc, rows: Math.ceil((r1 - r0) / sr), cols: Math.ceil((c1 - c0) / sc) };
  }

  /**
   * Of an OME-Zarr image's coarser levels (`v.levels`), the coarsest whose
   * elements are still no larger than a screen pixel at strides `sr`, `sc`:
   * it fills the screen with fewer bytes read. None when the array itself is best.
   */
  coarsestLevel(v, sr, sc) {
    const [R, C] = v.dims;
    let best = null;
    for (const level of v.levels || []) {
      if (!level.shape || level.shape.length !== v.shape.length || level.path === v.path) continue;
      const fr = v.shape[R] / level.shape[R];
      const fc = v.shape[C] / level.shape[C];
      if (fr <= 1 + 1e-9 && fc <= 1 + 1e-9) continue;
      if (fr > sr + 1e-9 || fc > sc + 1e-9) continue;
      if (!best || fr * fc > best.fr * best.fc) best = { ...level, fr, fc };
    }
    return best;
  }

  async load() {
    if (!this.view || !this.visible()) return;
    const sel = this.selection();
    if (!sel) return;
    const v = this.view;
    const params = { select: sel.select };
    if (v.reduce) params.reduce = v.reduce;
    if (!v.rgb) {
      params.cmap = v.cmap;
      params.scale = v.scale;
      if (v.vmin !== null && v.vmin !== undefined) params.vmin = v.vmin;
      if (v.vmax !== null && v.vmax !== undefined) params.vmax = v.vmax;
    }
    const source = sel.path || v.path;
    const key = JSON.stringify([source, params]);
    if (key === this.requested) return;
    this.requested = key;
    if (this.controller) this.controller.abort();
    const controller = new AbortController();
    this.controller = controller;
    this.image.dataset.state = "loading";
    this.container.dataset.state = "loading";
    try {
      const { blob, vmin, vmax } = await this.provider.image(source, params, { signal: controller.signal, primary: true });
      const objectURL = URL.createObjectURL(blob);
      const probe = new Image();
      probe.src = objectURL;
      await probe.decode();
      if (controller.signal.aborted) {
        URL.revokeObjectURL(objectURL);
        return;
      }
      const old = this.blobURL;
      this.blobURL = objectURL;
      this.image.src = objectURL;
      this.loaded = { ...sel, transposed: v.dims[0] > v.dims[1], width: probe.naturalWidth, height: probe.naturalHeight };
      const img = this.image;
      img.alt = `Heatmap of ${v.path || "/"}[${sel.select}]`;
      img.dataset.select = sel.select;
      img.dataset.vmin = vmin ?? "";
      img.dataset.vmax = vmax ?? "";
      img.dataset.cmap = v.rgb ? "" : v.cmap;
      img.dataset.scale = v.rgb ? "" : v.scale;
      img.dataset.stride = `${sel.sr},${sel.sc}`;
      img.dataset.source = sel.path || v.path;
      this.message.textContent = "";
      this.place();
      this.drawColorbar(vmin === null ? NaN : Number(vmin), vmax === null ? NaN : Number(vmax));
      img.dataset.state = "ready";
      this.container.dataset.state = "ready";
      this.onLoad({ select: sel.select, vmin, vmax });
      if (old) URL.revokeObjectURL(old);
    } catch (e) {
      if (this.provider.isAbort(e) || controller.signal.aborted) return;
      this.requested = "";
      this.image.dataset.state = "error";
      this.container.dataset.state = "error";
      this.message.textContent = `This selection could not be drawn: ${e.message}`;
    } finally {
      if (this.controller === controller) this.controller = null;
    }
  }

  // On narrow screens the box is as tall as the region needs at full
  // width (within limits), instead of a fixed height mostly left empty.
  fitHeight() {
    const [r0, r1, c0, c1] = this.live;
    const W = this.container.clientWidth - AXIS_LEFT - PAD;
    const want = Math.round(Math.min(Math.max(220, (W * (r1 - r0)) / (c1 - c0) + AXIS_BOTTOM + PAD), window.innerHeight * 0.62));
    if (Math.abs((this.fitted || 0) - want) > 1) {
      this.fitted = want;
      this.container.style.setProperty("--fit-height", `${want}px`);
    }
  }

  /** Positions the picture and redraws the axes for the live region. */
  place() {
    if (!this.view || !this.visible()) return;
    this.fitHeight();
    const g = this.geometry();
    const f = this.frame.style;
    f.left = `${g.ox}px`;
    f.top = `${g.oy}px`;
    f.width = `${Math.max(0, g.ew * g.sx)}px`;
    f.height = `${Math.max(0, g.eh * g.sy)}px`;
    const L = this.loaded;
    const s = this.image.style;
    if (L) {
      const x = (L.c0 - g.c0) * g.sx;
      const y = (L.r0 - g.r0) * g.sy;
      const w = L.cols * L.sc * g.sx;
      const h = L.rows * L.sr * g.sy;
      s.left = `${x}px`;
      s.top = `${y}px`;
      // The PNG's rows follow the lower-numbered dimension: a transposed
      // view swaps its axes on screen.
      if (L.transposed) {
        s.width = `${h}px`;
        s.height = `${w}px`;
        s.transform = "matrix(0, 1, 1, 0, 0, 0)";
      } else {
        s.width = `${w}px`;
        s.height = `${h}px`;
        s.transform = "";
      }
    }
    this.drawAxes(g);
  }

  drawAxes(g) {
    const v = this.view;
    const { cw, ch } = this.size();
    this.axes.setAttribute("width", cw);
    this.axes.setAttribute("height", ch);
    this.axes.replaceChildren();
    if (g.W < 1 || g.H < 1) return;
    const left = g.ox;
    const top = g.oy;
    const right = g.ox + g.ew * g.sx;
    const bottom = g.oy + g.eh * g.sy;
    const parts = [svg("rect", { class: "hm-border", x: left - 0.5, y: top - 0.5, width: right - left + 1, height: bottom - top + 1 })];
    const rowCount = Math.max(2, Math.floor((bottom - top) / 55));
    const colCount = Math.max(2, Math.floor((right - left) / 80));
    const rows = indexTicks(Math.ceil(g.r0), Math.floor(g.r1 - 1e-9), rowCount);
    const cols = indexTicks(Math.ceil(g.c0), Math.floor(g.c1 - 1e-9), colCount);
    for (const t of rows) {
      const y = top + (t + 0.5 - g.r0) * g.sy;
      if (y < top - 0.5 || y > bottom + 0.5) continue;
      parts.push(svg("line", { class: "tick", x1: left - 5, x2: left, y1: y, y2: y }));
      parts.push(svg("text", { class: "tick-label", x: left - 8, y: y + 4, "text-anchor": "end", text: tickText(v, 0, t) }));
    }
    for (const t of cols) {
      const x = left + (t + 0.5 - g.c0) * g.sx;
      if (x < left - 0.5 || x > right + 0.5) continue;
      parts.push(svg("line", { class: "tick", x1: x, x2: x, y1: bottom, y2: bottom + 5 }));
      parts.push(svg("text", { class: "tick-label", x, y: bottom + 17, "text-anchor": "middle", text: tickText(v, 1, t) }));
    }
    const [rowLabel, colLabel] = v.labels || ["rows", "columns"];
    parts.push(svg("text", { class: "axis-title", x: (left + right) / 2, y: Math.min(ch - 4, bottom + 34), "text-anchor": "middle", text: colLabel }));
    const cy = (top + bottom) / 2;
    const widest = Math.max(1, ...rows.map((t) => tickText(v, 0, t).length));
    const tx = Math.max(12, left - 16 - widest * 6.5);
    parts.push(svg("text", { class: "axis-title", x: tx, y: cy, "text-anchor": "middle", transform: `rotate(-90 ${tx} ${cy})`, text: rowLabel }));
    this.axes.append(...parts);
  }

  drawColorbar(vmin, vmax) {
    const cb = this.colorbar;
    const v = this.view;
    cb.hidden = !!v.rgb;
    if (v.rgb) return;
    const stops = (this.settings.colormaps && this.settings.colormaps[v.cmap]) || ["#000", "#fff"];
    const bar = cb.querySelector(".cb-bar");
    bar.style.setProperty("--cb-v", `linear-gradient(to top, ${stops.join(", ")})`);
    bar.style.setProperty("--cb-h", `linear-gradient(to right, ${stops.join(", ")})`);
    cb.querySelector(".cb-min").textContent = Number.isFinite(vmin) ? formatTick(vmin) : "–";
    cb.querySelector(".cb-max").textContent = Number.isFinite(vmax) ? formatTick(vmax) : "–";
    cb.dataset.vmin = Number.isFinite(vmin) ? String(vmin) : "";
    cb.dataset.vmax = Number.isFinite(vmax) ? String(vmax) : "";
    const ticksEl = cb.querySelector(".cb-ticks");
    ticksEl.replaceChildren();
    if (Number.isFinite(vmin) && Number.isFinite(vmax) && vmax > vmin) {
      const log = v.scale === "log" && vmin > 0;
      const ticks = log ? logTicks(vmin, vmax, 4) : niceTicks(vmin, vmax, 4);
      for (const t of ticks) {
        const f = log ? (Math.log10(t) - Math.log10(vmin)) / (Math.log10(vmax) - Math.log10(vmin)) : (t - vmin) / (vmax - vmin);
        if (f <= 0.06 || f >= 0.94) continue;
        const tick = document.createElement("span");
        tick.className = "cb-tick";
        tick.style.setProperty("--f", String(f));
        tick.textContent = formatTick(t);
        ticksEl.append(tick);
      }
    }
    cb.setAttribute("aria-label", `Colour scale ${v.cmap}${v.scale === "log" ? " (log)" : ""} from ${cb.querySelector(".cb-min").textContent} to ${cb.querySelector(".cb-max").textContent}`);
  }

  // Relative to the padding box, where the frame and axes are placed.
  point(e) {
    const r = this.container.getBoundingClientRect();
    return { x: e.clientX - r.left - this.container.clientLeft, y: e.clientY - r.top - this.container.clientTop };
  }

  /** The array element under a point of the container, or null. */
  elementAt(x, y) {
    const g = this.geometry();
    const c = Math.floor(g.c0 + (x - g.ox) / g.sx);
    const r = Math.floor(g.r0 + (y - g.oy) / g.sy);
    if (r < Math.floor(g.r0) || r >= Math.ceil(g.r1) || c < Math.floor(g.c0) || c >= Math.ceil(g.c1)) return null;
    if (r < 0 || c < 0 || r >= this.full[1] || c >= this.full[3]) return null;
    return { r, c, g };
  }

  /** Scales the live region by `factor` (below 1 zooms in), keeping (x, y) still. */
  zoomAt(x, y, factor) {
    const g = this.geometry();
    if (g.W < 1 || g.H < 1) return;
    const [, R1, , C1] = this.full;
    const ac = g.c0 + (x - g.ox) / g.sx;
    const ar = g.r0 + (y - g.oy) / g.sy;
    const sx = g.sx / factor;
    const sy = g.sy / factor;
    let ew = g.W / sx;
    let eh = g.H / sy;
    // Not closer than about two elements across the shorter side.
    const minSide = Math.min(ew, eh);
    if (factor < 1 && minSide < 2) return;
    const fx = Math.min(1, Math.max(0, (x - AXIS_LEFT) / g.W));
    const fy = Math.min(1, Math.max(0, (y - PAD) / g.H));
    const fit = (anchor, f, extent, size) => {
      if (extent >= size) return [0, size];
      let a = anchor - f * extent;
      a = Math.min(Math.max(0, a), size - extent);
      return [a, a + extent];
    };
    const [c0, c1] = fit(ac, fx, ew, C1);
    const [r0, r1] = fit(ar, fy, eh, R1);
    this.live = [r0, r1, c0, c1];
    this.place();
  }

  panBy(dx, dy) {
    const g = this.geometry();
    const [, R1, , C1] = this.full;
    const shift = (a, b, d, size) => {
      const ext = b - a;
      let n = a - d;
      n = Math.min(Math.max(0, n), Math.max(0, size - ext));
      return [n, n + ext];
    };
    const [c0, c1] = shift(g.c0, g.c1, dx / g.sx, C1);
    const [r0, r1] = shift(g.r0, g.r1, dy / g.sy, R1);
    this.live = [r0, r1, c0, c1];
    this.place();
  }

  /** Rounds the live region to whole elements and asks for its picture. */
  commit() {
    if (!this.view) return;
    const [R1, C1] = [this.full[1], this.full[3]];
    const snap = (a, b, size) => {
      let lo = Math.max(0, Math.round(a));
      let hi = Math.min(size, Math.max(lo + 1, Math.round(b)));
      if (hi - lo < 1) lo = Math.max(0, hi - 1);
      return [lo, hi];
    };
    const [r0, r1] = snap(this.live[0], this.live[1], R1);
    const [c0, c1] = snap(this.live[2], this.live[3], C1);
    const region = [r0, r1, c0, c1];
    this.live = region.slice();
    this.region = region;
    this.place();
    this.onZoom(sameRegion(region, this.full) ? null : region);
    this.load();
  }

  zoomIn() {
    this.zoomCenter(1 / ZOOM_STEP);
  }

  zoomOut() {
    this.zoomCenter(ZOOM_STEP);
  }

  zoomCenter(factor) {
    const g = this.geometry();
    this.zoomAt(g.ox + (g.ew * g.sx) / 2, g.oy + (g.eh * g.sy) / 2, factor);
    this.commit();
  }

  reset() {
    this.live = this.full.slice();
    this.commit();
  }

  onWheel(e) {
    if (!this.view) return;
    e.preventDefault();
    const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? 400 : 1;
    const delta = Math.max(-300, Math.min(300, e.deltaY * unit));
    const p = this.point(e);
    this.zoomAt(p.x, p.y, Math.exp(delta * 0.002));
    this.commitSoon();
  }

  onPointerDown(e) {
    if (!this.view || (e.pointerType === "mouse" && e.button !== 0)) return;
    this.container.setPointerCapture(e.pointerId);
    this.pointers.set(e.pointerId, { ...this.point(e), start: this.point(e) });
    this.moved = false;
  }

  onPointerMove(e) {
    if (!this.view) return;
    const p = this.point(e);
    const prev = this.pointers.get(e.pointerId);
    if (prev) {
      if (this.pointers.size === 2) {
        // Pinch: zoom by the change of distance between the two fingers.
        const [a, b] = [...this.pointers.values()];
        const before = Math.hypot(a.x - b.x, a.y - b.y);
        prev.x = p.x;
        prev.y = p.y;
        const [a2, b2] = [...this.pointers.values()];
        const after = Math.hypot(a2.x - b2.x, a2.y - b2.y);
        if (before > 0 && after > 0) this.zoomAt((a2.x + b2.x) / 2, (a2.y + b2.y) / 2, before / after);
        this.moved = true;
        return;
      }
      const dx = p.x - prev.x;
      const dy = p.y - prev.y;
      if (!this.moved && Math.hypot(p.x - prev.start.x, p.y - prev.start.y) < 3) return;
      this.moved = true;
      prev.x = p.x;
      prev.y = p.y;
      this.container.classList.add("dragging");
      this.panBy(dx, dy);
      return;
    }
    this.hoverAt(p.x, p.y);
  }

  onPointerUp(e) {
    if (!this.pointers.has(e.pointerId)) return;
    this.pointers.delete(e.pointerId);
    this.container.classList.remove("dragging");
    if (this.moved && this.pointers.size === 0) this.commit();
    else if (!this.moved) {
      const p = this.point(e);
      this.hoverAt(p.x, p.y);
    }
  }

  hoverAt(x, y) {
    const hit = this.elementAt(x, y);
    if (!hit) {
      this.cursor.hidden = true;
      return;
    }
    const { r, c, g } = hit;
    const cs = this.cursor.style;
    this.cursor.hidden = g.sx < 6 || g.sy < 6;
    cs.left = `${(c - g.c0) * g.sx}px`;
    cs.top = `${(r - g.r0) * g.sy}px`;
    cs.width = `${g.sx}px`;
    cs.height = `${g.sy}px`;
    const v = this.view;
    const [R, C] = v.dims;
    const index = v.index.slice();
    index[R] = r;
    index[C] = c;
    this.onHover(index, v.rgb ? v.shape.length - 1 : -1);
  }

  onKey(e) {
    if (!this.view) return;
    const g = this.geometry();
    const pan = (dx, dy) => {
      this.panBy(dx, dy);
      this.commit();
    };
    zoomKeys(e, { zoomIn: () => this.zoomIn(), zoomOut: () => this.zoomOut(), reset: () => this.reset(), pan },
      Math.max(1, g.ew * g.sx * 0.1), Math.max(1, g.eh * g.sy * 0.1));
  }
}

/** An axis tick: the coordinate's label at index t of the row (0) or column (1) dimension, else t. */
function tickText(v, which, t) {
  return v.tick ? v.tick(v.dims[which], t) : String(t);
}
