"""The benchmark corpus, written once by zarr-python: one float32 N x N
array (smooth field plus noise, so it compresses like real data) in four
layouts, and the array itself as .npy so every contender's answer can be
checked.

- v2_blosc:   Zarr v2, 1024 x 1024 chunks, Blosc lz4 byte-shuffle (~3 MB chunks)
- v3_zstd:    Zarr v3, 1024 x 1024 chunks, bytes + zstd level 1
- v3_sharded: Zarr v3, 2048 x 2048 shards of 256 x 256 inner chunks, zstd 1
- v2_small:   Zarr v2, 64 x 64 chunks, Blosc lz4 (many small chunks)
"""

import os

import numpy as np

LAYOUTS = ["v2_blosc", "v3_zstd", "v3_sharded", "v2_small"]
# The key a raw GET of "one chunk" fetches, per layout (one shard when sharded).
CHUNK_KEYS = {"v2_blosc": "0.0", "v3_zstd": "c/0/0", "v3_sharded": "c/0/0", "v2_small": "0.0"}
METADATA_KEYS = {"v2_blosc": ".zarray", "v3_zstd": "zarr.json", "v3_sharded": "zarr.json", "v2_small": ".zarray"}
ZARR_FORMAT = {"v2_blosc": 2, "v3_zstd": 3, "v3_sharded": 3, "v2_small": 2}


def field(n):
    rng = np.random.default_rng(0)
    i = np.arange(n, dtype=np.float32)
    return (np.sin(i[:, None] * 0.01) * np.cos(i[None, :] * 0.013) * 100
            + rng.random((n, n), dtype=np.float32)).astype("<f4")


def make(out_dir, n):
    """Write the corpus under out_dir/corpus-N once; returns (corpus dir, .npy path)."""
    import numcodecs
    import zarr
    import zarr.codecs as zc

    root = os.path.join(out_dir, f"corpus-{n}")
    npy = os.path.join(out_dir, f"expected-{n}.npy")
    marker = os.path.join(out_dir, f"corpus-{n}.done")
    if os.path.exists(marker):
        return root, npy
    data = field(n)
    np.save(npy, data)
    common = dict(shape=(n, n), dtype="f4", overwrite=True)
    blosc = numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)
    arrays = {
        "v2_blosc": dict(zarr_format=2, chunks=(1024, 1024), compressors=blosc),
        "v3_zstd": dict(zarr_format=3, chunks=(1024, 1024), compressors=[zc.ZstdCodec(level=1)]),
        "v3_sharded": dict(zarr_format=3, chunks=(256, 256), shards=(2048, 2048), compressors=[zc.ZstdCodec(level=1)]),
        "v2_small": dict(zarr_format=2, chunks=(64, 64), compressors=blosc),
    }
    # A small array a server reads once before cold-cache measurements, so that
    # "cold" means this array's chunks are not cached, not a process that has
    # yet to start its thread pools.
    warm = zarr.create_array(os.path.join(root, "warmup.zarr"), shape=(256, 256), chunks=(64, 64), dtype="f4",
                             zarr_format=3, compressors=[zc.ZstdCodec(level=1)], overwrite=True)
    warm[...] = data[:256, :256]
    for name, options in arrays.items():
        a = zarr.create_array(os.path.join(root, f"{name}.zarr"), **options, **common)
        a[...] = data
    open(marker, "w").close()
    return root, npy


def large_rows(expected, r0, r1):
    """Rows r0..r1 of the array four times the corpus's size (side 2N): the
    corpus tiled 2 x 2, each quadrant shifted by its own constant (so a
    misplaced block is caught), computed in float32 by writer and checker alike."""
    n = expected.shape[0]
    rows = np.arange(r0, r1)
    base = np.asarray(expected[rows % n])
    shift = (rows // n).astype(np.float32)[:, None] * np.float32(1000)
    return np.concatenate([base + shift, base + (shift + np.float32(2000))], axis=1).astype("<f4")


def make_large(out_dir, n, expected):
    """Write the side-2N array once under out_dir/large-2N/large.zarr (Zarr v3,
    1024 x 1024 chunks, zstd 1, as v3_zstd), a band of rows at a time so the
    writer never holds it whole; returns the directory to serve."""
    import zarr
    import zarr.codecs as zc

    side = 2 * n
    root = os.path.join(out_dir, f"large-{side}")
    marker = os.path.join(out_dir, f"large-{side}.done")
    if os.path.exists(marker):
        return root
    chunk = min(1024, side)
    a = zarr.create_array(os.path.join(root, "large.zarr"), shape=(side, side), chunks=(chunk, chunk), dtype="f4",
                          zarr_format=3, compressors=[zc.ZstdCodec(level=1)], overwrite=True)
    for r0 in range(0, side, chunk):
        r1 = min(side, r0 + chunk)
        a[r0:r1, :] = large_rows(expected, r0, r1)
    open(marker, "w").close()
    return root
