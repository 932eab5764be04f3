//! Builds the ZFP library (vendored C source, `vendor/zfp`, BSD-3-Clause)
//! that the `zfpy` codec calls: with the C compiler alone, so building
//! zarrd needs no CMake or libclang.

fn main() {
    let root = std::path::Path::new("vendor/zfp");
    let mut sources: Vec<_> = std::fs::read_dir(root.join("src"))
        .expect("vendor/zfp/src")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .collect();
    sources.sort();
    cc::Build::new()
        .include(root.join("include"))
        .files(&sources)
        // ZFP's own default; a stream's word size is part of its format,
        // and zfpy's wheels use 64 bits.
        .define("BIT_STREAM_WORD_TYPE", "uint64")
        .opt_level(3)
        .warnings(false)
        .compile("zfp");
    println!("cargo:rerun-if-changed=vendor/zfp");
    println!("cargo:rerun-if-changed=build.rs");
}
