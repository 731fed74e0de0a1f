// Package cudadrv is the little of the CUDA driver API that the GPU tests
// need: a device's primary context, device memory, copies and streams.
//
// libcuda.so.1 is opened with dlopen at run time, not linked, so the package
// builds and its callers' tests run (and skip) on machines without a driver;
// Open then fails with ErrNoDriver. FMHA_LIBCUDA names another path, as it
// does for libfmha, so both always use the same driver library.
//
// A CUDA context is current per OS thread and goroutines move between
// threads, so every call makes the context current on its thread first.
package cudadrv

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef int drv_result;             // CUresult
typedef unsigned long long drv_ptr; // CUdeviceptr

static struct {
	drv_result (*init)(unsigned int);
	drv_result (*device_get)(int *, int);
	drv_result (*primary_ctx_retain)(void **, int);
	drv_result (*ctx_set_current)(void *);
	drv_result (*mem_alloc)(drv_ptr *, size_t);
	drv_result (*mem_free)(drv_ptr);
	drv_result (*memcpy_htod)(drv_ptr, const void *, size_t);
	drv_result (*memcpy_dtoh)(void *, drv_ptr, size_t);
	drv_result (*stream_create)(void **, unsigned int);
	drv_result (*stream_synchronize)(void *);
	drv_result (*stream_destroy)(void *);
	drv_result (*get_error_name)(drv_result, const char **);
	drv_result (*get_error_string)(drv_result, const char **);
} drv;

// Returns 0, or 1 with *why the dlerror() text, or 2 with *why the name of
// the missing entry point.
static int drv_load(const char *path, const char **why) {
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		*why = dlerror();
		return 1;
	}
#define DRV_SYM(field, name) \
	if ((*(void **)&drv.field = dlsym(lib, name)) == NULL) { *why = name; return 2; }
	DRV_SYM(init, "cuInit")
	DRV_SYM(device_get, "cuDeviceGet")
	DRV_SYM(primary_ctx_retain, "cuDevicePrimaryCtxRetain")
	DRV_SYM(ctx_set_current, "cuCtxSetCurrent")
	DRV_SYM(mem_alloc, "cuMemAlloc_v2")
	DRV_SYM(mem_free, "cuMemFree_v2")
	DRV_SYM(memcpy_htod, "cuMemcpyHtoD_v2")
	DRV_SYM(memcpy_dtoh, "cuMemcpyDtoH_v2")
	DRV_SYM(stream_create, "cuStreamCreate")
	DRV_SYM(stream_synchronize, "cuStreamSynchronize")
	DRV_SYM(stream_destroy, "cuStreamDestroy_v2")
	DRV_SYM(get_error_name, "cuGetErrorName")
	DRV_SYM(get_error_string, "cuGetErrorString")
#undef DRV_SYM
	return 0;
}

// Handles cross as uintptr_t so Go never turns an integer into a pointer.
static drv_result drv_init(void) { return drv.init(0); }
static drv_result drv_device_get(int *dev, int ordinal) { return drv.device_get(dev, ordinal); }
static drv_result drv_primary_ctx_retain(uintptr_t *ctx, int dev) {
	void *c = NULL;
	drv_result r = drv.primary_ctx_retain(&c, dev);
	*ctx = (uintptr_t)c;
	return r;
}
static drv_result drv_ctx_set_current(uintptr_t ctx) { return drv.ctx_set_current((void *)ctx); }
static drv_result drv_mem_alloc(drv_ptr *p, size_t n) { return drv.mem_alloc(p, n); }
static drv_result drv_mem_free(drv_ptr p) { return drv.mem_free(p); }
static drv_result drv_memcpy_htod(drv_ptr dst, const void *src, size_t n) { return drv.memcpy_htod(dst, src, n); }
static drv_result drv_memcpy_dtoh(void *dst, drv_ptr src, size_t n) { return drv.memcpy_dtoh(dst, src, n); }
static drv_result drv_stream_create(uintptr_t *s) {
	void *h = NULL;
	drv_result r = drv.stream_create(&h, 0);
	*s = (uintptr_t)h;
	return r;
}
static drv_result drv_stream_synchronize(uintptr_t s) { return drv.stream_synchronize((void *)s); }
static drv_result drv_stream_destroy(uintptr_t s) { return drv.stream_destroy((void *)s); }
static const char *drv_error_name(drv_result r) {
	const char *s = NULL;
	return drv.get_error_name(r, &s) == 0 ? s : NULL;
}
static const char *drv_error_string(drv_result r) {
	const char *s = NULL;
	return drv.get_error_string(r, &s) == 0 ? s : NULL;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"
)

// ErrNoDriver: the driver library could not be loaded or lacks an entry
// point. Open's error wraps it with the loader's reason.
var ErrNoDriver = errors.New("no CUDA driver")

// Error is a failed driver call.
type Error struct {
	Call   string // e.g. "cuMemAlloc_v2"
	Result int    // the CUresult
	Name   string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Text   string // cuGetErrorString's description
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (%d): %s", e.Call, e.Name, e.Result, e.Text)
}

