// The hierarchy as an ARIA tree: every node is rendered once (so search can
// hide and show them without refetching), groups fold, arrays show a
// thumbnail fetched with the token when they scroll into view.

import { encodeSegment } from "./api.js";
import { el, isDrawable } from "./format.js";

/** Pages of the tree the viewer loads (of up to 1,000 nodes each). */
const MAX_PAGES = 50;

function parentOf(path) {
  const i = path.lastIndexOf("/");
  return i < 0 ? (path === "" ? null : "") : path.slice(0, i);
}

function nameOf(path) {
  return path.slice(path.lastIndexOf("/") + 1);
}

export function viewHref(path) {
  return path ? `/view/${path.split("/").map(encodeSegment).join("/")}` : "/";
}

const THUMB_CONCURRENCY = 3;

export class Tree {
  constructor({ provider, root, search, status, onSelect }) {
    this.provider = provider;
    this.root = root;
    this.search = search;
    this.status = status;
    this.onSelect = onSelect;
    this.nodes = new Map(); // path -> {info, li, children: []}
    this.selected = null;
    this.thumbQueue = [];
    this.thumbActive = 0;
    this.blobURLs = [];
    this.observer = null;
    this.query = "";

    root.addEventListener("click", (e) => this.onClick(e));
    root.addEventListener("keydown", (e) => this.onKey(e));
    search.addEventListener("input", () => this.filter(search.value));
    search.addEventListener("keydown", (e) => {
      if (e.key === "ArrowDown") {
        e.preventDefault();
        const first = this.visibleItems()[0];
        if (first) this.focusItem(first);
      } else if (e.key === "Escape" && search.value) {
        search.value = "";
        this.filter("");
      }
    });
  }

  /** Loads the whole hierarchy; answers the map of node summaries. */
  async load() {
    this.status.textContent = "Loading…";
    // The server answers a page at a time; a hierarchy past MAX_PAGES
    // pages is shown in part, and says so.
    let nodes = [];
    let after = null;
    let pages = 0;
    try {
      do {
        const answer = await this.provider.tree(after);
        nodes = nodes.concat(answer.nodes || []);
        // "" is a token too: after the root.
        after = answer.next ?? null;
        pages += 1;
      } while (after !== null && pages < MAX_PAGES);
    } catch (e) {
      this.status.textContent = this.provider.isAbort(e) ? "" : `The hierarchy could not be listed: ${e.message}`;
      throw e;
    }
    this.build(nodes);
    this.status.textContent = after !== null ? `Showing the first ${nodes.length} nodes of a larger hierarchy.` : "";
    if (this.query) this.filter(this.query);
    return this.infos();
  }

  infos() {
    const out = new Map();
    for (const [path, n] of this.nodes) out.set(path, n.info);
    return out;
  }

