//! Arrow IPC (the streaming format, `application/vnd.apache.arrow.stream`):
//! the selection's table in long form (see [`super::table`]) as a schema
//! message and one record batch. Written with flatbuffers directly, from
//! the format's `Schema.fbs` and `Message.fbs`: the Arrow crates would
//! bring a compute library for two messages.

use flatbuffers::{FlatBufferBuilder, WIPOffset};

use super::table::{columns, Column, Values};
use super::{Built, File};
use crate::http::error::ApiResult;
use crate::service::Data;

// A row repeats every dimension's label beside the value: 4 bytes per byte.
pub const ARROW: File = File {
    name: "arrow",
    content_type: "application/vnd.apache.arrow.stream",
    expansion: 4,
    build: encode,
};

/// A table's vtable slot of field `id`.
const fn slot(id: u16) -> u16 {
    4 + 2 * id
}

// Schema.fbs: the `Type` union's members, `MessageHeader`, `MetadataVersion`.
const TYPE_INT: u8 = 2;
const TYPE_FLOAT: u8 = 3;
const TYPE_UTF8: u8 = 5;
const TYPE_BOOL: u8 = 6;
const TYPE_TIMESTAMP: u8 = 10;
const HEADER_SCHEMA: u8 = 1;
const HEADER_RECORD_BATCH: u8 = 3;
const VERSION_V5: i16 = 4;

/// The column's type table and its union tag.
fn type_table<'a>(
    fbb: &mut FlatBufferBuilder<'a>,
    values: &Values,
) -> (u8, WIPOffset<flatbuffers::UnionWIPOffset>) {
    let t = fbb.start_table();
    let tag = match values {
        Values::F32(_) => {
            fbb.push_slot::<i16>(slot(0), 1, 0);
            TYPE_FLOAT
        }
        Values::F64(_) => {
            fbb.push_slot::<i16>(slot(0), 2, 0);
            TYPE_FLOAT
        }
        Values::Int { bits, signed, .. } => {
            fbb.push_slot::<i32>(slot(0), i32::from(*bits), 0);
            fbb.push_slot::<bool>(slot(1), *signed, false);
            TYPE_INT
        }
        Values::Time(_) => {
            // NANOSECOND, no time zone.
            fbb.push_slot::<i16>(slot(0), 3, 0);
            TYPE_TIMESTAMP
        }
        Values::Text(_) => TYPE_UTF8,
        Values::Bool(_) => TYPE_BOOL,
    };
    let done = fbb.end_table(t);
    (tag, WIPOffset::new(done.value()))
}

/// One encapsulated message: continuation, length, the flatbuffer padded
/// to 8 bytes, then the body.
fn message(
    out: &mut Vec<u8>,
    header_type: u8,
    build: impl FnOnce(&mut FlatBufferBuilder) -> WIPOffset<flatbuffers::UnionWIPOffset>,
    body: &[u8],
) {
    let mut fbb = FlatBufferBuilder::new();
    let header = build(&mut fbb);
    let m = fbb.start_table();
    fbb.push_slot::<i16>(slot(0), VERSION_V5, 0);
    fbb.push_slot::<u8>(slot(1), header_type, 0);
    fbb.push_slot_always(slot(2), header);
    fbb.push_slot::<i64>(slot(3), body.len() as i64, 0);
    let m = fbb.end_table(m);
    fbb.finish(m, None);
    let meta = fbb.finished_data();
    let padded = (meta.len() + 8).next_multiple_of(8) - 8;
    out.extend(0xFFFF_FFFFu32.to_le_bytes());
    out.extend((padded as i32).to_le_bytes());
    out.extend(meta);
    out.resize(out.len() + padded - meta.len(), 0);
    out.extend(body);
}

fn schema(
    fbb: &mut FlatBufferBuilder,
    columns: &[Column],
) -> WIPOffset<flatbuffers::UnionWIPOffset> {
    let mut fields = Vec::with_capacity(columns.len());
    for c in columns {
        let name = fbb.create_string(&c.name);
        let (tag, ty) = type_table(fbb, &c.values);
        let children = fbb.create_vector::<WIPOffset<flatbuffers::TableFinishedWIPOffset>>(&[]);
        let f = fbb.start_table();
        fbb.push_slot_always(slot(0), name);
        fbb.push_slot::<bool>(slot(1), false, false);
        fbb.push_slot::<u8>(slot(2), tag, 0);
        fbb.push_slot_always(slot(3), ty);
        fbb.push_slot_always(slot(5), children);
        fields.push(fbb.end_table(f));
    }
    let fields = fbb.create_vector(&fields);
    let s = fbb.start_table();
    // Little-endian.
    fbb.push_slot::<i16>(slot(0), 0, 0);
    fbb.push_slot_always(slot(1), fields);
    let s = fbb.end_table(s);
    WIPOffset::new(s.value())
}

