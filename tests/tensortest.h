/* Helpers for the tensor suites: a context with cpu, meta and a device the
 * core must stage through, and shorthands for shapes. */
#ifndef TSTOR_TENSORTEST_H
#define TSTOR_TENSORTEST_H

#include "coretest.h"

#include <inttypes.h>
#include <stdint.h>
#include <tstor/tensor.h>

/* Asserts sizes and strides of t. */
static inline void tensortest_layout(const tstor_tensor *t, int ndim, const int64_t *sizes,
                                     const int64_t *strides) {
  ck_assert_int_eq(tstor_tensor_dim(t), ndim);
  for (int i = 0; i < ndim; i++) {
    ck_assert_msg(tstor_tensor_sizes(t)[i] == sizes[i], "size[%d] = %" PRId64 ", want %" PRId64, i,
                  tstor_tensor_sizes(t)[i], sizes[i]);
    if (strides)
      ck_assert_msg(tstor_tensor_strides(t)[i] == strides[i],
                    "stride[%d] = %" PRId64 ", want %" PRId64, i, tstor_tensor_strides(t)[i],
                    strides[i]);
  }
}

/* t's elements as doubles, row-major, into a static buffer. */
static inline const double *tensortest_values(const tstor_tensor *t) {
  static double buf[1 << 16];
  ck_assert_int_le(tstor_tensor_numel(t), 1 << 16);
  ck_tstor_ok(tstor_tensor_to_array(t, buf, TSTOR_FLOAT64, (size_t)tstor_tensor_numel(t)));
  return buf;
}

#endif
