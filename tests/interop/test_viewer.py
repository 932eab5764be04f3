"""The built-in web viewer in a real browser: Chromium (Debian's) driven by
Playwright, against zarrd serving a hierarchy written here by zarr-python.
Pixels, hovered values, tables and code snippets are checked against numpy
on the values written; errors (a corrupt chunk, a missing or weak token)
must reach the page; the layout must hold on a phone-sized screen. Each
major state is saved as a screenshot under target/screenshots/ (viewer.png
is the one the README shows)."""

import io
import json
import math
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import numpy as np
from PIL import Image
import pytest

from conftest import start_zarrd, stop

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # reported by the `browser` fixture
    expect = sync_playwright = None
    PlaywrightTimeout = TimeoutError

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SHOTS = os.path.join(REPO, "target", "screenshots")
CHROMIUM = os.environ.get("ZARRD_CHROMIUM", "/usr/bin/chromium")
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
TIMEOUT = 15_000  # ms for any one thing the page has to do
if expect is not None:
    expect.set_options(timeout=TIMEOUT)

# The server draws through colorous (d3-scale-chromatic's schemes, B-spline
# interpolated); these are the matplotlib colormaps of the same schemes.
# Pinned orientations: `gray` is black at the low end (matplotlib's Greys
# reversed, ColorBrewer's greys, not the linear 'gray'), `rdbu` is red at
# the low end and blue at the high end (matplotlib's 'RdBu', not 'RdBu_r').
MATPLOTLIB_CMAP = {"viridis": "viridis", "magma": "magma", "inferno": "inferno", "plasma": "plasma",
                   "cividis": "cividis", "gray": "Greys_r", "rdbu": "RdBu"}
# Per channel. d3's B-spline through ColorBrewer's 11 RdBu stops strays up
# to 10 from matplotlib's straight segments between the same stops; the
# 256-stop schemes and the 9-stop greys stay within a few units.
TOLERANCE = {"rdbu": 12}
DEFAULT_TOLERANCE = 8

# Arrays /api/v1/preview has no picture of (here and in the demo).
UNDRAWABLE = {"legacy/records", "legacy/names", "v2/stations"}

TOKEN = "viewer-reader-token-0123456789"
FIELDS_TOKEN = "viewer-fields-only-token-0123"


# ---------------------------------------------------------------- fixtures


def write_hierarchy(root):
    """The hierarchy the viewer is tested on; returns ({path: values}, every node path)."""
    import zarr

    values = {}
    g = zarr.open_group(root, mode="w", zarr_format=3, attributes={"title": "viewer tests"})
    climate = g.create_group("climate", attributes={"source": "synthetic"})
    time = (np.arange(6) + 1) * 10
    lat = np.linspace(89.5, -89.5, 180)
    lon = np.arange(720) * 0.5
    t, la, lo = np.meshgrid(np.arange(6), lat, lon, indexing="ij")
    temperature = (30 * np.cos(np.radians(la)) - 10 + 5 * np.sin(np.radians(lo) * 2 + t)
                   + 3 * np.cos(np.radians(la) * 6 + np.radians(lo) * 3)).astype("float32")
    a = climate.create_array("temperature", shape=temperature.shape, chunks=(1, 90, 360), dtype="float32",
                             fill_value=np.nan, dimension_names=("time", "lat", "lon"),
                             attributes={"units": "degC", "long_name": "surface temperature"})
    a[...] = temperature
    values["climate/temperature"] = temperature
    for name, coord in [("time", time), ("lat", lat), ("lon", lon)]:
        c = climate.create_array(name, shape=coord.shape, dtype=coord.dtype, dimension_names=(name,))
        c[...] = coord
        values[f"climate/{name}"] = coord

    fields = g.create_group("fields")
    nans = np.random.default_rng(7).normal(size=(40, 60))
    nans[::7, :] = np.nan
    nans[20:, 40:] = np.nan  # chunk 1.2 is all fill value: never stored
    a = fields.create_array("nans", shape=nans.shape, chunks=(20, 20), dtype="float64", fill_value=np.nan)
    a[...] = nans
    values["fields/nans"] = nans
    series = np.sin(np.arange(500) / 20) * 3 + np.arange(500) / 100
    a = fields.create_array("series", shape=series.shape, chunks=(100,), dtype="float64", fill_value=np.nan)
    a[...] = series
    values["fields/series"] = series

    images = g.create_group("images")
    rgb = np.zeros((48, 64, 3), "uint8")
    rgb[..., 0] = np.arange(64) * 4
    rgb[..., 1] = (np.arange(48) * 5)[:, None]
    rgb[..., 2] = 128
    a = images.create_array("rgb", shape=rgb.shape, chunks=(24, 32, 3), dtype="uint8")
    a[...] = rgb
    values["images/rgb"] = rgb

    legacy = zarr.open_group(os.path.join(root, "legacy"), mode="w", zarr_format=2)
    records = np.array([(1, 51.5, b"london"), (2, 48.9, b"paris"), (3, 35.7, b"tokyo")],
                       dtype=[("id", "<u4"), ("lat", "<f8"), ("name", "S8")])
    a = legacy.create_array("records", shape=records.shape, dtype=records.dtype, chunks=(2,))
    a[...] = records
    values["legacy/records"] = records
    names = np.array(["alpha", "beta", "gamma", "delta"], dtype="U8")
    a = legacy.create_array("names", shape=names.shape, dtype=names.dtype, chunks=(2,))
    a[...] = names
    values["legacy/names"] = names

    nodes = {"", "climate", "fields", "images", "legacy", *values}
    return values, nodes


@pytest.fixture(scope="module")
def hierarchy(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("viewer-data"))
    values, nodes = write_hierarchy(root)
    return root, values, nodes


@pytest.fixture(scope="module")
def server(hierarchy):
    url, proc = start_zarrd(hierarchy[0])
    yield url
    stop(proc)


