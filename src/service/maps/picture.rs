//! Pictures of map layers: the level a picture reads, the elements its
//! pixels sample read as one selection and decoded, the value at a
//! point, and the default colour range.

use super::*;

impl Service {
    /// The selection of a level that fixes the layer's other dimensions
    /// as `query` says (the first position of each it leaves out) and
    /// takes `y` and `x` as given.
    pub(super) async fn fixed(
        &self,
        layer: &MapLayer,
        array: &Array,
        query: &Query,
    ) -> Result<Vec<DimSelector>> {
        let grid = layer.grid();
        let spatial = [&layer.dims[grid.y_dim], &layer.dims[grid.x_dim]];
        let named = query
            .sel
            .iter()
            .map(|(d, _)| d)
            .chain(query.isel.iter().map(|(d, _)| d));
        for dim in named {
            if spatial.contains(&dim) {
                return Err(ServiceError::invalid(
                    "bad_selection",
                    format!("{dim} is a dimension of the map itself: the picture's bounds choose it, not sel.{dim} or isel.{dim}"),
                ));
            }
        }
        let mut dims = if query.selects() {
            match self.label_selection(array, query).await? {
                Selection::Orthogonal(d) => d,
                Selection::Points(_) => {
                    return Err(ServiceError::new(
                        crate::service::ErrorKind::Internal,
                        "internal",
                        "a label selection came back as points",
                    ))
                }
            }
        } else {
            vec![DimSelector::all(); layer.dims.len()]
        };
        for (d, sel) in dims.iter_mut().enumerate() {
            if d == grid.y_dim || d == grid.x_dim {
                continue;
            }
            let name = &layer.dims[d];
            let given = query.sel.iter().any(|(n, _)| n == name)
                || query.isel.iter().any(|(n, _)| n == name);
            match sel {
                DimSelector::Index(_) => {}
                _ if !given => *sel = DimSelector::Index(0),
                _ => {
                    return Err(ServiceError::invalid(
                        "bad_selection",
                        format!("a map shows one {name}: select one value (sel.{name}=LABEL or isel.{name}=INDEX), not a range or list"),
                    ))
                }
            }
        }
        Ok(dims)
    }

    /// Refuses a query whose other dimensions a map could not show (a
    /// label no coordinate holds, a range), as its pictures would.
    pub async fn check_map_query(&self, layer: &MapLayer, query: &Query) -> Result<()> {
        let array = self.array(&layer.levels[0].path).await?;
        self.fixed(layer, &array, query).await.map(drop)
    }

    /// A picture of `layer` as `target` frames it, with its other
    /// dimensions fixed by `query`, from the pyramid level whose cells are
    /// the largest no larger than the picture's pixels.
    pub async fn render_map(
        &self,
        layer: &MapLayer,
        query: &Query,
        target: &Target,
        resampling: Resampling,
    ) -> Result<Raster> {
        let pixels = target.width as u64 * target.height as u64;
        if pixels == 0 || pixels > MAX_PICTURE_PIXELS {
            return Err(ServiceError::invalid(
                "bad_size",
                format!(
                    "a picture of {} x {} pixels: give 1 to {MAX_PICTURE_PIXELS} pixels in all",
                    target.width, target.height
                ),
            ));
        }
        let per_pixel = match resampling {
            Resampling::Nearest => PIXEL_BYTES,
            Resampling::Bilinear => BILINEAR_PIXEL_BYTES,
        };
        let reservation = self
            .budget
            .reserve(pixels * per_pixel, "this picture")
            .await?;
        let grids: Vec<&GeoGrid> = layer.levels.iter().map(|l| &l.grid).collect();
        let level = warp::level_for(&grids, target);
        let grid = &layer.levels[level].grid;
        let array = self.array(&layer.levels[level].path).await?;
        let fixed = self.fixed(layer, &array, query).await?;
        let values = if resampling == Resampling::Nearest && target.crs.separable_with(&grid.crs) {
            // Degrees and Web Mercator: a picture's rows read grid rows and
            // its columns grid columns, so its pixels are a table of them.
            let (rows, cols) = warp::axes(grid, target);
            let (h, w) = grid.shape();
            let rows: Vec<Option<u64>> = rows
                .iter()
                .map(|r| r.map(|r| warp::nearest(r, h)))
                .collect();
            let cols: Vec<Option<u64>> = cols
                .iter()
                .map(|c| c.map(|c| warp::nearest(c, w)))
                .collect();
            self.table_values(&array, grid, &fixed, &rows, &cols)
                .await?
        } else {
            // Projecting every pixel is CPU work: on the decoding pool.
            let (g, t) = (grid.clone(), target.clone());
            let taps = run_blocking(move || {
                let located = warp::locate(&g, &t);
                Ok(warp::taps(&g, &located, resampling))
            })
            .await?;
            let values = self.tap_values(&array, grid, &fixed, &taps).await?;
            warp::resample(target.pixels(), &taps, |i| values[i])
        };
        Ok(Raster {
            width: target.width,
            height: target.height,
            values,
            level,
            reservation,
        })
    }

