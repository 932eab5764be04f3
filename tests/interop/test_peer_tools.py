"""Tools nobody here wrote, against a zarrd started here: GDAL (Debian's)
opens v2 arrays and groups through `/vsicurl/` (with and without the
trailing slash: the folder redirect) and `/vsis3/` (the S3 API), with
values equal to zarr-python's; rclone copies and checks a group with
synthesized consolidated metadata through the S3 API (whose ETags it takes
for MD5s) and lists through WebDAV; and a second zarrd serves the first's
`http://` URL onward, listings included."""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest
import requests
import zarr

from conftest import start_zarrd, stop

REQUIRED = os.environ.get("ZARRD_REQUIRE_CORPUS") == "1"


def tool(name):
    path = shutil.which(name)
    if path is None:
        if REQUIRED:
            pytest.fail(f"{name} is not installed (scripts/test installs it)")
        pytest.skip(f"{name} is not installed")
    return path


# name: (values, compressor; "auto" is zarr-python's default, Blosc).
ARRAYS = {
    "f4_zlib": (np.linspace(-5, 5, 20 * 11, dtype="f4").reshape(20, 11), "zlib"),
    "i2_blosc": (np.arange(20 * 11, dtype="i2").reshape(20, 11) - 50, "auto"),
    "u1_plain": ((np.arange(9 * 7) % 251).astype("u1").reshape(9, 7), None),
}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    import numcodecs

    root = tmp_path_factory.mktemp("peer-tools")
    group = zarr.open_group(str(root / "g2"), mode="w", zarr_format=2)
    for name, (data, compressor) in ARRAYS.items():
        if compressor == "zlib":
            compressor = numcodecs.Zlib(level=3)
        arr = group.create_array(name, shape=data.shape, chunks=(6, 4), dtype=data.dtype, compressors=compressor)
        arr[...] = data
    g3 = zarr.open_group(str(root / "g3"), mode="w", zarr_format=3)
    sub = g3.create_group("sub")
    a = sub.create_array("a", shape=(8, 8), chunks=(4, 4), dtype="f8")
    a[...] = np.arange(64, dtype="f8").reshape(8, 8)
    url, proc = start_zarrd(str(root))
    yield url, root
    stop(proc)


def gdal_env(url):
    # The S3 API as GDAL's /vsis3/ reaches it: path-style, unsigned.
    host = url.split("://", 1)[1]
    return {**os.environ, "AWS_NO_SIGN_REQUEST": "YES", "AWS_S3_ENDPOINT": f"{host}/s3",
            "AWS_HTTPS": "NO", "AWS_VIRTUAL_HOSTING": "FALSE", "GDAL_HTTP_MAX_RETRY": "0",
            "CPL_VSIL_CURL_CHUNK_SIZE": "16384"}


def translate(path, env, out):
    """The array GDAL reads at `path`, through an ENVI file (raw, host order)."""
    subprocess.run([tool("gdal_translate"), "-q", "-of", "ENVI", path, str(out)], env=env, check=True,
                   timeout=120)
    info = json.loads(subprocess.run([tool("gdalinfo"), "-json", path], env=env, check=True, timeout=120,
                                     capture_output=True, text=True).stdout)
    return np.fromfile(out, dtype=ARRAY_TYPES[info["bands"][0]["type"]]).reshape(info["size"][::-1])


ARRAY_TYPES = {"Float32": "f4", "Int16": "i2", "Byte": "u1"}


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_gdal_reads_v2_arrays_through_vsicurl_and_vsis3(served, name, tmp_path):
    url, root = served
    expected = zarr.open_array(str(root / "g2"), path=name, mode="r")[...]
    env = gdal_env(url)
    for i, path in enumerate([f"/vsicurl/{url}/zarr/g2/{name}", f"/vsicurl/{url}/zarr/g2/{name}/",
                              f"/vsis3/zarr/g2/{name}"]):
        got = translate(path, env, tmp_path / f"out{i}.bin")
        assert np.array_equal(got, expected), path


def test_gdal_opens_a_v2_group_without_its_slash(served):
    url, _ = served
    for path in [f"/vsicurl/{url}/zarr/g2", f"/vsis3/zarr/g2"]:
        out = subprocess.run([tool("gdalmdiminfo"), path], env=gdal_env(url), check=True, timeout=120,
                             capture_output=True, text=True).stdout
        arrays = json.loads(out)["arrays"]
        assert sorted(arrays) == sorted(ARRAYS), path


def rclone_env():
    # This machine's CA bundle setting makes rclone's S3 client refuse its
    # own transport; nothing here is TLS.
    return {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}


def test_rclone_copies_and_checks_a_group_with_synthesized_consolidated_metadata(served, tmp_path):
    url, _ = served
    remote = f":s3,provider=Other,endpoint='{url}/s3',env_auth=false:zarr/g3"
    run = lambda *args: subprocess.run([tool("rclone"), *args], env=rclone_env(), timeout=120,
                                       capture_output=True, text=True)
    copied = run("copy", remote, str(tmp_path / "g3"))
    assert copied.returncode == 0, copied.stderr
    doc = json.loads((tmp_path / "g3" / "zarr.json").read_text())
    assert "sub/a" in doc["consolidated_metadata"]["metadata"], "the served document, not the stored one"
    checked = run("check", remote, str(tmp_path / "g3"))
    assert checked.returncode == 0, checked.stderr
    assert "0 differences found" in checked.stderr
    # WebDAV: rclone's backend lists through PROPFIND.
    listed = run("lsf", "-R", f":webdav,url='{url}/zarr':g3")
    assert listed.returncode == 0, listed.stderr
    assert {"zarr.json", "sub/", "sub/a/", "sub/a/zarr.json", "sub/a/c/0/0"} <= set(listed.stdout.split())


def test_a_second_zarrd_serves_the_first_over_http(served):
    url, root = served
    second, proc = start_zarrd(f"{url}/zarr/")
    try:
        listing = requests.get(f"{second}/zarr/g2/", headers={"accept": "application/json"}, timeout=30).json()
        assert sorted(listing["prefixes"]) == sorted(ARRAYS)
        tree = requests.get(f"{second}/api/v1/tree/g3", timeout=30).json()
        assert [n["path"] for n in tree["nodes"]] == ["g3", "g3/sub", "g3/sub/a"]
        data = requests.get(f"{second}/api/v1/data/g3/sub/a?select=7&format=json", timeout=30).json()
        assert data["data"] == list(range(56, 64))
        # Onward again, as a plain store: zarr-python through the second.
        onward = zarr.open_array(f"{second}/zarr/g2/i2_blosc", mode="r")[...]
        assert np.array_equal(onward, ARRAYS["i2_blosc"][0])
    finally:
        stop(proc)
