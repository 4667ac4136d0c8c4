/* tstor tensors: strided views of a storage, as c10's TensorImpl over StorageImpl.
 *
 * A tensor is a storage reference plus a dtype, sizes, strides and a storage
 * offset. Sizes and strides are int64 and counted in elements, strides are
 * never negative, and the offset is in elements from the start of the storage,
 * exactly as in PyTorch. Many tensors may share one storage, with different
 * dtypes and shapes; the storage lives as long as the last tensor (or other
 * reference) on it.
 *
 * Conventions (those of tstor.h, plus):
 *   - Tensors are refcounted. "Returns a new reference in *out" means the caller
 *     releases it with tstor_tensor_release() exactly once; on failure *out is
 *     NULL and nothing is left allocated or changed.
 *   - A tensor's shape, strides, offset, dtype and storage never change after
 *     creation: every view is a new tensor. So tensors may be shared between
 *     threads freely; writing the same elements from two threads is the
 *     caller's business, as in C.
 *   - Dimension arguments are int64_t, as in shape.h and PyTorch, and wrap as
 *     in Python: -1 is the last dimension. A
 *     dimension out of range is refused with TSTOR_ERANGE and PyTorch's message
 *     ("Dimension out of range (expected to be in range of [-2, 1], but got 2)").
 *   - 0 to TSTOR_TENSOR_MAX_DIM dimensions work; more are refused with
 *     TSTOR_EINVAL. Zero-size dimensions work everywhere. Sizes whose product
 *     passes INT64_MAX, and views whose strides or offset would, are refused
 *     with TSTOR_EOVERFLOW where PyTorch's arithmetic would silently wrap.
 *   - Where PyTorch refuses a call, tstor refuses it too, with PyTorch's
 *     message as the detail (tstor_last_error()).
 *   - The context of a tensor is tstor_storage_context(tstor_tensor_storage(t)).
 */
#ifndef TSTOR_TENSOR_H
#define TSTOR_TENSOR_H

#include <stdio.h>
#include <tstor/typed.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TSTOR_TENSOR_MAX_DIM 64 /* 0..64 dims work; 65 is refused with TSTOR_EINVAL */

typedef struct tstor_tensor tstor_tensor; /* refcounted: storage ref + dtype + sizes + strides + offset */

/* ---------------------------------------------------------------- creation */

/* A contiguous tensor of uninitialised elements on a new storage of exactly
 * the bytes it needs (PyTorch's torch.empty). Negative sizes are refused with
 * TSTOR_EINVAL, a byte count past INT64_MAX with TSTOR_EOVERFLOW. *out is a new
 * reference. */
TSTOR_EXTERN int tstor_tensor_empty(tstor_context *ctx, tstor_device dev, tstor_dtype dtype,
                                    int ndim, const int64_t *sizes, tstor_tensor **out);

/* As tstor_tensor_empty with the given strides (torch.empty_strided): the
 * storage holds computeStorageNbytes(sizes, strides) bytes. Negative strides
 * are refused (TSTOR_EINVAL). *out is a new reference. */
TSTOR_EXTERN int tstor_tensor_empty_strided(tstor_context *ctx, tstor_device dev,
                                            tstor_dtype dtype, int ndim, const int64_t *sizes,
                                            const int64_t *strides, tstor_tensor **out);

/* Contiguous tensors filled with 0, 1 or `value` (converted to dtype as
 * tstor_dtype_convert converts a float64). Zeros are zero bytes, so zeros
 * works on every dtype; ones and full refuse the opaque ones and bcomplex32
 * on a device with data, as PyTorch 2.x does (TSTOR_EDTYPE, "\"fill_cpu\"
 * not implemented for ..."), and pass on meta. *out is a new reference. */
TSTOR_EXTERN int tstor_tensor_zeros(tstor_context *ctx, tstor_device dev, tstor_dtype dtype,
                                    int ndim, const int64_t *sizes, tstor_tensor **out);
TSTOR_EXTERN int tstor_tensor_ones(tstor_context *ctx, tstor_device dev, tstor_dtype dtype,
                                   int ndim, const int64_t *sizes, tstor_tensor **out);
TSTOR_EXTERN int tstor_tensor_full(tstor_context *ctx, tstor_device dev, tstor_dtype dtype,
                                   int ndim, const int64_t *sizes, double value,
                                   tstor_tensor **out);

