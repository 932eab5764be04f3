"""Section virtual: the same array through the stores that leave data where
it already lives (a reference set, an Icechunk repository) against plain
Zarr, and against xarray reading the NetCDF file in-process.

The corpus's array is written once under OUT/virtual-N/, in min(N, 512)
square chunks compressed the way NetCDF4 files usually are (4-byte shuffle,
then zlib level 1), as:

- plain Zarr: Zarr v2, a shuffle filter and a zlib compressor (the anchor);
- a NetCDF4 file (netCDF4-python), variable t(y, x);
- references: kerchunk's SingleHdf5ToZarr JSON of that file, mounted as
  `{ references = "..." }`;
- references (Parquet): VirtualiZarr's Parquet set of the same file;
- Icechunk: a repository holding the array as native chunks (Zarr v3,
  numcodecs shuffle + zlib 1), mounted as `{ icechunk = "..." }`;
- Icechunk virtual: a repository whose chunks are the NetCDF file's byte
  ranges (a file:// virtual chunk container), mounted with `virtual_chunks`
  allowing the file's folder.

Contenders per selection (the 1000 x 1000 window, the whole array): one
GET /api/v1/data/{store}/t?select=...&format=npy per store, from two zarrd
processes with every mount: cold (--cache-size 0) and warm (the cache on,
the selection asked once right before); and xarray (engine netcdf4,
cache=False) reading the NetCDF file in-process, opened afresh inside each
timed read, and opened once outside the timing (HDF5's chunk cache then
lives on between reads). Every contender runs once untimed first; every
answer is checked (a wrong one, or an error response, fails the section).
Ratios are the anchor's seconds over the contender's in the same state
(xarray opened per read against plain Zarr cold, opened once against plain
Zarr warm): below 1, slower than plain Zarr through zarrd."""

import json
import os
import shutil
import warnings

import measure
import report
from common import mb, npy_slice, select_param, timed_checked
from procs import OUT, Zarrd

VAR = "t"
ANCHOR = "plain Zarr"
# What zarrd serves each store as (a path under its ROOT, or a mount), in table order.
STORES = {"plain Zarr": "plain.zarr", "references": "refs", "references (Parquet)": "parquet",
          "Icechunk": "icechunk", "Icechunk virtual": "icechunk-virtual"}


def chunk_side(n):
    return min(n, 512)


def bands(n):
    """Row bands of one chunk row each: writers never hold more than that."""
    c = chunk_side(n)
    return [(r, min(n, r + c)) for r in range(0, n, c)]


def write_netcdf(path, expected):
    import netCDF4
    n, c = expected.shape[0], chunk_side(expected.shape[0])
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.createDimension("y", n)
        nc.createDimension("x", n)
        # No fill value: every chunk is written, and xarray then reads the stored dtype unmasked.
        t = nc.createVariable(VAR, expected.dtype, ("y", "x"), zlib=True, complevel=1, shuffle=True,
                              chunksizes=(c, c), fill_value=False)
        for r0, r1 in bands(n):
            t[r0:r1, :] = expected[r0:r1]


def write_references(d, nc_path):
    """kerchunk's JSON and VirtualiZarr's Parquet set, beside the file (the
    folder a mount reads targets from by default); kerchunk's references."""
    from kerchunk.hdf import SingleHdf5ToZarr
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr import open_virtual_dataset
    from virtualizarr.parsers import HDFParser

    refs = SingleHdf5ToZarr(nc_path, inline_threshold=0).translate()
    with open(os.path.join(d, "refs.json"), "w") as f:
        json.dump(refs, f)
    vds = open_virtual_dataset(f"file://{nc_path}", registry=ObjectStoreRegistry({"file://": LocalStore()}),
                               parser=HDFParser(), loadable_variables=[])
    vds.vz.to_kerchunk(os.path.join(d, "refs.parq"), format="parquet")
    return refs["refs"]


def write_plain(path, expected):
    import numcodecs
    import zarr
    n, c = expected.shape[0], chunk_side(expected.shape[0])
    # A group holding `t`, as the NetCDF file (and so the references) and the repositories have it.
    a = zarr.open_group(path, mode="w", zarr_format=2).create_array(
        VAR, shape=(n, n), chunks=(c, c), dtype=expected.dtype, fill_value=0,
        filters=[numcodecs.Shuffle(elementsize=expected.dtype.itemsize)], compressors=numcodecs.Zlib(level=1))
    for r0, r1 in bands(n):
        a[r0:r1, :] = expected[r0:r1]


def icechunk_array(store, n, dtype):
    import zarr
    from zarr.codecs import BytesCodec
    from zarr.codecs.numcodecs import Shuffle, Zlib
    c = chunk_side(n)
    return zarr.create_array(store, name=VAR, shape=(n, n), chunks=(c, c), dtype=dtype, fill_value=0,
                             serializer=BytesCodec(endian="little"),
                             compressors=[Shuffle(elementsize=dtype.itemsize), Zlib(level=1)])


def write_icechunk(path, expected):
    import icechunk as ic
    repo = ic.Repository.create(ic.local_filesystem_storage(path))
    s = repo.writable_session("main")
    a = icechunk_array(s.store, expected.shape[0], expected.dtype)
    for r0, r1 in bands(expected.shape[0]):
        a[r0:r1, :] = expected[r0:r1]
    s.commit("native chunks")


