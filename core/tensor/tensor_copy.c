/* Copies between tensors: a transfer between two layouts on any two devices
 * (planned by iter.c, run on host memory, or by a backend's own strided copy,
 * or staged through host memory), and the calls built on it: copy_,
 * contiguous, clone and to. */
#include "tensor/tensor_internal.h"

#include <inttypes.h>
#include <string.h>

#define MAXD TSTOR_TENSOR_MAX_DIM

typedef tstor__side side;

int tstor__side_on_host(const side *x) {
  return x->storage == NULL ||
         (x->storage->ctx->types[x->storage->device.type].ops.flags & TSTOR_DEVICE_HOST);
}

side tstor__tensor_side(const tstor_tensor *t, const int64_t *strides) {
  side x = {t->storage, tstor_tensor_data(t), strides ? strides : t->strides, t->dtype, t->esize};
  return x;
}

int tstor__side_read(const side *x, int64_t lo, void *buf, int64_t n) {
  tstor_device h;
  int rc = tstor__staging_device(x->storage->ctx, &h);
  if (rc) return rc;
  return tstor__copy_bytes(x->storage->ctx, h, buf, x->storage->device, x->ptr + lo, (size_t)n,
                           NULL, NULL);
}
int tstor__side_write(const side *x, int64_t lo, const void *buf, int64_t n) {
  tstor_device h;
  int rc = tstor__staging_device(x->storage->ctx, &h);
  if (rc) return rc;
  return tstor__copy_bytes(x->storage->ctx, x->storage->device, x->ptr + lo, h, buf, (size_t)n,
                           NULL, NULL);
}

static int same_device(const side *a, const side *b) {
  return a->storage && b->storage && a->storage->ctx == b->storage->ctx &&
         a->storage->device.type == b->storage->device.type &&
         a->storage->device.index == b->storage->device.index;
}

/* Whether [a, a + an) and [b, b + bn) share a byte in one address space. */
static int ranges_meet(const side *a, int64_t an, const side *b, int64_t bn) {
  if (!(tstor__side_on_host(a) && tstor__side_on_host(b)) && !same_device(a, b)) return 0;
  uintptr_t a0 = (uintptr_t)a->ptr, b0 = (uintptr_t)b->ptr;
  return a0 < b0 + (uintptr_t)bn && b0 < a0 + (uintptr_t)an;
}

