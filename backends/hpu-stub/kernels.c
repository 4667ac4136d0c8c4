/* Kernels: what a copy or a fill does to device bytes, and the translation of
 * device addresses to their host backing. They are the only code that reaches
 * device bytes: an address is translated after a bounds check, so a pointer
 * that is not this device's memory is refused instead of scribbled on. The
 * bodies run on a stream's worker (stream.c) or, without a stream, in the
 * caller (copy.c). */
#include "hpu_stub.h"

#include <stdint.h>
#include <string.h>
#include <time.h>

int hpu_translate(hpu_stub *stub, int index, const void *ptr, size_t nbytes,
                  unsigned char **out) {
  if (index < 0 || index >= stub->ndevices)
    return HPU_ERROR(stub, TSTOR_ENODEV, "hpu:%d: no such device (%d present)", index,
                     stub->ndevices);
  const hpu_device *d = &stub->devices[index];
  uintptr_t p = (uintptr_t)ptr, base = (uintptr_t)d->base;
  if (p < base || p - base > d->capacity || nbytes > d->capacity - (p - base))
    return HPU_ERROR(stub, TSTOR_EINVAL,
                     "hpu:%d: [%p, +%zu bytes) is not memory of this device", index, ptr,
                     nbytes);
  *out = d->backing + (p - base);
  return 0;
}

/* The simulated latency of a transfer (fault injection: copy_delay_us). */
static void delay(const hpu_stub *stub) {
  if (stub->copy_delay_us <= 0) return;
  struct timespec ts = {(time_t)(stub->copy_delay_us / 1000000),
                        (long)(stub->copy_delay_us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

void hpu_kernel_copy(hpu_stub *stub, void *dst, const void *src, size_t nbytes) {
  delay(stub);
  memmove(dst, src, nbytes); /* views of one storage may overlap */
}

void hpu_kernel_copy_many(hpu_stub *stub, const hpu_move *moves, size_t n) {
  delay(stub);
  for (size_t i = 0; i < n; i++) memmove(moves[i].dst, moves[i].src, moves[i].nbytes);
}

void hpu_kernel_fill(hpu_stub *stub, void *dst, size_t nbytes, const void *pattern,
                     size_t pattern_size) {
  delay(stub);
  unsigned char *p = dst;
  if (pattern_size == 1) {
    memset(p, *(const unsigned char *)pattern, nbytes);
    return;
  }
  /* One copy of the pattern, then double what is written until it is full. */
  memcpy(p, pattern, pattern_size);
  size_t done = pattern_size;
  while (done < nbytes) {
    size_t n = done < nbytes - done ? done : nbytes - done;
    memcpy(p + done, p, n);
    done += n;
  }
}

/* A strided block of element_size-byte elements between two host backings;
 * dimension 0 moves fastest. */
void hpu_kernel_copy_strided(hpu_stub *stub, unsigned char *to, const int64_t *dst_strides,
                             const unsigned char *from, const int64_t *src_strides,
                             const int64_t *sizes, int ndim, size_t element_size, size_t n) {
  delay(stub);
  int64_t idx[64] = {0}, doff = 0, soff = 0;
  for (size_t i = 0; i < n; i++) {
    memcpy(to + doff, from + soff, element_size);
    for (int d = 0; d < ndim; d++) { /* odometer */
      doff += dst_strides[d];
      soff += src_strides[d];
      if (++idx[d] < sizes[d]) break;
      doff -= dst_strides[d] * sizes[d];
      soff -= src_strides[d] * sizes[d];
      idx[d] = 0;
    }
  }
}