/* A contiguous tensor holding a copy of the C array `data`: numel elements of
 * `dtype`, row-major. The caller keeps `data` (NULL only when numel is 0).
 * *out is a new reference. */
TSTOR_EXTERN int tstor_tensor_from_array(tstor_context *ctx, tstor_device dev, tstor_dtype dtype,
                                         int ndim, const int64_t *sizes, const void *data,
                                         tstor_tensor **out);

/* A tensor on an existing storage (PyTorch's set_(storage, offset, sizes,
 * strides)): offset, sizes and strides in elements; strides NULL means
 * contiguous. The tensor holds a new reference on s; s stays the caller's.
 * Refused with TSTOR_EINVAL for a negative offset, then (torch 2.x's order)
 * with TSTOR_ERANGE when the layout reaches past the storage and with
 * TSTOR_EOVERFLOW when its byte count overflows, with a message naming the
 * sizes and strides. A layout with a zero-size dimension fits any storage.
 * *out is a new reference. */
TSTOR_EXTERN int tstor_tensor_on_storage(tstor_storage *s, tstor_dtype dtype, int64_t offset,
                                         int ndim, const int64_t *sizes, const int64_t *strides,
                                         tstor_tensor **out);

/* Adds a reference and returns t; drops one (the last release drops the
 * storage reference and frees the tensor). NULL is a no-op for both. */
TSTOR_EXTERN tstor_tensor *tstor_tensor_retain(tstor_tensor *t);
TSTOR_EXTERN void tstor_tensor_release(tstor_tensor *t);
/* The current reference count (a snapshot, for tests and diagnostics). */
TSTOR_EXTERN long tstor_tensor_use_count(const tstor_tensor *t);

/* The bytes a layout needs: PyTorch's computeStorageNbytes, (offset + 1 +
 * sum(stride * (size - 1))) * element_size, or 0 when a size is 0. Sets *out;
 * TSTOR_EOVERFLOW (with sizes and strides in the message) when it passes
 * INT64_MAX, TSTOR_EINVAL for negative sizes, strides or offset. */
TSTOR_EXTERN int tstor_layout_nbytes(int ndim, const int64_t *sizes, const int64_t *strides,
                                     size_t element_size, int64_t offset, uint64_t *out);

/* ----------------------------------------------------------------- queries */

/* All borrowed or plain values, valid while t lives. */
TSTOR_EXTERN int tstor_tensor_dim(const tstor_tensor *t);
TSTOR_EXTERN const int64_t *tstor_tensor_sizes(const tstor_tensor *t);   /* dim() entries */
TSTOR_EXTERN const int64_t *tstor_tensor_strides(const tstor_tensor *t); /* dim() entries, elements */
/* Size and stride of one dimension; negative dim wraps as in Python;
 * TSTOR_ERANGE for a dimension out of range. */
TSTOR_EXTERN int tstor_tensor_size(const tstor_tensor *t, int64_t dim, int64_t *out);
TSTOR_EXTERN int tstor_tensor_stride(const tstor_tensor *t, int64_t dim, int64_t *out);
TSTOR_EXTERN int64_t tstor_tensor_numel(const tstor_tensor *t);
/* numel * element size: the bytes of the elements, not of the storage. */
TSTOR_EXTERN int64_t tstor_tensor_nbytes(const tstor_tensor *t);
TSTOR_EXTERN size_t tstor_tensor_element_size(const tstor_tensor *t);
TSTOR_EXTERN int64_t tstor_tensor_storage_offset(const tstor_tensor *t); /* elements */
TSTOR_EXTERN tstor_storage *tstor_tensor_storage(const tstor_tensor *t); /* borrowed */
TSTOR_EXTERN tstor_context *tstor_tensor_context(const tstor_tensor *t); /* borrowed */
TSTOR_EXTERN tstor_dtype tstor_tensor_dtype(const tstor_tensor *t);
TSTOR_EXTERN tstor_device tstor_tensor_device(const tstor_tensor *t);
/* PyTorch's Tensor.get_device(): the device index, or -1 on a device that has
 * none (cpu, meta, and any other host or data-less type). */
TSTOR_EXTERN int tstor_tensor_get_device(const tstor_tensor *t);
/* Address of element 0 (storage data + offset); NULL on meta. A device
 * address on devices that are not host memory; owned by the storage. */
