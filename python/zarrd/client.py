"""The client: HTTP with the standard library, answers through xarray."""

from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field, replace

import numpy as np
import xarray as xr

_PERIODS = {"D": "1D", "1D": "1D", "M": "1M", "1M": "1M", "MS": "1M", "1MS": "1M", "ME": "1M",
            "Y": "1Y", "1Y": "1Y", "YS": "1Y", "1YS": "1Y", "YE": "1Y", "A": "1Y", "AS": "1Y"}


class ZarrdError(Exception):
    """An error answer of the server: its status, code and message."""

    def __init__(self, status, code, message):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


def _label(value) -> str:
    """A label as the query grammar writes it: ISO 8601 for times."""
    if isinstance(value, (np.datetime64,)):
        return str(np.datetime_as_string(value))
    if isinstance(value, (_dt.datetime, _dt.date)):
        return value.isoformat()
    if hasattr(value, "isoformat"):  # pandas Timestamp, cftime dates
        return value.isoformat()
    if isinstance(value, (np.floating, float)):
        return repr(float(value))
    if isinstance(value, (np.integer, int)):
        return str(int(value))
    return str(value)


def _tolerance(value) -> str:
    if isinstance(value, (_dt.timedelta, np.timedelta64)) or hasattr(value, "total_seconds"):
        seconds = value.total_seconds() if hasattr(value, "total_seconds") else value / np.timedelta64(1, "s")
        return f"{float(seconds)!r}s"
    return str(value)


def _index(value) -> str:
    if isinstance(value, slice):
        part = lambda v: "" if v is None else str(int(v))
        text = f"{part(value.start)}:{part(value.stop)}"
        return text if value.step is None else f"{text}:{int(value.step)}"
    if isinstance(value, (list, tuple, np.ndarray)):
        return "[" + ",".join(str(int(v)) for v in value) + "]"
    return str(int(value))


class Client:
    """A zarrd server at `url`, with a bearer `token` when it needs one."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 300):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    # -- HTTP ---------------------------------------------------------
    def _get(self, path: str, params=None) -> bytes:
        query = urllib.parse.urlencode(params or {})
        request = urllib.request.Request(f"{self.url}{path}" + (f"?{query}" if query else ""))
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.read()
        except urllib.error.HTTPError as e:
            try:
                error = json.loads(e.read())["error"]
            except Exception:
                raise ZarrdError(e.code, "http_error", str(e)) from None
            raise ZarrdError(error["status"], error["code"], error["message"]) from None

    def _json(self, path: str, params=None):
        return json.loads(self._get(path, params))

    @staticmethod
    def _quote(path: str) -> str:
        return urllib.parse.quote(path.strip("/"))

    # -- browsing -----------------------------------------------------
    def meta(self, path: str = "") -> dict:
        """The server's description of a node (`/api/v1/meta`)."""
        return self._json(f"/api/v1/meta/{self._quote(path)}" if path.strip("/") else "/api/v1/meta")

    def tree(self, path: str = "") -> dict:
        """The hierarchy below `path` (`/api/v1/tree`)."""
        return self._json(f"/api/v1/tree/{self._quote(path)}" if path.strip("/") else "/api/v1/tree")

    def __getitem__(self, path: str):
        meta = self.meta(path)
        if meta["node_type"] == "group":
            return Group(self, path.strip("/"), meta)
        return Variable(self, path.strip("/"), meta)

    def statistics(self, path: str, bins: int | None = None, decode: bool = True, **labels) -> dict:
        """min, max, mean, std and counts of a selection by label (and its
        histogram with `bins`)."""
        params = {f"sel.{d}": _selection(v) for d, v in labels.items()}
        if decode:
            params["decode"] = "cf"
        if bins is None:
            return self._json(f"/api/v1/statistics/{self._quote(path)}", params)
        params["bins"] = str(bins)
        return self._json(f"/api/v1/histogram/{self._quote(path)}", params)