@pytest.fixture(scope="module")
def broken_server(tmp_path_factory):
    """A store whose only array has one chunk that is not what its codecs say."""
    import zarr

    root = str(tmp_path_factory.mktemp("viewer-broken"))
    g = zarr.open_group(root, mode="w", zarr_format=3)
    a = g.create_array("broken", shape=(20, 30), chunks=(10, 15), dtype="float32", fill_value=np.nan)
    a[...] = np.arange(600, dtype="float32").reshape(20, 30)
    with open(os.path.join(root, "broken", "c", "0", "0"), "wb") as f:
        f.write(b"this is not a zstd frame" * 3)
    url, proc = start_zarrd(root)
    yield url
    stop(proc)


@pytest.fixture(scope="module")
def token_server(hierarchy, tmp_path_factory):
    tokens = tmp_path_factory.mktemp("viewer-tokens") / "tokens.toml"
    tokens.write_text(f"""
[[tokens]]
name = "reader"
token = "{TOKEN}"
scopes = ["read"]

[[tokens]]
name = "fields"
token = "{FIELDS_TOKEN}"
scopes = ["read"]
prefixes = ["fields"]
""")
    url, proc = start_zarrd(hierarchy[0], "--tokens-file", str(tokens))
    yield url
    stop(proc)


@pytest.fixture(scope="module")
def demo_server():
    url, proc = start_zarrd("--demo")
    yield url
    stop(proc)


@pytest.fixture(scope="module")
def browser():
    reason = None
    if sync_playwright is None:
        reason = "playwright is not installed (tests/interop/requirements.txt pins it)"
    elif not os.access(CHROMIUM, os.X_OK):
        reason = f"no Chromium at {CHROMIUM}: scripts/test installs Debian's and sets ZARRD_CHROMIUM"
    if reason:
        if os.environ.get("ZARRD_REQUIRE_CORPUS"):
            pytest.fail(reason)
        pytest.skip(reason)
    os.makedirs(SHOTS, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


class Viewer:
    """One page in its own browser context, with every console error and
    uncaught exception collected."""

    def __init__(self, browser, base, viewport):
        self.base = base
        self.context = browser.new_context(viewport=viewport)
        self.context.set_default_timeout(TIMEOUT)
        self.page = self.context.new_page()
        self.errors = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))

    def _console(self, msg):
        if msg.type == "error":
            self.errors.append(f"console: {msg.text} at {msg.location.get('url', '')}")

    def open(self, path):
        self.page.goto(self.base + path)
        return self.page

    def unexpected_errors(self):
        """Console errors, less the browser's own note about the preview of
        an array that cannot be drawn (the contract has /api/v1/preview
        answer 4xx for those)."""
        def allowed(e):
            m = re.search(r"Failed to load resource: the server responded with a status of 4\d\d.* at (\S+)", e)
            return bool(m) and urllib.parse.urlsplit(m.group(1)).path in {f"/api/v1/preview/{p}" for p in UNDRAWABLE}

        return [e for e in self.errors if not allowed(e)]

    def shot(self, name):
        self.page.screenshot(path=os.path.join(SHOTS, name))


@pytest.fixture
def viewer(browser):
    """viewer(base_url, viewport=DESKTOP) -> Viewer; closed after the test."""
    opened = []

    def make(base, viewport=DESKTOP):
        v = Viewer(browser, base, viewport)
        opened.append(v)
        return v

    yield make
    for v in opened:
        v.context.close()


# ---------------------------------------------------------------- helpers


def parse_select(text, shape):
    """A select string as the API takes it (integers and slices, comma
    separated, `...` allowed) into a numpy index for an array of `shape`."""
    text = urllib.parse.unquote(text).strip()
    items = [s.strip() for s in text.split(",")] if text else []
    if "..." in items:
        i = items.index("...")
        items = items[:i] + [":"] * (len(shape) - len(items) + 1) + items[i + 1:]
    items += [":"] * (len(shape) - len(items))
    index = []
    for s in items:
        if ":" in s:
            index.append(slice(*[int(p) if p.strip() else None for p in s.split(":")]))
        else:
            index.append(int(s))
    return tuple(index)


def image_state(page):
    return page.eval_on_selector("img#heatmap-image", "img => ({...img.dataset})")


def wait_image(page, **want):
    """Wait until img#heatmap-image is ready and decoded, with every
    data-* attribute in `want` equal (value) or different (('!=', value));
    returns its data-* attributes."""
    try:
        page.wait_for_function(
            """(want) => {
                const img = document.querySelector('img#heatmap-image');
                if (!img || img.dataset.state !== 'ready' || !img.complete || !img.naturalWidth) return false;
                return Object.entries(want).every(([k, v]) =>
                    Array.isArray(v) ? img.dataset[k] !== v[1] : img.dataset[k] === v);
            }""",
            arg={k: (list(v) if isinstance(v, tuple) else v) for k, v in want.items()},
            timeout=TIMEOUT,
        )
    except PlaywrightTimeout:
        raise AssertionError(f"no ready heatmap with {want} at {page.url}: {describe(page)}") from None
    return image_state(page)


def describe(page):
    """What the page shows, for failure messages."""
    return page.evaluate("""() => {
        const img = document.querySelector('img#heatmap-image'), err = document.querySelector('#error');
        return {image: img ? {...img.dataset, visible: !!img.offsetParent} : null,
                error: err ? err.textContent.trim() : null,
                tab: document.querySelector('[role=tab][aria-selected=true]')?.id ?? null};
    }""")


READ_PIXELS = """async (img) => {
    await img.decode().catch(() => {});
    const c = document.createElement('canvas');
    c.width = img.naturalWidth;
    c.height = img.naturalHeight;
    const ctx = c.getContext('2d', {willReadFrequently: true});
    ctx.drawImage(img, 0, 0);
    const d = ctx.getImageData(0, 0, c.width, c.height).data;
    let s = '';
    for (let i = 0; i < d.length; i += 0x8000) s += String.fromCharCode.apply(null, d.subarray(i, i + 0x8000));
    return {width: c.width, height: c.height, data: btoa(s)};
}"""


def read_pixels(page):
    """The heatmap image's natural pixels, as the page shows them, (H, W, 4) uint8."""
    import base64

    got = page.eval_on_selector("img#heatmap-image", READ_PIXELS)
    raw = np.frombuffer(base64.b64decode(got["data"]), dtype=np.uint8)
    return raw.reshape(got["height"], got["width"], 4)