/// A column's buffers (validity, then offsets and data or data), each
/// padded to 8 bytes in the body; returns their (offset, length).
fn buffers(body: &mut Vec<u8>, values: &Values) -> Vec<(i64, i64)> {
    let mut spans = vec![(body.len() as i64, 0)];
    let put = |body: &mut Vec<u8>, bytes: &[u8]| {
        let at = body.len();
        body.extend(bytes);
        body.resize(body.len().next_multiple_of(8), 0);
        (at as i64, bytes.len() as i64)
    };
    let le = |v: &mut dyn Iterator<Item = Vec<u8>>| -> Vec<u8> { v.flatten().collect() };
    match values {
        Values::F32(v) => spans.push(put(
            body,
            &le(&mut v.iter().map(|x| x.to_le_bytes().to_vec())),
        )),
        Values::F64(v) => spans.push(put(
            body,
            &le(&mut v.iter().map(|x| x.to_le_bytes().to_vec())),
        )),
        Values::Int { bits, values, .. } => {
            let width = usize::from(*bits / 8);
            let bytes: Vec<u8> = values
                .iter()
                .flat_map(|x| x.to_le_bytes()[..width].to_vec())
                .collect();
            spans.push(put(body, &bytes));
        }
        Values::Time(v) => spans.push(put(
            body,
            &le(&mut v.iter().map(|x| x.to_le_bytes().to_vec())),
        )),
        Values::Text(v) => {
            let mut offsets = Vec::with_capacity((v.len() + 1) * 4);
            let mut data = Vec::new();
            offsets.extend(0i32.to_le_bytes());
            for s in v {
                data.extend(s.as_bytes());
                offsets.extend((data.len() as i32).to_le_bytes());
            }
            spans.push(put(body, &offsets));
            spans.push(put(body, &data));
        }
        Values::Bool(v) => {
            let mut bits = vec![0u8; v.len().div_ceil(8)];
            for (i, &b) in v.iter().enumerate() {
                if b {
                    bits[i / 8] |= 1 << (i % 8);
                }
            }
            spans.push(put(body, &bits));
        }
    }
    spans
}

/// A vector of 16-byte structs of two longs (FieldNode, Buffer).
fn pairs<'a>(
    fbb: &mut FlatBufferBuilder<'a>,
    list: &[(i64, i64)],
) -> WIPOffset<flatbuffers::UnionWIPOffset> {
    fbb.start_vector::<i64>(list.len() * 2);
    // Built back to front: the last struct's second field first.
    for &(a, b) in list.iter().rev() {
        fbb.push(b);
        fbb.push(a);
    }
    let v = fbb.end_vector::<i64>(list.len());
    WIPOffset::new(v.value())
}

fn stream(columns: &[Column]) -> Vec<u8> {
    let rows = columns.first().map_or(0, |c| c.values.len());
    let mut body = Vec::new();
    let mut spans = Vec::new();
    for c in columns {
        spans.extend(buffers(&mut body, &c.values));
    }
    let nodes: Vec<(i64, i64)> = columns.iter().map(|_| (rows as i64, 0)).collect();
    let mut out = Vec::with_capacity(body.len() + 1024);
    message(&mut out, HEADER_SCHEMA, |fbb| schema(fbb, columns), &[]);
    message(
        &mut out,
        HEADER_RECORD_BATCH,
        |fbb| {
            let nodes = pairs(fbb, &nodes);
            let buffers = pairs(fbb, &spans);
            let r = fbb.start_table();
            fbb.push_slot::<i64>(slot(0), rows as i64, 0);
            fbb.push_slot_always(slot(1), nodes);
            fbb.push_slot_always(slot(2), buffers);
            let r = fbb.end_table(r);
            WIPOffset::new(r.value())
        },
        &body,
    );
    // End of stream.
    out.extend(0xFFFF_FFFFu32.to_le_bytes());
    out.extend(0u32.to_le_bytes());
    out
}

fn encode(data: Data) -> ApiResult<Built> {
    let out = stream(&columns(&data)?);
    Ok(Built {
        bytes: out,
        filename: None,
    })
}