def _selection(value) -> str:
    if isinstance(value, slice):
        if value.step is not None:
            raise ValueError("a label range has no step; use isel for strides")
        start = "" if value.start is None else _label(value.start)
        stop = "" if value.stop is None else _label(value.stop)
        return f"{start}..{stop}"
    return _label(value)


class Group:
    """A group: its members by name, and its dataset description."""

    def __init__(self, client: Client, path: str, meta: dict):
        self.client, self.path, self.meta = client, path, meta

    @property
    def members(self) -> list[str]:
        return [m["name"] for m in self.meta.get("members", [])]

    @property
    def dataset(self) -> dict | None:
        """Dimensions, coordinates and data variables, as the server reads them."""
        return self.meta.get("dataset")

    def __getitem__(self, name: str):
        return self.client[f"{self.path}/{name}" if self.path else name]

    def __repr__(self):
        return f"<zarrd.Group {self.path or '/'} members={self.members}>"


@dataclass(frozen=True)
class _Request:
    sel: dict = field(default_factory=dict)
    isel: dict = field(default_factory=dict)
    tolerance: dict = field(default_factory=dict)
    reduce: str | None = None
    extra: dict = field(default_factory=dict)
    grouping: dict = field(default_factory=dict)


class Variable:
    """An array on the server, lazily selected and reduced."""

    def __init__(self, client: Client, path: str, meta: dict, request: _Request | None = None):
        self.client, self.path, self.meta = client, path, meta
        self._request = request or _Request()

    # -- description ---------------------------------------------------
    @property
    def dims(self) -> tuple:
        return tuple(self.meta.get("dimensions") or [f"dim_{i}" for i in range(len(self.meta["shape"]))])

    @property
    def shape(self) -> tuple:
        return tuple(self.meta["shape"])

    @property
    def coords(self) -> dict:
        return self.meta.get("coordinates", {})

    @property
    def attrs(self) -> dict:
        return self.meta.get("attributes", {})

    def __repr__(self):
        return f"<zarrd.Variable {self.path} dims={self.dims} shape={self.shape} request={self.params()}>"

    # -- building a request ---------------------------------------------
    def _with(self, **changes) -> "Variable":
        return Variable(self.client, self.path, self.meta, replace(self._request, **changes))

    def _check_unreduced(self, what):
        if self._request.reduce is not None:
            raise NotImplementedError(f"{what} after a reduction: select first, then reduce")

    def sel(self, indexers=None, method=None, tolerance=None, **labels) -> "Variable":
        """Select by label as `xarray.DataArray.sel`: values, slices of
        labels (inclusive), `method="nearest"` with `tolerance`."""
        self._check_unreduced("sel")
        labels = {**(indexers or {}), **labels}
        if method not in (None, "nearest"):
            raise ValueError("method is None or 'nearest'")
        sel, tol = dict(self._request.sel), dict(self._request.tolerance)
        for dim, value in labels.items():
            if dim in sel or dim in self._request.isel:
                raise ValueError(f"{dim} is selected already")
            if method == "nearest" and not isinstance(value, slice):
                sel[dim] = "~" + _label(value)
                if tolerance is not None:
                    tol[dim] = _tolerance(tolerance)
            else:
                sel[dim] = _selection(value)
        return self._with(sel=sel, tolerance=tol)

    def isel(self, indexers=None, **indices) -> "Variable":
        """Select by index as `xarray.DataArray.isel` (slices with steps,
        negative ones included, and lists)."""
        self._check_unreduced("isel")
        indices = {**(indexers or {}), **indices}
        isel = dict(self._request.isel)
        for dim, value in indices.items():
            if dim in isel or dim in self._request.sel:
                raise ValueError(f"{dim} is selected already")
            isel[dim] = _index(value)
        return self._with(isel=isel)

    def _reduce(self, op, dim=None, **extra) -> "Variable":
        self._check_unreduced(op)
        dims = [dim] if isinstance(dim, str) else list(dim or [])
        spec = f"{op}:{','.join(dims)}" if dims else op
        return self._with(reduce=spec, extra={k: str(v) for k, v in extra.items()})

    def mean(self, dim=None):
        return self._reduce("mean", dim)

    def sum(self, dim=None):
        return self._reduce("sum", dim)

    def min(self, dim=None):
        return self._reduce("min", dim)

    def max(self, dim=None):
        return self._reduce("max", dim)

    def std(self, dim=None, ddof=0):
        return self._reduce("std", dim, ddof=ddof)

    def var(self, dim=None, ddof=0):
        return self._reduce("var", dim, ddof=ddof)

    def count(self, dim=None):
        return self._reduce("count", dim)

    def median(self, dim=None):
        return self._reduce("median", dim)

    def quantile(self, q, dim=None):
        qs = np.atleast_1d(q)
        return self._reduce("quantile", dim, q=",".join(repr(float(v)) for v in qs))

    def argmin(self, dim):
        return self._reduce("argmin", dim)

    def argmax(self, dim):
        return self._reduce("argmax", dim)

    def coarsen(self, dim=None, **windows) -> "_Grouped":
        """Blocks of `windows` positions, reduced by the method called next."""
        windows = {**(dim or {}), **windows}
        return _Grouped(self, {"coarsen": ",".join(f"{d}:{int(n)}" for d, n in windows.items())})

    def resample(self, indexer=None, **periods) -> "_Grouped":
        """Calendar periods of a time dimension (`"1D"`, `"1M"`/`"1MS"`,
        `"1Y"`), reduced by the method called next."""
        periods = {**(indexer or {}), **periods}
        if len(periods) != 1:
            raise ValueError("resample one dimension")
        (dim, period), = periods.items()
        if period not in _PERIODS:
            raise ValueError(f"period {period!r} is not a day, month or year")
        return _Grouped(self, {"resample": f"{dim}:{_PERIODS[period]}"})

    def params(self, decode: bool = True) -> dict:
        """The query this variable's request is."""
        r = self._request
        params = {f"sel.{d}": v for d, v in r.sel.items()}
        params.update({f"isel.{d}": v for d, v in r.isel.items()})
        params.update({f"tolerance.{d}": v for d, v in r.tolerance.items()})
        if r.reduce:
            params["reduce"] = r.reduce
        params.update(r.extra)
        params.update(r.grouping)
        if decode:
            params["decode"] = "cf"
        return params

    # -- running it --------------------------------------------------
    def load(self, decode: bool = True) -> xr.DataArray:
        """Run the request on the server: an `xarray.DataArray` with its
        coordinates and attributes."""
        params = {**self.params(decode), "format": "netcdf"}
        body = self.client._get(f"/api/v1/data/{self.client._quote(self.path)}", params)
        handle, path = tempfile.mkstemp(suffix=".nc")
        try:
            with os.fdopen(handle, "wb") as f:
                f.write(body)
            with xr.open_dataset(path, engine="netcdf4") as ds:
                name = next(iter(ds.data_vars))
                return ds[name].load()
        finally:
            os.unlink(path)

    def to_xarray(self, decode: bool = True) -> xr.DataArray:
        return self.load(decode)

    @property
    def values(self) -> np.ndarray:
        return self.load().values


class _Grouped:
    """`coarsen(...)` or `resample(...)` waiting for its reduction."""

    def __init__(self, variable: Variable, grouping: dict):
        self._variable, self._grouping = variable, grouping

    def _op(self, op):
        v = self._variable._reduce(op)
        return v._with(grouping=self._grouping)

    def mean(self):
        return self._op("mean")

    def sum(self):
        return self._op("sum")

    def min(self):
        return self._op("min")

    def max(self):
        return self._op("max")

    def std(self):
        return self._op("std")

    def var(self):
        return self._op("var")

    def count(self):
        return self._op("count")
