/* Internals shared by the typed-storage files (typed/: dtype.c, convert.c,
 * typed.c, typed_print.c); never installed. */
#ifndef TSTOR_TYPED_INTERNAL_H
#define TSTOR_TYPED_INTERNAL_H

#include "internal.h"
#include "host/parallel.h"

#include <tstor/typed.h>

/* The table entry for dtype, or NULL (with a TSTOR_EINVAL detail naming `what`
 * when what is non-NULL) for a value that is not a dtype. */
const tstor_dtype_info *tstor__dtype(tstor_dtype dtype, const char *what);

/* Whether d is float4_e2m1fn_x2, the one opaque dtype PyTorch counts as a
 * float: it promotes with uint16/32/64, and its tensors print their bytes in
 * a float's format, where the bits types print nothing. */
static inline int tstor__opaque_float(tstor_dtype d) { return d == TSTOR_FLOAT4_E2M1FN_X2; }

/* TSTOR_EDTYPE for a copy between an opaque dtype and another, in the words
 * of PyTorch's copy kernel, which refuses it naming the destination where
 * both are opaque; its loop between float32 and float4_e2m1fn_x2 has a name
 * of its own, used when the copy's innermost dimension is `contiguous` in
 * both. */
int tstor__opaque_copy_refused(tstor_dtype dst, tstor_dtype src, int contiguous);

/* 0 when PyTorch reads or writes elements of d as numbers; TSTOR_EDTYPE for
 * an opaque dtype, and for a fill of bcomplex32, in the words of the kernel
 * PyTorch lacks for it: `kernel` is TSTOR__READ_ONE (item, tolist, str),
 * TSTOR__SET_ONE (x[i] = v) or TSTOR__FILL (fill_, ones, full). */
#define TSTOR__READ_ONE "_local_scalar_dense_cpu"
#define TSTOR__SET_ONE "fill_out"
#define TSTOR__FILL "fill_cpu"
int tstor__dtype_as_numbers(const tstor_dtype_info *d, const char *kernel);

/* Reads bytes [offset, offset + n) of s (which has data) into host memory,
 * through the copy table when s is not host memory. */
int tstor__typed_read(const tstor_storage *s, size_t offset, void *host, size_t n);

/* The host-memory device (index 0) that copies stage through, or TSTOR_ENOTSUP
 * when no loaded backend provides host memory. */
int tstor__staging_device(tstor_context *ctx, tstor_device *out);

/* Converts n elements on the calling thread. The pair must have passed
 * tstor_dtype_can_convert; equal dtypes are a memmove. */
void tstor__convert_serial(void *dst, tstor_dtype dst_dtype, const void *src,
                           tstor_dtype src_dtype, size_t n);

/* The byte order of this machine. */
static inline int tstor__little_endian(void) {
  const uint16_t one = 1;
  return *(const unsigned char *)&one == 1;
}

#endif /* TSTOR_TYPED_INTERNAL_H */
