/* Helpers for the suites that compare tstor's layouts with PyTorch's
 * (test_shape.c, test_networks.c). */
#ifndef TSTOR_SHAPETEST_H
#define TSTOR_SHAPETEST_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <tstor/shape.h>

/* "float32:2,3:3,1", the way shapes.txt and networks.txt write a layout. */
static inline const char *shapetest_layout_str(char *buf, size_t n, const tstor_layout *l) {
  char s[512], st[512];
  size_t a = 0, b = 0;
  s[0] = st[0] = 0;
  for (int i = 0; i < l->ndim; i++) {
    a += (size_t)snprintf(s + a, sizeof s - a, "%s%" PRId64, i ? "," : "", l->sizes[i]);
    b += (size_t)snprintf(st + b, sizeof st - b, "%s%" PRId64, i ? "," : "", l->strides[i]);
  }
  snprintf(buf, n, "%s:%s:%s", tstor_dtype_name(l->dtype), s, st);
  return buf;
}

/* Same dtype, sizes and strides. */
static inline int shapetest_same_layout(const tstor_layout *a, const tstor_layout *b) {
  return a->dtype == b->dtype && a->ndim == b->ndim &&
         !memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim) &&
         !memcmp(a->strides, b->strides, sizeof(int64_t) * (size_t)a->ndim);
}

#endif