def render(values, vmin, vmax, cmap, fill=None):
    """What the server's PNG should be: `values` through `cmap` between vmin
    and vmax (linear), NaN and the fill value transparent."""
    import matplotlib

    v = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(v) if fill is None else np.isfinite(v) & (np.asarray(values) != fill)
    span = vmax - vmin if vmax > vmin else 1.0
    t = np.clip((np.where(ok, v, vmin) - vmin) / span, 0.0, 1.0)
    rgba = np.round(matplotlib.colormaps[MATPLOTLIB_CMAP[cmap]](t) * 255).astype(np.int16)
    rgba[~ok] = 0
    return rgba


def assert_pixels(got, want, tolerance):
    got = got.astype(np.int16)
    assert got.shape == want.shape, f"image {got.shape[:2]}, selection {want.shape[:2]}"
    clear = want[..., 3] == 0
    assert np.array_equal(got[..., 3] == 0, clear), \
        f"{int((got[..., 3] == 0).sum())} transparent pixels, want {int(clear.sum())} (the NaNs)"
    diff = np.abs(got[~clear][:, :3] - want[~clear][:, :3])
    worst = int(diff.max()) if diff.size else 0
    assert worst <= tolerance, f"max channel difference {worst} > {tolerance} ({int((diff > tolerance).sum())} values)"
    assert (got[~clear][:, 3] == 255).all()


def check_heatmap(page, arr, state=None, fill=None):
    """The heatmap on the page is `arr` at its data-select drawn with its
    data-cmap between its data-vmin and data-vmax; returns the state."""
    state = state or image_state(page)
    sel = arr[parse_select(state["select"], arr.shape)]
    cmap = state["cmap"]
    want = render(sel, float(state["vmin"]), float(state["vmax"]), cmap, fill)
    assert_pixels(read_pixels(page), want, TOLERANCE.get(cmap, DEFAULT_TOLERANCE))
    return state


def image_box(page):
    """Where the image's natural pixels are on screen (object-fit aware)."""
    return page.eval_on_selector("img#heatmap-image", """img => {
        const r = img.getBoundingClientRect(), cs = getComputedStyle(img);
        const px = (p) => parseFloat(cs[p]) || 0;
        let x = r.left + px('borderLeftWidth') + px('paddingLeft');
        let y = r.top + px('borderTopWidth') + px('paddingTop');
        let w = r.width - px('borderLeftWidth') - px('paddingLeft') - px('borderRightWidth') - px('paddingRight');
        let h = r.height - px('borderTopWidth') - px('paddingTop') - px('borderBottomWidth') - px('paddingBottom');
        const nw = img.naturalWidth, nh = img.naturalHeight;
        if (cs.objectFit === 'contain' || cs.objectFit === 'scale-down') {
            let s = Math.min(w / nw, h / nh);
            if (cs.objectFit === 'scale-down') s = Math.min(s, 1);
            x += (w - nw * s) / 2; y += (h - nh * s) / 2; w = nw * s; h = nh * s;
        }
        return {x, y, w, h, nw, nh};
    }""")


def pixel_span(index_item, dim, pixel):
    """The array indices along one displayed dimension that image pixel
    `pixel` covers, for the select item `index_item` (a slice)."""
    start, stop_, step = index_item.indices(dim)
    lo = start + pixel * step
    return range(lo, min(lo + step, stop_))


def json_value(text):
    """data-value (a JSON number or string) as a Python float or str."""
    try:
        v = json.loads(text)
    except ValueError:
        v = text
    if isinstance(v, str) and v in ("NaN", "Infinity", "-Infinity"):
        return float(v.replace("Infinity", "inf"))
    return v


def cell_number(text):
    text = text.strip().replace("\u2212", "-")
    return float("nan") if text.lower() == "nan" else float(text)


def wait_hover(page, previous=None):
    page.wait_for_function(
        """(prev) => {
            const h = document.querySelector('#hover');
            return h && h.dataset.index && h.dataset.value !== undefined && h.dataset.index !== prev;
        }""", arg=previous, timeout=TIMEOUT)
    return page.eval_on_selector("#hover", "h => ({index: h.dataset.index, value: h.dataset.value, text: h.textContent})")