TSTOR_EXTERN void *tstor_tensor_data(const tstor_tensor *t);

/* PyTorch's contiguity: row-major with size-1 dimensions ignored (a tensor
 * with no elements is contiguous). */
TSTOR_EXTERN int tstor_tensor_is_contiguous(const tstor_tensor *t);
/* Every element at its own address and no gaps, in some dimension order. */
TSTOR_EXTERN int tstor_tensor_is_non_overlapping_and_dense(const tstor_tensor *t);
/* channels_last contiguity of a 4-d tensor (NHWC in memory), channels_last_3d
 * of a 5-d one (NDHWC); 0 for any other number of dimensions. */
TSTOR_EXTERN int tstor_tensor_is_channels_last(const tstor_tensor *t);

/* ------------------------------------------------------------------- views */

/* Every view returns a new reference in *out to a tensor on t's storage (it
 * holds its own reference on the storage, so t may be released first); t
 * stays the caller's. No bytes move, except where a comment says a copy may
 * be made. */

/* PyTorch's as_strided: t's storage and dtype with another layout, checked as
 * tstor_tensor_on_storage checks it, except on a device without data (meta),
 * where torch 2.x checks no bound: the layout may reach past the storage
 * there, as long as its byte count fits in int64. */
TSTOR_EXTERN int tstor_tensor_as_strided(const tstor_tensor *t, int ndim, const int64_t *sizes,
                                         const int64_t *strides, int64_t offset,
                                         tstor_tensor **out);

/* view(sizes): one size may be -1 (inferred). Refused (TSTOR_EINVAL, "... Use
 * .reshape(...) instead.") when t's strides cannot express the new shape
 * (PyTorch's computeStride), TSTOR_ESIZE when the element count differs. */
TSTOR_EXTERN int tstor_tensor_view(const tstor_tensor *t, int ndim, const int64_t *sizes,
                                   tstor_tensor **out);
/* reshape(sizes): a view when view() would succeed, else a contiguous copy
 * on a new storage. */
TSTOR_EXTERN int tstor_tensor_reshape(const tstor_tensor *t, int ndim, const int64_t *sizes,
                                      tstor_tensor **out);

/* narrow(dim, start, length): elements [start, start + length) of dim; start
 * in [-size, size] (a negative one wraps once), length >= 0, as torch 2.x. */
TSTOR_EXTERN int tstor_tensor_narrow(const tstor_tensor *t, int64_t dim, int64_t start,
                                     int64_t length, tstor_tensor **out);
/* select(dim, index): drops dim, keeping element `index` (negative wraps). */
TSTOR_EXTERN int tstor_tensor_select(const tstor_tensor *t, int64_t dim, int64_t index,
                                     tstor_tensor **out);
/* t[start:end:step] along dim, with Python's clamping; step > 0. Pass
 * INT64_MAX as end for "to the end". */
TSTOR_EXTERN int tstor_tensor_slice(const tstor_tensor *t, int64_t dim, int64_t start, int64_t end,
                                    int64_t step, tstor_tensor **out);

/* transpose(dim0, dim1); t() for tensors of at most 2 dimensions; permute
 * with one entry per dimension; movedim(source[i] -> destination[i]). */
TSTOR_EXTERN int tstor_tensor_transpose(const tstor_tensor *t, int64_t dim0, int64_t dim1,
                                        tstor_tensor **out);
TSTOR_EXTERN int tstor_tensor_t(const tstor_tensor *t, tstor_tensor **out);
TSTOR_EXTERN int tstor_tensor_permute(const tstor_tensor *t, int ndim, const int64_t *dims,
                                      tstor_tensor **out);
TSTOR_EXTERN int tstor_tensor_movedim(const tstor_tensor *t, int n, const int64_t *source,
                                      const int64_t *destination, tstor_tensor **out);

/* expand(sizes): size-1 dimensions (and new leading ones) repeated with
 * stride 0; -1 keeps a size. expand_as(other) expands to other's sizes. */
TSTOR_EXTERN int tstor_tensor_expand(const tstor_tensor *t, int ndim, const int64_t *sizes,
                                     tstor_tensor **out);
TSTOR_EXTERN int tstor_tensor_expand_as(const tstor_tensor *t, const tstor_tensor *other,
                                        tstor_tensor **out);

