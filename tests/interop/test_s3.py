"""zarrd's S3-compatible read API at /s3: boto3 (unsigned and signed) lists
and reads the corpus, zarr-python reads it through s3fs, a second zarrd reads
the first through object_store's S3 client (signing with an access key that
maps to a token), and the folder listings Neuroglancer asks for."""

import os
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET

import boto3
import numpy as np
import pytest
import zarr
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

from conftest import as_comparable, expected_values, files_under, load_manifest, start_zarrd, stop

ROOT, MANIFEST = load_manifest("ZARRD_CORPUS")
NS = {"s3": "http://s3.amazonaws.com/doc/2006-03-01/"}
ACCESS_KEY = "zarrd-reader"
SECRET = "s3-reader-secret-0123456789"
LIMITED = "s3-v2-only-secret-0123456789"

# What zarr-python cannot read at all, whichever store it reads through.
SKIP = ("v1/", "ts.zarr/bfloat16", "ts.zarr/float8_e4m3fn", "ts.zarr/int4", "ts.zarr/structured",
        "hand_v2.zarr/nested_structured", "archive")


def name(entry):
    return f"{entry['store']}/{entry['path']}"


@pytest.fixture(scope="module")
def server():
    url, proc = start_zarrd(ROOT)
    yield url
    stop(proc)


@pytest.fixture(scope="module")
def signed_server(tmp_path_factory):
    tokens = tmp_path_factory.mktemp("s3-tokens") / "tokens.toml"
    tokens.write_text(f"""
[[tokens]]
name = "s3-reader"
token = "{SECRET}"
access_key_id = "{ACCESS_KEY}"
scopes = ["read"]

[[tokens]]
name = "v2-only"
token = "{LIMITED}"
scopes = ["read"]
prefixes = ["v2.zarr"]
""")
    url, proc = start_zarrd(ROOT, "--tokens-file", str(tokens))
    yield url
    stop(proc)


def client(url, **kw):
    config = kw.pop("config", Config(signature_version=UNSIGNED))
    return boto3.client("s3", endpoint_url=f"{url}/s3", region_name="us-east-1", config=config, **kw)


def stored(prefix):
    """Every file of the corpus below `prefix` (a key prefix) with its size."""
    found = {}
    for path, key in files_under(ROOT):
        # The server's own folder (its mark on a directory it serves) is never served.
        if key.startswith(prefix) and not key.startswith("__zarrd/"):
            found[key] = os.path.getsize(path)
    return found


def test_boto3_lists_every_key_page_by_page(server):
    s3 = client(server)
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["zarr"]
    top = s3.list_objects_v2(Bucket="zarr", Delimiter="/")
    prefixes = [p["Prefix"] for p in top.get("CommonPrefixes", [])]
    expected_top = sorted({k.split("/")[0] + "/" for k in stored("") if "/" in k})
    assert prefixes == expected_top
    keys = {}
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket="zarr", Prefix="v3.zarr/dtype_", PaginationConfig={"PageSize": 7})
    count = 0
    for page in pages:
        count += 1
        assert page["KeyCount"] <= 7
        for obj in page.get("Contents", []):
            keys[obj["Key"]] = obj["Size"]
    want = stored("v3.zarr/dtype_")
    assert count > 2 and keys.keys() == want.keys()
    # Arrays' documents and chunks are listed at their stored sizes.
    assert keys == want
    # One level of a folder: its documents and its chunk folder.
    level = s3.list_objects_v2(Bucket="zarr", Prefix="v3.zarr/dtype_i2/", Delimiter="/")
    assert [o["Key"] for o in level["Contents"]] == ["v3.zarr/dtype_i2/zarr.json"]
    assert [p["Prefix"] for p in level["CommonPrefixes"]] == ["v3.zarr/dtype_i2/c/"]
    # StartAfter skips; v1 listings page with markers.
    after = s3.list_objects_v2(Bucket="zarr", Prefix="v3.zarr/dtype_", StartAfter=sorted(want)[-2])
    assert [o["Key"] for o in after["Contents"]] == [sorted(want)[-1]]
    v1 = s3.list_objects(Bucket="zarr", Prefix="v3.zarr/dtype_", MaxKeys=3)
    assert v1["IsTruncated"] and len(v1["Contents"]) == 3