def run_snippet(code):
    """Run a zarr-python snippet; returns its `data` as a numpy array."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "data.npy")
        script = code + "\nimport numpy as _np\n_np.save(" + repr(out) + ", _np.asarray(data))\n"
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
        assert done.returncode == 0, f"the snippet failed:\n{code}\n{done.stderr.decode()[-2000:]}"
        return np.load(out)


def error_cleared(page):
    page.wait_for_function(
        """() => { const e = document.querySelector('#error');
                   return !e || e.hidden || !e.textContent.trim() || getComputedStyle(e).display === 'none'; }""",
        timeout=TIMEOUT)


def click_tree_link(page, path):
    """Follow the tree's link to `path`, searching for it first if it is
    inside a collapsed group."""
    link = page.locator(f'#tree a[href="/view/{path}"]').first
    expect(link).to_be_attached()
    if not link.is_visible():
        page.fill("#search", path.rsplit("/", 1)[-1])
    link.click()


def tree_paths(page):
    return page.eval_on_selector_all("#tree [role=treeitem]", "els => els.map(e => e.dataset.path)")


# ---------------------------------------------------------------- tests


def test_page_loads_without_console_errors(server, viewer):
    v = viewer(server)
    page = v.open("/")
    expect(page.locator('#tree [role=treeitem][data-path="climate/temperature"]')).to_be_attached()
    page.wait_for_load_state("networkidle")
    assert v.unexpected_errors() == []

    v = viewer(server)
    page = v.open("/view/climate/temperature?tab=heatmap&index=3,0,0&cmap=magma")
    state = wait_image(page)
    assert parse_select(state["select"], (6, 180, 720))[0] == 3
    assert state["cmap"] == "magma"
    page.wait_for_load_state("networkidle")
    assert v.unexpected_errors() == []


def test_tree_lists_every_node_and_search_filters_it(server, hierarchy, viewer):
    _, _, nodes = hierarchy
    v = viewer(server)
    page = v.open("/")
    expect(page.locator('#tree [role=treeitem][data-path="legacy/records"]')).to_be_attached()
    expect(page.locator("#tree")).to_have_attribute("role", "tree")
    paths = tree_paths(page)
    assert sorted(paths) == sorted(nodes)
    for path in nodes - {""}:
        item = page.locator(f'#tree [role=treeitem][data-path="{path}"]')
        assert path.rsplit("/", 1)[-1] in item.text_content()
        assert item.locator(f'a[href="/view/{path}"]').count() >= 1, f"{path} has no link to /view/{path}"

    expect(page.get_by_label("Search nodes")).to_have_attribute("type", "search")
    page.fill("#search", "LAT")  # case-insensitive: matches climate/lat only
    shown = {"", "climate", "climate/lat"}
    for path in nodes:
        item = page.locator(f'#tree [role=treeitem][data-path="{path}"]')
        if path in shown:
            expect(item).to_be_visible()
        else:
            expect(item).to_be_hidden()
    v.shot("viewer-tree-search.png")
    page.fill("#search", "")
    expect(page.locator('#tree [role=treeitem][data-path="legacy"]')).to_be_visible()


def test_tree_link_opens_node_and_back_returns(server, hierarchy, viewer):
    values = hierarchy[1]
    v = viewer(server)
    page = v.open("/view/fields/nans?tab=heatmap")
    first = wait_image(page)
    click_tree_link(page, "climate/temperature")
    page.wait_for_url(re.compile(r"/view/climate/temperature"))
    state = wait_image(page, select=("!=", first["select"]))
    check_heatmap(page, values["climate/temperature"], state)
    page.go_back()
    page.wait_for_url(re.compile(r"/view/fields/nans"))
    state = wait_image(page, select=("!=", state["select"]))
    check_heatmap(page, values["fields/nans"], state)
    assert v.unexpected_errors() == []


def test_array_metadata(server, viewer):
    v = viewer(server)
    page = v.open("/view/climate/temperature?tab=meta")
    meta = page.locator("#meta")
    expect(meta.locator('[data-field="shape"]')).to_be_visible()

    def field(name):
        return meta.locator(f'[data-field="{name}"]').first.text_content()

    ints = lambda s: [int(x) for x in re.findall(r"\d+", s)]  # noqa: E731
    assert ints(field("shape")) == [6, 180, 720]
    assert ints(field("chunks")) == [1, 90, 360]
    assert "float32" in field("dtype")
    assert re.search(r"time.*lat.*lon", field("dimension_names"), re.S)
    assert "array" in field("node_type")
    assert "3" in field("zarr_format")
    assert "nan" in field("fill_value").lower()
    assert "climate/temperature" in field("path")
    for name in ["ratio", "nbytes", "stored_bytes", "chunks_initialized", "codecs", "order", "shard_shape"]:
        expect(meta.locator(f'[data-field="{name}"]').first).to_be_attached()
    assert re.search(r"\d", field("ratio")), f"no compression ratio: {field('ratio')!r}"
    assert json.loads(page.locator("#attributes").text_content()) == {
        "units": "degC", "long_name": "surface temperature"}
    cells = page.locator("#chunk-grid [data-chunk]")
    expect(cells).to_have_count(4)
    for cell in ["0.0", "0.1", "1.0", "1.1"]:
        expect(page.locator(f'#chunk-grid [data-chunk="{cell}"]')).to_have_class(re.compile(r"\bpresent\b"))
    v.shot("viewer-meta.png")

    page = v.open("/view/fields/nans?tab=meta")
    expect(page.locator("#chunk-grid [data-chunk]")).to_have_count(6)
    for cell in ["0.0", "0.1", "0.2", "1.0", "1.1"]:
        expect(page.locator(f'#chunk-grid [data-chunk="{cell}"]')).to_have_class(re.compile(r"\bpresent\b"))
    expect(page.locator('#chunk-grid [data-chunk="1.2"]')).to_have_class(re.compile(r"\bmissing\b"))
    assert v.unexpected_errors() == []


def test_tabs_offered_match_the_node(server, viewer):
    v = viewer(server)
    expected = {
        "climate/temperature": {"heatmap", "line", "table", "meta", "code"},
        "fields/series": {"line", "table", "meta", "code"},
        "images/rgb": {"heatmap", "table", "meta", "code"},
        "legacy/records": {"table", "meta", "code"},
        "climate": {"meta"},
    }
    for path, tabs in expected.items():
        page = v.open(f"/view/{path}")
        expect(page.locator("[role=tablist]").first).to_be_attached()
        expect(page.locator("#tab-meta")).to_be_visible()
        for tab in ["heatmap", "line", "table", "meta", "code"]:
            locator = page.locator(f"#tab-{tab}")
            if tab in tabs:
                expect(locator).to_be_visible()
            else:
                expect(locator).to_be_hidden()
    assert v.unexpected_errors() == []


def test_heatmap_pixels_match_numpy(server, hierarchy, viewer):
    values = hierarchy[1]
    v = viewer(server)
    # viridis (the default) with the server's automatic range.
    page = v.open("/view/climate/temperature?tab=heatmap")
    state = wait_image(page)
    assert state["cmap"] == "viridis" and state["scale"] == "linear"
    check_heatmap(page, values["climate/temperature"], state)
    expect(page.locator("#colorbar")).to_be_visible()
    expect(page.locator("#tree")).to_be_visible()
    # At screen resolution: never more pixels than the heatmap shows.
    fit = page.eval_on_selector("#heatmap", """el => {
        const img = el.querySelector('img#heatmap-image'), r = el.getBoundingClientRect();
        return {nw: img.naturalWidth, nh: img.naturalHeight, w: r.width, h: r.height, dpr: devicePixelRatio};
    }""")
    assert fit["nw"] <= math.ceil(fit["w"] * fit["dpr"]) and fit["nh"] <= math.ceil(fit["h"] * fit["dpr"]), fit
    v.shot("viewer.png")

    # gray with a fixed range, from the URL, on an array with NaNs and a missing chunk.
    page = v.open("/view/fields/nans?tab=heatmap&cmap=gray&vmin=-2&vmax=2")
    state = wait_image(page)
    assert (state["cmap"], float(state["vmin"]), float(state["vmax"])) == ("gray", -2.0, 2.0)
    check_heatmap(page, values["fields/nans"], state)
    v.shot("viewer-heatmap-gray.png")

    # rdbu from the colormap control; the URL follows.
    page.select_option("select#cmap", "rdbu")
    state = wait_image(page, cmap="rdbu")
    check_heatmap(page, values["fields/nans"], state)
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query).get("cmap") == ["rdbu"]
    v.shot("viewer-heatmap-rdbu.png")

    # The automatic range again, from its button.
    page.click("button#auto-range")
    state = wait_image(page, vmin=("!=", state["vmin"]))
    check_heatmap(page, values["fields/nans"], state)
    assert "vmin" not in urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query)
    assert v.unexpected_errors() == []


def test_rgb_array_is_drawn_as_colours(server, hierarchy, viewer):
    rgb = hierarchy[1]["images/rgb"]
    v = viewer(server)
    page = v.open("/view/images/rgb?tab=heatmap")
    state = wait_image(page)
    sel = rgb[parse_select(state["select"], rgb.shape)]
    assert sel.ndim == 3 and sel.shape[2] == 3, f"select {state['select']!r} does not keep the channels"
    want = np.concatenate([sel, np.full(sel.shape[:2] + (1,), 255, np.uint8)], axis=2).astype(np.int16)
    assert_pixels(read_pixels(page), want, 0)
    v.shot("viewer-rgb.png")


def test_slider_moves_to_the_next_index(server, hierarchy, viewer):
    values = hierarchy[1]
    arr = values["climate/temperature"]
    v = viewer(server)
    page = v.open("/view/climate/temperature?tab=heatmap")
    before = wait_image(page)
    assert parse_select(before["select"], arr.shape)[0] == 0
    slider = page.locator('input[type=range][data-dim="0"]')
    expect(slider).to_have_accessible_name(re.compile("time"))
    # No slider for the displayed dimensions.
    expect(page.locator('input[type=range][data-dim="1"]')).to_be_hidden()
    expect(page.locator('input[type=range][data-dim="2"]')).to_be_hidden()
    slider.focus()
    page.keyboard.press("ArrowRight")
    state = wait_image(page, select=("!=", before["select"]))
    index = parse_select(state["select"], arr.shape)
    assert index[0] == 1 and index[1:] == parse_select(before["select"], arr.shape)[1:]
    check_heatmap(page, arr, state)
    # The coordinate value at the new index (time[1] == 20) is shown by the slider.
    page.wait_for_function("""() => {
        let el = document.querySelector('input[type=range][data-dim="0"]');
        for (let up = 0; up < 3 && el; up++, el = el.parentElement)
            if (/\\b20\\b/.test(el.textContent)) return true;
        return false;
    }""")
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query)
    assert query.get("index", [""])[0].split(",")[0] == "1", page.url
    v.shot("viewer-slider.png")
    # Reloading the URL reproduces the view.
    page.reload()
    again = wait_image(page)
    assert again["select"] == state["select"]
    assert v.unexpected_errors() == []


def test_zoom_from_the_url_and_the_buttons(server, hierarchy, viewer):
    arr = hierarchy[1]["climate/temperature"]
    v = viewer(server)
    page = v.open("/view/climate/temperature?tab=heatmap&index=4,0,0&zoom=10:50,100:300")
    state = wait_image(page)
    index = parse_select(state["select"], arr.shape)
    assert index[0] == 4
    assert index[1].indices(180)[:2] == (10, 50) and index[2].indices(720)[:2] == (100, 300), state["select"]
    check_heatmap(page, arr, state)
    page.click("button#zoom-reset")
    state = wait_image(page, select=("!=", state["select"]))
    index = parse_select(state["select"], arr.shape)
    assert index[1].indices(180)[:2] == (0, 180) and index[2].indices(720)[:2] == (0, 720), state["select"]
    page.click("button#zoom-in")
    zoomed = wait_image(page, select=("!=", state["select"]))
    index = parse_select(zoomed["select"], arr.shape)
    assert len(range(*index[1].indices(180))) < 180 or len(range(*index[2].indices(720))) < 720
    check_heatmap(page, arr, zoomed)
    assert "zoom" in urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query)
    # By keyboard: `-` on the focused heatmap zooms back out.
    page.focus("#heatmap")
    page.keyboard.press("-")
    out = wait_image(page, select=("!=", zoomed["select"]))
    wider = parse_select(out["select"], arr.shape)
    extent = lambda i: (len(range(*i[1].indices(180))), len(range(*i[2].indices(720))))  # noqa: E731
    assert extent(wider) > extent(index), (zoomed["select"], out["select"])
    check_heatmap(page, arr, out)
    assert v.unexpected_errors() == []


def test_displayed_dimensions_from_the_url(server, hierarchy, viewer):
    arr = hierarchy[1]["climate/temperature"]
    v = viewer(server)
    page = v.open("/view/climate/temperature?tab=heatmap&dims=0,2&index=0,45,0")
    state = wait_image(page)
    index = parse_select(state["select"], arr.shape)
    assert index[1] == 45 and isinstance(index[0], slice) and isinstance(index[2], slice), state["select"]
    check_heatmap(page, arr, state)
    expect(page.locator("select#dim-rows")).to_be_visible()
    expect(page.locator("select#dim-cols")).to_be_visible()
    slider = page.locator('input[type=range][data-dim="1"]')
    expect(slider).to_be_visible()
    expect(slider).to_have_accessible_name(re.compile("lat"))
    expect(page.locator('input[type=range][data-dim="0"]')).to_be_hidden()
    v.shot("viewer-dims-time-lon.png")
    assert v.unexpected_errors() == []


def test_hovered_value_is_numpys(server, hierarchy, viewer):
    values = hierarchy[1]
    v = viewer(server)
    for path, query, (fy, fx) in [("climate/temperature", "&index=2,0,0", (1 / 3, 1 / 4)),
                                  ("fields/nans", "", (0.5, 0.85))]:  # a NaN there
        arr = values[path]
        page = v.open(f"/view/{path}?tab=heatmap{query}")
        state = wait_image(page)
        index = parse_select(state["select"], arr.shape)
        box = image_box(page)
        py, px = int(box["nh"] * fy), int(box["nw"] * fx)
        page.mouse.move(box["x"] + (px + 0.5) * box["w"] / box["nw"], box["y"] + (py + 0.5) * box["h"] / box["nh"])
        hover = wait_hover(page)
        at = tuple(int(i) for i in hover["index"].split(","))
        assert len(at) == arr.ndim
        assert at[:-2] == tuple(index[:-2]), (hover, state["select"])
        assert at[-2] in pixel_span(index[-2], arr.shape[-2], py), (hover, state["select"], py)
        assert at[-1] in pixel_span(index[-1], arr.shape[-1], px), (hover, state["select"], px)
        got, want = json_value(hover["value"]), arr[at]
        if np.isnan(want):
            assert isinstance(got, float) and math.isnan(got), hover
        else:
            assert np.asarray(got, dtype=arr.dtype) == want, (hover, want)
        expect(page.locator("#hover")).to_be_visible()
        v.shot(f"viewer-hover-{path.replace('/', '-')}.png")
    assert v.unexpected_errors() == []


def run_curl(code, tmp):
    """Run the curl snippet's first command (the selection as .npy)."""
    command = next(line for line in code.splitlines() if line.startswith("curl"))
    subprocess.run(command, shell=True, cwd=tmp, check=True, timeout=60)
    return np.load(os.path.join(tmp, "data.npy"))