int tstor__transfer(const side *dst, const side *src, int ndim, const int64_t *sizes) {
  char *dbuf = NULL, *sbuf = NULL;
  int rc = 0;
  tstor__plan *p = tstor__malloc(sizeof *p);
  if (p == NULL) return tstor__err(TSTOR_ENOMEM, "no memory for a copy plan");
  p->dst_dtype = dst->dtype;
  p->src_dtype = src->dtype;
  p->dst_esize = dst->es;
  p->src_esize = src->es;
  p->same = dst->dtype == src->dtype;
  if (tstor__plan_build(p, ndim, sizes, dst->strides, src->strides) == 0) goto out;
  int64_t dspan = tstor__plan_span(p, p->dst_strides, p->dst_esize);
  int64_t sspan = tstor__plan_span(p, p->src_strides, p->src_esize);
  p->serial = ranges_meet(dst, dspan, src, sspan);
  p->ordered = !tstor__plan_dst_distinct(p);
  if (tstor__side_on_host(dst) && tstor__side_on_host(src)) {
    p->dst = dst->ptr;
    p->src = src->ptr;
    tstor__plan_run(p);
    goto out;
  }
  /* A backend's own strided copy, same device, same dtype, in any order. */
  if (p->same && same_device(dst, src) && !p->serial && !p->ordered) {
    const tstor__devtype *t = &dst->storage->ctx->types[dst->storage->device.type];
    if (t->ops.copy_strided) {
      tstor__err_clear();
      rc = t->ops.copy_strided(t->state, dst->storage->device.index, dst->ptr, p->dst_strides,
                               src->ptr, p->src_strides, p->size, p->ndim, p->dst_esize, NULL);
      if (rc != TSTOR_ENOTSUP) {
        if (rc && !tstor_last_error()[0])
          tstor__err(rc, "%s strided copy of %d dims failed", t->name, p->ndim);
        goto out;
      }
      rc = 0; /* declined: staged below */
    }
  }
  /* Staged through host memory: the bytes each side spans. Sides that share
   * bytes are staged as one buffer, so the overlap stays what it was. */
  if (p->serial && !tstor__side_on_host(dst)) {
    uintptr_t d0 = (uintptr_t)dst->ptr, s0 = (uintptr_t)src->ptr;
    uintptr_t lo = d0 < s0 ? d0 : s0;
    uintptr_t hi = d0 + (uintptr_t)dspan > s0 + (uintptr_t)sspan ? d0 + (uintptr_t)dspan
                                                                 : s0 + (uintptr_t)sspan;
    side whole = *dst;
    whole.ptr = (char *)lo;
    if ((dbuf = tstor__malloc(hi - lo)) == NULL) {
      rc = tstor__err(TSTOR_ENOMEM, "no host memory to stage %zu bytes", (size_t)(hi - lo));
      goto out;
    }
    if ((rc = tstor__side_read(&whole, 0, dbuf, (int64_t)(hi - lo)))) goto out;
    p->dst = dbuf + (d0 - lo);
    p->src = dbuf + (s0 - lo);
    tstor__plan_run(p);
    rc = tstor__side_write(&whole, 0, dbuf, (int64_t)(hi - lo));
    goto out;
  }
  if (!tstor__side_on_host(src)) {
    if ((sbuf = tstor__malloc((size_t)sspan)) == NULL) {
      rc = tstor__err(TSTOR_ENOMEM, "no host memory to stage %" PRId64 " bytes", sspan);
      goto out;
    }
    if ((rc = tstor__side_read(src, 0, sbuf, sspan))) goto out;
  }
  if (!tstor__side_on_host(dst)) {
    int64_t numel = 1;
    for (int i = 0; i < p->ndim; i++) numel *= p->size[i];
    if ((dbuf = tstor__malloc((size_t)dspan)) == NULL) {
      rc = tstor__err(TSTOR_ENOMEM, "no host memory to stage %" PRId64 " bytes", dspan);
      goto out;
    }
    /* a destination with gaps keeps the bytes between its elements */
    if (dspan != numel * (int64_t)p->dst_esize && (rc = tstor__side_read(dst, 0, dbuf, dspan)))
      goto out;
  }
  p->dst = dbuf ? dbuf : dst->ptr;
  p->src = sbuf ? sbuf : src->ptr;
  tstor__plan_run(p);
  if (dbuf) rc = tstor__side_write(dst, 0, dbuf, dspan);
out:
  tstor__free(sbuf);
  tstor__free(dbuf);
  tstor__free(p);
  return rc;
}

/* -------------------------------------------------------------- copy_ */

static const char internal_overlap_msg[] =
    "unsupported operation: more than one element of the written-to tensor refers to a single "
    "memory location. Please clone() the tensor before performing the operation.";
static const char partial_overlap_msg[] =
    "unsupported operation: some elements of the input tensor and the written-to tensor refer "
    "to a single memory location. Please clone() the tensor before performing the operation.";

/* assert_no_internal_overlap: only a certain overlap (stride 0) is refused. */
static int internal_overlap(const tstor_tensor *t) {
  if (tstor_tensor_is_non_overlapping_and_dense(t)) return 0;
  for (int i = 0; i < t->ndim; i++)
    if (t->strides[i] == 0 && t->sizes[i] > 1) return 1;
  return 0;
}

/* get_overlap_status == PARTIAL, on the bytes of one device. */
static int partial_overlap(const tstor_tensor *a, const tstor_tensor *b) {
  if (a->numel == 0 || b->numel == 0) return 0;
  if (!tstor_tensor_is_non_overlapping_and_dense(a) ||
      !tstor_tensor_is_non_overlapping_and_dense(b))
    return 0;
  if (!tstor__tensor_has_data(a) || !tstor__tensor_has_data(b)) return 0;
  if (a->storage->ctx != b->storage->ctx || a->storage->device.type != b->storage->device.type ||
      a->storage->device.index != b->storage->device.index)
    return 0;
  uintptr_t a0 = (uintptr_t)tstor_tensor_data(a), b0 = (uintptr_t)tstor_tensor_data(b);
  uintptr_t a1 = a0 + (uintptr_t)(a->numel * (int64_t)a->esize);
  uintptr_t b1 = b0 + (uintptr_t)(b->numel * (int64_t)b->esize);
  if (a0 == b0 && a1 == b1) {
    for (int i = 0; i < a->ndim && a->ndim == b->ndim; i++)
      if (a->strides[i] != b->strides[i]) return 1;
    return a->ndim != b->ndim;
  }
  return a0 < b1 && b0 < a1;
}

