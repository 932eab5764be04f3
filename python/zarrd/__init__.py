"""A notebook client for zarrd.

`Client(url, token=...)` browses a server; `client["group/var"]` is a lazy
`Variable` whose `sel`, `isel` and reductions build one request to
`/api/v1/data`, run on the server when `load()` is called, and come back
as an `xarray.DataArray` (through NetCDF, so coordinates, times and CF
attributes arrive as xarray decodes them)."""

from .client import Client, Group, Variable, ZarrdError

__all__ = ["Client", "Group", "Variable", "ZarrdError"]
