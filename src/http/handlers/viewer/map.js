// The map view of a georeferenced array: its tiles (`/tiles/...`,
// WebMercatorQuad) in OpenLayers, with no basemap (the page talks to this
// server only), the other dimensions at the sliders' positions, and the
// legend the server draws. Tiles are fetched through the data provider, so
// they carry the page's token like every other request.

import { Map as OlMap, View, TileLayer, XYZ, transformExtent, fromLonLat, toLonLat, defaultControls } from "./ol-map.js";
import { urls } from "./api.js";

export class MapView {
  constructor({ container, legend, provider, onMove }) {
    this.container = container;
    this.legend = legend;
    this.provider = provider;
    this.onMove = onMove;
    this.map = null;
    this.source = null;
    this.url = null;
    this.path = null;
    this.legendUrl = null;
  }

  /** The query every tile of the view carries. */
  static params(view) {
    const p = {};
    const m = view.meta;
    const names = m.dimensions || [];
    names.forEach((name, d) => {
      if (name !== m.map.x && name !== m.map.y) p[`isel.${name}`] = String(view.index[d] || 0);
    });
    if (view.cmap) p.cmap = view.cmap;
    if (view.scale && view.scale !== "linear") p.scale = view.scale;
    if (view.vmin !== null && view.vmin !== undefined) p.vmin = view.vmin;
    if (view.vmax !== null && view.vmax !== undefined) p.vmax = view.vmax;
    return p;
  }

  ensureMap() {
    if (this.map) return;
    this.source = new XYZ({
      tileSize: 256,
      // Values are drawn as they are: no smoothing between cells.
      interpolate: false,
      tileLoadFunction: (tile, src) => {
        const image = tile.getImage();
        this.provider
          .picture(src, { report: false })
          .then((blob) => {
            const url = URL.createObjectURL(blob);
            image.addEventListener("load", () => URL.revokeObjectURL(url), { once: true });
            image.src = url;
          })
          .catch(() => tile.setState(3)); // TileState.ERROR
      },
    });
    this.map = new OlMap({
      target: this.container,
      layers: [new TileLayer({ source: this.source })],
      controls: defaultControls({ attribution: false, rotate: false }),
      view: new View({ center: [0, 0], zoom: 1, maxZoom: 24 }),
    });
    this.map.on("moveend", () => {
      const view = this.map.getView();
      const [lon, lat] = view.getCenter() ? toLonLat(view.getCenter()) : [0, 0];
      const z = view.getZoom();
      if (this.onMove && Number.isFinite(z)) this.onMove([round(z, 3), round(lon, 5), round(lat, 5)]);
    });
  }

  /** Shows `view`: {path, meta, index, cmap, scale, vmin, vmax, at}. */
  show(view) {
    this.ensureMap();
    const params = MapView.params(view);
    const url = urls.tiles(view.path, params);
    if (url !== this.url) {
      this.url = url;
      this.source.setUrl(url);
    }
    if (view.path !== this.path) {
      this.path = view.path;
      const v = this.map.getView();
      if (view.at) {
        v.setCenter(fromLonLat([view.at[1], view.at[2]]));
        v.setZoom(view.at[0]);
      } else {
        const [w, s, e, n] = view.meta.map.bounds;
        const extent = transformExtent([w, Math.max(s, -85), e, Math.min(n, 85)], "EPSG:4326", "EPSG:3857");
        this.map.updateSize();
        v.fit(extent, { size: this.map.getSize() || [512, 512] });
      }
    }
    this.map.updateSize();
    const legendUrl = urls.legend(view.path, params);
    if (legendUrl !== this.legendUrl) {
      this.legendUrl = legendUrl;
      this.provider
        .picture(legendUrl, { report: false })
        .then((blob) => {
          if (this.legendUrl !== legendUrl) return;
          if (this.legend.src.startsWith("blob:")) URL.revokeObjectURL(this.legend.src);
          this.legend.src = URL.createObjectURL(blob);
          this.legend.hidden = false;
        })
        .catch(() => {
          this.legend.hidden = true;
        });
    }
  }

  clear() {
    this.path = null;
    this.url = null;
    this.legendUrl = null;
    if (this.source) this.source.setUrl("");
    this.legend.hidden = true;
  }
}

function round(v, digits) {
  const f = 10 ** digits;
  return Math.round(v * f) / f;
}