  build(list) {
    for (const u of this.blobURLs) URL.revokeObjectURL(u);
    this.blobURLs = [];
    this.thumbQueue = [];
    if (this.observer) this.observer.disconnect();
    this.observer = new IntersectionObserver((entries) => this.onVisible(entries), {
      root: this.root.closest("aside") || null,
      rootMargin: "100px",
    });
    this.nodes = new Map();
    const byPath = new Map(list.map((n) => [n.path, n]));
    // Parents the listing skipped (implicit groups) still get a row.
    for (const n of list) {
      let p = parentOf(n.path);
      while (p !== null && !byPath.has(p)) {
        byPath.set(p, { path: p, node_type: "group", implicit: true });
        p = parentOf(p);
      }
    }
    if (!byPath.has("")) byPath.set("", { path: "", node_type: "group" });
    const paths = [...byPath.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    for (const path of paths) this.nodes.set(path, { info: byPath.get(path), li: null, children: [] });
    for (const path of paths) {
      if (path === "") continue;
      this.nodes.get(parentOf(path)).children.push(path);
    }
    this.root.replaceChildren(this.renderNode(""));
    this.expand("", true);
    for (const child of this.nodes.get("").children) {
      if (this.nodes.get(child).children.length) this.expand(child, true);
    }
    if (this.selected !== null) this.select(this.selected);
    else this.setTabStop(this.nodes.get("").li);
  }

  renderNode(path, level = 1) {
    const node = this.nodes.get(path);
    const info = node.info;
    const isGroup = info.node_type === "group";
    const isArray = info.node_type === "array";
    const name = path === "" ? "/" : nameOf(path);
    const li = el("li", {
      role: "treeitem",
      "data-path": path,
      "aria-level": level,
      "aria-selected": "false",
      tabindex: "-1",
      class: `node node-${info.node_type}${info.error ? " broken" : ""}`,
    });
    const twisty = el("span", { class: "twisty", "aria-hidden": "true" });
    let icon;
    if (isArray && isDrawable(info.dtype) && info.shape && info.shape.length > 0 && !info.shape.includes(0)) {
      icon = el("img", { class: "thumb", alt: "", width: 24, height: 24, decoding: "async" });
      icon.dataset.preview = path;
      this.observer.observe(icon);
    } else {
      icon = el("span", { class: `icon icon-${isGroup ? "group" : isArray ? "array" : "broken"}`, "aria-hidden": "true" });
    }
    const link = el("a", { href: viewHref(path), tabindex: "-1", class: "name" }, name);
    const row = el("div", { class: "row" }, twisty, icon, link);
    if (isArray && info.shape) {
      const desc = `${info.shape.length ? info.shape.join("×") : "scalar"} ${info.dtype || ""}`.trim();
      row.append(el("span", { class: "desc", title: desc }, desc));
    }
    li.append(row);
    if (info.error) {
      li.append(
        el("div", { class: "node-error" }, `${info.error.status} ${info.error.code}: ${info.error.message}`)
      );
    }
    if (node.children.length) {
      li.setAttribute("aria-expanded", "false");
      const ul = el("ul", { role: "group" });
      for (const c of node.children) ul.append(this.renderNode(c, level + 1));
      li.append(ul);
    }
    node.li = li;
    return li;
  }

  expand(path, open) {
    const node = this.nodes.get(path);
    if (node && node.children.length) node.li.setAttribute("aria-expanded", open ? "true" : "false");
  }

  /** Marks `path` as the current node and reveals it. */
  select(path) {
    this.selected = path;
    for (const n of this.nodes.values()) {
      if (n.li) n.li.setAttribute("aria-selected", "false");
    }
    const node = this.nodes.get(path);
    if (!node) return;
    node.li.setAttribute("aria-selected", "true");
    for (let p = parentOf(path); p !== null; p = parentOf(p)) this.expand(p, true);
    this.setTabStop(node.li);
    const row = node.li.querySelector(".row");
    if (row && row.scrollIntoView) row.scrollIntoView({ block: "nearest" });
  }

  setTabStop(li) {
    for (const n of this.nodes.values()) if (n.li) n.li.tabIndex = -1;
    li.tabIndex = 0;
  }

  focusItem(li) {
    this.setTabStop(li);
    li.focus();
  }

  visibleItems() {
    return [...this.root.querySelectorAll('[role="treeitem"]')].filter((li) => li.offsetParent !== null);
  }

  onClick(e) {
    const li = e.target.closest('[role="treeitem"]');
    if (!li) return;
    const path = li.dataset.path;
    if (e.target.closest(".twisty")) {
      const open = li.getAttribute("aria-expanded") === "true";
      this.expand(path, !open);
      e.preventDefault();
      return;
    }
    const link = e.target.closest("a");
    if (link && (e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0)) return; // a new tab
    e.preventDefault();
    if (li.hasAttribute("aria-expanded") && this.selected === path) {
      this.expand(path, li.getAttribute("aria-expanded") !== "true");
    } else if (li.getAttribute("aria-expanded") === "false") {
      this.expand(path, true);
    }
    this.setTabStop(li);
    this.onSelect(path);
  }

  onKey(e) {
    const li = e.target.closest('[role="treeitem"]');
    if (!li || e.altKey || e.ctrlKey || e.metaKey) return;
    const items = this.visibleItems();
    const i = items.indexOf(li);
    const path = li.dataset.path;
    const expanded = li.getAttribute("aria-expanded");
    let handled = true;
    switch (e.key) {
      case "ArrowDown":
        if (i < items.length - 1) this.focusItem(items[i + 1]);
        break;
      case "ArrowUp":
        if (i > 0) this.focusItem(items[i - 1]);
        break;
      case "ArrowRight":
        if (expanded === "false") this.expand(path, true);
        else if (expanded === "true" && items[i + 1]) this.focusItem(items[i + 1]);
        break;
      case "ArrowLeft":
        if (expanded === "true") this.expand(path, false);
        else {
          const parent = li.parentElement.closest('[role="treeitem"]');
          if (parent) this.focusItem(parent);
        }
        break;
      case "Home":
        if (items[0]) this.focusItem(items[0]);
        break;
      case "End":
        if (items.length) this.focusItem(items[items.length - 1]);
        break;
      case "Enter":
      case " ":
        this.onSelect(path);
        break;
      default:
        handled = false;
        if (e.key.length === 1 && /\S/.test(e.key)) handled = this.typeAhead(items, i, e.key);
    }
    if (handled) {
      e.preventDefault();
      e.stopPropagation();
    }
  }

  typeAhead(items, from, char) {
    const c = char.toLowerCase();
    for (let k = 1; k <= items.length; k++) {
      const li = items[(from + k) % items.length];
      const name = nameOf(li.dataset.path).toLowerCase();
      if (name.startsWith(c)) {
        this.focusItem(li);
        return true;
      }
    }
    return false;
  }

  /** Hides nodes whose name does not contain `text` (ancestors of matches stay). */
  filter(text) {
    this.query = text.trim().toLowerCase();
    const q = this.query;
    this.root.classList.toggle("searching", q !== "");
    if (!q) {
      for (const n of this.nodes.values()) if (n.li) n.li.hidden = false;
      this.status.textContent = "";
      return;
    }
    const visible = new Set();
    let matches = 0;
    for (const [path, n] of this.nodes) {
      if (path !== "" && nameOf(path).toLowerCase().includes(q)) {
        matches += 1;
        for (let p = path; p !== null; p = parentOf(p)) {
          if (visible.has(p)) break;
          visible.add(p);
        }
      }
      n.li.classList.toggle("match", path !== "" && nameOf(path).toLowerCase().includes(q));
    }
    for (const [path, n] of this.nodes) n.li.hidden = !visible.has(path);
    this.status.textContent = matches
      ? `${matches} node${matches === 1 ? "" : "s"} match`
      : `No node matches “${text.trim()}”`;
  }

  onVisible(entries) {
    for (const entry of entries) {
      if (!entry.isIntersecting) continue;
      this.observer.unobserve(entry.target);
      this.thumbQueue.push(entry.target);
    }
    this.pumpThumbs();
  }

  pumpThumbs() {
    while (this.thumbActive < THUMB_CONCURRENCY && this.thumbQueue.length) {
      const img = this.thumbQueue.shift();
      this.thumbActive += 1;
      this.loadThumb(img).finally(() => {
        this.thumbActive -= 1;
        this.pumpThumbs();
      });
    }
  }

  async loadThumb(img) {
    const path = img.dataset.preview;
    try {
      // Thumbnail failures stay on the row: they would otherwise replace the
      // error of what the user is looking at.
      const url = URL.createObjectURL(await this.provider.thumbnail(path, { report: false }));
      this.blobURLs.push(url);
      img.src = url;
      img.classList.add("loaded");
    } catch (e) {
      img.classList.add("failed");
      img.title = `No preview: ${e.message}`;
      img.alt = "!";
    }
  }
}
