"""A pytest plugin for zarr-python's own test suite (run from its source by
test_zarr_python_suite.py): the suite's "local" store becomes a store over
HTTP against a zarrd this plugin starts, a fresh folder of it per store.
ZARRD_SUITE_CLIENT picks the client: `fsspec` (zarr's FsspecStore on
fsspec's HTTP file system) or `obstore` (zarr's ObjectStore on obstore's
HTTPStore)."""

import itertools
import os
import re
import shutil
import subprocess
import tempfile

import pytest

_server = {}
_serial = itertools.count()


def _start():
    root = tempfile.mkdtemp(prefix="zarrd-suite-")
    proc = subprocess.Popen(
        [os.environ["ZARRD_BIN"], "serve", "--listen", "127.0.0.1:0", "--allow-anonymous-writes", root],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    match = re.search(r"(http://127\.0\.0\.1:\d+)/", proc.stdout.readline())
    if not match:
        proc.kill()
        raise RuntimeError("zarrd did not start")
    _server.update(url=match.group(1), proc=proc, root=root)


def zarrd_store():
    from zarr.storage import FsspecStore, ObjectStore

    url = f"{_server['url']}/zarr/t{os.getpid()}-{next(_serial)}"
    if os.environ.get("ZARRD_SUITE_CLIENT") == "obstore":
        from obstore.store import HTTPStore

        return ObjectStore(HTTPStore.from_url(url, client_options={"allow_http": True}))
    from fsspec.implementations.http import HTTPFileSystem

    return FsspecStore(HTTPFileSystem(asynchronous=True, skip_instance_cache=True), path=url)


def pytest_configure(config):
    _start()


def pytest_unconfigure(config):
    proc = _server.get("proc")
    if proc:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(_server["root"], ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    # The suite's conftest is imported by now: its store parser is replaced.
    import tests.conftest as suite

    original = suite.parse_store

    async def parse_store(store, path):
        if store == "local":
            return zarrd_store()
        return await original(store, path)

    suite.parse_store = parse_store