    /// The values of a picture whose row `r` shows grid row `rows[r]` and
    /// column `c` grid column `cols[c]` (`None`: off the grid), read as one
    /// selection of those rows and columns.
    async fn table_values(
        &self,
        array: &Array,
        grid: &GeoGrid,
        fixed: &[DimSelector],
        rows: &[Option<u64>],
        cols: &[Option<u64>],
    ) -> Result<Vec<f64>> {
        let mut out = vec![f64::NAN; rows.len() * cols.len()];
        let distinct = |v: &[Option<u64>]| {
            let mut d: Vec<u64> = v.iter().flatten().copied().collect();
            d.sort_unstable();
            d.dedup();
            d
        };
        let (ur, uc) = (distinct(rows), distinct(cols));
        if ur.is_empty() || uc.is_empty() {
            return Ok(out);
        }
        let chunk = array.read_chunk_shape();
        let (cy, cx) = (chunk[grid.y_dim].max(1), chunk[grid.x_dim].max(1));
        let chunks_across = |v: &[u64], c: u64| {
            let mut n: Vec<u64> = v.iter().map(|i| i / c).collect();
            n.dedup();
            n.len()
        };
        let chunks = chunks_across(&ur, cy) * chunks_across(&uc, cx);
        if chunks > MAX_PICTURE_CHUNKS {
            return Err(too_many_chunks(array, chunks));
        }
        let mut dims = fixed.to_vec();
        dims[grid.y_dim] = DimSelector::List(ur.iter().map(|&r| r as i64).collect());
        dims[grid.x_dim] = DimSelector::List(uc.iter().map(|&c| c as i64).collect());
        let decoded = self
            .read_decoded(array, Selection::Orthogonal(dims))
            .await?;
        let (row_at, col_at) = (Positions::of(&ur), Positions::of(&uc));
        let x_first = grid.x_dim < grid.y_dim;
        let col_pos: Vec<Option<usize>> = cols.iter().map(|c| c.map(|c| col_at.get(c))).collect();
        for (r, row) in rows.iter().enumerate() {
            let Some(row) = row else { continue };
            let pr = row_at.get(*row);
            let line = &mut out[r * cols.len()..(r + 1) * cols.len()];
            for (px, pc) in line.iter_mut().zip(&col_pos) {
                if let Some(pc) = pc {
                    *px = if x_first {
                        decoded[pc * ur.len() + pr]
                    } else {
                        decoded[pr * uc.len() + pc]
                    };
                }
            }
        }
        Ok(out)
    }

    /// A selection's elements, decoded.
    pub(super) async fn read_decoded(
        &self,
        array: &Array,
        selection: Selection,
    ) -> Result<Vec<f64>> {
        let data = self
            .read_array(
                array.clone(),
                ReadRequest {
                    selection,
                    field: None,
                    fixed_size_only: true,
                    encoding_per_element: 0,
                },
                Residence::InMemory { expansion: 1 },
            )
            .await?;
        decoded_values(array, &data)
    }