func check(call string, r C.drv_result) error {
	if r == 0 {
		return nil
	}
	e := &Error{Call: call, Result: int(r), Name: "unknown CUresult", Text: "no description"}
	if s := C.drv_error_name(r); s != nil {
		e.Name = C.GoString(s)
	}
	if s := C.drv_error_string(r); s != nil {
		e.Text = C.GoString(s)
	}
	return e
}

var loaded struct {
	once sync.Once
	err  error
}

// load opens the driver library and runs cuInit, once per process.
func load() error {
	loaded.once.Do(func() {
		path := os.Getenv("FMHA_LIBCUDA")
		if path == "" {
			path = "libcuda.so.1"
		}
		cpath := C.CString(path)
		defer C.free(unsafe.Pointer(cpath))
		var why *C.char
		switch C.drv_load(cpath, &why) {
		case 0:
			loaded.err = check("cuInit", C.drv_init())
		case 1:
			loaded.err = fmt.Errorf("%w: dlopen(%q): %s", ErrNoDriver, path, C.GoString(why))
		default:
			loaded.err = fmt.Errorf("%w: %s has no %s", ErrNoDriver, path, C.GoString(why))
		}
	})
	return loaded.err
}

// Context is the retained primary context of one device. It stays retained
// for the life of the process, as libfmha's plans use that same context.
type Context struct {
	Device int
	handle C.uintptr_t
}

// Open loads the driver (once) and retains the primary context of device
// ordinal.
func Open(ordinal int) (*Context, error) {
	if err := load(); err != nil {
		return nil, err
	}
	var dev C.int
	if err := check("cuDeviceGet", C.drv_device_get(&dev, C.int(ordinal))); err != nil {
		return nil, err
	}
	c := &Context{Device: ordinal}
	if err := check("cuDevicePrimaryCtxRetain", C.drv_primary_ctx_retain(&c.handle, dev)); err != nil {
		return nil, err
	}
	return c, nil
}

// do runs one driver call with the context current on the calling thread.
func (c *Context) do(call string, f func() C.drv_result) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := check("cuCtxSetCurrent", C.drv_ctx_set_current(c.handle)); err != nil {
		return err
	}
	return check(call, f())
}

// Alloc returns bytes of device memory (256-byte aligned).
func (c *Context) Alloc(bytes int) (uintptr, error) {
	var p C.drv_ptr
	err := c.do("cuMemAlloc_v2", func() C.drv_result { return C.drv_mem_alloc(&p, C.size_t(bytes)) })
	return uintptr(p), err
}

// Free releases memory from Alloc.
func (c *Context) Free(p uintptr) error {
	return c.do("cuMemFree_v2", func() C.drv_result { return C.drv_mem_free(C.drv_ptr(p)) })
}

// Element is a type whose values hold no pointers, so a slice of them can be
// copied to and from the device as raw bytes.
type Element interface {
	~uint8 | ~uint16 | ~int32 | ~uint32 | ~float32 | ~int64 | ~uint64 | ~float64
}

// CopyToDevice copies src to device address dst (synchronously).
func CopyToDevice[T Element](c *Context, dst uintptr, src []T) error {
	if len(src) == 0 {
		return nil
	}
	n := C.size_t(uintptr(len(src)) * unsafe.Sizeof(src[0]))
	return c.do("cuMemcpyHtoD_v2", func() C.drv_result {
		return C.drv_memcpy_htod(C.drv_ptr(dst), unsafe.Pointer(&src[0]), n)
	})
}

// CopyFromDevice fills dst from device address src (synchronously).
func CopyFromDevice[T Element](c *Context, dst []T, src uintptr) error {
	if len(dst) == 0 {
		return nil
	}
	n := C.size_t(uintptr(len(dst)) * unsafe.Sizeof(dst[0]))
	return c.do("cuMemcpyDtoH_v2", func() C.drv_result {
		return C.drv_memcpy_dtoh(unsafe.Pointer(&dst[0]), C.drv_ptr(src), n)
	})
}

// NewStream creates a stream (CU_STREAM_DEFAULT) in the context; the value
// is the CUstream handle.
func (c *Context) NewStream() (uintptr, error) {
	var s C.uintptr_t
	err := c.do("cuStreamCreate", func() C.drv_result { return C.drv_stream_create(&s) })
	return uintptr(s), err
}

// Synchronize waits until the work enqueued on stream s has finished; a
// kernel fault shows here.
func (c *Context) Synchronize(s uintptr) error {
	return c.do("cuStreamSynchronize", func() C.drv_result { return C.drv_stream_synchronize(C.uintptr_t(s)) })
}

// DestroyStream destroys stream s.
func (c *Context) DestroyStream(s uintptr) error {
	return c.do("cuStreamDestroy_v2", func() C.drv_result { return C.drv_stream_destroy(C.uintptr_t(s)) })
}
