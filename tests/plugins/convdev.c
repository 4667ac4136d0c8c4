/* A device type "convdev" for the typed-storage and tensor tests: memory the
 * core must not touch (the flags do not say host), with copy kernels to and
 * from cpu and a convert op that handles float32 -> float64 only and declines
 * every other pair with TSTOR_ENOTSUP, so that both the op and the staged
 * fallback are exercised. A conversion of exactly 13 elements fails, to test
 * how a backend's error reaches the caller. Its copy_strided moves elements
 * last to first, an order as good as any for the blocks backend.h promises
 * (as a GPU's threads have none), so a block the core should not have handed
 * it shows, and declines elements of 2 bytes (TSTOR_ENOTSUP, as cuda's
 * declines quantized or misaligned ones), which the core must then stage.
 * convdev_convert_calls, convdev_strided_calls and convdev_strided_declines
 * count the calls, for the tests to read with dlsym. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <tstor/backend.h>

TSTOR_EXTERN atomic_long convdev_convert_calls;
atomic_long convdev_convert_calls;
TSTOR_EXTERN atomic_long convdev_strided_calls;
atomic_long convdev_strided_calls;
TSTOR_EXTERN atomic_long convdev_strided_declines;
atomic_long convdev_strided_declines;

static const tstor_registrar *registrar;

static int cd_count(void *state) { return 2; }

static int cd_allocate(void *state, int index, size_t nbytes, void *stream, tstor_block *out) {
  out->ptr = nbytes ? malloc(nbytes) : NULL;
  out->alloc_ctx = NULL;
  return nbytes && out->ptr == NULL ? TSTOR_ENOMEM : 0;
}

static void cd_free(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx) {
  free(ptr);
}

static const tstor_allocator_ops cd_allocator = {
    TSTOR_OPS_HEADER(tstor_allocator_ops), "convdev", 0, cd_allocate, cd_free,
    NULL, NULL, NULL, NULL, NULL};

static int cd_copy(void *state, void *dst, int dst_index, const void *src, int src_index,
                   size_t nbytes, void *stream) {
  memmove(dst, src, nbytes);
  return 0;
}

/* tstor_dtype values, as the op receives them. */
enum { CD_FLOAT32 = 6, CD_FLOAT64 = 7 };

static int cd_convert(void *state, int index, void *dst, int dst_dtype, const void *src,
                      int src_dtype, size_t count, void *stream) {
  if (src_dtype != CD_FLOAT32 || dst_dtype != CD_FLOAT64) return TSTOR_ENOTSUP;
  if (count == 13) return registrar->set_error(TSTOR_EBACKEND, "convdev: injected failure");
  const float *s = src;
  double *d = dst;
  for (size_t i = 0; i < count; i++) d[i] = s[i];
  atomic_fetch_add(&convdev_convert_calls, 1);
  return 0;
}

static int cd_copy_strided(void *state, int index, void *dst, const int64_t *dst_strides,
                           const void *src, const int64_t *src_strides, const int64_t *sizes,
                           int ndim, size_t element_size, void *stream) {
  if (element_size == 2) {
    atomic_fetch_add(&convdev_strided_declines, 1);
    return TSTOR_ENOTSUP;
  }
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= sizes[d];
  for (int64_t i = n - 1; i >= 0; i--) {
    int64_t q = i, doff = 0, soff = 0;
    for (int d = 0; d < ndim; d++) {
      doff += q % sizes[d] * dst_strides[d];
      soff += q % sizes[d] * src_strides[d];
      q /= sizes[d];
    }
    memcpy((char *)dst + doff, (const char *)src + soff, element_size);
  }
  atomic_fetch_add(&convdev_strided_calls, 1);
  return 0;
}

static const tstor_device_ops cd_device = {
    .struct_size = sizeof(tstor_device_ops),
    .abi_version = TSTOR_ABI_VERSION,
    .type_name = "convdev",
    .flags = 0,
    .device_count = cd_count,
    .allocator = &cd_allocator,
    .convert = cd_convert,
    .copy_strided = cd_copy_strided,
};

static int cd_init(const tstor_registrar *reg, tstor_module *m, void **module_state, char *msg,
                   size_t msg_size) {
  int rc;
  registrar = reg;
  if ((rc = reg->register_device_type(m, &cd_device, NULL)) != 0 ||
      (rc = reg->register_copy(m, "convdev", "cpu", cd_copy, NULL)) != 0 ||
      (rc = reg->register_copy(m, "cpu", "convdev", cd_copy, NULL)) != 0 ||
      (rc = reg->register_copy(m, "convdev", "convdev", cd_copy, NULL)) != 0)
    return rc;
  *module_state = NULL;
  return 0;
}

static void cd_fini(void *module_state) {}

TSTOR_BACKEND_DEFINE(cd_init, cd_fini);
