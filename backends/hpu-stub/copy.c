/* The copy and fill ops the core calls: translate the device addresses
 * (kernels.c), then queue the kernel on the stream (stream.c) or, without
 * one, run it before returning. */
#include "hpu_stub.h"

#include <stdlib.h>

static int copy(hpu_stub *stub, void *dst, const void *src, size_t nbytes, void *stream) {
  if (stream) return hpu_stream_copy(stream, dst, src, nbytes);
  hpu_kernel_copy(stub, dst, src, nbytes);
  return 0;
}

int hpu_copy_to_device(void *state, void *dst, int dst_index, const void *src, int src_index,
                       size_t nbytes, void *stream) {
  (void)src_index;
  if (nbytes == 0) return 0;
  unsigned char *to;
  int rc = hpu_translate(state, dst_index, dst, nbytes, &to);
  return rc ? rc : copy(state, to, src, nbytes, stream);
}

/* The mirror of hpu_copy_to_device: the backend table has one entry per
 * direction, and only the device side's address is translated. */
int hpu_copy_to_host(void *state, void *dst, int dst_index, const void *src, int src_index,
                     size_t nbytes, void *stream) {
  (void)dst_index;
  if (nbytes == 0) return 0;
  unsigned char *from;
  int rc = hpu_translate(state, src_index, src, nbytes, &from);
  return rc ? rc : copy(state, dst, from, nbytes, stream);
}

/* Within one device or between two: the backings are all host memory here. */
int hpu_copy_on_device(void *state, void *dst, int dst_index, const void *src, int src_index,
                       size_t nbytes, void *stream) {
  if (nbytes == 0) return 0;
  unsigned char *to, *from;
  int rc = hpu_translate(state, dst_index, dst, nbytes, &to);
  if (rc == 0) rc = hpu_translate(state, src_index, src, nbytes, &from);
  return rc ? rc : copy(state, to, from, nbytes, stream);
}

/* A batch: every span's device side translated (and so checked) before any
 * byte moves, then all of them as one job. */
static int copy_batch(hpu_stub *stub, const tstor_copy_span *spans, size_t count, size_t *failed,
                      int dst_on_device, int src_on_device) {
  hpu_move *moves = malloc(count * sizeof *moves);
  if (!moves) {
    *failed = 0;
    return HPU_ERROR(stub, TSTOR_ENOMEM, "hpu: no host memory for a batch of %zu copies", count);
  }
  int rc = 0;
  for (size_t i = 0; i < count && rc == 0; i++) {
    const tstor_copy_span *sp = &spans[i];
    unsigned char *to = sp->dst, *from = (unsigned char *)sp->src;
    if (dst_on_device) rc = hpu_translate(stub, sp->dst_index, sp->dst, sp->nbytes, &to);
    if (rc == 0 && src_on_device)
      rc = hpu_translate(stub, sp->src_index, sp->src, sp->nbytes, &from);
    if (rc) *failed = i;
    moves[i] = (hpu_move){to, from, sp->nbytes};
  }
  if (rc == 0) hpu_kernel_copy_many(stub, moves, count);
  free(moves);
  return rc;
}

int hpu_copy_batch_to_device(void *state, const tstor_copy_span *spans, size_t count,
                             size_t *failed) {
  return copy_batch(state, spans, count, failed, 1, 0);
}

int hpu_copy_batch_to_host(void *state, const tstor_copy_span *spans, size_t count,
                           size_t *failed) {
  return copy_batch(state, spans, count, failed, 0, 1);
}

int hpu_copy_batch_on_device(void *state, const tstor_copy_span *spans, size_t count,
                             size_t *failed) {
  return copy_batch(state, spans, count, failed, 1, 1);
}

int hpu_fill(void *state, int index, void *ptr, size_t nbytes, const void *pattern,
             size_t pattern_size, void *stream) {
  hpu_stub *stub = state;
  if (pattern_size == 0 || pattern_size > 16 || (pattern_size & (pattern_size - 1)) != 0 ||
      nbytes % pattern_size != 0)
    return HPU_ERROR(stub, TSTOR_EINVAL,
                     "hpu:%d: fill: pattern of %zu bytes over %zu bytes (1, 2, 4, 8 or 16 "
                     "bytes, dividing the size)",
                     index, pattern_size, nbytes);
  if (nbytes == 0) return 0;
  unsigned char *to;
  int rc = hpu_translate(stub, index, ptr, nbytes, &to);
  if (rc) return rc;
  if (stream) return hpu_stream_fill(stream, to, nbytes, pattern, pattern_size);
  hpu_kernel_fill(stub, to, nbytes, pattern, pattern_size);
  return 0;
}

/* A strided block (backend.h's copy_strided): both spans bounds-checked, then
 * element by element, synchronously. A stream is declined (TSTOR_ENOTSUP):
 * the core then stages through host memory, which is also correct. */
int hpu_copy_strided(void *state, int index, void *dst, const int64_t *dst_strides,
                     const void *src, const int64_t *src_strides, const int64_t *sizes, int ndim,
                     size_t element_size, void *stream) {
  hpu_stub *stub = state;
  if (stream != NULL || ndim < 1 || ndim > 64) return TSTOR_ENOTSUP;
  size_t dspan = element_size, sspan = element_size, n = 1;
  for (int d = 0; d < ndim; d++) {
    if (sizes[d] <= 0) return sizes[d] == 0 ? 0 : TSTOR_EINVAL;
    dspan += (size_t)(dst_strides[d] * (sizes[d] - 1));
    sspan += (size_t)(src_strides[d] * (sizes[d] - 1));
    n *= (size_t)sizes[d];
  }
  unsigned char *to, *from;
  int rc = hpu_translate(stub, index, dst, dspan, &to);
  if (rc == 0) rc = hpu_translate(stub, index, src, sspan, &from);
  if (rc) return rc;
  hpu_kernel_copy_strided(stub, to, dst_strides, from, src_strides, sizes, ndim, element_size, n);
  return 0;
}