def run_zarrita(code, tmp):
    """Run the zarrita.js snippet in Node with the zarrita package scripts/test installs."""
    zarrita = os.environ.get("ZARRD_ZARRITA")
    if not zarrita:
        pytest.skip("zarrita.js is installed by scripts/test")
    script = os.path.join(zarrita, f"snippet-{os.getpid()}.mjs")
    with open(script, "w") as f:
        f.write(code + "\nconsole.log(JSON.stringify({ shape: data.shape, data: Array.from(data.data) }));\n")
    try:
        done = subprocess.run(["node", script], capture_output=True, timeout=60, text=True)
    finally:
        os.remove(script)
    assert done.returncode == 0, f"the snippet failed:\n{code}\n{done.stderr[-2000:]}"
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return np.array(out["data"]).reshape(out["shape"])


def test_every_snippet_returns_the_view(server, hierarchy, viewer, tmp_path):
    arr = hierarchy[1]["climate/temperature"]
    v = viewer(server)
    page = v.open("/view/climate/temperature?tab=heatmap&index=2,0,0&zoom=20:120,0:500")
    state = wait_image(page)
    page.click("#tab-code")
    expect(page.locator('#code pre[data-lang="zarr-python"]')).to_be_visible()
    want = arr[parse_select(state["select"], arr.shape)]
    for lang in ["zarrd", "zarr-python", "xarray", "tensorstore", "curl", "zarrita"]:
        code = page.locator(f'#code pre[data-lang="{lang}"]').text_content()
        assert server in code, code
        if lang == "curl":
            got = run_curl(code, tmp_path)
        elif lang == "zarrita":
            got = run_zarrita(code, tmp_path)
        else:
            got = run_snippet(code)
        assert got.shape == want.shape, (lang, got.shape, want.shape, code)
        if lang != "zarrita":
            assert got.dtype == want.dtype, (lang, got.dtype, code)
        assert np.array_equal(np.asarray(got, dtype=want.dtype), want, equal_nan=want.dtype.kind == "f"), (lang, code)
    v.shot("viewer-code.png")
    assert v.unexpected_errors() == []


