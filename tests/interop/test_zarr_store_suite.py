"""zarr-python's own store test suite (`zarr.testing.store.StoreTests`, from
the pinned zarr-python) over HTTP, against a zarrd started here: zarr's
`FsspecStore` on fsspec's HTTP file system, and zarr's `ObjectStore` on
obstore's `HTTPStore` (which lists with WebDAV PROPFIND). Every test passes,
or fails for the reason `zarr_expected_failures.txt` gives (a client's
limit, or a policy of zarrd's), and the xfail is strict: a listed test
that starts to pass fails the run until the file is corrected.

Each test gets a folder of its own on one server, so the suite's "empty
store" holds for each. zarrd serves the hierarchy at `/zarr/`; obstore's
HTTPStore names listed keys by their whole path on the host (object_store's
`MultiStatusResponse::path`), so it is given a zarrd whose store is exactly
what it lists."""

import asyncio
import itertools
import os

import pytest
import requests

from conftest import start_zarrd, stop

zarr = pytest.importorskip("zarr")
from zarr.core.buffer import Buffer, cpu  # noqa: E402
from zarr.storage import FsspecStore, ObjectStore  # noqa: E402
from zarr.testing.store import StoreTests  # noqa: E402

SERIAL = itertools.count()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("store-suite")
    url, proc = start_zarrd(str(root), "--allow-anonymous-writes", "--check-documents=false")
    yield url
    stop(proc)


@pytest.fixture(scope="module", autouse=True)
def own_http_file_system():
    """fsspec keeps one HTTP file system per set of arguments, with the
    aiohttp session of the event loop that made it: one another test module
    made would be handed to this suite's stores, on this suite's loop."""
    from fsspec.implementations.http import HTTPFileSystem

    HTTPFileSystem.clear_instance_cache()
    yield
    HTTPFileSystem.clear_instance_cache()


def fresh_folder(server):
    return f"{server}/zarr/suite-{os.getpid()}-{next(SERIAL)}"


def raw_put(url, value):
    r = requests.put(url, data=value, timeout=30)
    assert r.status_code in (201, 204), (url, r.status_code, r.text)


def raw_get(url):
    r = requests.get(url, timeout=30)
    assert r.status_code == 200, (url, r.status_code, r.text)
    return r.content


class ZarrdHttpTests:
    """What the suite asks of a store, answered through zarrd's HTTP API
    (not through the store under test)."""

    buffer_cls = cpu.Buffer

    def base(self, store):
        # The folder `store_kwargs` made for this test.
        return self.url

    async def set(self, store, key: str, value: Buffer) -> None:
        await asyncio.to_thread(raw_put, f"{self.base(store)}/{key}", value.to_bytes())

    async def get(self, store, key: str) -> Buffer:
        data = await asyncio.to_thread(raw_get, f"{self.base(store)}/{key}")
        return self.buffer_cls.from_bytes(data)

    def test_store_supports_writes(self, store) -> None:
        assert store.supports_writes

    def test_store_supports_listing(self, store) -> None:
        assert store.supports_listing


class TestFsspecStoreOverZarrd(ZarrdHttpTests, StoreTests[FsspecStore, cpu.Buffer]):
    store_cls = FsspecStore

    @pytest.fixture
    def store_kwargs(self, server):
        from fsspec.implementations.http import HTTPFileSystem

        fs = HTTPFileSystem(asynchronous=True)
        self.url = fresh_folder(server)
        return {"fs": fs, "path": self.url}

    def test_store_repr(self, store) -> None:
        assert repr(store).startswith("<FsspecStore(HTTPFileSystem,")


class TestObjectStoreOverZarrd(ZarrdHttpTests, StoreTests[ObjectStore, cpu.Buffer]):
    store_cls = ObjectStore

    @pytest.fixture
    def store_kwargs(self, server):
        from obstore.store import HTTPStore

        self.url = fresh_folder(server)
        return {"store": HTTPStore.from_url(self.url, client_options={"allow_http": True})}

    def test_store_repr(self, store) -> None:
        assert repr(store).startswith("ObjectStore(object_store://")


def test_what_zarr_python_writes_reads_back_through_every_client(server):
    """Beyond the suite: a group written through fsspec reads back through
    obstore, zarrd's REST API and an obstore listing at the host's root,
    where object_store's WebDAV paths are the keys."""
    import numpy as np
    import obstore
    from obstore.store import HTTPStore

    folder = fresh_folder(server)
    name = folder.rsplit("/", 1)[1]
    # A file system of its own: the suite's is bound to the suite's event loop.
    writer = FsspecStore.from_url(folder, storage_options={"skip_instance_cache": True})
    root = zarr.open_group(writer, mode="w", zarr_format=3)
    arr = root.create_array("a", shape=(6, 5), chunks=(4, 4), dtype="i4")
    arr[...] = np.arange(30, dtype="i4").reshape(6, 5)
    # fsspec finds group members by following the folder redirect and listing.
    assert sorted(zarr.open_group(writer, mode="r").array_keys()) == ["a"]
    reader = ObjectStore(HTTPStore.from_url(folder, client_options={"allow_http": True}), read_only=True)
    back = zarr.open_array(reader, path="a", mode="r")[...]
    assert np.array_equal(back, np.arange(30).reshape(6, 5))
    rest = requests.get(f"{server}/api/v1/data/{name}/a?format=json", timeout=30).json()
    assert rest["data"][5] == [25, 26, 27, 28, 29]
    host = HTTPStore.from_url(server, client_options={"allow_http": True})
    listed = sorted(m["path"] for batch in obstore.list(host, prefix=f"zarr/{name}") for m in batch)
    assert listed == [f"zarr/{name}/a/c/0/0", f"zarr/{name}/a/c/0/1", f"zarr/{name}/a/c/1/0",
                      f"zarr/{name}/a/c/1/1", f"zarr/{name}/a/zarr.json", f"zarr/{name}/zarr.json"]
    level = obstore.list_with_delimiter(host, prefix=f"zarr/{name}")
    assert [m["path"] for m in level["objects"]] == [f"zarr/{name}/zarr.json"]
    assert level["common_prefixes"] == [f"zarr/{name}/a"]
