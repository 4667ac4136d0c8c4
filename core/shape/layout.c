/* Layouts, as ATen's TensorGeometry and ExpandUtils: the tstor_layout value
 * (init, of, numel, bytes, memory format, restride, view, empty) and
 * broadcasting; the helpers the other shape files share; and the tensor glue,
 * which turns an inference into a new tensor (tstor__shape_form, the one
 * helper of every tensor form). The bottom of shape/: it calls no other shape
 * file. */
#include "shape/shape_internal.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ helpers */

static const int cl2d_order[4] = {1, 3, 2, 0};
static const int cl3d_order[5] = {1, 4, 3, 2, 0};

/* c10's get_channels_last_strides_2d/3d: plain products, so that a size of 0
 * zeroes the strides outside it (where contiguous strides count it as 1). */
void tstor__channels_last_strides(int ndim, const int64_t *sizes, int64_t *strides) {
  const int *order = ndim == 4 ? cl2d_order : cl3d_order;
  int64_t acc = 1;
  for (int i = 0; i < ndim; i++) {
    strides[order[i]] = acc;
    acc = tstor__mul_wrap(acc, sizes[order[i]]);
  }
}

/* c10's is_channels_last_strides_2d/3d: the strides read as channels-last,
 * with the ambiguous layouts (a C of stride 0, N11W sliced, N1H1) read as
 * contiguous, as PyTorch's suggest_memory_format does. */
static int strides_like(const tstor_layout *l, const int *order, int n) {
  int64_t min = 0;
  if (l->strides[1] == 0) return 0;
  for (int i = 0; i < n; i++) {
    int d = order[i];
    if (l->sizes[d] == 0 || l->strides[d] < min) return 0;
    if (d == 0 && min == l->strides[1]) return 0;
    min = l->strides[d];
    if (l->sizes[d] > 1) min *= l->sizes[d];
  }
  return 1;
}

int tstor__check_layout(const tstor_layout *l, const char *what) {
  if (!l) return tstor__err(TSTOR_EINVAL, "%s is NULL", what);
  if (!tstor_dtype_info_of(l->dtype) || l->ndim < 0 || l->ndim > TSTOR_TENSOR_MAX_DIM)
    return tstor__err(TSTOR_EINVAL, "%s is not a valid layout", what);
  return 0;
}

int tstor__check_optional(const tstor_layout *l, const char *what) {
  return l ? tstor__check_layout(l, what) : 0;
}

bool tstor__is_quantized(tstor_dtype d) {
  return tstor_dtype_info_of(d)->kind == TSTOR_KIND_QUANTIZED;
}

int tstor__set_contiguous(tstor_layout *out, tstor_dtype dtype, int ndim, const int64_t *sizes) {
  uint64_t nbytes;
  int rc = tstor__layout_nbytes(ndim, sizes, NULL, tstor_dtype_size(dtype), &nbytes);
  if (rc) return rc;
  out->dtype = dtype;
  out->ndim = ndim;
  if (ndim) memmove(out->sizes, sizes, sizeof(int64_t) * (size_t)ndim);
  tstor__layout_contiguous(out);
  return 0;
}

void tstor__layout_empty_like(const tstor_layout *in, tstor_layout *out) {
  tstor__layout_copy(out, in);
  if (!tstor__non_overlapping_and_dense(in->ndim, in->sizes, in->strides))
    tstor__infer_dense_strides(in->ndim, in->sizes, in->strides, out->strides);
}

int tstor__params_read(const tstor__params_kind *kind, const void *params, void *out) {
  size_t size;
  memcpy(&size, params, sizeof size);
  if (size < kind->first || size > kind->current)
    return tstor__err(TSTOR_EINVAL, "%s.size is %zu, expected %zu to %zu: initialise it with %s",
                      kind->type, size, kind->first, kind->current, kind->init);
  memcpy(out, kind->defaults, kind->current);
  memcpy(out, params, size);
  return 0;
}

/* ------------------------------------------------------------------ layouts */

