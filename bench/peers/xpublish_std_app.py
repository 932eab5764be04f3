"""xpublish with xpublish-opendap and xpublish-edr serving one Zarr
dataset as the dataset `bench`: DAP2 at /datasets/bench/opendap.dods and
EDR at /datasets/bench/edr/position. The dataset is opened lazily (dask),
as xarray.open_zarr opens it, so every answer reads the store.
Usage: python xpublish_std_app.py DATASET_PATH PORT
"""

import sys

import xarray as xr
import xpublish
from xpublish_edr import CfEdrPlugin
from xpublish_opendap import OpenDapPlugin

path, port = sys.argv[1], int(sys.argv[2])
ds = xr.open_zarr(path, consolidated=False)
rest = xpublish.Rest({"bench": ds}, plugins={"edr": CfEdrPlugin(), "opendap": OpenDapPlugin()})
rest.serve(host="127.0.0.1", port=port, log_level="warning")
