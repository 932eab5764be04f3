// The data source the views read through: what each method asks the
// server, and what it answers. A fake `fetch` stands for the server, so
// this is also how a view can be driven without one.
import { test } from "node:test";
import assert from "node:assert/strict";

import { encodePath, query, urls, ApiError } from "../../src/http/handlers/viewer/api.js";
import { httpProvider } from "../../src/http/handlers/viewer/provider.js";

/** Answers each request with `answer(url, init)`; records the URLs asked. */
function server(answer) {
  const asked = [];
  globalThis.fetch = async (url, init) => {
    asked.push(url);
    return answer(url, init);
  };
  return asked;
}

const json = (doc, status = 200) =>
  new Response(JSON.stringify(doc), { status, headers: { "content-type": "application/json" } });

test("paths and queries keep node names apart from the URL's syntax", () => {
  assert.equal(encodePath("a b/c?d"), "a%20b/c%3Fd");
  assert.equal(encodePath("./.."), "%2E/%2E%2E", "dot segments are names, not steps");
  assert.equal(query({ select: "0:10,::2", cmap: undefined, vmin: "" }), "?select=0:10,::2");
  assert.equal(urls.data("t 2m", { select: "0", format: "json" }), "/api/v1/data/t%202m?select=0&format=json");
  assert.equal(urls.listing(""), "/zarr/");
  assert.equal(urls.tree(""), "/api/v1/tree?after=", "the root is a place to continue after");
});

test("values, elements and metadata are read as JSON from the API", async () => {
  const text = '{"shape":[2],"dtype":"int64","data":[1,9007199254740993]}';
  const asked = server(() => new Response(text, { headers: { "content-type": "application/json" } }));
  const doc = await httpProvider.values("g/a", "0:2", { report: false });
  assert.equal(asked.at(-1), "/api/v1/data/g/a?select=0:2&format=json");
  assert.equal(doc.data.length, 2);
  await httpProvider.values("g/a", undefined, { report: false });
  assert.equal(asked.at(-1), "/api/v1/data/g/a?format=json", "no selection: the whole array");
  const element = await httpProvider.element("g/a", "1", { report: false });
  assert.equal(element.raw, "[1,9007199254740993]", "the text as the server wrote it, past 2^53");
  server(() => json({ path: "g", node_type: "group" }));
  assert.equal((await httpProvider.meta("g", { report: false })).node_type, "group");
});

test("an image comes with the range it was drawn with", async () => {
  const asked = server(
    () =>
      new Response(new Uint8Array([137, 80, 78, 71]), {
        headers: { "content-type": "image/png", "x-zarr-vmin": "2", "x-zarr-vmax": "9" },
      }),
  );
  const drawn = await httpProvider.image("f", { select: "0,:,:", cmap: "gray" }, { report: false });
  assert.equal(asked.at(-1), "/api/v1/data/f?select=0,:,:&cmap=gray&format=png");
  assert.equal(drawn.blob.size, 4);
  assert.deepEqual([drawn.vmin, drawn.vmax], ["2", "9"]);
});

test("errors carry the server's code and message", async () => {
  server(() => json({ error: { status: 404, code: "not_found", message: "no node 'x'" } }, 404));
  await assert.rejects(httpProvider.meta("x", { report: false }), (e) => {
    assert.ok(e instanceof ApiError);
    assert.equal(e.status, 404);
    assert.equal(e.code, "not_found");
    assert.ok(!httpProvider.isAbort(e));
    return true;
  });
});
