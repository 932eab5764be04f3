"""xpublish serving one Zarr v2 array as the variable `data` of a Dataset.

The array is wrapped lazily with dask, chunk for chunk, so xpublish reads
and decodes the stored chunks on request (as it would for a dataset opened
with xarray.open_zarr) instead of serving a copy held in memory.
Usage: python xpublish_app.py ARRAY_PATH PORT
"""

import sys

import dask.array as da
import xarray as xr
import xpublish  # noqa: F401  (registers the .rest accessor)

path, port = sys.argv[1], int(sys.argv[2])
data = da.from_zarr(path)
ds = xr.Dataset({"data": (("y", "x"), data)})
ds["data"].encoding["chunks"] = data.chunksize
ds.rest.serve(host="127.0.0.1", port=port, log_level="warning")