@pytest.fixture(scope="module")
def ome_server(tmp_path_factory):
    """An OME-Zarr image written by ome-zarr-py: four levels of a 1200 x 1600 field."""
    import zarr
    from ome_zarr.format import FormatV05
    from ome_zarr.io import parse_url
    from ome_zarr.writer import write_image

    root = tmp_path_factory.mktemp("viewer-ome")
    y, x = np.mgrid[0:1200, 0:1600]
    field = ((np.sin(y / 90.0) + np.cos(x / 130.0)) * 1000 + 2500).astype("uint16")
    location = parse_url(str(root / "img"), mode="w", fmt=FormatV05())
    group = zarr.group(store=location.store, zarr_format=3)
    write_image(field, group, scale_factors=(2, 4, 8), axes="yx", fmt=FormatV05(),
                storage_options=dict(chunks=(256, 256)))
    levels = [zarr.open_array(str(root / "img" / f"s{i}"), mode="r")[...] for i in range(4)]
    url, proc = start_zarrd(str(root))
    yield url, levels
    stop(proc)


def test_multiscale_image_reads_the_coarsest_level_that_fills_the_screen(ome_server, viewer):
    url, levels = ome_server
    v = viewer(url)
    page = v.open("/view/img")
    expect(page.locator("#node-summary")).to_contain_text("OME-Zarr 0.5 image, 4 levels")
    page = v.open("/view/img/s0?tab=heatmap")
    state = wait_image(page)
    level = int(state["source"].rsplit("s", 1)[1])
    assert state["source"] == f"img/s{level}" and level >= 1, state
    # The level's elements are no larger than the screen's pixels: its
    # factor is at most the stride the full-resolution array would need.
    factor = levels[0].shape[1] / levels[level].shape[1]
    assert factor <= min(float(s) for s in state["stride"].split(",")) + 1e-9, state
    if level < 3:
        coarser = levels[0].shape[1] / levels[level + 1].shape[1]
        assert coarser > min(float(s) for s in state["stride"].split(",")), state
    check_heatmap(page, levels[level], state)
    # Zoomed in to a small region, only the full resolution has enough pixels.
    page = v.open("/view/img/s0?tab=heatmap&zoom=100:220,300:460")
    state = wait_image(page)
    assert state["source"] == "img/s0", state
    check_heatmap(page, levels[0], state)
    # The value under the cursor is read from the array itself, at full resolution.
    assert v.unexpected_errors() == []


