/* Internals shared by the tensor files (tensor/: geometry.c, tensor.c,
 * view.c, iter.c, tensor_copy.c, data.c, tensor_print.c); never installed. */
#ifndef TSTOR_TENSOR_INTERNAL_H
#define TSTOR_TENSOR_INTERNAL_H

#include "tensor/geometry.h"
#include "typed/typed_internal.h"

#include <tstor/tensor.h>

/* One allocation per tensor: the sizes and strides live right after the
 * header, so a small tensor costs one malloc and its shape shares the
 * header's cache lines. */
struct tstor_tensor {
  atomic_long refs;
  tstor_storage *storage; /* one reference */
  tstor_dtype dtype;
  int ndim;
  int64_t offset; /* elements */
  int64_t numel;
  size_t esize;   /* element size in bytes */
  int contiguous; /* PyTorch's is_contiguous, computed once */
  int64_t *sizes;   /* dims[0 .. ndim) */
  int64_t *strides; /* dims[ndim .. 2 ndim) */
  int64_t dims[];
};

/* A new tensor on s (which it retains) with the given layout, trusted: the
 * caller has checked it. strides NULL means contiguous. */
int tstor__tensor_make(tstor_storage *s, tstor_dtype dtype, int64_t offset, int ndim,
                       const int64_t *sizes, const int64_t *strides, tstor_tensor **out);
/* tstor_tensor_on_storage, checked; bounded 0 skips only the check that the
 * layout lies inside s (as_strided on a device without data, as torch 2.x's
 * meta kernel). */
int tstor__tensor_place(tstor_storage *s, tstor_dtype dtype, int64_t offset, int ndim,
                        const int64_t *sizes, const int64_t *strides, int bounded,
                        tstor_tensor **out);
/* As tstor__tensor_make at offset 0 on a new storage of exactly the bytes the
 * layout needs, made on dev. */
int tstor__tensor_make_on_new(tstor_context *ctx, tstor_device dev, size_t nbytes,
                              tstor_dtype dtype, int ndim, const int64_t *sizes,
                              const int64_t *strides, tstor_tensor **out);

/* A tensor in two steps, for code that computes a layout straight into the
 * object (shape inference) rather than into a buffer it then copies:
 * tstor__tensor_blank allocates one of ndim dimensions with only ndim, sizes
 * and strides set (NULL and a message when out of memory); the caller writes
 * sizes[0..ndim) and strides[0..ndim), then either completes it on storage s,
 * whose reference the tensor takes over, or discards it. */
tstor_tensor *tstor__tensor_blank(int ndim);
void tstor__tensor_discard(tstor_tensor *t);
static inline void tstor__tensor_complete(tstor_tensor *t, tstor_storage *s, tstor_dtype dtype,
                                          size_t esize, int64_t offset, int64_t numel,
                                          int contiguous) {
  atomic_init(&t->refs, 1);
  t->storage = s;
  t->dtype = dtype;
  t->esize = esize;
  t->offset = offset;
  t->numel = numel;
  t->contiguous = contiguous;
}

/* The float dtype of a complex one's parts (complex32's are float16, bcomplex32's
 * bfloat16). */
static inline tstor_dtype tstor__complex_part(tstor_dtype d) {
  return d == TSTOR_COMPLEX32    ? TSTOR_FLOAT16
         : d == TSTOR_BCOMPLEX32 ? TSTOR_BFLOAT16
         : d == TSTOR_COMPLEX64  ? TSTOR_FLOAT32
                                 : TSTOR_FLOAT64;
}

/* Whether the tensor's device holds bytes / is host memory. */
int tstor__tensor_has_data(const tstor_tensor *t);
int tstor__tensor_on_host(const tstor_tensor *t);

/* --------------------------------------------------------- copies (iter.c) */

/* TensorIterator's plan for one copy, built from two layouts of the same
 * sizes: dims innermost first after ordering and merging, strides in bytes. */
typedef struct tstor__plan {
  int ndim;
  int64_t size[TSTOR_TENSOR_MAX_DIM];
  int64_t dst_strides[TSTOR_TENSOR_MAX_DIM], src_strides[TSTOR_TENSOR_MAX_DIM];
  char *dst; /* element 0 of each side, in host memory */
  const char *src;
  tstor_dtype dst_dtype, src_dtype;
  size_t dst_esize, src_esize;
  int same;    /* same dtype: bytes move unchanged */
  int serial;  /* source and destination overlap: one element after another */
  int ordered; /* destination elements may share bytes: PyTorch's order, one thread */
  int tile;    /* 0, or the dimension along which the source is contiguous (a transpose) */
  int stream;  /* the destination is too large for the caches: non-temporal stores */
  int band;    /* tile set and the items are bands (host/transpose.h) */
  unsigned what; /* which transpose, where the store is chosen call by call */
  int64_t nchunk0, ntile, items;
  int64_t step0, stept; /* an item's extent along dim 0 and the tile dimension */
} tstor__plan;

/* Fills p's dims from a layout (dtypes and element sizes set first): dims in
 * elements, innermost first after ordering, merged where contiguous
 * together. Returns the element count; 0 leaves p without dims. */
int64_t tstor__plan_build(tstor__plan *p, int ndim, const int64_t *sizes,
                          const int64_t *dst_strides, const int64_t *src_strides);
/* Runs a plan whose dst and src (and serial and ordered) are set, on host
 * memory: one contiguous run, tiles or bands of a transpose, or rows. */
void tstor__plan_run(tstor__plan *p);
/* The bytes a side spans from element 0: [0, span). */
int64_t tstor__plan_span(const tstor__plan *p, const int64_t *strides, size_t esize);
/* Whether no two destination elements share a byte (PyTorch's sufficient
 * non-overlap test; where it fails the copy keeps PyTorch's order). */
int tstor__plan_dst_distinct(const tstor__plan *p);

/* --------------------------------------------------- transfers (tensor_copy.c) */

/* One side of a transfer: a storage's bytes, or host memory (storage NULL). */
typedef struct tstor__side {
  tstor_storage *storage;
  char *ptr; /* element 0 */
  const int64_t *strides;
  tstor_dtype dtype;
  size_t es;
} tstor__side;

/* A tensor's side, with other strides (a broadcast source) or its own (NULL). */
tstor__side tstor__tensor_side(const tstor_tensor *t, const int64_t *strides);
/* Whether the side's bytes are host memory. */
int tstor__side_on_host(const tstor__side *x);
/* Moves n bytes between [lo, lo + n) of a side on a device and host memory. */
int tstor__side_read(const tstor__side *x, int64_t lo, void *buf, int64_t n);
int tstor__side_write(const tstor__side *x, int64_t lo, const void *buf, int64_t n);
/* Copies the elements of `sizes` from src to dst, converting the dtype. The
 * caller has checked shapes, dtypes and data. */
int tstor__transfer(const tstor__side *dst, const tstor__side *src, int ndim,
                    const int64_t *sizes);

#endif /* TSTOR_TENSOR_INTERNAL_H */
