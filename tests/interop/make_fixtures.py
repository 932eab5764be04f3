"""Write the fixture corpus: arrays as zarr-python 3, numcodecs and TensorStore
write them (plus hand-made v1 stores), each with its expected values.

Usage: python make_fixtures.py OUT_DIR

OUT_DIR/manifest.json lists every array: its store, path, shape and where its
expected values are (little-endian C-order bytes, or JSON for variable-length
strings and bytes). Every case must be written; a failure stops the script.
"""

import base64
import json
import os
import shutil
import sys
import warnings

import numcodecs
import numpy as np
import zarr
import zarr.codecs as zc

warnings.filterwarnings("ignore")

OUT = os.path.abspath(sys.argv[1])
EXPECTED = os.path.join(OUT, "expected")
MANIFEST = []
RNG = np.random.default_rng(42)


def expected_entry(store, path, arr, zarr_format, writer, note=""):
    name = f"{store.replace('/', '__')}__{path.replace('/', '__') or 'root'}"
    entry = {
        "store": store,
        "path": path,
        "shape": list(arr.shape),
        "zarr_format": zarr_format,
        "writer": writer,
        "note": note,
    }
    if arr.dtype.kind in "OT":
        values = [v if isinstance(v, str) else base64.b64encode(v).decode() for v in arr.reshape(-1)]
        kind = "str" if all(isinstance(v, str) for v in arr.reshape(-1)) else "bytes"
        entry.update(kind=kind, expected=f"expected/{name}.json")
        with open(os.path.join(OUT, entry["expected"]), "w") as f:
            json.dump(values, f)
    else:
        little = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"))
        entry.update(kind="fixed", expected=f"expected/{name}.bin", itemsize=arr.dtype.itemsize,
                     descr=np.lib.format.dtype_to_descr(little.dtype), ml_dtype=arr.dtype.name if arr.dtype.kind == "V" and arr.dtype.fields is None and arr.dtype.name in ("bfloat16", "int4", "float8_e4m3fn") else None)
        with open(os.path.join(OUT, entry["expected"]), "wb") as f:
            f.write(little.tobytes())
    MANIFEST.append(entry)