def write_icechunk_virtual(path, expected, nc_path, refs):
    """Every chunk a virtual reference to the NetCDF file's chunk, in a
    file:// container for the file's folder; returns the container's prefix."""
    import icechunk as ic
    folder = os.path.dirname(nc_path)
    prefix = f"file://{folder}/"
    config = ic.RepositoryConfig.default()
    config.set_virtual_chunk_container(ic.VirtualChunkContainer(prefix, ic.local_filesystem_store(folder)))
    repo = ic.Repository.create(ic.local_filesystem_storage(path), config=config,
                                authorize_virtual_chunk_access=ic.containers_credentials({prefix: None}))
    s = repo.writable_session("main")
    icechunk_array(s.store, expected.shape[0], expected.dtype)
    location = prefix + os.path.basename(nc_path)
    for key, value in refs.items():
        name, _, index = key.partition("/")
        if name == VAR and not index.startswith("."):
            _, offset, length = value
            s.store.set_virtual_ref(f"{VAR}/c/" + index.replace(".", "/"), location, offset=offset, length=length)
    s.commit("virtual chunks of the NetCDF file")
    return prefix


def toml(s):
    return json.dumps(str(s))


def make(expected):
    """Write every form of the array once under OUT/virtual-N; the ROOT and
    the config file zarrd is started with, and the NetCDF file."""
    import icechunk
    n = expected.shape[0]
    d = os.path.abspath(os.path.join(OUT, f"virtual-{n}"))
    nc_dir, root = os.path.join(d, "nc"), os.path.join(d, "root")
    nc_path, config = os.path.join(nc_dir, "data.nc"), os.path.join(d, "zarrd.toml")
    marker = os.path.join(OUT, f"virtual-{n}.done")
    if os.path.exists(marker):
        return root, config, nc_path
    # Paths inside the references and the repositories are absolute: written in place, never moved.
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(nc_dir)
    # Icechunk warns that local storage is unsafe for concurrent commits (one process commits here).
    icechunk.set_logs_filter("icechunk=error")
    with warnings.catch_warnings():
        # "Numcodecs codecs are not in the Zarr version 3 specification": NetCDF's codecs, on purpose.
        warnings.filterwarnings("ignore", message="Numcodecs codecs")
        write_plain(os.path.join(root, STORES[ANCHOR]), expected)
        write_netcdf(nc_path, expected)
        refs = write_references(nc_dir, nc_path)
        write_icechunk(os.path.join(d, "icechunk"), expected)
        prefix = write_icechunk_virtual(os.path.join(d, "icechunk-virtual"), expected, nc_path, refs)
    with open(config, "w") as f:
        f.write("[mounts]\n"
                f"refs = {{ references = {toml(os.path.join(nc_dir, 'refs.json'))} }}\n"
                f"parquet = {{ references = {toml(os.path.join(nc_dir, 'refs.parq'))} }}\n"
                f"icechunk = {{ icechunk = {toml(os.path.join(d, 'icechunk'))} }}\n"
                f"icechunk-virtual = {{ icechunk = {toml(os.path.join(d, 'icechunk-virtual'))}, "
                f"virtual_chunks = [{toml(prefix)}] }}\n")
    open(marker, "w").close()
    return root, config, nc_path


def xarray_read(nc_path, sel, ds=None):
    """The selection as xarray reads it from the file: through `ds` if given,
    else a dataset opened and closed around the read."""
    import xarray as xr
    if ds is not None:
        return ds[VAR].isel(y=sel[0], x=sel[1]).values
    with xr.open_dataset(nc_path, engine="netcdf4", cache=False) as opened:
        return opened[VAR].isel(y=sel[0], x=sel[1]).values


def section(ctx):
    import xarray as xr
    root, config, nc_path = make(ctx.expected)
    rows = []
    # Both with every mount; the warm one trusts cached values for 60 s, as ctx.zarrd() does.
    with Zarrd(root, "--config", config, "--cache-size", "0") as cold, \
            Zarrd(root, "--config", config, "--cache-size", ctx.args.cache_size, "--recheck-cached", "60") as warm, \
            xr.open_dataset(nc_path, engine="netcdf4", cache=False) as ds:
        for sel_name, sel in ctx.selections().items():
            contenders = {}
            for store, path in STORES.items():
                url = f"/api/v1/data/{path}/{VAR}?select={select_param(sel)}&format=npy"
                for state, server in (("cold", cold), ("warm", warm)):
                    who = f"{store} {state}"
                    contenders[who] = (lambda u=server.url + url, who=who, repeat=state == "warm":
                                       npy_slice(ctx, u, sel, who, repeat))
            for who, opened in (("xarray, opened per read", None), ("xarray, opened once", ds)):
                contenders[who] = (lambda who=who, opened=opened: {"seconds": timed_checked(
                    ctx, who, sel, lambda: xarray_read(nc_path, sel, opened))["seconds"]})
            # Once each untimed (a process's first request, xarray's first open); zarrd is the subject
            # here, not a peer, so an error or a wrong answer fails the section.
            for run in contenders.values():
                run()
            res = measure.alternate(contenders, ctx.args.reps)
            rows.append({"selection": sel_name, "shape": [s.stop - s.start for s in sel], "mb": mb(sel), **res})
            print("virtual", sel_name, report.brief(res, "seconds"))
        rss = {"zarrd warm": warm.peak_rss(), "zarrd cold": cold.peak_rss()}
    return {"rows": rows, "chunk": chunk_side(ctx.n), "stores": STORES, "peak_rss": rss}
