"""Load the benchmark array (an .npy file) into HSDS as /home/bench.h5:/data,
chunked like the Zarr layouts (1024 x 1024) with lz4 and byte shuffle.
Prints the dataset id. Loads only once per HSDS data directory.
Usage: python hsds_load.py HSDS_URL ARRAY.npy
"""

import sys

import h5pyd
import numpy as np

url, npy = sys.argv[1], sys.argv[2]
kw = dict(endpoint=url, username="bench", password="bench", bucket="hsdsbench")
try:
    f = h5pyd.File("/home/bench.h5", "r", **kw)
    if f["data"].shape == np.load(npy, mmap_mode="r").shape:
        print(f["data"].id.id)
        sys.exit(0)
except (OSError, IOError, KeyError):
    pass
try:
    h5pyd.Folder("/home/", mode="w", **kw)
except (OSError, IOError):
    pass  # the folder exists
data = np.load(npy, mmap_mode="r")
f = h5pyd.File("/home/bench.h5", "w", **kw)
ds = f.create_dataset("data", shape=data.shape, dtype=data.dtype, chunks=(1024, 1024), compression="lz4", shuffle=True)
for row in range(0, data.shape[0], 1024):
    ds[row:row + 1024, :] = np.asarray(data[row:row + 1024])
f.close()
f = h5pyd.File("/home/bench.h5", "r", **kw)
print(f["data"].id.id)