def test_corrupt_chunk_is_reported(broken_server, viewer):
    with urllib.request.urlopen(f"{broken_server}/api/v1/meta/broken") as r:
        assert json.load(r)["shape"] == [20, 30]
    v = viewer(broken_server)
    page = v.open("/view/broken?tab=heatmap")
    expect(page.locator("img#heatmap-image")).to_have_attribute("data-state", "error")
    error = page.locator("#error")
    expect(error).to_have_attribute("role", "alert")
    expect(error).to_be_visible()
    expect(error).to_contain_text("broken/c/0/0")
    expect(error).to_contain_text("could not be decoded")
    expect(error).to_contain_text("corrupt_chunk")
    expect(error).to_contain_text("500")
    v.shot("viewer-error-corrupt-chunk.png")


def test_token_from_the_page(token_server, hierarchy, viewer):
    arr = hierarchy[1]["climate/temperature"]
    v = viewer(token_server)
    page = v.open("/view/climate/temperature?tab=heatmap")
    error = page.locator("#error")
    expect(error).to_contain_text("401")
    token = page.locator("#token")
    expect(token).to_be_visible()
    expect(token).to_have_accessible_name(re.compile("Access token"))
    v.shot("viewer-token-required.png")

    # A token without the prefix: what it may not read is not there for it.
    token.fill(FIELDS_TOKEN)
    page.click("#token-save")
    expect(error).to_contain_text("404")

    token.fill(TOKEN)
    page.click("#token-save")
    state = wait_image(page)
    error_cleared(page)
    assert page.evaluate("sessionStorage.getItem('zarrd-token')") == TOKEN
    check_heatmap(page, arr, state)
    expect(page.locator('#tree [role=treeitem][data-path="climate/temperature"]')).to_be_attached()
    v.shot("viewer-token-accepted.png")

    page.click("#tab-code")
    code = page.locator('#code pre[data-lang="zarr-python"]').text_content()
    assert f"Bearer {TOKEN}" in code, code
    got = run_snippet(code)
    assert np.array_equal(got, arr[parse_select(state["select"], arr.shape)])


def test_line_plot_and_tables(server, hierarchy, viewer):
    values = hierarchy[1]
    series = values["fields/series"]
    v = viewer(server)
    page = v.open("/view/fields/series?tab=line")
    plot = page.locator("svg#lineplot")
    expect(plot).to_be_visible()
    expect(plot.locator("path, polyline").first).to_be_attached()
    box = plot.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    hover = wait_hover(page)
    (i,) = (int(x) for x in hover["index"].split(","))
    assert 0 <= i < len(series)
    assert json_value(hover["value"]) == series[i], hover
    v.shot("viewer-lineplot.png")

    page.click("#tab-table")
    assert (0,) in check_table(page, series)
    v.shot("viewer-table-1d.png")

    page = v.open("/view/fields/nans?tab=table")
    cells = check_table(page, values["fields/nans"])
    assert (0, 0) in cells and (39, 0) in cells, "the first page shows every row of this 40-row array"
    v.shot("viewer-table.png")
    if page.locator("#table-next").count() and page.locator("#table-next").is_enabled():
        first = page.locator("table#values td[data-index]").first.get_attribute("data-index")
        page.click("#table-next")
        page.wait_for_function(
            "(f) => { const td = document.querySelector('table#values td[data-index]'); return td && td.dataset.index !== f; }",
            arg=first)
        check_table(page, values["fields/nans"])

    page = v.open("/view/legacy/names?tab=table")
    cells = cells_by_index(page)
    assert cells, "no cells"
    for (i,), texts in cells.items():
        assert texts == [values["legacy/names"][i]], (i, texts)

    page = v.open("/view/legacy/records?tab=table")
    records = values["legacy/records"]
    cells = cells_by_index(page)
    assert sorted(cells) == [(i,) for i in range(len(records))]
    for (i,), texts in cells.items():
        assert len(texts) == 3, f"one column per field: {texts}"
        assert int(texts[0]) == records[i]["id"] and float(texts[1]) == records[i]["lat"], texts
        assert records[i]["name"].decode() in texts[2], texts
    assert v.unexpected_errors() == []


def cells_by_index(page):
    expect(page.locator("table#values td[data-index]").first).to_be_attached()
    rows = page.eval_on_selector_all(
        "table#values td[data-index]", "tds => tds.map(td => [td.dataset.index, td.textContent])")
    out = {}
    for index, text in rows:
        out.setdefault(tuple(int(i) for i in index.split(",")), []).append(text.strip())
    return out


def check_table(page, arr):
    """Every cell shown equals numpy; the first page starts at the origin."""
    cells = cells_by_index(page)
    assert all(len(t) == 1 for t in cells.values()), "one cell per index"
    assert len(cells) <= 100 * 50
    for index, (text,) in cells.items():
        want = arr[index]
        got = cell_number(text)
        if np.isnan(want):
            assert math.isnan(got), (index, text)
        else:
            assert math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-12), (index, text, want)
    return cells


def test_phone_layout(server, hierarchy, viewer):
    arr = hierarchy[1]["climate/temperature"]
    v = viewer(server, PHONE)
    page = v.open("/view/climate/temperature?tab=heatmap")
    toggle = page.locator("button#tree-toggle")
    expect(toggle).to_be_visible()
    state = wait_image(page)
    image = page.locator("img#heatmap-image")
    expect(image).to_be_visible()
    box = image.bounding_box()
    assert box["x"] >= -1 and box["x"] + box["width"] <= PHONE["width"] + 1, box
    natural = page.eval_on_selector("img#heatmap-image", "img => img.naturalWidth")
    assert natural <= PHONE["width"], f"{natural} pixels wide on a {PHONE['width']} px screen"
    check_heatmap(page, arr, state)
    v.shot("viewer-phone.png")
    toggle.click()
    expect(page.locator('#tree [role=treeitem][data-path="climate/temperature"]').first).to_be_visible()
    v.shot("viewer-phone-tree.png")
    assert v.unexpected_errors() == []


