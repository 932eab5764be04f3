"""xpublish-tiles serving one Zarr dataset as the dataset `bench`: its
OGC tiles at /datasets/bench/tiles/{tms}/{z}/{y}/{x}. The dataset is opened
lazily (dask), as xarray.open_zarr opens it, so tiles read the store.
Usage: python xpublish_tiles_app.py DATASET_PATH PORT
"""

import sys

import xarray as xr
import xpublish
from xpublish_tiles.xpublish.tiles import TilesPlugin

path, port = sys.argv[1], int(sys.argv[2])
ds = xr.open_zarr(path, consolidated=False)
rest = xpublish.Rest({"bench": ds}, plugins={"tiles": TilesPlugin()})
rest.serve(host="127.0.0.1", port=port, log_level="warning")
