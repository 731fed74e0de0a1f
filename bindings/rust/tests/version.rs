//! The run-time version check: every entry point that hands libfmha a
//! struct refuses a library whose version does not match the header this
//! crate mirrors, before the call. `version_compatible`'s rule is unit-tested
//! in src/lib.rs with made-up numbers; here the test binary re-runs itself
//! with an LD_PRELOAD shim whose `fmha_version()` reports another release,
//! so the real library sees each entry point's check (or lack of one).
//! Needs a C compiler (`$CC`, default `cc`) and the glibc loader.

use core::ptr;
use fmha::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Set in the child process: the version the shim reports.
const SHIM_VERSION: &str = "FMHA_SHIM_VERSION";

/// The shim: `fmha_version()` returning `$FMHA_SHIM_VERSION`. It has no
/// symbol versions, so the loader lets it stand in for libfmha's versioned
/// `fmha_version`. Built once: the tests run on parallel threads.
fn shim() -> &'static Path {
    static SHIM: OnceLock<PathBuf> = OnceLock::new();
    SHIM.get_or_init(build_shim)
}

fn build_shim() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("version_shim");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("version_shim.c");
    let lib = dir.join("libfmha_version_shim.so");
    std::fs::write(
        &src,
        "#include <stdint.h>\n#include <stdlib.h>\n\
         uint32_t fmha_version(void) { return (uint32_t)strtoul(getenv(\"FMHA_SHIM_VERSION\"), 0, 10); }\n",
    )
    .unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let out = Command::new(&cc)
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("cannot run C compiler `{cc}`: {e}"));
    assert!(out.status.success(), "C compiler failed:\n{}", String::from_utf8_lossy(&out.stderr));
    lib
}

/// Runs `test` (a test of this file) in a child process whose libfmha
/// reports `reported` as its version.
fn run_child(test: &str, reported: u32) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env("LD_PRELOAD", shim())
        .env(SHIM_VERSION, reported.to_string())
        .output()
        .unwrap();
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "child `{test}` with version {reported} failed:\n{log}");
    assert!(log.contains("child ran"), "child `{test}` did not run its checks:\n{log}");
}

/// The version the shim reports in a child; `None` in the parent.
fn reported() -> Option<u32> {
    std::env::var(SHIM_VERSION).ok().map(|v| v.parse().unwrap())
}

/// Every public entry point that passes the library a struct, called with
/// throwaway arguments the library would reject anyway (no driver needed).
fn entry_points() -> Vec<(&'static str, Result<()>)> {
    let desc = Descriptor::from_raw(sys::fmha_descriptor {
        version: sys::FMHA_DESCRIPTOR_VERSION,
        ..Default::default()
    });
    let merge = MergeDescriptor::from_raw(sys::fmha_merge_descriptor {
        version: sys::FMHA_MERGE_DESCRIPTOR_VERSION,
        ..Default::default()
    });
    vec![
        ("Descriptor::new", Descriptor::new().map(drop)),
        ("strides", strides(Layout::Bshd, 16, 2, 64).map(drop)),
        ("check_support", check_support(&desc, SM_ANY)),
        ("Plan::new", Plan::new(&desc).map(drop)),
        ("check_block_table", check_block_table(&desc, &[], None)),
        ("MergeDescriptor::new", MergeDescriptor::new().map(drop)),
        ("MergePlan::new", MergePlan::new(&merge).map(drop)),
        ("Tensors::new", Tensors::new(ptr::null(), ptr::null(), ptr::null(), ptr::null_mut()).map(drop)),
    ]
}

#[test]
fn loaded_library_matches_the_mirrored_header() {
    if reported().is_some() {
        return; // a child runs only the test it was started for
    }
    assert_eq!(check_library_version(), Ok(()));
}

#[test]
fn another_minor_release_is_refused_before_any_struct_is_passed() {
    match reported() {
        None => run_child("another_minor_release_is_refused_before_any_struct_is_passed", 200),
        Some(v) => expect_refused(v, "0.2.0"),
    }
}

#[test]
fn another_major_release_is_refused_before_any_struct_is_passed() {
    match reported() {
        None => run_child("another_major_release_is_refused_before_any_struct_is_passed", 10100),
        Some(v) => expect_refused(v, "1.1.0"),
    }
}

#[test]
fn another_patch_release_is_accepted() {
    match reported() {
        None => run_child("another_patch_release_is_accepted", sys::FMHA_VERSION_NUMBER + 7),
        Some(v) => {
            assert_eq!(version(), v, "the shim did not replace fmha_version");
            assert_eq!(check_library_version(), Ok(()));
            Descriptor::new().expect("a patch release keeps the struct layouts");
            Tensors::new(ptr::null(), ptr::null(), ptr::null(), ptr::null_mut()).unwrap();
            println!("child ran");
        }
    }
}

/// In a child whose library reports `v` (printed `name`): every entry point
/// fails with VersionMismatch naming both versions, and so does the check.
fn expect_refused(v: u32, name: &str) {
    assert_eq!(version(), v, "the shim did not replace fmha_version");
    let mirrored = format!("libfmha {}.{}", sys::FMHA_VERSION_MAJOR, sys::FMHA_VERSION_MINOR);
    let mut results = entry_points();
    results.push(("check_library_version", check_library_version()));
    for (entry, result) in results {
        let err = result.expect_err(entry);
        assert_eq!(err.status, Status::VersionMismatch, "{entry}: {err}");
        assert!(err.message.contains(&format!("libfmha is {name}")), "{entry}: {err}");
        assert!(err.message.contains(&mirrored), "{entry}: {err}");
    }
    println!("child ran");
}