/* src's strides expanded to dst's shape (0 where src broadcasts), with
 * TensorIterator's messages when the shapes do not broadcast to dst's. */
static int broadcast_to(const tstor_tensor *dst, const tstor_tensor *src, int64_t *sstr) {
  int nd = dst->ndim;
  int64_t shape[MAXD];
  memcpy(shape, dst->sizes, sizeof(int64_t) * (size_t)nd);
  int rc = tstor__broadcast_into(&nd, shape, src->ndim, src->sizes);
  if (rc) return rc;
  int differs = nd != dst->ndim;
  for (int i = 0; !differs && i < nd; i++) differs = shape[i] != dst->sizes[i];
  if (differs) {
    char x[256], y[256];
    return tstor__err(TSTOR_ESIZE, "output with shape %s doesn't match the broadcast shape %s",
                      tstor__dims_str(x, sizeof x, dst->ndim, dst->sizes),
                      tstor__dims_str(y, sizeof y, nd, shape));
  }
  for (int i = 0; i < dst->ndim; i++) {
    int j = i - (dst->ndim - src->ndim);
    sstr[i] = j < 0 || src->sizes[j] != dst->sizes[i] ? 0 : src->strides[j];
  }
  return 0;
}

static int is_opaque(tstor_dtype dt) { return tstor_dtype_info_of(dt)->kind == TSTOR_KIND_OPAQUE; }

/* PyTorch refuses a copy between an opaque dtype and another in its copy
 * kernel: after TensorIterator has checked overlaps and shapes, and not when
 * nothing is copied. Its words name the kernel: for float4_e2m1fn_x2 with
 * float32, copy_kernel where the innermost dimension TensorIterator iterates
 * is contiguous in both (or broadcast in the source), as its loop between
 * float32 and the narrower floats wants; copy_ otherwise, 0-dim tensors
 * included. */
static int opaque_refusal(const tstor_tensor *dst, const tstor_tensor *src, const int64_t *sstr) {
  int contiguous = 0;
  if (dst->ndim > 0) {
    tstor__plan p;
    p.dst_esize = dst->esize;
    p.src_esize = src->esize;
    tstor__plan_build(&p, dst->ndim, dst->sizes, dst->strides, sstr);
    contiguous = p.dst_strides[0] == (int64_t)dst->esize &&
                 (p.src_strides[0] == (int64_t)src->esize || p.src_strides[0] == 0);
  }
  return tstor__opaque_copy_refused(dst->dtype, src->dtype, contiguous);
}

int tstor_tensor_copy_(tstor_tensor *dst, const tstor_tensor *src) {
  if (dst == NULL || src == NULL) return tstor__err(TSTOR_EINVAL, "tensor_copy_: NULL tensor");
  if (dst->storage->ctx != src->storage->ctx)
    return tstor__err(TSTOR_EINVAL, "tensor_copy_: tensors belong to different contexts");
  int rc = tstor_dtype_can_convert(dst->dtype, src->dtype);
  int opaque = rc && (is_opaque(dst->dtype) || is_opaque(src->dtype));
  if (rc && !opaque) return rc;
  if (dst == src) return 0;
  /* the same elements read as the same dtype: nothing to do (PyTorch's is_same_data) */
  if (dst->storage == src->storage && dst->offset == src->offset && dst->dtype == src->dtype &&
      dst->ndim == src->ndim && memcmp(dst->dims, src->dims, 2 * (size_t)dst->ndim * 8) == 0)
    return 0;
  /* TensorIterator's order: overlaps first, then shapes */
  if (dst->numel != 0 && internal_overlap(dst))
    return tstor__err(TSTOR_EINVAL, "%s", internal_overlap_msg);
  if (partial_overlap(dst, src)) return tstor__err(TSTOR_EINVAL, "%s", partial_overlap_msg);
  int64_t sstr[MAXD];
  if ((rc = broadcast_to(dst, src, sstr))) return rc;
  if (dst->numel == 0 || !tstor__tensor_has_data(dst)) return 0;
  if (opaque) return opaque_refusal(dst, src, sstr);
  if (!tstor__tensor_has_data(src))
    return tstor__err(TSTOR_ENODATA, "tensor_copy_: the source is on %s, which has no data",
                      src->storage->ctx->types[src->storage->device.type].name);
  side d = tstor__tensor_side(dst, NULL), s = tstor__tensor_side(src, sstr);
  return tstor__transfer(&d, &s, dst->ndim, dst->sizes);
}

