/* Control interface of the fake CUDA driver (libfmha_fake_cuda.so) that the
 * fake-driver tests load through FMHA_LIBCUDA. The fake implements only the
 * entry points libfmha fetches with cuGetProcAddress (so loading it shows
 * that libfmha requires no other), runs no kernel, checks what a real driver
 * would reject (unknown kernel names, missing context at launch, too much
 * shared memory, bad tensor maps) and records what it was asked. */
#ifndef FMHA_TESTS_FAKE_CUDA_H
#define FMHA_TESTS_FAKE_CUDA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fake_cuda_launch {
    char kernel[128];
    unsigned grid[3], block[3];
    unsigned shared_bytes;
    void *stream;
    void *context;          /* current context at the launch */
    int max_dynamic_smem;   /* cuFuncSetAttribute value of the function */
    int programmatic;       /* cuLaunchKernelEx with programmatic stream serialization */
    unsigned cluster[3];    /* cluster dimension; 1, 1, 1 without the attribute */
} fake_cuda_launch;

/* One cuTensorMapEncodeTiled call that succeeded. */
typedef struct fake_cuda_tensor_map {
    unsigned rank;
    unsigned long long dims[5];
    unsigned long long strides[4]; /* bytes, dims 1.. */
    unsigned box[5];
} fake_cuda_tensor_map;

enum { FAKE_CUDA_MAP_RING = 8 };

typedef struct fake_cuda_stats {
    int init_calls;
    int primary_retained;   /* retains minus releases, all devices */
    int module_loads;
    int module_loads_ptx;
    int function_lookups;
    int launches;
    int tensor_maps;
    int tensor_map_errors;
    /* The last FAKE_CUDA_MAP_RING maps: map n (counting from 0) at n % ring. */
    fake_cuda_tensor_map maps[FAKE_CUDA_MAP_RING];
    int context_pushes, context_pops;
    /* Entry points other than context queries/push/pop, launches and
     * tensor-map encoding called while "in run" was marked: the things that
     * must not happen inside fmha_run (graph capture safety). */
    int calls_in_run_not_allowed;
    char last_not_allowed[64];
    /* Most cuModuleLoadDataEx calls in progress at once. */
    int max_concurrent_loads;
    /* Programmatic dependent launches of a kernel from a PTX image that has no
     * griddepcontrol.wait: such a kernel could read its predecessor's output
     * before that kernel is done (a real driver runs it anyway). */
    int programmatic_without_wait;
} fake_cuda_stats;

typedef void (*fake_cuda_reset_fn)(void);
typedef void (*fake_cuda_configure_fn)(const char *key, long long value);
typedef void (*fake_cuda_fail_fn)(const char *entry_point, int result);
typedef void (*fake_cuda_get_stats_fn)(fake_cuda_stats *out);
typedef int (*fake_cuda_last_launch_fn)(fake_cuda_launch *out);
typedef int (*fake_cuda_previous_launch_fn)(fake_cuda_launch *out);
typedef void (*fake_cuda_set_in_run_fn)(int in_run);
typedef void *(*fake_cuda_context_fn)(int device, int id);
typedef void (*fake_cuda_push_fn)(void *ctx);
typedef void (*fake_cuda_pop_fn)(void);

/* Exported by the fake:
 *   void  fake_cuda_reset(void);               defaults, counters to 0
 *   void  fake_cuda_configure(key, value);     "sm", "devices", "sms",
 *                                              "smem_optin", "smem_per_sm" (0, the
 *                                              default: the attribute reads 0),
 *                                              "driver_version",
 *                                              "load_rendezvous": a module load
 *                                              waits (up to 2 s) until this
 *                                              many loads are in progress
 *   void  fake_cuda_fail(entry, CUresult);     make an entry point fail
 *                                              (entry NULL: clear)
 *   void  fake_cuda_get_stats(out);
 *   int   fake_cuda_last_launch(out);          0 if there was none
 *   int   fake_cuda_previous_launch(out);      the one before it; 0 if none
 *   void  fake_cuda_set_in_run(int);
 *   void *fake_cuda_context(device, id);       a user context handle
 *   void  fake_cuda_push(ctx) / fake_cuda_pop(); make one current (like the
 *                                              runtime would) */

#ifdef __cplusplus
}
#endif

#endif
