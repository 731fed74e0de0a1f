//! ABI drift test: compiles a tiny C program against include/fmha/fmha.h with
//! the system C compiler, runs it, and compares every struct size, field
//! offset, enum value and macro it prints with the Rust declarations in
//! `fmha::sys`. Needs a C compiler (`$CC`, default `cc`), no GPU, no libfmha.

use core::mem::{align_of, offset_of, size_of};
use fmha::sys::*;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

const C_PROGRAM: &str = r#"
#include <stdio.h>
#include <stddef.h>
#include <fmha/fmha.h>

#define SIZE(T) printf("sizeof %s %lu\n", #T, (unsigned long)sizeof(T)); \
                printf("alignof %s %lu\n", #T, (unsigned long)_Alignof(T))
#define OFF(T, f) printf("offsetof %s.%s %lu\n", #T, #f, (unsigned long)offsetof(T, f))
#define VAL(x) printf("value %s %lld\n", #x, (long long)(x))

int main(void) {
    SIZE(fmha_status); SIZE(fmha_dtype); SIZE(fmha_mask); SIZE(fmha_kernel_family);
    SIZE(fmha_stream);

    SIZE(fmha_strides);
    OFF(fmha_strides, batch); OFF(fmha_strides, seq); OFF(fmha_strides, head);
    OFF(fmha_strides, dim);

    SIZE(fmha_descriptor);
    OFF(fmha_descriptor, version); OFF(fmha_descriptor, dtype);
    OFF(fmha_descriptor, batch); OFF(fmha_descriptor, num_q_heads);
    OFF(fmha_descriptor, num_kv_heads); OFF(fmha_descriptor, seqlen_q);
    OFF(fmha_descriptor, seqlen_k); OFF(fmha_descriptor, head_dim);
    OFF(fmha_descriptor, head_dim_v); OFF(fmha_descriptor, q_strides);
    OFF(fmha_descriptor, k_strides); OFF(fmha_descriptor, v_strides);
    OFF(fmha_descriptor, o_strides); OFF(fmha_descriptor, softmax_scale);
    OFF(fmha_descriptor, mask); OFF(fmha_descriptor, flags);
    OFF(fmha_descriptor, kernel); OFF(fmha_descriptor, device);
    OFF(fmha_descriptor, reserved0); OFF(fmha_descriptor, window_left);
    OFF(fmha_descriptor, window_right); OFF(fmha_descriptor, softcap);
    OFF(fmha_descriptor, reserved1); OFF(fmha_descriptor, total_q);
    OFF(fmha_descriptor, total_k); OFF(fmha_descriptor, num_pages);
    OFF(fmha_descriptor, max_pages_per_seq); OFF(fmha_descriptor, page_size);
    OFF(fmha_descriptor, num_splits);

    SIZE(fmha_plan_info);
    OFF(fmha_plan_info, version); OFF(fmha_plan_info, kernel_family);
    OFF(fmha_plan_info, kernel_name); OFF(fmha_plan_info, device);
    OFF(fmha_plan_info, device_sm); OFF(fmha_plan_info, image_sm);
    OFF(fmha_plan_info, image_is_ptx); OFF(fmha_plan_info, tile_m);
    OFF(fmha_plan_info, tile_n); OFF(fmha_plan_info, threads_per_cta);
    OFF(fmha_plan_info, shared_memory_bytes); OFF(fmha_plan_info, workspace_bytes);
    OFF(fmha_plan_info, num_splits); OFF(fmha_plan_info, reserved0);

    SIZE(fmha_tensors);
    OFF(fmha_tensors, version); OFF(fmha_tensors, reserved0);
    OFF(fmha_tensors, q); OFF(fmha_tensors, k); OFF(fmha_tensors, v);
    OFF(fmha_tensors, o); OFF(fmha_tensors, lse); OFF(fmha_tensors, sinks);
    OFF(fmha_tensors, cu_seqlens_q); OFF(fmha_tensors, cu_seqlens_k);
    OFF(fmha_tensors, seqused_k); OFF(fmha_tensors, block_table);

    SIZE(fmha_merge_descriptor);
    OFF(fmha_merge_descriptor, version); OFF(fmha_merge_descriptor, dtype);
    OFF(fmha_merge_descriptor, batch); OFF(fmha_merge_descriptor, seqlen_q);
    OFF(fmha_merge_descriptor, num_heads); OFF(fmha_merge_descriptor, head_dim);
    OFF(fmha_merge_descriptor, part_strides); OFF(fmha_merge_descriptor, o_strides);
    OFF(fmha_merge_descriptor, num_parts); OFF(fmha_merge_descriptor, flags);
    OFF(fmha_merge_descriptor, device); OFF(fmha_merge_descriptor, reserved0);

    VAL(FMHA_VERSION_MAJOR); VAL(FMHA_VERSION_MINOR); VAL(FMHA_VERSION_PATCH);
    VAL(FMHA_VERSION_NUMBER);
    VAL(FMHA_STATUS_SUCCESS); VAL(FMHA_STATUS_INVALID_ARGUMENT);
    VAL(FMHA_STATUS_NOT_SUPPORTED); VAL(FMHA_STATUS_VERSION_MISMATCH);
    VAL(FMHA_STATUS_NO_DRIVER); VAL(FMHA_STATUS_NO_DEVICE);
    VAL(FMHA_STATUS_DRIVER_ERROR); VAL(FMHA_STATUS_MISALIGNED);
    VAL(FMHA_STATUS_WORKSPACE_TOO_SMALL); VAL(FMHA_STATUS_OUT_OF_MEMORY);
    VAL(FMHA_STATUS_NO_KERNEL_IMAGE); VAL(FMHA_STATUS_CONTEXT_MISMATCH);
    VAL(FMHA_STATUS_INTERNAL_ERROR);
    VAL(FMHA_DTYPE_BF16); VAL(FMHA_DTYPE_FP16);
    VAL(FMHA_MASK_NONE); VAL(FMHA_MASK_CAUSAL_TOP_LEFT); VAL(FMHA_MASK_CAUSAL_BOTTOM_RIGHT);
    VAL(FMHA_KERNEL_AUTO); VAL(FMHA_KERNEL_PORTABLE); VAL(FMHA_KERNEL_HOPPER);
    VAL(FMHA_KERNEL_DECODE);
    VAL(FMHA_FLAG_WRITE_LSE); VAL(FMHA_FLAG_SINKS); VAL(FMHA_FLAG_VARLEN_Q);
    VAL(FMHA_FLAG_VARLEN_K); VAL(FMHA_FLAG_SEQUSED_K); VAL(FMHA_FLAG_PAGED_KV);
    VAL(FMHA_DESCRIPTOR_VERSION); VAL(FMHA_PLAN_INFO_VERSION); VAL(FMHA_TENSORS_VERSION);
    VAL(FMHA_MERGE_DESCRIPTOR_VERSION); VAL(FMHA_MERGE_MAX_PARTS);
    VAL(FMHA_SM_ANY); VAL(FMHA_SM_CURRENT_DEVICE);
    return 0;
}
"#;

macro_rules! size {
    ($m:ident, $cname:literal, $t:ty) => {
        $m.insert(format!("sizeof {}", $cname), size_of::<$t>() as i64);
        $m.insert(format!("alignof {}", $cname), align_of::<$t>() as i64);
    };
}
macro_rules! off {
    ($m:ident, $t:ident, $($f:ident),+) => {
        $( $m.insert(format!("offsetof {}.{}", stringify!($t), stringify!($f)),
                     offset_of!($t, $f) as i64); )+
    };
}
macro_rules! val {
    ($m:ident, $($c:ident),+) => {
        $( $m.insert(format!("value {}", stringify!($c)), $c as i64); )+
    };
}

fn rust_side() -> BTreeMap<String, i64> {
    let mut m = BTreeMap::new();
    size!(m, "fmha_status", fmha_status);
    size!(m, "fmha_dtype", fmha_dtype);
    size!(m, "fmha_mask", fmha_mask);
    size!(m, "fmha_kernel_family", fmha_kernel_family);
    size!(m, "fmha_stream", fmha_stream);
    size!(m, "fmha_strides", fmha_strides);
    off!(m, fmha_strides, batch, seq, head, dim);
    size!(m, "fmha_descriptor", fmha_descriptor);
    off!(m, fmha_descriptor, version, dtype, batch, num_q_heads, num_kv_heads, seqlen_q,
         seqlen_k, head_dim, head_dim_v, q_strides, k_strides, v_strides, o_strides,
         softmax_scale, mask, flags, kernel, device, reserved0, window_left, window_right,
         softcap, reserved1, total_q, total_k, num_pages, max_pages_per_seq, page_size,
         num_splits);
    size!(m, "fmha_plan_info", fmha_plan_info);
    off!(m, fmha_plan_info, version, kernel_family, kernel_name, device, device_sm, image_sm,
         image_is_ptx, tile_m, tile_n, threads_per_cta, shared_memory_bytes, workspace_bytes,
         num_splits, reserved0);
    size!(m, "fmha_tensors", fmha_tensors);
    off!(m, fmha_tensors, version, reserved0, q, k, v, o, lse, sinks, cu_seqlens_q, cu_seqlens_k,
         seqused_k, block_table);
    size!(m, "fmha_merge_descriptor", fmha_merge_descriptor);
    off!(m, fmha_merge_descriptor, version, dtype, batch, seqlen_q, num_heads, head_dim,
         part_strides, o_strides, num_parts, flags, device, reserved0);
    val!(m, FMHA_VERSION_MAJOR, FMHA_VERSION_MINOR, FMHA_VERSION_PATCH, FMHA_VERSION_NUMBER,
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
         FMHA_SM_ANY, FMHA_SM_CURRENT_DEVICE);
    m
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
    std::fs::write(&src, C_PROGRAM).unwrap();
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