/* ------------------------------------------------- layouts of new copies */

/* A new uninitialised tensor shaped like t, on dev with dtype, laid out as
 * PyTorch's empty_like(preserve_format) lays it out: t's strides when t is
 * dense, else dense strides in the order of t's. */
static int empty_like(const tstor_tensor *t, tstor_device dev, tstor_dtype dtype,
                      tstor_tensor **out) {
  int64_t st[MAXD];
  if (tstor_tensor_is_non_overlapping_and_dense(t))
    memcpy(st, t->strides, (size_t)t->ndim * 8);
  else
    tstor__infer_dense_strides(t->ndim, t->sizes, t->strides, st);
  return tstor_tensor_empty_strided(t->storage->ctx, dev, dtype, t->ndim, t->sizes, st, out);
}

static int copy_into_new(const tstor_tensor *t, tstor_tensor *c, tstor_tensor **out) {
  int rc = tstor_tensor_copy_(c, t);
  if (rc) {
    tstor_tensor_release(c);
    return rc;
  }
  *out = c;
  return 0;
}

int tstor_tensor_clone(const tstor_tensor *t, tstor_tensor **out) {
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "tensor_clone: NULL out");
  *out = NULL;
  if (t == NULL) return tstor__err(TSTOR_EINVAL, "tensor_clone: NULL tensor");
  tstor_tensor *c;
  int rc = empty_like(t, t->storage->device, t->dtype, &c);
  return rc ? rc : copy_into_new(t, c, out);
}

int tstor_tensor_contiguous(const tstor_tensor *t, tstor_tensor **out) {
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "tensor_contiguous: NULL out");
  *out = NULL;
  if (t == NULL) return tstor__err(TSTOR_EINVAL, "tensor_contiguous: NULL tensor");
  if (t->contiguous) {
    *out = tstor_tensor_retain((tstor_tensor *)t);
    return 0;
  }
  tstor_tensor *c;
  int rc = tstor_tensor_empty(t->storage->ctx, t->storage->device, t->dtype, t->ndim, t->sizes, &c);
  return rc ? rc : copy_into_new(t, c, out);
}

int tstor_tensor_to(const tstor_tensor *t, tstor_device dev, tstor_dtype dtype,
                    tstor_tensor **out) {
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "tensor_to: NULL out");
  *out = NULL;
  if (t == NULL) return tstor__err(TSTOR_EINVAL, "tensor_to: NULL tensor");
  int rc;
  if ((rc = tstor__check_device(t->storage->ctx, dev))) return rc;
  if (tstor__dtype(dtype, "tensor_to") == NULL) return TSTOR_EINVAL;
  /* an opaque dtype is refused by the copy, in the words its layout gives */
  if ((rc = tstor_dtype_can_convert(dtype, t->dtype)) && !is_opaque(dtype) && !is_opaque(t->dtype))
    return rc;
  if (dev.type == t->storage->device.type && dev.index == t->storage->device.index &&
      dtype == t->dtype) {
    *out = tstor_tensor_retain((tstor_tensor *)t);
    return 0;
  }
  tstor_tensor *c;
  rc = empty_like(t, dev, dtype, &c);
  return rc ? rc : copy_into_new(t, c, out);
}