int tstor_layout_init(tstor_layout *out, tstor_dtype dtype, int ndim, const int64_t *sizes,
                      const int64_t *strides) {
  if (!out) return tstor__err(TSTOR_EINVAL, "layout: out is NULL");
  if (!tstor_dtype_info_of(dtype))
    return tstor__err(TSTOR_EINVAL, "layout: %d is not a dtype", (int)dtype);
  if (ndim < 0 || ndim > TSTOR_TENSOR_MAX_DIM || (ndim > 0 && !sizes))
    return tstor__err(TSTOR_EINVAL, "layout: %d dimensions (0 .. %d, with sizes)", ndim,
                      TSTOR_TENSOR_MAX_DIM);
  int64_t numel = 1;
  for (int d = 0; d < ndim; d++) {
    if (sizes[d] < 0)
      return tstor__err(TSTOR_EINVAL, "layout: negative size %lld in dimension %d",
                        (long long)sizes[d], d);
    /* the contiguous strides are products of the sizes: they must fit */
    if (__builtin_mul_overflow(numel, sizes[d] > 1 ? sizes[d] : 1, &numel)) {
      char a[TSTOR__SHAPE_STR_MAX];
      return tstor__err(TSTOR_EOVERFLOW, "layout: %s has more elements than int64 counts",
                        tstor__dims_str(a, sizeof a, ndim, sizes));
    }
  }
  out->dtype = dtype;
  out->ndim = ndim;
  if (ndim) memmove(out->sizes, sizes, sizeof(int64_t) * (size_t)ndim);
  if (strides && ndim)
    memmove(out->strides, strides, sizeof(int64_t) * (size_t)ndim);
  else
    tstor__layout_contiguous(out);
  return 0;
}

int tstor_layout_of(const tstor_tensor *t, tstor_layout *out) {
  if (!t || !out) return tstor__err(TSTOR_EINVAL, "layout_of: NULL argument");
  return tstor_layout_init(out, tstor_tensor_dtype(t), tstor_tensor_dim(t), tstor_tensor_sizes(t),
                           tstor_tensor_strides(t));
}

int64_t tstor_layout_numel(const tstor_layout *l) {
  int64_t n = 1;
  for (int d = 0; d < l->ndim; d++)
    if (l->sizes[d] == 0) return 0;
  for (int d = 0; d < l->ndim; d++)
    if (__builtin_mul_overflow(n, l->sizes[d], &n)) return -1;
  return n;
}

int tstor_layout_bytes(const tstor_layout *l, uint64_t *out) {
  if (!l || !out) return tstor__err(TSTOR_EINVAL, "layout_bytes: NULL argument");
  size_t es = tstor_dtype_size(l->dtype);
  if (!es) return tstor__err(TSTOR_EINVAL, "layout_bytes: %d is not a dtype", (int)l->dtype);
  if (l->ndim < 0 || l->ndim > TSTOR_TENSOR_MAX_DIM)
    return tstor__err(TSTOR_EINVAL, "layout_bytes: %d dimensions", l->ndim);
  return tstor_layout_nbytes(l->ndim, l->sizes, l->strides, es, 0, out);
}

tstor_memory_format tstor_layout_memory_format(const tstor_layout *l) {
  if (l && l->ndim == 4 && strides_like(l, cl2d_order, 4)) return TSTOR_MEMORY_CHANNELS_LAST;
  if (l && l->ndim == 5 && strides_like(l, cl3d_order, 5)) return TSTOR_MEMORY_CHANNELS_LAST_3D;
  return TSTOR_MEMORY_CONTIGUOUS;
}

int tstor_layout_restride(tstor_layout *l, tstor_memory_format format) {
  if (!l) return tstor__err(TSTOR_EINVAL, "layout_restride: NULL layout");
  switch (format) {
    case TSTOR_MEMORY_CONTIGUOUS: tstor__layout_contiguous(l); return 0;
    case TSTOR_MEMORY_CHANNELS_LAST:
      if (l->ndim != 4)
        return tstor__err(TSTOR_EINVAL, "required rank 4 tensor to use channels_last format");
      tstor__channels_last_strides(4, l->sizes, l->strides);
      return 0;
    case TSTOR_MEMORY_CHANNELS_LAST_3D:
      if (l->ndim != 5)
        return tstor__err(TSTOR_EINVAL, "required rank 5 tensor to use channels_last_3d format");
      tstor__channels_last_strides(5, l->sizes, l->strides);
      return 0;
  }
  return tstor__err(TSTOR_EINVAL, "layout_restride: bad memory format %d", (int)format);
}

