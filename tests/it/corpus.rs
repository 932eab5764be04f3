//! Reads every array of the fixture corpus (written by zarr-python, numcodecs,
//! TensorStore and by hand; see tests/interop/make_fixtures.py) and compares
//! whole arrays and a set of selections bit for bit with the expected values.
//!
//! The corpus is made by the test script; without it this test says so and
//! passes, unless ZARRD_REQUIRE_CORPUS is set (as the test script does).

use std::path::PathBuf;

use base64::Engine;
use serde_json::Value;
use zarrd::store::{node_path, Store};
use zarrd::zarr::array::extract_field;
use zarrd::zarr::selection::Resolved;
use zarrd::zarr::{ArrayBytes, Hierarchy, Selection};

fn corpus_dir() -> Option<PathBuf> {
    let dir = std::env::var("ZARRD_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/corpus")
        });
    if dir.join("manifest.json").exists() {
        return Some(dir);
    }
    if std::env::var_os("ZARRD_REQUIRE_CORPUS").is_some() {
        panic!(
            "no fixture corpus at {}; run tests/interop/make_fixtures.py",
            dir.display()
        );
    }
    eprintln!(
        "skipping: no fixture corpus at {} (the test script makes it)",
        dir.display()
    );
    None
}

fn expected(dir: &std::path::Path, entry: &Value) -> ArrayBytes {
    let file = dir.join(entry["expected"].as_str().unwrap());
    match entry["kind"].as_str().unwrap() {
        "fixed" => ArrayBytes::Fixed(std::fs::read(file).unwrap()),
        kind => {
            let values: Vec<String> =
                serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
            ArrayBytes::Variable(
                values
                    .into_iter()
                    .map(|v| {
                        if kind == "str" {
                            v.into_bytes()
                        } else {
                            base64::engine::general_purpose::STANDARD.decode(v).unwrap()
                        }
                    })
                    .collect(),
            )
        }
    }
}

/// The selection computed element by element from the whole array: an
/// independent reference for the chunked read path.
fn reference(whole: &ArrayBytes, shape: &[u64], sel: &Resolved, elem: usize) -> ArrayBytes {
    let strides: Vec<u64> = (0..shape.len())
        .map(|d| shape[d + 1..].iter().product())
        .collect();
    let sources: Vec<u64> = match sel {
        Resolved::Points { coords } => coords
            .iter()
            .map(|c| c.iter().zip(&strides).map(|(i, s)| i * s).sum())
            .collect(),
        Resolved::Orthogonal(dims) => {
            let mut out = vec![0u64];
            for (d, dim) in dims.iter().enumerate() {
                let idx: Vec<u64> = (0..dim.indices.len()).map(|i| dim.indices.get(i)).collect();
                let stride = strides[d];
                out = out
                    .iter()
                    .flat_map(|&base| idx.iter().map(move |i| base + i * stride))
                    .collect();
            }
            out
        }
    };
    match whole {
        ArrayBytes::Fixed(b) => ArrayBytes::Fixed(
            sources
                .iter()
                .flat_map(|&s| b[s as usize * elem..(s as usize + 1) * elem].to_vec())
                .collect(),
        ),
        ArrayBytes::Variable(v) => {
            ArrayBytes::Variable(sources.iter().map(|&s| v[s as usize].clone()).collect())
        }
    }
}

fn selections(shape: &[u64]) -> Vec<Selection> {
    let mut out = vec![];
    if shape.is_empty() || shape.contains(&0) {
        return out;
    }
    let n = shape[0] as i64;
    for s in [
        "-1",
        "1:",
        "::2",
        "1:-1:3",
        "...,-1",
        &format!("[{},0,{}]", n - 1, n / 2),
    ] {
        out.push(Selection::parse(s).unwrap());
    }
    if shape.len() >= 2 {
        out.push(Selection::parse("1:4,::3").unwrap());
        out.push(Selection::parse(&format!("{},[1,0]", n / 2)).unwrap());
    }
    let last: Vec<i64> = shape.iter().map(|&s| s as i64 - 1).collect();
    let mid: Vec<i64> = shape.iter().map(|&s| (s / 2) as i64).collect();
    out.push(Selection::Points(vec![last, vec![0; shape.len()], mid]));
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn corpus_reads_bit_for_bit() {
    let Some(dir) = corpus_dir() else { return };
    let manifest: Vec<Value> =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert!(manifest.len() > 100, "corpus is incomplete");
    let mut failures = Vec::new();
    let mut checked = 0;
    for entry in &manifest {
        let name = format!(
            "{}/{}",
            entry["store"].as_str().unwrap(),
            entry["path"].as_str().unwrap()
        );
        let store =
            Store::open(dir.join(entry["store"].as_str().unwrap()).to_str().unwrap()).unwrap();
        let hierarchy = Hierarchy::new(store);
        let path = node_path(entry["path"].as_str().unwrap()).unwrap();
        let array = match hierarchy.array(&path).await {
            Ok(a) => a,
            Err(e) => {
                failures.push(format!("{name}: open: {e}"));
                continue;
            }
        };
        let shape = array.shape().to_vec();
        let want_shape: Vec<u64> = entry["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        if shape != want_shape {
            failures.push(format!("{name}: shape {shape:?}, expected {want_shape:?}"));
            continue;
        }
        let want = expected(&dir, entry);
        let all = Selection::all().resolve(&shape).unwrap();
        match array.read(&all).await {
            Ok(got) if got == want => {}
            Ok(got) => {
                failures.push(format!(
                    "{name}: whole array differs ({} vs {} elements)",
                    got.len(array.elem_size().max(1)),
                    want.len(array.elem_size().max(1))
                ));
                continue;
            }
            Err(e) => {
                failures.push(format!("{name}: read: {e}"));
                continue;
            }
        }
        checked += 1;
        for sel in selections(&shape) {
            let resolved = sel.resolve(&shape).unwrap();
            let expect = reference(&want, &shape, &resolved, array.elem_size());
            match array.read(&resolved).await {
                Ok(got) if got == expect => {}
                Ok(_) => failures.push(format!("{name}: selection {sel:?} differs")),
                Err(e) => failures.push(format!("{name}: selection {sel:?}: {e}")),
            }
        }
        if let zarrd::zarr::DataType::Structured(fields) = &array.metadata().dtype {
            let field = &fields[fields.len() - 1];
            let got = extract_field(
                &array.read(&all).await.unwrap(),
                &array.metadata().dtype,
                &field.name,
            )
            .unwrap();
            let want_field = extract_field(&want, &array.metadata().dtype, &field.name).unwrap();
            if got.data != want_field.data {
                failures.push(format!("{name}: field {} differs", field.name));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} arrays failed:\n{}",
        failures.len(),
        manifest.len(),
        failures.join("\n")
    );
    eprintln!("checked {checked} arrays");
}