    /// The decoded value at each tap, read in one selection: the rows and
    /// columns they share when that is compact, else the elements alone.
    async fn tap_values(
        &self,
        array: &Array,
        grid: &GeoGrid,
        fixed: &[DimSelector],
        taps: &[Tap],
    ) -> Result<Vec<f64>> {
        if taps.is_empty() {
            return Ok(Vec::new());
        }
        let chunk = array.read_chunk_shape();
        let (cy, cx) = (chunk[grid.y_dim].max(1), chunk[grid.x_dim].max(1));
        let mut chunks: Vec<(u64, u64)> = taps.iter().map(|t| (t.row / cy, t.col / cx)).collect();
        chunks.sort_unstable();
        chunks.dedup();
        if chunks.len() > MAX_PICTURE_CHUNKS {
            return Err(too_many_chunks(array, chunks.len()));
        }
        let mut rows: Vec<u64> = taps.iter().map(|t| t.row).collect();
        let mut cols: Vec<u64> = taps.iter().map(|t| t.col).collect();
        rows.sort_unstable();
        rows.dedup();
        cols.sort_unstable();
        cols.dedup();
        let compact = (rows.len() * cols.len()) as u64 <= 2 * taps.len() as u64 + 65_536;
        let fixed_index = |d: usize| match &fixed[d] {
            DimSelector::Index(i) => *i,
            _ => 0,
        };
        let selection = if compact {
            let mut dims = fixed.to_vec();
            dims[grid.y_dim] = DimSelector::List(rows.iter().map(|&r| r as i64).collect());
            dims[grid.x_dim] = DimSelector::List(cols.iter().map(|&c| c as i64).collect());
            Selection::Orthogonal(dims)
        } else {
            let points = taps
                .iter()
                .map(|t| {
                    (0..fixed.len())
                        .map(|d| match d {
                            d if d == grid.y_dim => t.row as i64,
                            d if d == grid.x_dim => t.col as i64,
                            d => fixed_index(d),
                        })
                        .collect()
                })
                .collect();
            Selection::Points(points)
        };
        let decoded = self.read_decoded(array, selection).await?;
        if !compact {
            return Ok(decoded);
        }
        // Rows then columns, in the order the dimensions come.
        let x_first = grid.x_dim < grid.y_dim;
        let (row_at, col_at) = (Positions::of(&rows), Positions::of(&cols));
        Ok(taps
            .iter()
            .map(|t| {
                let (r, c) = (row_at.get(t.row), col_at.get(t.col));
                let i = if x_first {
                    c * rows.len() + r
                } else {
                    r * cols.len() + c
                };
                decoded[i]
            })
            .collect())
    }

    /// The value of `layer` at (`x`, `y`) of `crs` (its finest level),
    /// `None` off the grid.
    pub async fn map_value(
        &self,
        layer: &MapLayer,
        query: &Query,
        crs: &Crs,
        (x, y): (f64, f64),
    ) -> Result<Option<PointValue>> {
        let grid = layer.grid();
        let mut p = [(x, y)];
        crs.transform(&grid.crs, &mut p);
        let Some((r, c)) = grid.locate(p[0]) else {
            return Ok(None);
        };
        let tap = warp::taps(grid, &[Some((r, c))], Resampling::Nearest);
        // The finest level, whichever level the layer was asked by.
        let array = self.array(&layer.levels[0].path).await?;
        let fixed = self.fixed(layer, &array, query).await?;
        let value = self.tap_values(&array, grid, &fixed, &tap).await?[0];
        let shape = array.shape();
        let index = fixed
            .iter()
            .enumerate()
            .map(|(d, s)| match s {
                _ if d == grid.y_dim => tap[0].row,
                _ if d == grid.x_dim => tap[0].col,
                // Counted from the end, as numpy counts it.
                DimSelector::Index(i) if *i < 0 => shape[d].saturating_sub(i.unsigned_abs()),
                DimSelector::Index(i) => *i as u64,
                _ => 0,
            })
            .collect();
        Ok(Some(PointValue {
            value,
            index,
            x: grid.x.values()[tap[0].col as usize],
            y: grid.y.values()[tap[0].row as usize],
        }))
    }

    /// The range a map's colours span when the request names none: the
    /// layer's `valid_min`/`valid_max` (or `valid_range`), else the 2nd to
    /// 98th percentile of its coarsest level (at most 512 x 512 of it, by
    /// stride) at the same other dimensions, so every tile of a map uses
    /// the same colours. `positive`: of the values above 0 only (for a log
    /// scale).
    pub async fn map_range(
        &self,
        layer: &MapLayer,
        query: &Query,
        positive: bool,
    ) -> Result<(f64, f64)> {
        let attr = |k: &str| layer.attributes.get(k).and_then(cf::attr_number);
        let range = layer
            .attributes
            .get("valid_range")
            .and_then(Value::as_array);
        let (lo, hi) = match range {
            Some(r) if r.len() == 2 => (cf::attr_number(&r[0]), cf::attr_number(&r[1])),
            _ => (attr("valid_min"), attr("valid_max")),
        };
        if let (Some(lo), Some(hi)) = (lo, hi) {
            if !positive || lo > 0.0 {
                return Ok((lo, hi));
            }
        }
        let coarsest = layer.levels.last().unwrap_or(&layer.levels[0]);
        let array = self.array(&coarsest.path).await?;
        let mut dims = self.fixed(layer, &array, query).await?;
        let key = format!(
            "{}\u{0}{}\u{0}{positive}\u{0}{dims:?}",
            coarsest.path,
            self.cache.subtree_version(&coarsest.path)
        );
        if let Some(kept) = self.maps.ranges.get(&key).await {
            return Ok(kept);
        }
        let grid = &coarsest.grid;
        let (shape, chunk) = (array.shape(), array.read_chunk_shape());
        for d in [grid.y_dim, grid.x_dim] {
            dims[d] = DimSelector::List(sample(shape[d], chunk[d]));
        }
        let mut finite: Vec<f64> = self
            .read_decoded(&array, Selection::Orthogonal(dims))
            .await?
            .into_iter()
            .filter(|v| v.is_finite() && (!positive || *v > 0.0))
            .collect();
        let found = if finite.is_empty() {
            (0.0, 1.0)
        } else {
            finite.sort_by(f64::total_cmp);
            let at = |q: f64| finite[((finite.len() - 1) as f64 * q).round() as usize];
            (at(0.02), at(0.98))
        };
        self.maps.ranges.insert(key, found).await;
        Ok(found)
    }
}