/* squeeze() drops every size-1 dimension, squeeze_dim(dim) that one when its
 * size is 1; unsqueeze(dim) inserts a size-1 dimension at dim (in
 * [-dim()-1, dim()]). */
TSTOR_EXTERN int tstor_tensor_squeeze(const tstor_tensor *t, tstor_tensor **out);
TSTOR_EXTERN int tstor_tensor_squeeze_dim(const tstor_tensor *t, int64_t dim, tstor_tensor **out);
TSTOR_EXTERN int tstor_tensor_unsqueeze(const tstor_tensor *t, int64_t dim, tstor_tensor **out);

/* flatten(start_dim, end_dim) merges those dimensions (a copy when reshape
 * needs one); unflatten(dim, sizes) splits dim into sizes (one may be -1). */
TSTOR_EXTERN int tstor_tensor_flatten(const tstor_tensor *t, int64_t start_dim, int64_t end_dim,
                                      tstor_tensor **out);
TSTOR_EXTERN int tstor_tensor_unflatten(const tstor_tensor *t, int64_t dim, int nsizes,
                                        const int64_t *sizes, tstor_tensor **out);

/* unfold(dim, size, step): every window of `size` elements along dim, `step`
 * apart, as a new last dimension. diagonal(offset, dim1, dim2): the diagonal
 * of dims dim1 and dim2 as a new last dimension. */
TSTOR_EXTERN int tstor_tensor_unfold(const tstor_tensor *t, int64_t dim, int64_t size,
                                     int64_t step, tstor_tensor **out);
TSTOR_EXTERN int tstor_tensor_diagonal(const tstor_tensor *t, int64_t offset, int64_t dim1,
                                       int64_t dim2, tstor_tensor **out);

/* split(split_size, dim), split_with_sizes(sizes, dim) and chunk(chunks, dim):
 * *out is a new array of *count new references; free both with
 * tstor_tensor_list_free(). On failure *out is NULL and *count 0. */
TSTOR_EXTERN int tstor_tensor_split(const tstor_tensor *t, int64_t split_size, int64_t dim,
                                    int *count, tstor_tensor ***out);
TSTOR_EXTERN int tstor_tensor_split_sizes(const tstor_tensor *t, int n, const int64_t *sizes,
                                          int64_t dim, int *count, tstor_tensor ***out);
TSTOR_EXTERN int tstor_tensor_chunk(const tstor_tensor *t, int chunks, int64_t dim, int *count,
                                    tstor_tensor ***out);
/* Releases each of the count tensors and frees the array; NULL is a no-op. */
TSTOR_EXTERN void tstor_tensor_list_free(tstor_tensor **list, int count);

/* view(dtype): the same bytes as another dtype. With a different element
 * size the last dimension must have stride 1 and is scaled (PyTorch's rule:
 * its size, the offset and the other strides must divide when widening). */
TSTOR_EXTERN int tstor_tensor_view_dtype(const tstor_tensor *t, tstor_dtype dtype,
                                         tstor_tensor **out);
/* The real and imaginary parts of a complex tensor, as float views (float16
 * for complex32). real() of a real tensor is t itself (one more reference);
 * imag() of one is refused. view_as_real adds a last dimension of 2. */
TSTOR_EXTERN int tstor_tensor_real(const tstor_tensor *t, tstor_tensor **out);
TSTOR_EXTERN int tstor_tensor_imag(const tstor_tensor *t, tstor_tensor **out);
TSTOR_EXTERN int tstor_tensor_view_as_real(const tstor_tensor *t, tstor_tensor **out);

/* -------------------------------------------------------------------- data */

/* Copies src into dst element by element (PyTorch's dst.copy_(src)): src is
 * broadcast to dst's shape, converted to dst's dtype (tstor_dtype_convert's
 * results), between any two devices (a backend's strided copy, else staged
 * through host memory). Refused as PyTorch refuses it: a dst whose elements
 * overlap one another (stride 0), a src that partly overlaps dst in memory,
 * shapes that do not broadcast. A src that overlaps dst in a way PyTorch
 * accepts is read element by element in PyTorch's order, giving its result.
 * A copy between an opaque dtype (float4_e2m1fn_x2, the bits types) and
 * another is refused after those checks, unless it copies nothing, in torch
 * 2.x's words (its kernel's name depends on the layout). A dst without data
 * (meta) is only checked. dst and src stay the caller's. */