def sample(dtype, shape):
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    if dtype.kind == "b":
        v = RNG.integers(0, 2, n).astype(bool)
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        v = RNG.integers(max(info.min, -(2**40)), min(info.max, 2**40), n, endpoint=True).astype(dtype)
    elif dtype.kind == "f":
        v = (RNG.standard_normal(n) * 100).astype(dtype)
        if n > 3:
            v[1], v[2], v[3] = np.nan, np.inf, -np.inf
    elif dtype.kind == "c":
        v = (RNG.standard_normal(n) + 1j * RNG.standard_normal(n)).astype(dtype)
    elif dtype.kind in "mM":
        v = RNG.integers(-(10**12), 10**12, n).astype(dtype)
        if n > 2:
            v[1] = np.array("NaT", dtype=dtype)
    elif dtype.kind == "S":
        v = np.array([f"b{i % 97}"[: dtype.itemsize].encode() for i in range(n)], dtype=dtype)
    elif dtype.kind == "U":
        v = np.array([f"ü{i % 89}"[: dtype.itemsize // 4] for i in range(n)], dtype=dtype)
    elif dtype.kind == "V" and dtype.fields is None:
        v = np.frombuffer(RNG.integers(0, 256, n * dtype.itemsize, dtype=np.uint8).tobytes(), dtype=dtype)
    elif dtype.fields is not None:
        v = np.zeros(n, dtype=dtype)
        for name in dtype.names:
            sub = dtype.fields[name][0]
            base = sub.base
            count = int(np.prod(sub.shape)) if sub.shape else 1
            vals = sample(base, (n * count,)) if base.fields is None else sample(base, (n * count,))
            v[name] = vals.reshape((n,) + sub.shape)
    else:
        raise ValueError(dtype)
    return v.reshape(shape)


def strings(shape, kind=str):
    n = int(np.prod(shape))
    words = ["", "a", "zarr", "Grüße", "日本語", "x" * 40]
    vals = [words[i % len(words)] + str(i) for i in range(n)]
    if kind is bytes:
        vals = [v.encode() + b"\x00\xff" for v in vals]
    arr = np.empty(n, dtype=object)
    arr[:] = vals
    return arr.reshape(shape)


def nan_payload(dtype):
    arr = np.arange(12, dtype=dtype).reshape(3, 4) * 1.5
    ints = arr.view(np.uint32 if np.dtype(dtype).itemsize == 4 else np.uint64)
    ints[0, 1] = 0x7FC00001 if np.dtype(dtype).itemsize == 4 else 0x7FF8000000000123
    ints[2, 3] = 0xFFC12345 if np.dtype(dtype).itemsize == 4 else 0xFFF0000000000001
    return arr


def write(store, path, data, zarr_format, note="", **kwargs):
    root = os.path.join(OUT, store)
    arr = zarr.create_array(root, name=path, shape=data.shape, dtype=data.dtype, zarr_format=zarr_format, overwrite=True, **kwargs)
    if data.size:
        arr[...] = data
    back = arr[...]
    # The oracle must read back what it wrote, or the fixture is wrong.
    if data.dtype.kind == "f":
        assert np.array_equal(back, data, equal_nan=True) or "lossy" in note, (store, path)
    expected = back if "lossy" in note else data
    expected_entry(store, path, np.asarray(expected), zarr_format, "zarr-python", note)
    return arr


def v3_cases():
    store = "v3.zarr"
    zarr.open_group(os.path.join(OUT, store), mode="w", zarr_format=3, attributes={"title": "v3 corpus"})
    for dt in ["bool", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16",
               "M8[ns]", "m8[10s]", "S5", "U4", "V3"]:
        name = "dtype_" + dt.replace("[", "_").replace("]", "")
        write(store, name, sample(dt, (13, 7)), 3, chunks=(5, 4))
    write(store, "dtype_structured", sample([("a", "<i4"), ("b", "<f8")], (9,)), 3, chunks=(4,),
          fill_value=np.zeros((), dtype=[("a", "<i4"), ("b", "<f8")])[()])
    write(store, "dtype_string", strings((7, 3)), 3, chunks=(3, 2), dtype=None) if False else None
    arr = zarr.create_array(os.path.join(OUT, store), name="dtype_string", shape=(7, 3), chunks=(3, 2), dtype=str, zarr_format=3)
    arr[...] = strings((7, 3))
    expected_entry(store, "dtype_string", strings((7, 3)), 3, "zarr-python")
    arr = zarr.create_array(os.path.join(OUT, store), name="dtype_bytes", shape=(8,), chunks=(3,),
                            dtype=zarr.dtype.VariableLengthBytes(), zarr_format=3)
    arr[...] = strings((8,), bytes)
    expected_entry(store, "dtype_bytes", strings((8,), bytes), 3, "zarr-python")

    base = sample("i4", (20, 11))
    f = sample("f4", (20, 11))
    B = zc.BytesCodec()
    for name, kwargs in {
        "codec_gzip": dict(compressors=[zc.GzipCodec(level=6)]),
        "codec_zstd_checksum": dict(compressors=[zc.ZstdCodec(level=5, checksum=True)]),
        "codec_blosc_lz4": dict(compressors=[zc.BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")]),
        "codec_blosc_zstd_bit": dict(compressors=[zc.BloscCodec(cname="zstd", clevel=3, shuffle="bitshuffle")]),
        "codec_blosc_zlib_noshuffle": dict(compressors=[zc.BloscCodec(cname="zlib", clevel=1, shuffle="noshuffle")]),
        "codec_blosc_lz4hc": dict(compressors=[zc.BloscCodec(cname="lz4hc", clevel=9, shuffle="shuffle")]),
        "codec_blosc_blosclz": dict(compressors=[zc.BloscCodec(cname="blosclz", clevel=5, shuffle="shuffle")]),
        "codec_crc32c": dict(compressors=[zc.Crc32cCodec()]),
        "codec_big_endian": dict(serializer=zc.BytesCodec(endian="big"), compressors=None),
        "codec_transpose": dict(filters=[zc.TransposeCodec(order=(1, 0))], compressors=[zc.GzipCodec()]),
        "codec_none": dict(compressors=None),
        "numcodecs_shuffle": dict(compressors=[zc.Shuffle(elementsize=4), zc.Zlib(level=1)]),
        "numcodecs_zlib": dict(compressors=[zc.Zlib(level=3)]),
        "numcodecs_bz2": dict(compressors=[zc.BZ2(level=5)]),
        "numcodecs_lzma": dict(compressors=[zc.LZMA(preset=1)]),
        "numcodecs_lz4": dict(compressors=[zc.LZ4(acceleration=1)]),
        "numcodecs_crc32": dict(compressors=[zc.CRC32()]),
        "numcodecs_adler32": dict(compressors=[zc.Adler32()]),
        "numcodecs_fletcher32": dict(compressors=[zc.Fletcher32()]),
        "numcodecs_jenkins_lookup3": dict(compressors=[zc.JenkinsLookup3(initval=7)]),
        "numcodecs_pcodec": dict(serializer=zc.PCodec(level=8), compressors=None),
        "numcodecs_pcodec_delta": dict(serializer=zc.PCodec(level=3, delta_spec="try_consecutive", delta_encoding_order=1,
                                                            mode_spec="classic", equal_pages_up_to=10), compressors=None),
        "numcodecs_zfpy_reversible": dict(serializer=zc.ZFPY(mode=4, tolerance=-1), compressors=None),
        "numcodecs_delta": dict(filters=[zc.Delta(dtype="<i4")]),
        "numcodecs_astype": dict(filters=[zc.AsType(encode_dtype="<i8", decode_dtype="<i4")]),
    }.items():
        write(store, name, base, 3, chunks=(6, 4), **kwargs)
    for name, kwargs in {
        "numcodecs_fixedscaleoffset": dict(filters=[zc.FixedScaleOffset(offset=10, scale=100, dtype="<f4", astype="<i4")]),
        "numcodecs_quantize": dict(filters=[zc.Quantize(digits=2, dtype="<f4")]),
        "numcodecs_bitround": dict(filters=[zc.BitRound(keepbits=6)]),
        "numcodecs_zfpy_accuracy": dict(serializer=zc.ZFPY(mode=4, tolerance=0.01), compressors=None),
        "numcodecs_zfpy_rate": dict(serializer=zc.ZFPY(mode=2, rate=12), compressors=None),
        "numcodecs_zfpy_precision": dict(serializer=zc.ZFPY(mode=3, precision=14), compressors=None),
    }.items():
        write(store, name, f, 3, "lossy", chunks=(6, 4), **kwargs)
    write(store, "numcodecs_packbits", sample("bool", (21, 5)), 3, chunks=(8, 3), filters=[zc.PackBits()])

    # Layouts.
    write(store, "edge_chunks", sample("u2", (17, 23, 3)), 3, chunks=(5, 7, 2))
    write(store, "zero_d", np.array(3.25, dtype="f8"), 3)
    write(store, "empty", np.zeros((0, 5), dtype="i2"), 3, chunks=(2, 2))
    sparse = np.full((30, 30), -1, dtype="i4")
    sparse[3:5, 22:29] = 7
    write(store, "missing_chunks", sparse, 3, chunks=(8, 8), fill_value=-1)
    write(store, "fill_nan", np.full((6,), np.nan, dtype="f4"), 3, chunks=(3,), fill_value=np.nan)
    write(store, "nan_payload_f4", nan_payload("f4"), 3, chunks=(2, 2))
    write(store, "nan_payload_f8", nan_payload("f8"), 3, chunks=(2, 3))
    write(store, "key_dot_separator", base, 3, chunks=(6, 4), chunk_key_encoding={"name": "default", "separator": "."})
    write(store, "key_v2_encoding", base, 3, chunks=(6, 4), chunk_key_encoding={"name": "v2", "separator": "/"})
    write(store, "group/nested/named", sample("f8", (4, 5)), 3, chunks=(2, 5), dimension_names=["y", "x"],
          attributes={"units": "K", "scale": [1, 2]})
    write(store, "order_f_ignored", sample("i8", (5, 6)), 3, chunks=(3, 3))

    # Sharding.
    big = sample("f4", (64, 48))
    write(store, "shard_end", big, 3, chunks=(8, 8), shards=(32, 24))
    for name, compressors in [("shard_start", None), ("shard_whole_compressed", "auto")]:
        # zarr-python's default compressors apply to the whole shard when a
        # sharding serializer is given; both layouts occur in the wild.
        arr = zarr.create_array(os.path.join(OUT, store), name=name, shape=big.shape, dtype="f4", zarr_format=3,
                                chunks=(64, 48), compressors=compressors,
                                serializer=zc.ShardingCodec(chunk_shape=(8, 8), codecs=[B, zc.ZstdCodec(level=1)],
                                                            index_location="start"))
        arr[...] = big
        expected_entry(store, name, big, 3, "zarr-python")
    inner = zc.ShardingCodec(chunk_shape=(4, 4), codecs=[B, zc.GzipCodec(level=1)])
    arr = zarr.create_array(os.path.join(OUT, store), name="shard_nested", shape=big.shape, dtype="f4", zarr_format=3,
                            chunks=(32, 24), compressors=None, serializer=zc.ShardingCodec(chunk_shape=(16, 8), codecs=[inner]))
    arr[...] = big
    expected_entry(store, "shard_nested", big, 3, "zarr-python")
    sparse = np.zeros((40, 40), dtype="u1")
    sparse[1:3, 1:3] = 9
    sparse[33:40, 20:25] = 4
    write(store, "shard_missing_inner", sparse, 3, chunks=(4, 4), shards=(20, 20))
    write(store, "shard_edge", sample("i2", (37, 29)), 3, chunks=(5, 5), shards=(10, 15))
    write(store, "shard_strings", strings((12,)), 3, chunks=(2,), shards=(6,)) if False else None
    arr = zarr.create_array(os.path.join(OUT, store), name="shard_strings", shape=(12,), dtype=str, zarr_format=3, chunks=(2,), shards=(6,))
    arr[...] = strings((12,))
    expected_entry(store, "shard_strings", strings((12,)), 3, "zarr-python")
    zarr.consolidate_metadata(os.path.join(OUT, "v3.zarr"))


def v2_cases():
    store = "v2.zarr"
    zarr.open_group(os.path.join(OUT, store), mode="w", zarr_format=2, attributes={"title": "v2 corpus"})
    for dt in ["|b1", "|i1", "<i2", ">i4", "<i8", "|u1", ">u2", "<u4", ">u8", "<f2", ">f4", "<f8", "<c8", ">c16",
               "<M8[ns]", ">m8[s]", "|S6", "<U3", ">U2", "|V4"]:
        name = "dtype_" + dt.replace("<", "le_").replace(">", "be_").replace("|", "").replace("[", "_").replace("]", "")
        write(store, name, sample(dt, (11, 6)), 2, chunks=(4, 4))
    sdt = np.dtype([("id", "<u2"), ("pos", ">f4"), ("tag", "S3")])
    write(store, "dtype_structured_nested", sample(sdt, (7,)), 2, chunks=(3,), fill_value=np.zeros((), dtype=sdt)[()])
    arr = zarr.create_array(os.path.join(OUT, store), name="dtype_object_str", shape=(7, 3), chunks=(3, 2), dtype=str, zarr_format=2)
    arr[...] = strings((7, 3))
    expected_entry(store, "dtype_object_str", strings((7, 3)), 2, "zarr-python")

    base = sample("<i4", (20, 11))
    f = sample("<f8", (20, 11))
    compressors = {
        "blosc_lz4_shuffle": numcodecs.Blosc(cname="lz4", clevel=5, shuffle=1),
        "blosc_lz4hc_noshuffle": numcodecs.Blosc(cname="lz4hc", clevel=9, shuffle=0),
        "blosc_zlib_bitshuffle": numcodecs.Blosc(cname="zlib", clevel=3, shuffle=2),
        "blosc_zstd_auto": numcodecs.Blosc(cname="zstd", clevel=1, shuffle=-1),
        "blosc_blosclz_blocksize": numcodecs.Blosc(cname="blosclz", clevel=5, shuffle=1, blocksize=256),
        "zlib": numcodecs.Zlib(level=1),
        "gzip": numcodecs.GZip(level=9),
        "bz2": numcodecs.BZ2(level=1),
        "lzma_xz": numcodecs.LZMA(preset=1),
        "lzma_alone": numcodecs.LZMA(format=2, preset=1),
        "lzma_raw_filters": numcodecs.LZMA(format=3, filters=[dict(id=3, dist=4), dict(id=0x21, preset=1)]),
        "zstd": numcodecs.Zstd(level=3),
        "zstd_checksum": numcodecs.Zstd(level=1, checksum=True),
        "lz4": numcodecs.LZ4(acceleration=2),
        "none": None,
        "crc32": numcodecs.CRC32(),
        "adler32": numcodecs.Adler32(),
        "fletcher32": numcodecs.Fletcher32(),
        "crc32c": numcodecs.CRC32C(),
        "jenkins_lookup3": numcodecs.JenkinsLookup3(),
        "pcodec": numcodecs.PCodec(level=5),
        "zfpy_reversible": numcodecs.ZFPY(tolerance=-1),
    }
    for name, comp in compressors.items():
        write(store, "compressor_" + name, base, 2, chunks=(6, 4), compressors=comp)
    write(store, "blosc_u1_autoshuffle", sample("|u1", (40,)), 2, chunks=(16,), compressors=numcodecs.Blosc(cname="lz4", shuffle=-1))
    for name, flt in {
        "delta": [numcodecs.Delta(dtype="<i4")],
        "delta_astype": [numcodecs.Delta(dtype="<i4", astype="<i8")],
        "astype": [numcodecs.AsType(encode_dtype="<i8", decode_dtype="<i4")],
        "shuffle": [numcodecs.Shuffle(elementsize=4)],
        "checksum_chain": [numcodecs.CRC32(), numcodecs.Adler32()],
    }.items():
        write(store, "filter_" + name, base, 2, chunks=(6, 4), filters=flt)
    for name, flt in {
        "fixedscaleoffset": [numcodecs.FixedScaleOffset(offset=1000, scale=10, dtype="<f8", astype="<i4")],
        "quantize": [numcodecs.Quantize(digits=3, dtype="<f8")],
        "bitround": [numcodecs.BitRound(keepbits=10)],
    }.items():
        write(store, "filter_" + name, f, 2, "lossy", chunks=(6, 4), filters=flt)
    write(store, "filter_packbits", sample("|b1", (21, 5)), 2, chunks=(8, 3), filters=[numcodecs.PackBits()])
    labels = ["apple", "banana", "cherry"]
    cat = np.array([labels[i % 3] for i in range(10)], dtype="<U6")
    cat[4] = ""
    write(store, "filter_categorize", cat, 2, chunks=(4,), filters=[numcodecs.Categorize(labels, dtype="<U6", astype="|u1")])

    write(store, "order_f", sample("<i4", (7, 9, 4)), 2, chunks=(3, 4, 3), order="F")
    write(store, "order_f_blosc", sample(">f8", (10, 6)), 2, chunks=(4, 4), order="F",
          compressors=numcodecs.Blosc(cname="zstd", shuffle=1))
    write(store, "slash_separator", base, 2, chunks=(6, 4), chunk_key_encoding={"name": "v2", "separator": "/"})
    write(store, "edge_chunks", sample("<u2", (17, 23)), 2, chunks=(5, 7))
    write(store, "zero_d", np.array(-7, dtype="<i2"), 2)
    write(store, "empty", np.zeros((0,), dtype="<f4"), 2, chunks=(4,))
    sparse = np.full((25,), 2.5, dtype="<f4")
    sparse[20:23] = 1
    write(store, "missing_chunks", sparse, 2, chunks=(4,), fill_value=2.5)
    write(store, "fill_nan", np.full((5,), np.nan, dtype="<f8"), 2, chunks=(2,), fill_value=np.nan)
    write(store, "fill_inf", np.full((5,), -np.inf, dtype="<f4"), 2, chunks=(2,), fill_value=-np.inf)
    write(store, "nan_payload_f8", nan_payload("<f8"), 2, chunks=(2, 2))
    write(store, "group/sub/deep", sample("<i8", (6,)), 2, chunks=(4,), attributes={"long_name": "depth"})
    zarr.consolidate_metadata(os.path.join(OUT, store))


def tensorstore_cases():
    import tensorstore as ts

    def ts_write(store, path, driver, metadata, data, note=""):
        spec = {"driver": driver, "kvstore": {"driver": "file", "path": os.path.join(OUT, store, path)},
                "metadata": metadata, "create": True, "delete_existing": True}
        arr = ts.open(spec).result()
        arr.write(data).result()
        back = arr.read().result()
        expected_entry(store, path, np.asarray(back), 3 if driver == "zarr3" else 2, "tensorstore", note)

    store = "ts.zarr"
    os.makedirs(os.path.join(OUT, store), exist_ok=True)
    with open(os.path.join(OUT, store, ".zgroup"), "w") as fh:
        json.dump({"zarr_format": 2}, fh)
    ml = __import__("ml_dtypes")
    bf = (RNG.standard_normal(30) * 10).astype(ml.bfloat16).reshape(5, 6)
    ts_write(store, "bfloat16", "zarr", {"dtype": "bfloat16", "shape": [5, 6], "chunks": [2, 4]}, bf)
    f8 = (RNG.standard_normal(12)).astype(ml.float8_e4m3fn).reshape(3, 4)
    ts_write(store, "float8_e4m3fn", "zarr", {"dtype": "float8_e4m3fn", "shape": [3, 4], "chunks": [2, 2]}, f8)
    i4 = np.arange(-8, 8, dtype=ml.int4)
    ts_write(store, "int4", "zarr", {"dtype": "int4", "shape": [16], "chunks": [5]}, i4)
    # TensorStore opens structured arrays one field at a time.
    sdt = np.dtype([("x", "<f4"), ("y", ">i2", (2,))])
    data = sample(sdt, (6,))
    meta = {"dtype": [["x", "<f4"], ["y", ">i2", [2]]], "shape": [6], "chunks": [4]}
    for i, field in enumerate(["x", "y"]):
        spec = {"driver": "zarr", "kvstore": {"driver": "file", "path": os.path.join(OUT, store, "structured")},
                "field": field, "metadata": meta, "create": i == 0, "delete_existing": i == 0, "open": i > 0}
        arr = ts.open(spec).result()
        arr.write(data[field]).result()
        assert np.array_equal(arr.read().result(), data[field], equal_nan=data[field].dtype.kind == "f")
    expected_entry(store, "structured", data, 2, "tensorstore")
    ts_write(store, "order_f", "zarr", {"dtype": "<u4", "shape": [6, 5], "chunks": [4, 3], "order": "F",
                                          "compressor": {"id": "zlib", "level": 1}}, sample("<u4", (6, 5)))
    ts_write(store, "zarr3_sharded", "zarr3", {
        "shape": [40, 30], "data_type": "int16", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [20, 30]}},
        "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [5, 10],
                    "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 2}}],
                    "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]}}],
    }, sample("i2", (40, 30)))
    ts_write(store, "zarr3_transpose", "zarr3", {
        "shape": [9, 7], "data_type": "float64", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
        "codecs": [{"name": "transpose", "configuration": {"order": [1, 0]}}, {"name": "bytes", "configuration": {"endian": "big"}},
                   {"name": "gzip", "configuration": {"level": 3}}],
    }, sample("f8", (9, 7)))


def v1_cases():
    """zarr-python 0.x stores: a `meta` document and chunks beside it."""
    for name, compression, opts, dtype, order in [
        ("v1_zlib", "zlib", 1, "<i4", "C"),
        ("v1_blosc", "blosc", {"cname": "lz4", "clevel": 5, "shuffle": 1}, "<f8", "C"),
        ("v1_none_f", "none", None, ">u2", "F"),
    ]:
        root = os.path.join(OUT, "v1", name)
        os.makedirs(root, exist_ok=True)
        shape, chunks = (7, 5), (3, 2)
        data = sample(dtype, shape)
        meta = {"zarr_format": 1, "shape": list(shape), "chunks": list(chunks), "dtype": dtype,
                "compression": compression, "compression_opts": opts, "fill_value": 0, "order": order}
        with open(os.path.join(root, "meta"), "w") as f:
            json.dump(meta, f)
        with open(os.path.join(root, "attrs"), "w") as f:
            json.dump({"made_by": "hand"}, f)
        codec = {"zlib": lambda: numcodecs.Zlib(level=1), "blosc": lambda: numcodecs.Blosc(**opts), "none": lambda: None}[compression]()
        for i in range(0, shape[0], chunks[0]):
            for j in range(0, shape[1], chunks[1]):
                block = np.zeros(chunks, dtype=dtype)
                part = data[i:i + chunks[0], j:j + chunks[1]]
                block[: part.shape[0], : part.shape[1]] = part
                raw = np.asarray(block, order=order).tobytes(order=order)
                enc = codec.encode(raw) if codec else raw
                with open(os.path.join(root, f"{i // chunks[0]}.{j // chunks[1]}"), "wb") as f:
                    f.write(bytes(enc))
        expected_entry(f"v1/{name}", "", data, 1, "hand")


def hand_v2_cases():
    """v2 layouts no writer here produces: nested structured dtypes with subarrays."""
    store = "hand_v2.zarr"
    root = os.path.join(OUT, store, "nested_structured")
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(OUT, store, ".zgroup"), "w") as f:
        json.dump({"zarr_format": 2}, f)
    sdt = np.dtype([("id", "<u2"), ("pos", ">f4", (3,)), ("inner", [("a", "|i1"), ("b", ">f8", (2, 2))]), ("tag", "S3")])
    data = sample(sdt, (5,))
    fill = np.zeros((), dtype=sdt)
    meta = {"zarr_format": 2, "shape": [5], "chunks": [2], "dtype": json.loads(json.dumps(sdt.descr)),
            "compressor": {"id": "zlib", "level": 1}, "fill_value": base64.b64encode(fill.tobytes()).decode(),
            "order": "C", "filters": None}
    with open(os.path.join(root, ".zarray"), "w") as f:
        json.dump(meta, f)
    codec = numcodecs.Zlib(level=1)
    for c in range(3):
        block = np.zeros(2, dtype=sdt)
        part = data[c * 2:(c + 1) * 2]
        block[: len(part)] = part
        with open(os.path.join(root, str(c)), "wb") as f:
            f.write(bytes(codec.encode(block.tobytes())))
    expected_entry(store, "nested_structured", data, 2, "hand")


def xarray_cases():
    """Datasets as xarray writes them (dimension names, coordinates, CF attributes)."""
    import xarray as xr

    time = np.arange(6)
    ds = xr.Dataset(
        {
            "temperature": (("time", "y", "x"), sample("f4", (6, 10, 12)), {"units": "K"}),
            "mask": (("y", "x"), sample("bool", (10, 12))),
        },
        coords={"time": time, "y": np.linspace(0, 1, 10), "x": np.arange(12) * 2.0},
        attrs={"title": "xarray fixture"},
    )
    for fmt in (2, 3):
        store = f"xarray_v{fmt}.zarr"
        encoding = {"temperature": {"chunks": (2, 5, 6)}}
        if fmt == 3:
            encoding["temperature"]["shards"] = (6, 10, 12)
        ds.to_zarr(os.path.join(OUT, store), zarr_format=fmt, consolidated=True, mode="w", encoding=encoding)
        for name in ["temperature", "mask", "x", "y", "time"]:
            expected_entry(store, name, ds[name].values, fmt, "xarray")


def zip_cases():
    """A zip file as zarr-python's ZipStore writes it (entries stored, not compressed)."""
    path = os.path.join(OUT, "archive.zip")
    store = zarr.storage.ZipStore(path, mode="w")
    root = zarr.open_group(store, mode="w", zarr_format=3, attributes={"title": "zipped"})
    plain = sample("f4", (20, 30))
    root.create_array("plain", shape=plain.shape, chunks=(8, 8), dtype="f4")[...] = plain
    sharded = sample("i2", (32, 32))
    root.create_array("sharded", shape=sharded.shape, chunks=(4, 4), shards=(16, 16), dtype="i2")[...] = sharded
    store.close()
    # The same entries deflated, as other zip tools write them.
    import zipfile

    with zipfile.ZipFile(path) as src, zipfile.ZipFile(os.path.join(OUT, "archive_deflated.zip"), "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename))
    for name in ("archive.zip", "archive_deflated.zip"):
        expected_entry(name, "plain", plain, 3, "zarr-python")
        expected_entry(name, "sharded", sharded, 3, "zarr-python")


def main():
    if os.path.exists(OUT):
        shutil.rmtree(OUT)
    os.makedirs(EXPECTED)
    v3_cases()
    v2_cases()
    tensorstore_cases()
    v1_cases()
    hand_v2_cases()
    xarray_cases()
    zip_cases()
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(MANIFEST, f, indent=1)
    print(f"wrote {len(MANIFEST)} arrays to {OUT}")


if __name__ == "__main__":
    main()