int tstor_layout_view(const tstor_layout *in, int ndim, const int64_t *sizes, tstor_layout *out) {
  int rc = tstor__check_layout(in, "view: input");
  if (rc < 0) return rc;
  if (!out || ndim < 0 || ndim > TSTOR_TENSOR_MAX_DIM || (ndim && !sizes))
    return tstor__err(TSTOR_EINVAL, "view: bad arguments");
  int64_t numel = tstor_layout_numel(in), s[TSTOR_TENSOR_MAX_DIM], st[TSTOR_TENSOR_MAX_DIM];
  if (numel < 0) return tstor__err(TSTOR_EOVERFLOW, "view: the input's element count passes int64");
  rc = tstor__infer_size(ndim, sizes, numel, s);
  if (rc == 0) rc = tstor__view_strides(in->ndim, in->sizes, in->strides, ndim, s, st, "view");
  if (rc < 0) return rc;
  out->dtype = in->dtype;
  out->ndim = ndim;
  memcpy(out->sizes, s, sizeof(int64_t) * (size_t)ndim);
  memcpy(out->strides, st, sizeof(int64_t) * (size_t)ndim);
  return 0;
}

int tstor_layout_empty(tstor_context *ctx, tstor_device dev, const tstor_layout *l,
                       tstor_tensor **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "layout_empty: out is NULL");
  *out = NULL;
  if (!l) return tstor__err(TSTOR_EINVAL, "layout_empty: NULL layout");
  return tstor_tensor_empty_strided(ctx, dev, l->dtype, l->ndim, l->sizes, l->strides, out);
}

/* ------------------------------------------------------------- tensor glue */

int tstor__shape_device(int n, const tstor_tensor *const *tensors, tstor_context **ctx,
                        tstor_device *dev) {
  const tstor_tensor *first = NULL;
  for (int i = 0; i < n; i++) {
    const tstor_tensor *t = tensors[i];
    if (!t) continue;
    if (!first) {
      first = t;
      *ctx = t->storage->ctx;
      *dev = t->storage->device;
      continue;
    }
    tstor_device d = t->storage->device;
    if (d.type != dev->type || d.index != dev->index || t->storage->ctx != *ctx) {
      char a[64] = "?", b[64] = "?";
      tstor_device_format(*ctx, *dev, a, sizeof a);
      tstor_device_format(t->storage->ctx, d, b, sizeof b);
      return tstor__err(TSTOR_EINVAL,
                        "Expected all tensors to be on the same device, but found "
                        "at least two devices, %s and %s!",
                        a, b);
    }
  }
  if (!first) return tstor__err(TSTOR_EINVAL, "shape: no tensor given");
  return 0;
}