TSTOR_EXTERN int tstor_tensor_copy_(tstor_tensor *dst, const tstor_tensor *src);

/* A contiguous tensor with t's elements: t itself (one more reference) when it
 * is contiguous already, else a new tensor on a new storage. *out is a new
 * reference either way. */
TSTOR_EXTERN int tstor_tensor_contiguous(const tstor_tensor *t, tstor_tensor **out);

/* A copy of t on a new storage (PyTorch's clone() with preserve_format): a
 * non-overlapping and dense t keeps its strides; another gets dense strides
 * in the order of its own (PyTorch's infer_dense_strides). *out is a new
 * reference. */
TSTOR_EXTERN int tstor_tensor_clone(const tstor_tensor *t, tstor_tensor **out);

/* t on device `dev` with dtype `dtype` (PyTorch's to(device, dtype)): t itself
 * (one more reference) when both match, else a copy laid out as clone() lays
 * it out. *out is a new reference. */
TSTOR_EXTERN int tstor_tensor_to(const tstor_tensor *t, tstor_device dev, tstor_dtype dtype,
                                 tstor_tensor **out);

/* Sets every element of t to `value`, converted as tstor_dtype_convert
 * converts a float64 (PyTorch's fill_; like it, elements that overlap one
 * another, as after expand, are allowed). The opaque dtypes and bcomplex32
 * are refused (TSTOR_EDTYPE), as PyTorch 2.x refuses them, but on a device
 * without data (meta), where no kernel runs. */
TSTOR_EXTERN int tstor_tensor_fill(tstor_tensor *t, double value);

/* Element access by multi-index (ndim = dim() indices, each wrapping when
 * negative; TSTOR_ERANGE with PyTorch's "index 5 is out of bounds for dimension
 * 0 with size 3" otherwise). get/set move element_size raw bytes; the _f64
 * forms convert as tstor_typed_get_f64 and tstor_typed_set_f64 do, and
 * refuse the opaque dtypes in PyTorch 2.x's words (TSTOR_EDTYPE). */
TSTOR_EXTERN int tstor_tensor_get(const tstor_tensor *t, const int64_t *index, void *value);
TSTOR_EXTERN int tstor_tensor_set(tstor_tensor *t, const int64_t *index, const void *value);
TSTOR_EXTERN int tstor_tensor_get_f64(const tstor_tensor *t, const int64_t *index, double *out);
TSTOR_EXTERN int tstor_tensor_set_f64(tstor_tensor *t, const int64_t *index, double value);

/* Copies t's elements, row-major and converted to out_dtype, into the C array
 * `out` of `count` elements (TSTOR_ESIZE unless count == numel). The caller
 * owns `out`. */
TSTOR_EXTERN int tstor_tensor_to_array(const tstor_tensor *t, void *out, tstor_dtype out_dtype,
                                       size_t count);

/* ---------------------------------------------------------------- printing */

/* t as PyTorch 1.13's str(t) writes it (torch 2.x's, for the dtypes 1.13
 * lacks): "tensor([[1., 2.],\n        [3., 4.]])"
 * with 4 digits, scientific notation where PyTorch chooses it, rows wrapped
 * at 80 columns, more than 1000 elements summarised with "...", and the
 * device (every device but cpu), dtype (all but float32, complex64, int64 and
 * bool) and size suffixes PyTorch adds; a meta tensor prints "tensor(...,
 * device='meta', size=(2, 3))". float8_e8m0fnu's 2^-127 counts as the zero
 * it stands for when the format is chosen, as PyTorch's ne(0) has it; a
 * float4_e2m1fn_x2 tensor shows its uint8 view in a float's format, and a
 * 0-dim one is refused (TSTOR_EDTYPE), as in torch 2.x, as is a bits tensor
 * with elements. *out is a new NUL-terminated string that the caller frees
 * with free(). */
TSTOR_EXTERN int tstor_tensor_to_string(const tstor_tensor *t, char **out);

/* Writes tstor_tensor_to_string(t) and a newline to f (Python's print(t)). */
TSTOR_EXTERN int tstor_tensor_print(FILE *f, const tstor_tensor *t);

#ifdef __cplusplus
}
#endif

#endif /* TSTOR_TENSOR_H */