def test_boto3_pages_through_more_keys_than_a_listing_held_whole(tmp_path):
    # 100,001 chunk files (empty: no data blocks), nested as v3 chunk keys,
    # listed without a delimiter in pages of 1000 and with one other than
    # `/`: each page holds one page, so there is no limit on the count.
    rows, cols = 317, 316
    chunks = tmp_path / "big.zarr" / "c"
    for i in range(rows):
        row = chunks / str(i)
        row.mkdir(parents=True)
        for j in range(cols):
            (row / str(j)).touch()
    (chunks / "0" / "x").touch()
    assert rows * cols + 1 == 100_173
    url, proc = start_zarrd(tmp_path)
    try:
        s3 = client(url)
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket="zarr", Prefix="big.zarr/c/")
        listed, count = [], 0
        for page in pages:
            count += 1
            listed.extend(o["Key"] for o in page.get("Contents", []))
        want = sorted([f"big.zarr/c/{i}/{j}" for i in range(rows) for j in range(cols)] + ["big.zarr/c/0/x"])
        assert listed == want and count == 101
        # Rolled up at `/1`: each row's keys starting with 1 are one
        # prefix, listed once however the pages fall.
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket="zarr", Prefix="big.zarr/c/", Delimiter="/1")
        keys, prefixes = [], []
        for page in pages:
            keys.extend(o["Key"] for o in page.get("Contents", []))
            prefixes.extend(p["Prefix"] for p in page.get("CommonPrefixes", []))
        assert sorted(prefixes) == sorted(f"big.zarr/c/{i}/1" for i in range(rows))
        assert keys == [k for k in want if "/1" not in k[len("big.zarr/c/"):]]
    finally:
        stop(proc)


def test_boto3_reads_objects_ranges_and_conditionals(server):
    s3 = client(server)
    key = "v3.zarr/dtype_i2/zarr.json"
    data = open(os.path.join(ROOT, key), "rb").read()
    chunk = next(k for k in stored("v2.zarr/") if k.rsplit("/", 1)[-1][0].isdigit())
    raw = open(os.path.join(ROOT, chunk), "rb").read()
    got = s3.get_object(Bucket="zarr", Key=chunk)
    assert got["Body"].read() == raw and got["ContentLength"] == len(raw)
    part = s3.get_object(Bucket="zarr", Key=chunk, Range="bytes=2-9")
    assert part["Body"].read() == raw[2:10] and part["ContentRange"] == f"bytes 2-9/{len(raw)}"
    head = s3.head_object(Bucket="zarr", Key=key)
    assert head["ContentLength"] == len(data)
    etag = head["ETag"]
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="zarr", Key=key, IfNoneMatch=etag)
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 304
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="zarr", Key=key, IfMatch='"not-the-tag"')
    assert e.value.response["Error"]["Code"] == "PreconditionFailed"
    assert s3.get_object(Bucket="zarr", Key=key, IfMatch=etag)["Body"].read() == data
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="zarr", Key="v3.zarr/no/such/key")
    assert e.value.response["Error"]["Code"] == "NoSuchKey"
    with pytest.raises(ClientError) as e:
        s3.list_objects_v2(Bucket="other")
    assert e.value.response["Error"]["Code"] == "NoSuchBucket"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket="zarr", Key=chunk, Range=f"bytes={len(raw) + 10}-")
    assert e.value.response["Error"]["Code"] == "InvalidRange"
    with pytest.raises(ClientError) as e:
        s3.get_bucket_acl(Bucket="zarr")
    assert e.value.response["Error"]["Code"] == "NotImplemented"