/// At most 512 positions along a dimension of `len` in chunks of `chunk`,
/// spread over at most 32 of its chunks: a sample of a level for its
/// range that decodes at most 32 x 32 chunks, however the array is cut.
fn sample(len: u64, chunk: u64) -> Vec<i64> {
    let chunk = chunk.max(1);
    let chunks = len.div_ceil(chunk);
    let picked = chunks.min(32);
    let per_chunk = (512 / picked).max(1);
    let mut out = Vec::new();
    for k in 0..picked {
        let c = k * chunks / picked;
        let (start, end) = (c * chunk, ((c + 1) * chunk).min(len));
        let step = (end - start).div_ceil(per_chunk).max(1);
        out.extend((start..end).step_by(step as usize).map(|i| i as i64));
    }
    out
}

fn too_many_chunks(array: &Array, chunks: usize) -> ServiceError {
    ServiceError::too_large(format!(
        "this picture of '{}' would decode {chunks} chunks, more than {MAX_PICTURE_CHUNKS}: zoom in, or give the array overviews (a multiscales pyramid) for pictures this wide",
        array.path()
    ))
}

/// Where each index is in a sorted list of distinct indices: a table
/// over their span when it is short (a tile's rows are), else a search.
struct Positions<'a> {
    sorted: &'a [u64],
    first: u64,
    table: Vec<u32>,
}

impl<'a> Positions<'a> {
    fn of(sorted: &'a [u64]) -> Self {
        let first = sorted.first().copied().unwrap_or(0);
        let span = sorted.last().map_or(0, |&l| l - first + 1);
        let table = if span <= 1 << 20 {
            let mut t = vec![0u32; span as usize];
            for (i, &v) in sorted.iter().enumerate() {
                t[(v - first) as usize] = i as u32;
            }
            t
        } else {
            Vec::new()
        };
        Positions {
            sorted,
            first,
            table,
        }
    }

    fn get(&self, v: u64) -> usize {
        if self.table.is_empty() {
            self.sorted.binary_search(&v).unwrap_or(0)
        } else {
            self.table[(v - self.first) as usize] as usize
        }
    }
}

/// A read's elements as the numbers they mean: CF-decoded, NaN where
/// missing (`_FillValue`, `missing_value`, a v2 array's fill value), as
/// xarray decodes them.
fn decoded_values(array: &Array, data: &crate::service::Data) -> Result<Vec<f64>> {
    let crate::service::Content::Whole(ArrayBytes::Fixed(bytes)) = &data.content else {
        return Err(ServiceError::new(
            crate::service::ErrorKind::Internal,
            "internal",
            "a map read came back streamed",
        ));
    };
    let meta = array.metadata();
    let mut values = Vec::with_capacity(bytes.len() / meta.dtype.size().unwrap_or(1).max(1));
    cf::numbers(&meta.dtype, bytes, &mut values).ok_or_else(|| {
        ServiceError::new(
            crate::service::ErrorKind::NotAcceptable,
            "not_numbers",
            format!(
                "'{}' holds {} values; a map draws numbers",
                array.path(),
                meta.dtype.name()
            ),
        )
    })?;
    let packing = Packing::of(meta).map_err(|e| {
        ServiceError::invalid(
            "bad_attributes",
            format!("'{}' cannot be decoded: {e}", array.path()),
        )
    })?;
    for v in &mut values {
        *v = packing.decode(*v);
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::sample;

    #[test]
    fn a_range_sample_touches_at_most_32_chunks_a_dimension() {
        let s = sample(100_000, 100);
        assert!(s.len() <= 544 && s.len() >= 256, "{}", s.len());
        let mut chunks: Vec<i64> = s.iter().map(|i| i / 100).collect();
        chunks.dedup();
        assert_eq!(chunks.len(), 32);
        assert!(s.windows(2).all(|w| w[0] < w[1]) && *s.last().unwrap() < 100_000);
        assert_eq!(sample(10, 100), (0..10).collect::<Vec<i64>>());
        assert_eq!(sample(1000, 1).len(), 32);
    }
}