/* As tstor__shape_device, and builds a layout from each tensor. */
static int shape_layouts(int n, const tstor_tensor *const *tensors, tstor_layout *layouts,
                         tstor_context **ctx, tstor_device *dev) {
  for (int i = 0; i < n; i++) {
    const tstor_tensor *t = tensors[i];
    if (!t) continue;
    /* a tensor's layout is valid by construction: copied, not checked */
    layouts[i].dtype = t->dtype;
    layouts[i].ndim = t->ndim;
    memcpy(layouts[i].sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    memcpy(layouts[i].strides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
  }
  return tstor__shape_device(n, tensors, ctx, dev);
}

int tstor__shape_complete(tstor_context *ctx, tstor_device dev, tstor_dtype dtype, tstor_tensor *t,
                          int contiguous, tstor_tensor **out) {
  /* t's layout came out of shape inference: valid sizes and strides, so the
   * tensor goes straight onto a new storage of exactly the bytes it needs,
   * counted as PyTorch's empty and empty_strided count them */
  int64_t numel = 1;
  int over_numel = 0, empty = 0;
  for (int d = 0; d < t->ndim; d++) {
    empty |= t->sizes[d] == 0;
    over_numel |= __builtin_mul_overflow(numel, t->sizes[d], &numel);
  }
  if (!contiguous) contiguous = tstor__compute_contiguous(t->ndim, t->sizes, t->strides);
  size_t esize = tstor_dtype_size(dtype);
  /* A contiguous count is the element count's bytes, known here already; the
   * shared count runs for strides and for the refusal and its message. */
  uint64_t nbytes = 0;
  int rc = 0;
  if (!contiguous || over_numel || __builtin_mul_overflow((uint64_t)numel, esize, &nbytes) ||
      nbytes > INT64_MAX || nbytes > SIZE_MAX)
    rc = tstor__layout_nbytes(t->ndim, t->sizes, contiguous ? NULL : t->strides, esize, &nbytes);
  /* the strided count stops at a size of 0, and its strides may have wrapped
   * (tstor__mul_wrap) where the element count passes int64 */
  if (rc == 0 && over_numel && !empty) {
    char a[TSTOR__SHAPE_STR_MAX];
    rc = tstor__err(TSTOR_EOVERFLOW, "the number of elements of sizes %s overflows int64",
                    tstor__dims_str(a, sizeof a, t->ndim, t->sizes));
  }
  tstor_storage *s = NULL;
  /* the device is a live tensor's: checked when that tensor was made */
  if (TSTOR__LIKELY(rc == 0))
    rc =
        tstor__storage_new_with(ctx, dev, ctx->types[dev.type].allocator, (size_t)nbytes, NULL, &s);
  if (TSTOR__UNLIKELY(rc)) {
    tstor__tensor_discard(t);
    return rc;
  }
  tstor__tensor_complete(t, s, dtype, esize, 0, numel, contiguous);
  *out = t;
  return 0;
}

/* Ends a tensor form: on rc == 0 allocates the output tensor for layout l. */
static int shape_finish(int rc, tstor_context *ctx, tstor_device dev, const tstor_layout *l,
                        tstor_tensor **out) {
  if (rc < 0) return rc;
  tstor_tensor *t = tstor__tensor_blank(l->ndim);
  if (!t) return TSTOR_ENOMEM;
  memcpy(t->sizes, l->sizes, sizeof(int64_t) * (size_t)l->ndim);
  memcpy(t->strides, l->strides, sizeof(int64_t) * (size_t)l->ndim);
  return tstor__shape_complete(ctx, dev, l->dtype, t, 0, out);
}

/* The inputs a tensor form keeps on the stack (batch_norm's five); cat and
 * stack of more allocate, up to FORM_MAX. */
#define FORM_LOCAL 5
#define FORM_MAX (1 << 20)

int tstor__shape_form(const char *name, int n, const tstor_tensor *const *tensors, int required,
                      tstor__shape_infer infer, const void *args, tstor_tensor **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "%s: out is NULL", name);
  *out = NULL;
  if (n < 1 || n > FORM_MAX || !tensors)
    return tstor__err(TSTOR_EINVAL, "%s: expected a non-empty list of tensors", name);
  for (int i = 0; i < required; i++)
    if (!tensors[i]) return tstor__err(TSTOR_EINVAL, "%s: tensor %d is NULL", name, i);
  tstor_layout local[FORM_LOCAL], *l = local, r;
  const tstor_layout *local_in[FORM_LOCAL], **in = local_in;
  if (n > FORM_LOCAL) {
    l = tstor__malloc((sizeof *l + sizeof *in) * (size_t)n);
    if (!l) return tstor__err(TSTOR_ENOMEM, "%s: out of memory", name);
    in = (const tstor_layout **)(l + n);
  }
  tstor_context *ctx = NULL;
  tstor_device dev = {0, 0};
  int rc = shape_layouts(n, tensors, l, &ctx, &dev);
  for (int i = 0; i < n; i++) in[i] = tensors[i] ? &l[i] : NULL;
  if (rc == 0) rc = infer(in, args, &r);
  if (l != local) tstor__free(l);
  if (rc == TSTOR__SHAPE_IS_INPUT) {
    *out = tstor_tensor_retain((tstor_tensor *)tensors[0]);
    return 0;
  }
  return shape_finish(rc, ctx, dev, &r, out);
}

/* ------------------------------------------------------------ broadcasting */

/* torch.broadcast_shapes in torch 2.x's words (its references'
 * _broadcast_shapes): the shapes taken in turn into a common shape of ones. */
int tstor_broadcast_shapes(int n, const int *ndims, const int64_t *const *sizes, int *out_ndim,
                           int64_t *out_sizes) {
  int rc = tstor__broadcast_shapes(n, ndims, sizes, out_ndim, out_sizes);
  if (rc != TSTOR_ESIZE) return rc;
  int nd = 0;
  for (int i = 0; i < n; i++)
    if (ndims[i] > nd) nd = ndims[i];
  int64_t common[TSTOR_TENSOR_MAX_DIM];
  for (int d = 0; d < nd; d++) common[d] = 1;
  for (int i = 0; i < n; i++)
    for (int idx = -1; idx >= -ndims[i]; idx--) {
      int64_t s = sizes[i][ndims[i] + idx], *c = &common[nd + idx];
      if (*c == 1) {
        *c = s;
      } else if (s != 1 && *c != s) {
        char a[TSTOR__SHAPE_STR_MAX], b[TSTOR__SHAPE_STR_MAX];
        return tstor__err(TSTOR_ESIZE,
                          "Attempting to broadcast a dimension of length %lld at %d! Mismatching "
                          "argument at index %d had %s; but expected shape should be "
                          "broadcastable to %s",
                          (long long)s, idx, i, tstor__dims_str(a, sizeof a, ndims[i], sizes[i]),
                          tstor__dims_str(b, sizeof b, nd, common));
      }
    }
  return rc; /* not reached: the two agree on what broadcasts */
}

int tstor__broadcast_shapes(int n, const int *ndims, const int64_t *const *sizes, int *out_ndim,
                            int64_t *out_sizes) {
  if (n < 1 || !ndims || !sizes || !out_ndim || !out_sizes)
    return tstor__err(TSTOR_EINVAL, "broadcast_shapes: %s", n < 1 ? "no shapes" : "NULL argument");
  int nd = 0;
  int64_t r[TSTOR_TENSOR_MAX_DIM];
  for (int i = 0; i < n; i++) {
    if (ndims[i] < 0 || ndims[i] > TSTOR_TENSOR_MAX_DIM || (ndims[i] && !sizes[i]))
      return tstor__err(TSTOR_EINVAL, "broadcast_shapes: shape %d has %d dimensions", i, ndims[i]);
    for (int d = 0; d < ndims[i]; d++)
      if (sizes[i][d] < 0)
        return tstor__err(TSTOR_EINVAL, "broadcast_shapes: shape %d has a negative size", i);
    int rc = tstor__broadcast_into(&nd, r, ndims[i], sizes[i]);
    if (rc < 0) return rc;
  }
  *out_ndim = nd;
  memcpy(out_sizes, r, sizeof(int64_t) * (size_t)nd);
  return 0;
}

/* The name torch's argument checks give a CPU tensor's type: the legacy
 * Python class where the dtype has one ("torch.FloatTensor"), else the C++
 * type's ("CPUUInt16Type"). */
const char *tstor__tensor_type_name(tstor_dtype d, char *buf, size_t size) {
  const char *legacy = NULL;
  switch (d) {
    case TSTOR_UINT8: legacy = "Byte"; break;
    case TSTOR_INT8: legacy = "Char"; break;
    case TSTOR_INT16: legacy = "Short"; break;
    case TSTOR_INT32: legacy = "Int"; break;
    case TSTOR_INT64: legacy = "Long"; break;
    case TSTOR_FLOAT16: legacy = "Half"; break;
    case TSTOR_FLOAT32: legacy = "Float"; break;
    case TSTOR_FLOAT64: legacy = "Double"; break;
    case TSTOR_BOOL: legacy = "Bool"; break;
    case TSTOR_BFLOAT16: legacy = "BFloat16"; break;
    case TSTOR_COMPLEX64: legacy = "ComplexFloat"; break;
    case TSTOR_COMPLEX128: legacy = "ComplexDouble"; break;
    default: break;
  }
  if (legacy)
    snprintf(buf, size, "torch.%sTensor", legacy);
  else
    snprintf(buf, size, "CPU%sType", tstor_dtype_info_of(d)->scalar_type);
  return buf;
}
