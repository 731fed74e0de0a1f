//! Tells rustc where to find libfmha.so. No pkg-config, no external crates.
//!
//! Search order for the link directory:
//!   1. `FMHA_LIB_DIR`                    (directory holding libfmha.so)
//!   2. `FMHA_PREFIX`/lib, lib64          (an install prefix)
//!   3. `FMHA_BUILD_DIR`                  (a CMake build directory)
//!   4. /usr/local/lib, /usr/local/lib64  (default install location)
//!
//! The system linker's own default paths (/usr/lib, ...) are always searched.

use std::env;
use std::path::{Path, PathBuf};

fn has_lib(dir: &Path) -> bool {
    dir.join("libfmha.so").exists()
}

fn main() {
    for var in ["FMHA_LIB_DIR", "FMHA_PREFIX", "FMHA_BUILD_DIR"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=build.rs");

    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(dir) = env::var_os("FMHA_LIB_DIR") {
        // Explicit request: use it even if the library is not there (yet).
        candidates.push(PathBuf::from(dir));
    } else {
        if let Some(prefix) = env::var_os("FMHA_PREFIX") {
            let prefix = PathBuf::from(prefix);
            candidates.push(prefix.join("lib"));
            candidates.push(prefix.join("lib64"));
        }
        if let Some(build) = env::var_os("FMHA_BUILD_DIR") {
            candidates.push(PathBuf::from(build));
        }
        candidates.push(PathBuf::from("/usr/local/lib"));
        candidates.push(PathBuf::from("/usr/local/lib64"));
        let explicit = env::var_os("FMHA_PREFIX").is_some() || env::var_os("FMHA_BUILD_DIR").is_some();
        // Keep only directories that really hold the library, but if nothing
        // matches, still pass the explicitly named ones so the linker error
        // shows where we looked.
        let found: Vec<PathBuf> = candidates.iter().filter(|d| has_lib(d)).cloned().collect();
        if !found.is_empty() || !explicit {
            candidates = found;
        }
    }

    for dir in &candidates {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
    if let Some(first) = candidates.first() {
        // Exposed to dependents as DEP_FMHA_LIB_DIR (we declare `links = "fmha"`).
        println!("cargo:lib_dir={}", first.display());
    }
    // Linking itself is requested by #[link(name = "fmha")] in src/sys.rs.
}
