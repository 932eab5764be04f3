// The data source the views read through. The page hands every view
// `httpProvider`, which asks this server; a test (or another page) hands
// them any object with the same methods (h5web's DataProvider is the
// model). Each method takes the fetch options `request` takes (signal,
// report, primary) and rejects with an `ApiError`, or an abort.

import { getJSON, getElement, request, urls, isAbort } from "./api.js";

export const httpProvider = {
  /** A page of the hierarchy's node summaries after `after` (null: the first). */
  tree: (after, options) => getJSON(urls.tree(after), options),
  /** One node's metadata, as `/api/v1/meta` describes it. */
  meta: (path, options) => getJSON(urls.meta(path), options),
  /**
   * A selection's values: `{shape, dtype, data}`, with `coords` where the
   * array's dimensions have coordinates (no `select`: the whole array).
   * `extra` adds query parameters (`reduce`).
   */
  values: (path, select, options, extra = {}) =>
    getJSON(urls.data(path, { ...(select === undefined ? {} : { select }), format: "json", ...extra }), options),
  /** One element at `index` ("3,4"): `{value, dtype}`. */
  element: (path, index, options) => getElement(path, index, options),
  /**
   * A selection drawn as a PNG (`params`: select, cmap, scale, vmin, vmax):
   * the image and the range it was drawn with (`null` for RGB).
   */
  image: async (path, params, options) => {
    const response = await request(urls.data(path, { ...params, format: "png" }), options);
    return {
      blob: await response.blob(),
      vmin: response.headers.get("X-Zarr-Vmin"),
      vmax: response.headers.get("X-Zarr-Vmax"),
    };
  },
  /** A map tile or legend (a `/tiles/` URL), as an image, with the token. */
  picture: async (url, options) => (await request(url, options)).blob(),
  /** The thumbnail of an array in the tree, as an image. */
  thumbnail: async (path, options) => (await request(urls.preview(path), options)).blob(),
  /** One level of stored keys below `prefix` (`/zarr/{prefix}/`). */
  listing: (prefix, options) => getJSON(urls.listing(prefix), options),
  /** A stored JSON document (a metadata key). */
  document: (key, options) => getJSON(urls.key(key), options),
  /** The server's settings for the viewer (colormaps, limits). */
  settings: (options) => getJSON(urls.settings(), options),
  /** Whether an error is a request given up (not a failure to show). */
  isAbort,
};
