"""zarrita.js (npm) in Debian's Chromium, from a page of another origin:
it reads v2, v3 and sharded arrays of the corpus from zarrd across origins
(the CORS preflight its suffix ranges need, the exposed headers), and
treats a missing chunk's 404 as the fill value."""

import math
import os

import numpy as np
import pytest

from conftest import bundle_zarrita, expected_array, load_manifest, serve_folder, start_zarrd, stop

ROOT, MANIFEST = load_manifest("ZARRD_CORPUS")
ZARRITA = os.environ.get("ZARRD_ZARRITA")
CHROMIUM = os.environ.get("ZARRD_CHROMIUM")

pytestmark = pytest.mark.skipif(
    not (ZARRITA and CHROMIUM) and not os.environ.get("ZARRD_REQUIRE_CORPUS"),
    reason="zarrita.js and Chromium are installed by scripts/test",
)

# Sharded arrays, but not nested sharding (zarrita.js has no codec for a shard
# inside a shard) nor an index at the start (it always reads the index from the end).
CASES = ["v2.zarr/dtype_le_i2", "v2.zarr/missing_chunks", "v3.zarr/dtype_f4", "v3.zarr/missing_chunks",
         "v3.zarr/shard_edge", "v3.zarr/shard_missing_inner", "v3.zarr/shard_end", "v3.zarr/fill_nan"]

PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>zarrita.js over zarrd</title></head>
<body><script type="module">
import * as zarr from "./zarrita.js";
window.readArray = async (url) => {
  const arr = await zarr.open(new zarr.FetchStore(url), { kind: "array" });
  const got = await zarr.get(arr);
  return { shape: got.shape, data: Array.from(got.data, (v) => (typeof v === "bigint" ? Number(v) : v)).map(
    (v) => (Number.isNaN(v) ? "NaN" : v)) };
};
window.rangeHeaders = async (url) => {
  const r = await fetch(url, { headers: { Range: "bytes=-4" } });
  return { status: r.status, contentRange: r.headers.get("Content-Range"), etag: r.headers.get("ETag"),
           length: (await r.arrayBuffer()).byteLength };
};
window.ready = true;
</script></body></html>
"""


def name(entry):
    return f"{entry['store']}/{entry['path']}"


@pytest.fixture(scope="module")
def page_origin(tmp_path_factory):
    """A page on another origin (a second loopback server) with zarrita.js bundled for the browser."""
    site = tmp_path_factory.mktemp("zarrita-site")
    bundle_zarrita(site)
    (site / "index.html").write_text(PAGE)
    origin, httpd = serve_folder(site)
    yield origin
    httpd.shutdown()


@pytest.fixture(scope="module")
def server():
    url, proc = start_zarrd(ROOT)
    yield url
    stop(proc)


@pytest.fixture(scope="module")
def browser_page(page_origin):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        requests = []
        page.on("request", lambda r: requests.append((r.method, r.url, r.headers)))
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{page_origin}/index.html")
        page.wait_for_function("window.ready === true")
        yield page, requests, errors
        browser.close()


@pytest.mark.parametrize("path", CASES)
def test_zarrita_reads_across_origins(path, server, browser_page):
    page, requests, errors = browser_page
    entry = next(e for e in MANIFEST if name(e) == path)
    got = page.evaluate("(url) => window.readArray(url)", f"{server}/zarr/{path}")
    want = expected_array(ROOT, entry)
    assert got["shape"] == list(want.shape)
    values = np.array([math.nan if v == "NaN" else v for v in got["data"]], dtype=want.dtype).reshape(want.shape)
    assert np.array_equal(values, want, equal_nan=want.dtype.kind == "f"), path
    assert errors == []


def test_preflight_and_exposed_headers(server, browser_page):
    page, requests, _ = browser_page
    chunk = "v3.zarr/shard_edge/c/0/0"
    got = page.evaluate("(url) => window.rangeHeaders(url)", f"{server}/zarr/{chunk}")
    size = os.path.getsize(os.path.join(ROOT, chunk))
    assert got == {"status": 206, "contentRange": f"bytes {size - 4}-{size - 1}/{size}",
                   "etag": got["etag"], "length": 4}
    assert got["etag"], "ETag is exposed to scripts"
    # The sharded reads sent ranges; a suffix range is not CORS-safelisted, so
    # Chromium asked first and zarrd allowed it.
    ranged = [h.get("range") for m, u, h in requests if u.startswith(server) and "range" in h]
    assert any(r and r.startswith("bytes=-") for r in ranged), ranged


def test_missing_chunks_are_404_with_cors(server, browser_page):
    page, requests, _ = browser_page
    status = page.evaluate("""async (url) => (await fetch(url)).status""", f"{server}/zarr/v3.zarr/missing_chunks/c/9/9")
    assert status == 404
