// The viewer's pure formatting: axis ticks, sizes, element values.
import { test } from "node:test";
import assert from "node:assert/strict";

import {
  dtypeName,
  formatBytes,
  formatTick,
  formatValue,
  indexTicks,
  isDrawable,
  logTicks,
  niceTicks,
  toNumber,
} from "../../src/http/handlers/viewer/format.js";

test("ticks are short, and exponents only where digits would not fit", () => {
  assert.equal(formatTick(0), "0");
  assert.equal(formatTick(12), "12");
  assert.equal(formatTick(0.123456), "0.1235");
  assert.equal(formatTick(2_500_000), "2.5e+6");
  assert.equal(formatTick(0.0001), "1e-4");
  assert.equal(formatTick(NaN), "NaN");
});

test("nice ticks cover the range in round steps", () => {
  assert.deepEqual(niceTicks(0, 10), [0, 2, 4, 6, 8, 10]);
  assert.deepEqual(niceTicks(10, 0), [0, 2, 4, 6, 8, 10], "reversed ranges too");
  assert.deepEqual(niceTicks(3, 3), [3]);
  assert.deepEqual(niceTicks(0, Infinity), []);
  assert.ok(niceTicks(0, 1e300, 5).length <= 51, "never unbounded");
  assert.deepEqual(indexTicks(0, 3, 10), [0, 1, 2, 3], "indices are integers");
  assert.deepEqual(logTicks(1, 1e4), [1, 10, 100, 1000, 10000]);
  assert.deepEqual(logTicks(-1, 10), [], "a log axis needs positive ends");
});

test("sizes are binary units", () => {
  assert.equal(formatBytes(0), "0 B");
  assert.equal(formatBytes(2048), "2.00 KiB");
  assert.equal(formatBytes(512 << 20), "512.0 MiB");
  assert.equal(formatBytes(null), "—");
});

test("values keep what JSON carries: big integers, complex numbers, strings", () => {
  assert.equal(formatValue(2n ** 63n), "9223372036854775808");
  assert.equal(formatValue([1, -2], "complex64"), "1-2j");
  assert.equal(formatValue(["NaN", "Infinity"], "complex128"), "NaN+Infinityj");
  assert.equal(formatValue(null), "null");
  assert.equal(formatValue({ a: 1n }), '{"a":"1"}');
  assert.equal(toNumber("Infinity"), Infinity);
  assert.ok(Number.isNaN(toNumber("NaN")));
  assert.equal(toNumber(true), 1);
});

test("data types are named as zarr names them, and drawn when numbers", () => {
  assert.equal(dtypeName({ dtype: { zarr: "float32" } }), "float32");
  assert.equal(dtypeName({ dtype: { zarr: { name: "numpy.datetime64" } } }), "numpy.datetime64");
  assert.equal(dtypeName({}), "");
  assert.ok(isDrawable("float32") && isDrawable("uint8"));
  assert.ok(!isDrawable("string"));
});
