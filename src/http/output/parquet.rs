//! Parquet: the selection's table in long form (see [`super::table`]) as
//! one row group, zstd-compressed; times as `TIMESTAMP(NANOS)`, integers
//! with their width and sign, so pandas and pyarrow read the dtypes back.

use std::sync::Arc;

use axum::http::StatusCode;
use parquet::basic::{Compression, LogicalType, Repetition, TimeUnit, Type as Physical};
use parquet::data_type::{
    BoolType, ByteArray, ByteArrayType, DoubleType, FloatType, Int32Type, Int64Type,
};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;

use super::table::{columns, Column, Values};
use super::{Built, File};
use crate::http::error::{ApiError, ApiResult};
use crate::service::Data;

pub const PARQUET: File = File {
    name: "parquet",
    content_type: "application/vnd.apache.parquet",
    expansion: 4,
    build: encode,
};

fn internal(e: parquet::errors::ParquetError) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        format!("writing Parquet: {e}"),
    )
}

fn field(column: &Column) -> Result<Type, parquet::errors::ParquetError> {
    let (physical, logical) = match &column.values {
        Values::F32(_) => (Physical::FLOAT, None),
        Values::F64(_) => (Physical::DOUBLE, None),
        Values::Int { bits, signed, .. } if *bits <= 32 => (
            Physical::INT32,
            Some(LogicalType::integer(*bits as i8, *signed)),
        ),
        Values::Int { signed, .. } => (Physical::INT64, Some(LogicalType::integer(64, *signed))),
        Values::Time(_) => (
            Physical::INT64,
            Some(LogicalType::timestamp(false, TimeUnit::NANOS)),
        ),
        Values::Text(_) => (Physical::BYTE_ARRAY, Some(LogicalType::String)),
        Values::Bool(_) => (Physical::BOOLEAN, None),
    };
    Type::primitive_type_builder(&column.name, physical)
        .with_repetition(Repetition::REQUIRED)
        .with_logical_type(logical)
        .build()
}

fn write(columns: &[Column]) -> Result<Vec<u8>, parquet::errors::ParquetError> {
    let fields = columns
        .iter()
        .map(|c| field(c).map(Arc::new))
        .collect::<Result<Vec<_>, _>>()?;
    let schema = Arc::new(
        Type::group_type_builder("schema")
            .with_fields(fields)
            .build()?,
    );
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::ZSTD(Default::default()))
            .build(),
    );
    let mut out = Vec::new();
    let mut writer = SerializedFileWriter::new(&mut out, schema, props)?;
    let mut group = writer.next_row_group()?;
    for column in columns {
        let Some(mut w) = group.next_column()? else {
            break;
        };
        match &column.values {
            Values::F32(v) => {
                w.typed::<FloatType>().write_batch(v, None, None)?;
            }
            Values::F64(v) => {
                w.typed::<DoubleType>().write_batch(v, None, None)?;
            }
            Values::Int { bits, values, .. } if *bits <= 32 => {
                let narrow: Vec<i32> = values.iter().map(|&x| x as i32).collect();
                w.typed::<Int32Type>().write_batch(&narrow, None, None)?;
            }
            Values::Int { values, .. } | Values::Time(values) => {
                w.typed::<Int64Type>().write_batch(values, None, None)?;
            }
            Values::Text(v) => {
                let bytes: Vec<ByteArray> = v.iter().map(|s| ByteArray::from(s.as_str())).collect();
                w.typed::<ByteArrayType>().write_batch(&bytes, None, None)?;
            }
            Values::Bool(v) => {
                w.typed::<BoolType>().write_batch(v, None, None)?;
            }
        }
        w.close()?;
    }
    group.close()?;
    writer.close()?;
    Ok(out)
}

fn encode(data: Data) -> ApiResult<Built> {
    let columns = columns(&data)?;
    let out = write(&columns).map_err(internal)?;
    Ok(Built {
        bytes: out,
        filename: None,
    })
}
