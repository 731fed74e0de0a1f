//! ABI drift test: compiles a tiny C program against include/fmha/fmha.h with
//! the system C compiler, runs it, and compares every struct size, field
//! offset, enum value and macro it prints with the Rust declarations in
//! `fmha::sys`. Needs a C compiler (`$CC`, default `cc`), no GPU, no libfmha.

use core::mem::{align_of, offset_of, size_of};
use fmha::sys::*;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

/// The probe's preamble: each macro prints one fact as `key value`, keyed as
/// the Rust side keys it.
const C_PRELUDE: &str = r#"
#include <stdio.h>
#include <stddef.h>
#include <fmha/fmha.h>

#define SIZE(T) printf("sizeof %s %lu\n", #T, (unsigned long)sizeof(T)); \
                printf("alignof %s %lu\n", #T, (unsigned long)_Alignof(T))
#define OFF(T, f) printf("offsetof %s.%s %lu\n", #T, #f, (unsigned long)offsetof(T, f))
#define VAL(x) printf("value %s %lld\n", #x, (long long)(x))
"#;

/// Lists every type, field and constant once and expands to both sides of
/// the comparison: `c_program()`, the C probe that prints each fact from the
/// header, and `rust_side()`, the same facts from `fmha::sys`. A name missing
/// on either side fails to compile there.
macro_rules! abi_facts {
    (
        types: $($ty:ident),+;
        structs: $($st:ident { $($field:ident),+ }),+;
        values: $($c:ident),+;
    ) => {
        fn c_program() -> String {
            let mut body = Vec::new();
            $( body.push(format!("SIZE({});", stringify!($ty))); )+
            $(
                body.push(format!("SIZE({});", stringify!($st)));
                $( body.push(format!("OFF({}, {});", stringify!($st), stringify!($field))); )+
            )+
            $( body.push(format!("VAL({});", stringify!($c))); )+
            format!("{C_PRELUDE}\nint main(void) {{\n    {}\n    return 0;\n}}\n", body.join("\n    "))
        }

        fn rust_side() -> BTreeMap<String, i64> {
            let mut m = BTreeMap::new();
            $(
                m.insert(format!("sizeof {}", stringify!($ty)), size_of::<$ty>() as i64);
                m.insert(format!("alignof {}", stringify!($ty)), align_of::<$ty>() as i64);
            )+
            $(
                m.insert(format!("sizeof {}", stringify!($st)), size_of::<$st>() as i64);
                m.insert(format!("alignof {}", stringify!($st)), align_of::<$st>() as i64);
                $( m.insert(format!("offsetof {}.{}", stringify!($st), stringify!($field)),
                            offset_of!($st, $field) as i64); )+
            )+
            $( m.insert(format!("value {}", stringify!($c)), $c as i64); )+
            m
        }
    };
}

abi_facts! {
    types: fmha_status, fmha_dtype, fmha_mask, fmha_kernel_family, fmha_stream;
    structs:
        fmha_strides { batch, seq, head, dim },
        fmha_descriptor {
            version, dtype, batch, num_q_heads, num_kv_heads, seqlen_q, seqlen_k, head_dim,
            head_dim_v, q_strides, k_strides, v_strides, o_strides, softmax_scale, mask, flags,
            kernel, device, reserved0, window_left, window_right, softcap, reserved1, total_q,
            total_k, num_pages, max_pages_per_seq, page_size, num_splits
        },
        fmha_plan_info {
            version, kernel_family, kernel_name, device, device_sm, image_sm, image_is_ptx,
            tile_m, tile_n, threads_per_cta, shared_memory_bytes, workspace_bytes, num_splits,
            reserved0
        },
        fmha_tensors {
            version, reserved0, q, k, v, o, lse, sinks, cu_seqlens_q, cu_seqlens_k, seqused_k,
            block_table
        },
        fmha_merge_descriptor {
            version, dtype, batch, seqlen_q, num_heads, head_dim, part_strides, o_strides,
            num_parts, flags, device, reserved0
        };
    values:
        FMHA_VERSION_MAJOR, FMHA_VERSION_MINOR, FMHA_VERSION_PATCH, FMHA_VERSION_NUMBER,
        FMHA_STATUS_SUCCESS, FMHA_STATUS_INVALID_ARGUMENT, FMHA_STATUS_NOT_SUPPORTED,
        FMHA_STATUS_VERSION_MISMATCH, FMHA_STATUS_NO_DRIVER, FMHA_STATUS_NO_DEVICE,
        FMHA_STATUS_DRIVER_ERROR, FMHA_STATUS_MISALIGNED, FMHA_STATUS_WORKSPACE_TOO_SMALL,
        FMHA_STATUS_OUT_OF_MEMORY, FMHA_STATUS_NO_KERNEL_IMAGE, FMHA_STATUS_CONTEXT_MISMATCH,
        FMHA_STATUS_INTERNAL_ERROR,
        FMHA_DTYPE_BF16, FMHA_DTYPE_FP16,
        FMHA_MASK_NONE, FMHA_MASK_CAUSAL_TOP_LEFT, FMHA_MASK_CAUSAL_BOTTOM_RIGHT,
        FMHA_KERNEL_AUTO, FMHA_KERNEL_PORTABLE, FMHA_KERNEL_HOPPER, FMHA_KERNEL_DECODE,
        FMHA_FLAG_WRITE_LSE, FMHA_FLAG_SINKS, FMHA_FLAG_VARLEN_Q, FMHA_FLAG_VARLEN_K,
        FMHA_FLAG_SEQUSED_K, FMHA_FLAG_PAGED_KV, FMHA_DESCRIPTOR_VERSION, FMHA_PLAN_INFO_VERSION,
        FMHA_TENSORS_VERSION, FMHA_MERGE_DESCRIPTOR_VERSION, FMHA_MERGE_MAX_PARTS,
        FMHA_SM_ANY, FMHA_SM_CURRENT_DEVICE;
}

fn include_dir() -> PathBuf {
    match std::env::var_os("FMHA_INCLUDE_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../include"),
    }
}

fn c_side() -> BTreeMap<String, i64> {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("abi_probe");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("abi_probe.c");
    let exe = dir.join("abi_probe");
    std::fs::write(&src, c_program()).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let inc = include_dir();
    assert!(inc.join("fmha/fmha.h").exists(), "no fmha/fmha.h under {}", inc.display());
    let out = Command::new(&cc)
        .arg("-std=c11")
        .arg("-Wall")
        .arg("-Werror")
        .arg("-I")
        .arg(&inc)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("cannot run C compiler `{cc}`: {e}"));
    assert!(
        out.status.success(),
        "C compiler failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&exe).output().expect("run abi probe");
    assert!(out.status.success());
    let mut m = BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let (key, value) = line.rsplit_once(' ').unwrap();
        m.insert(key.to_string(), value.parse::<i64>().unwrap());
    }
    m
}

#[test]
fn rust_declarations_match_c_header() {
    let c = c_side();
    let r = rust_side();
    let mut problems = Vec::new();
    for (k, cv) in &c {
        match r.get(k) {
            Some(rv) if rv == cv => {}
            Some(rv) => problems.push(format!("{k}: C says {cv}, Rust says {rv}")),
            None => problems.push(format!("{k}: checked in C, missing on the Rust side")),
        }
    }
    for k in r.keys() {
        if !c.contains_key(k) {
            problems.push(format!("{k}: checked in Rust, missing in the C probe"));
        }
    }
    assert!(problems.is_empty(), "ABI drift:\n  {}", problems.join("\n  "));
    println!("{} ABI facts match", c.len());
}