def test_neuroglancer_folder_listing(server):
    url = f"{server}/s3/zarr/?list-type=2&prefix=v2.zarr/&delimiter=/"
    with urllib.request.urlopen(url) as r:
        assert r.headers["Content-Type"] == "application/xml"
        doc = ET.fromstring(r.read())
    prefixes = [p.text for p in doc.findall("s3:CommonPrefixes/s3:Prefix", NS)]
    want = sorted({"v2.zarr/" + k[len("v2.zarr/"):].split("/")[0] + "/" for k in stored("v2.zarr/") if k.count("/") > 1})
    assert prefixes == want
    assert doc.find("s3:KeyCount", NS).text == str(len(prefixes) + len(doc.findall("s3:Contents", NS)))
    # Errors are S3's XML, with CORS for cross-origin viewers.
    req = urllib.request.Request(f"{server}/s3/zarr/v2.zarr/missing", headers={"Origin": "http://viewer.example"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req)
    assert e.value.code == 404 and e.value.headers["Access-Control-Allow-Origin"]
    error = ET.fromstring(e.value.read())
    assert error.find("Code").text == "NoSuchKey" and error.find("RequestId").text
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{server}/s3/zarr?list-type=2&max-keys=many")
    assert e.value.code == 400 and ET.fromstring(e.value.read()).find("Code").text == "InvalidArgument"


S3FS_CASES = [e for e in MANIFEST if not name(e).startswith(SKIP)]


@pytest.mark.parametrize("entry", S3FS_CASES, ids=name)
def test_zarr_python_reads_through_s3fs(entry, server):
    options = {"anon": True, "client_kwargs": {"endpoint_url": f"{server}/s3", "region_name": "us-east-1"}}
    arr = zarr.open_array(f"s3://zarr/{name(entry)}".rstrip("/"), mode="r", zarr_format=entry["zarr_format"],
                          storage_options=options)
    assert list(arr.shape) == entry["shape"]
    assert as_comparable(arr[...], entry["kind"]) == expected_values(ROOT, entry)


def test_signed_requests_need_the_mapped_secret(signed_server):
    signed = Config(signature_version="s3v4", s3={"addressing_style": "path"})
    good = client(signed_server, config=signed, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET)
    key = "v3.zarr/dtype_i2/zarr.json"
    assert good.get_object(Bucket="zarr", Key=key)["Body"].read() == open(os.path.join(ROOT, key), "rb").read()
    assert good.list_objects_v2(Bucket="zarr", Prefix="v3.zarr/dtype_i2/")["KeyCount"] > 1
    url = good.generate_presigned_url("get_object", Params={"Bucket": "zarr", "Key": key}, ExpiresIn=60)
    with urllib.request.urlopen(url) as r:
        assert r.read() == open(os.path.join(ROOT, key), "rb").read()
    # A download link: the signed response-* parameters set the answer's headers.
    url = good.generate_presigned_url("get_object", ExpiresIn=60, Params={
        "Bucket": "zarr", "Key": key, "ResponseContentType": "text/plain",
        "ResponseContentDisposition": 'attachment; filename="zarr.json"'})
    with urllib.request.urlopen(url) as r:
        assert r.headers["Content-Type"] == "text/plain"
        assert r.headers["Content-Disposition"] == 'attachment; filename="zarr.json"'
    wrong = client(signed_server, config=signed, aws_access_key_id=ACCESS_KEY, aws_secret_access_key="x" * 30)
    with pytest.raises(ClientError) as e:
        wrong.get_object(Bucket="zarr", Key=key)
    assert e.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    unknown = client(signed_server, config=signed, aws_access_key_id="nobody", aws_secret_access_key=SECRET)
    with pytest.raises(ClientError) as e:
        unknown.head_object(Bucket="zarr", Key=key)
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    with pytest.raises(ClientError) as e:
        client(signed_server).get_object(Bucket="zarr", Key=key)
    assert e.value.response["Error"]["Code"] == "AccessDenied"
    # zarrd's own bearer token works on /s3 too.
    req = urllib.request.Request(f"{signed_server}/s3/zarr/{key}", headers={"Authorization": f"Bearer {SECRET}"})
    with urllib.request.urlopen(req) as r:
        assert r.status == 200


ONWARD = [e for e in S3FS_CASES if e["kind"] == "fixed" and e["store"] in ("v2.zarr", "v3.zarr")][:12]


def test_object_store_s3_client_serves_it_onward(signed_server):
    """A second zarrd whose root is s3://zarr at the first's /s3 (object_store's
    S3 client, signing with the mapped access key) serves the corpus onward."""
    env = {"AWS_ENDPOINT": f"{signed_server}/s3", "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": ACCESS_KEY,
           "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "us-east-1", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false"}
    url, proc = start_zarrd("s3://zarr", env=env)
    try:
        assert len(ONWARD) >= 8
        for entry in ONWARD:
            arr = zarr.open_array(f"{url}/zarr/{name(entry)}", mode="r", zarr_format=entry["zarr_format"])
            assert as_comparable(arr[...], entry["kind"]) == expected_values(ROOT, entry), name(entry)
        # Its listings come from ListObjectsV2.
        req = urllib.request.Request(f"{url}/zarr/v3.zarr/", headers={"Accept": "application/json"})
        with urllib.request.urlopen(req) as r:
            import json
            listed = json.load(r)
        assert "dtype_i2" in listed["prefixes"]
        with urllib.request.urlopen(f"{url}/api/v1/data/v3.zarr/dtype_i2?format=json") as r:
            import json
            doc = json.load(r)
        entry = next(e for e in MANIFEST if name(e) == "v3.zarr/dtype_i2")
        want = np.frombuffer(expected_values(ROOT, entry), dtype="<i2").reshape(entry["shape"])
        assert np.array_equal(np.array(doc["data"]), want)
    finally:
        stop(proc)


def s3_error(url, method="GET", token=LIMITED):
    req = urllib.request.Request(url, method=method, headers={"Authorization": f"Bearer {token}"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req)
    return e.value.code, ET.fromstring(e.value.read()).find("Code").text


def test_a_prefix_limited_token_lists_and_reads_only_below_its_prefix(signed_server):
    # The one bucket is the server's, not a key: every reader may list it.
    req = urllib.request.Request(f"{signed_server}/s3/", headers={"Authorization": f"Bearer {LIMITED}"})
    with urllib.request.urlopen(req) as r:
        assert [b.text for b in ET.fromstring(r.read()).findall("s3:Buckets/s3:Bucket/s3:Name", NS)] == ["zarr"]
    # And so may it ask whether the bucket exists (HeadBucket), which tools
    # such as pyarrow's S3 file system do before reading.
    req = urllib.request.Request(f"{signed_server}/s3/zarr", method="HEAD",
                                 headers={"Authorization": f"Bearer {LIMITED}"})
    with urllib.request.urlopen(req) as r:
        assert r.status == 200
    req = urllib.request.Request(f"{signed_server}/s3/other", method="HEAD",
                                 headers={"Authorization": f"Bearer {LIMITED}"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req)
    assert e.value.code == 404
    req = urllib.request.Request(f"{signed_server}/s3/zarr?list-type=2&prefix=v2.zarr/&delimiter=/",
                                 headers={"Authorization": f"Bearer {LIMITED}"})
    with urllib.request.urlopen(req) as r:
        doc = ET.fromstring(r.read())
    assert all(p.text.startswith("v2.zarr/") for p in doc.findall("s3:CommonPrefixes/s3:Prefix", NS))
    # `v2.zarr` without its slash would also match `v2.zarr.bak/...`: it is a
    # listing of the root, which shows the token only the way to its prefix.
    for prefix in ["v2.zarr", "v"]:
        req = urllib.request.Request(f"{signed_server}/s3/zarr?list-type=2&prefix={prefix}&delimiter=/",
                                     headers={"Authorization": f"Bearer {LIMITED}"})
        with urllib.request.urlopen(req) as r:
            doc = ET.fromstring(r.read())
        assert [p.text for p in doc.findall("s3:CommonPrefixes/s3:Prefix", NS)] == ["v2.zarr/"], prefix
        assert not doc.findall("s3:Contents", NS), prefix
    # What it may not read is not there for it.
    assert s3_error(f"{signed_server}/s3/zarr/v3.zarr/dtype_i2/zarr.json") == (404, "NoSuchKey")
    # Writes are not served through /s3: NotImplemented, as S3 answers an operation it lacks.
    assert s3_error(f"{signed_server}/s3/zarr/v2.zarr/x", method="PUT") == (501, "NotImplemented")
