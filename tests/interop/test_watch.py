"""Change notifications: `GET /api/v1/watch/{path}` streams Server-Sent
Events. A client subscribed while another appends sees one `appended` event
per append, in order, with the new shape and the rows written; watchers of
the root see everything, watchers of another path nothing of it; attribute
patches, resizes, region writes, raw key writes and deletes each have their
event; a change made by another replica (a second zarrd on the same
directory) arrives when the metadata is revalidated; a watcher that does not
read does not hold up writers; an unknown path is a 404."""

import http.client
import httpx
import json
import queue
import threading
import urllib.parse

import numpy as np

from conftest import start_zarrd, stop
from test_icechunk import call


class Watch:
    """A watch's response read on a thread, line by line as it arrives."""

    def __init__(self, url, path):
        self.client = httpx.Client(timeout=60)
        target = f"{url}/api/v1/watch/{path}" if path else f"{url}/api/v1/watch"
        self.stream = self.client.stream("GET", target)
        self.response = self.stream.__enter__()
        assert self.response.status_code == 200, self.response.read()
        assert self.response.headers["content-type"] == "text/event-stream"

    def close(self):
        self.response.close()
        self.client.close()


def watcher(url, path):
    """Events of a watch as they come: a queue of (event, data, id), with
    the watch to close."""
    watch = Watch(url, path)
    events = queue.Queue()

    def read():
        fields = {}
        try:
            for line in watch.response.iter_lines():
                if not line:
                    if "event" in fields:
                        events.put((fields["event"], json.loads(fields["data"]), fields.get("id")))
                    fields = {}
                elif not line.startswith(":"):
                    name, _, value = line.partition(": ")
                    fields[name] = value
        except (httpx.HTTPError, OSError, ValueError, RuntimeError):
            pass  # the test closed the watch

    threading.Thread(target=read, daemon=True).start()
    return events, watch


def take(events, n, timeout=30):
    return [events.get(timeout=timeout) for _ in range(n)]


def send(url, method, target, body):
    status, _, answer = call(method, url + target, {"Content-Type": "application/json"}, json.dumps(body).encode())
    assert status in (200, 201, 204), (status, answer[:300])
    return answer


def create_series(url, name="series"):
    send(url, "PUT", f"/api/v1/meta/{name}",
         {"node_type": "array", "zarr_format": 3, "shape": [0, 4], "chunks": [4, 4], "dtype": "int32"})


def test_one_event_per_append_in_order_with_the_shape(tmp_path):
    url, proc = start_zarrd(str(tmp_path), "--allow-anonymous-writes")
    try:
        create_series(url)
        create_series(url, "other")
        series, c1 = watcher(url, "series")
        everything, c2 = watcher(url, "")
        other, c3 = watcher(url, "other")
        for i in range(10):
            send(url, "POST", "/api/v1/append/series?axis=0", {"data": [[i] * 4]})
        got = take(series, 10)
        assert [e for e, _, _ in got] == ["appended"] * 10
        assert [d["shape"] for _, d, _ in got] == [[i + 1, 4] for i in range(10)]
        assert [d["region"] for _, d, _ in got] == [[[i, i + 1], [0, 4]] for i in range(10)]
        ids = [int(i) for _, _, i in got]
        assert ids == sorted(ids) and len(set(ids)) == 10
        assert [d["path"] for _, d, _ in take(everything, 10)] == ["series"] * 10
        # The other path's watcher saw none of it: its first event is its own.
        send(url, "PATCH", "/api/v1/meta/other", {"attributes": {"units": "K"}})
        kind, data, _ = take(other, 1)[0]
        assert (kind, data["path"]) == ("attributes", "other")
        # Every kind of write has its event.
        send(url, "PUT", "/api/v1/data/series?select=0:2,0:4", {"data": [[7] * 4, [8] * 4]})
        send(url, "PATCH", "/api/v1/meta/series", {"shape": [12, 4]})
        status, _, _ = call("PUT", f"{url}/zarr/series/c/9/0", {}, np.zeros(16, "<i4").tobytes())
        assert status in (201, 204)
        assert call("DELETE", f"{url}/api/v1/meta/series")[0] == 204
        got = take(series, 4)
        assert [e for e, _, _ in got] == ["written", "resized", "key", "deleted"]
        assert got[0][1]["region"] == [[0, 2], [0, 4]] and got[1][1]["shape"] == [12, 4]
        assert got[2][1]["path"] == "series/c/9/0"
        for c in (c1, c2, c3):
            c.close()
    finally:
        stop(proc)


def test_changes_made_by_another_replica_arrive_on_revalidation(tmp_path):
    url, proc = start_zarrd(str(tmp_path), "--allow-anonymous-writes", "--recheck-cached", "1")
    other_url, other = start_zarrd(str(tmp_path), "--allow-anonymous-writes")
    try:
        create_series(url)
        events, conn = watcher(url, "series")
        send(other_url, "PATCH", "/api/v1/meta/series", {"attributes": {"from": "elsewhere"}})
        kind, data, event_id = take(events, 1)[0]
        assert (kind, data["path"], event_id) == ("metadata", "series", None)
        conn.close()
    finally:
        stop(other)
        stop(proc)


def test_attribute_changes_made_elsewhere_reach_watchers_above(tmp_path):
    url, proc = start_zarrd(str(tmp_path), "--allow-anonymous-writes", "--recheck-cached", "1")
    other_url, other = start_zarrd(str(tmp_path), "--allow-anonymous-writes")
    try:
        send(url, "PUT", "/api/v1/meta/a/x", {"node_type": "group"})
        # Two watchers of the root share its looks; one of `a` has its own.
        watchers = [watcher(url, path) for path in ("", "", "a")]
        send(other_url, "PATCH", "/api/v1/meta/a/x", {"attributes": {"from": "elsewhere"}})
        for events, conn in watchers:
            kind, data, _ = take(events, 1)[0]
            assert (kind, data["path"]) == ("metadata", "a/x")
            conn.close()
    finally:
        stop(other)
        stop(proc)


def test_a_watcher_that_does_not_read_does_not_hold_up_writers(tmp_path):
    url, proc = start_zarrd(str(tmp_path), "--allow-anonymous-writes")
    try:
        create_series(url)
        parsed = urllib.parse.urlparse(url)
        idle = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=60)
        idle.request("GET", "/api/v1/watch/series")  # and never read
        for i in range(300):
            send(url, "PATCH", "/api/v1/meta/series", {"attributes": {"i": i}})
        status, _, body = call("GET", f"{url}/api/v1/meta/series")
        assert status == 200 and json.loads(body)["attributes"] == {"i": 299}
        idle.close()
        status, _, body = call("GET", f"{url}/api/v1/watch/nothing")
        assert status == 404 and json.loads(body)["error"]["code"] == "not_found"
    finally:
        stop(proc)


def test_a_server_shutting_down_ends_its_watches(tmp_path):
    url, proc = start_zarrd(str(tmp_path))
    try:
        events, conn = watcher(url, "")
        proc.terminate()
        # Watches end (clients reconnect after `retry`), so the shutdown
        # does not wait out its deadline for them.
        proc.wait(timeout=10)
        conn.close()
    finally:
        stop(proc)
