/* A torch quantized tensor's values (its codes mapped through its scales and
 * zero points), bit for bit as torch's CPU dequantize computes them: per
 * tensor float((int32)(q - zero_point)) * float(scale); per channel
 * float((float(q) - float(zero_point)) * scale) in double, the scales
 * float64; with float zero points (float_qparams) (float(q) - zero_point) *
 * scale in float32. */
#include "io_internal.h"

#include <string.h>

/* The n per-channel scales or zero points of a quantized tensor (a tensor,
 * or a list of numbers), converted to `as` as torch converts them: into d[]
 * for float64 and float32, into i[] for int64. */
static int channel_values(const tstor_value *v, tstor_dtype as, int64_t n, double *d, int64_t *i) {
  tstor_tensor *src = v->kind == TSTOR_VALUE_TENSOR ? v->u.tensor.t : NULL, *conv = NULL;
  if (!src) {
    for (int64_t c = 0; c < n; c++) {
      const tstor_value *x = v->u.seq.items[c];
      bool f = x->kind == TSTOR_VALUE_FLOAT;
      if (as == TSTOR_INT64)
        i[c] = f ? (int64_t)x->u.f : x->u.i; /* torch.tensor(list, dtype=long) */
      else if (as == TSTOR_FLOAT32)
        d[c] = (float)(f ? x->u.f : (double)x->u.i);
      else
        d[c] = f ? x->u.f : (double)x->u.i;
    }
    return 0;
  }
  tstor_device cpu;
  int rc = tstor_device_parse(tstor_tensor_context(src), "cpu", &cpu);
  if (!rc) rc = tstor_tensor_to(src, cpu, as, &conv);
  for (int64_t c = 0; c < n && !rc; c++) {
    if (as == TSTOR_INT64) {
      rc = tstor_tensor_get(conv, &c, &i[c]);
    } else if (as == TSTOR_FLOAT32) {
      float f;
      rc = tstor_tensor_get(conv, &c, &f);
      d[c] = f;
    } else {
      rc = tstor_tensor_get(conv, &c, &d[c]);
    }
  }
  tstor_tensor_release(conv);
  return rc;
}

/* Code k of a contiguous tensor of `dtype`'s codes at p. */
static int64_t code_at(const uint8_t *p, tstor_dtype dtype, int64_t k) {
  switch (dtype) {
    case TSTOR_QINT8: return (int8_t)p[k];
    case TSTOR_QUINT8: return p[k];
    default: {
      int32_t x;
      memcpy(&x, p + 4 * k, 4);
      return x;
    }
  }
}

int tstor__io_torch_dequantize(const tstor_value *v, tstor_tensor **out) {
  tstor_qparams q;
  int rc = tstor_value_qparams(v, &q);
  if (rc) return rc;
  const tstor_tensor *t = v->u.tensor.t;
  tstor_dtype dt = tstor_tensor_dtype(t);
  tstor_context *ctx = tstor_tensor_context(t);
  int nd = tstor_tensor_dim(t);
  const int64_t *sizes = tstor_tensor_sizes(t);
  int64_t n = tstor_tensor_numel(t), channels = q.scales ? sizes[q.axis] : 1, inner = 1;
  for (int d = q.scales ? (int)q.axis + 1 : nd; d < nd; d++) inner *= sizes[d];
  bool fq = strcmp(q.scheme, "per_channel_affine_float_qparams") == 0;
  size_t room = channels ? (size_t)channels : 1; /* none along an empty axis */
  double *scale = tstor__io_calloc(room, sizeof *scale), *zpf = tstor__io_calloc(room, sizeof *zpf);
  int64_t *zp = tstor__io_calloc(room, sizeof *zp);
  tstor_tensor *codes = NULL, *f32 = NULL;
  tstor_storage *tmp = NULL;
  tstor_device cpu;
  if (!scale || !zpf || !zp) {
    rc = TSTOR__ERR(TSTOR_ENOMEM, "out of memory for %lld channels", (long long)channels);
    goto out;
  }
  if (q.scales) {
    if ((rc =
             channel_values(q.scales, fq ? TSTOR_FLOAT32 : TSTOR_FLOAT64, channels, scale, NULL)) ||
        (rc = fq ? channel_values(q.zero_points, TSTOR_FLOAT32, channels, zpf, NULL)
                 : channel_values(q.zero_points, TSTOR_INT64, channels, NULL, zp)))
      goto out;
  } else {
    scale[0] = q.scale;
    zp[0] = q.zero_point;
  }
  const void *base = NULL;
  if ((rc = tstor_device_parse(ctx, "cpu", &cpu)) ||
      (rc = tstor_tensor_empty(ctx, cpu, TSTOR_FLOAT32, nd, sizes, &f32)) ||
      (rc = tstor_tensor_contiguous(t, &codes)) ||
      (n && (rc = tstor__io_host_bytes(tstor_tensor_storage(codes), &tmp, &base))))
    goto out;
  const uint8_t *p =
      (const uint8_t *)base + tstor_tensor_storage_offset(codes) * tstor_dtype_size(dt);
  float *o = tstor_tensor_data(f32);
  for (int64_t k = 0; k < n; k++) {
    int64_t c = q.scales ? k / inner % channels : 0, x = code_at(p, dt, k);
    if (!q.scales)
      o[k] = (float)(int32_t)(uint32_t)((uint64_t)x - (uint64_t)zp[0]) * (float)scale[0];
    else if (fq)
      o[k] = ((float)x - (float)zpf[c]) * (float)scale[c];
    else
      o[k] = (float)((double)((float)x - (float)zp[c]) * scale[c]);
  }
  *out = f32;
  f32 = NULL;
out:
  tstor_storage_release(tmp);
  tstor_tensor_release(codes);
  tstor_tensor_release(f32);
  tstor__io_free(scale);
  tstor__io_free(zpf);
  tstor__io_free(zp);
  return rc;
}