def test_demo(demo_server, viewer):
    with urllib.request.urlopen(f"{demo_server}/api/v1/tree") as r:
        nodes = {n["path"] for n in json.load(r)["nodes"]}
    v = viewer(demo_server)
    page = v.open("/")
    expect(page.locator('#tree [role=treeitem][data-path="v3/sharded"]')).to_be_attached()
    assert sorted(tree_paths(page)) == sorted(nodes)
    click_tree_link(page, "v3/sharded")
    page.wait_for_url(re.compile(r"/view/v3/sharded"))
    state = wait_image(page)
    # src/demo.rs: element i is (i % 9973) / 100; the fill value 0 is transparent.
    sharded = ((np.arange(64 * 128 * 128, dtype=np.uint32) % 9973) / 100).astype(np.float32).reshape(64, 128, 128)
    check_heatmap(page, sharded, state, fill=0)
    expect(page.locator('input[type=range][data-dim="0"]')).to_have_accessible_name(re.compile("time"))
    page.wait_for_load_state("networkidle")
    v.shot("viewer-demo.png")
    assert v.unexpected_errors() == []


def test_reductions_run_on_the_server_and_axes_carry_coordinates(server, hierarchy, viewer):
    values = hierarchy[1]
    arr = values["climate/temperature"]
    v = viewer(server)
    # A time-mean map: the hidden dimension reduced by the server.
    page = v.open("/view/climate/temperature?tab=heatmap&reduce=mean")
    state = wait_image(page)
    assert state["select"].startswith(":,")
    expect(page.locator("#dim-reduce")).to_have_value("mean")
    expect(page.locator("#dim-index-0")).to_be_disabled()
    index = parse_select(state["select"], arr.shape)
    mean = np.nanmean(arr[index], axis=0)
    want = render(mean, float(state["vmin"]), float(state["vmax"]), state["cmap"], None)
    assert_pixels(read_pixels(page), want, TOLERANCE.get(state["cmap"], DEFAULT_TOLERANCE))
    # The axes are labelled with the coordinates, not indices.
    page.wait_for_function("() => [...document.querySelectorAll('.hm-axes .tick-label')].some(t => t.textContent === '89.5')")
    # The hover reads the reduction's value under the cursor.
    # An area-mean series: the line of time (columns), latitude and longitude reduced.
    page = v.open("/view/climate/temperature?tab=line&dims=1,0&reduce=mean")
    page.wait_for_function("() => document.querySelector('#lineplot').dataset.state === 'ready'")
    select = page.eval_on_selector("#lineplot", "p => p.dataset.select")
    assert select.startswith("0:6")
    ticks = page.eval_on_selector_all("#lineplot .tick-label", "ts => ts.map(t => t.textContent)")
    assert "10" in ticks and "20" in ticks  # time's coordinate values, not 0, 1
    page.select_option("#dim-reduce", "")
    page.wait_for_url(re.compile(r"^(?!.*reduce=)"))
    expect(page.locator("#dim-index-2")).to_be_enabled()
    # The code tab reproduces the reduction with the notebook client.
    page = v.open("/view/climate/temperature?tab=code&reduce=max")
    code = page.locator('pre[data-lang="zarrd"]').text_content()
    assert '.max(["time"])' in code and "zarrd.Client" in code
    assert v.unexpected_errors() == []


def test_a_georeferenced_array_is_shown_on_a_map_of_its_tiles(demo_server, viewer):
    """The demo's climate/t2m (descending latitudes, 0-360 longitudes) in
    the map tab: OpenLayers draws the server's WebMercatorQuad tiles, and
    the map at zoom 1 centred on 0, 0 is exactly the four tiles of zoom 1."""
    v = viewer(demo_server)
    tiles = []
    v.page.on("response", lambda r: tiles.append(r) if "/tiles/climate/t2m/WebMercatorQuad/1/" in r.url else None)
    page = v.open("/view/climate/t2m?tab=map&index=100,0,0&vmin=-40&vmax=40&at=1/0/0")
    expect(page.locator("#tab-map")).to_be_visible()
    # At whole pixels of the page, so the screenshot is the canvas itself.
    page.add_style_tag(content="#map { position: fixed; inset: auto; left: 0; top: 0; width: 512px; height: 512px; z-index: 100000; } #map .ol-control { display: none; }")
    page.wait_for_function("() => !document.querySelector('#map-legend').hidden")
    deadline = time.time() + 30
    while len({r.url for r in tiles}) < 4 and time.time() < deadline:
        page.wait_for_timeout(100)
    assert all("isel.time=100" in r.url and r.status == 200 for r in tiles), [r.url for r in tiles]
    page.wait_for_timeout(1500)  # OpenLayers fades tiles in
    shot = np.asarray(Image.open(io.BytesIO(page.locator("#map canvas").first.screenshot())).convert("RGBA"))
    assert shot.shape[:2] == (512, 512)

    def tile(x, y):
        with urllib.request.urlopen(f"{demo_server}/tiles/climate/t2m/WebMercatorQuad/1/{x}/{y}.png?isel.time=100&cmap=viridis&vmin=-40&vmax=40") as r:
            return np.asarray(Image.open(io.BytesIO(r.read())).convert("RGBA"))

    want = np.vstack([np.hstack([tile(0, 0), tile(1, 0)]), np.hstack([tile(0, 1), tile(1, 1)])])
    opaque = want[:, :, 3] == 255
    # Where a tile is transparent the map shows the panel's background.
    close = (np.abs(shot[:, :, :3].astype(int) - want[:, :, :3].astype(int)) <= 2).all(axis=2)
    if close[opaque].mean() <= 0.99:
        Image.fromarray(shot).save(os.path.join(SHOTS, "map-shot.png"))
    assert close[opaque].mean() > 0.99, f"{(~close[opaque]).sum()} pixels differ"
    # Another time at the slider: new tiles, and the address says where the map is.
    page.fill("#dim-index-0", "200")
    page.wait_for_url(re.compile(r"index=200"))
    deadline = time.time() + 30
    while not any("isel.time=200" in r.url for r in tiles) and time.time() < deadline:
        page.wait_for_timeout(100)
    assert any("isel.time=200" in r.url for r in tiles)
    assert "at=1/0/0" in page.url
    assert v.unexpected_errors() == []
