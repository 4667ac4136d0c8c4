/* What the checkpoint fuzz targets do with a load that succeeded: walk every
 * value and read every tensor's elements through its strides, so that what a
 * reader hands out is safe to use. */
#ifndef TSTOR_FUZZ_CKPT_WALK_H
#define TSTOR_FUZZ_CKPT_WALK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tstor/serialize.h>
#include <tstor/tensor.h>

static tstor_context *ctx;
static volatile unsigned sink;

static void touch_tensor(const tstor_tensor *t) {
  int nd = tstor_tensor_dim(t);
  const int64_t *sz = tstor_tensor_sizes(t), *st = tstor_tensor_strides(t);
  int64_t n = tstor_tensor_numel(t);
  const unsigned char *base = tstor_tensor_data(t);
  if (!n || !base) return;
  size_t es = tstor_dtype_size(tstor_tensor_dtype(t));
  int64_t idx[TSTOR_TENSOR_MAX_DIM] = {0};
  for (int64_t k = 0; k < n && k < 4096; k++) {
    int64_t off = 0;
    for (int d = 0; d < nd; d++) off += idx[d] * st[d];
    for (size_t b = 0; b < es; b++) sink += base[off * (int64_t)es + (int64_t)b];
    for (int d = nd - 1; d >= 0; d--) {
      if (++idx[d] < sz[d]) break;
      idx[d] = 0;
    }
  }
}

static void walk(const tstor_value *v, int depth) {
  if (depth > TSTOR_CHECKPOINT_MAX_DEPTH + 1) abort(); /* the reader promised a bound */
  switch (tstor_value_kind_of(v)) {
    case TSTOR_VALUE_TENSOR: touch_tensor(tstor_value_tensor(v)); return;
    case TSTOR_VALUE_STRING: {
      size_t len;
      const char *s = tstor_value_string(v, &len);
      if (s[len] != '\0') abort();
      return;
    }
    default: break;
  }
  for (size_t i = 0; i < tstor_value_len(v); i++) {
    if (tstor_value_key(v, i)) walk(tstor_value_key(v, i), depth + 1);
    walk(tstor_value_item(v, i), depth + 1);
  }
  if (tstor_value_dict_attributes(v)) walk(tstor_value_dict_attributes(v), depth + 1);
}

/* Loads `size` bytes with `load` read and borrowed; each must succeed and be
 * walked, or fail with a code and a message and hand out nothing. */
typedef int (*ckpt_loader)(tstor_context *, const void *, size_t, const tstor_load_options *,
                           tstor_checkpoint **);
static void load_both_ways(ckpt_loader load, const uint8_t *data, size_t size) {
  if (!ctx && tstor_context_open(NULL, &ctx) != 0) {
    fprintf(stderr, "fuzz: no context: %s\n", tstor_last_error());
    abort();
  }
  /* a private copy, so that a borrowed load may never write the input */
  uint8_t *copy = malloc(size ? size : 1);
  if (!copy) return;
  memcpy(copy, data, size);
  static const unsigned modes[] = {TSTOR_LOAD_READ, TSTOR_LOAD_BORROW_BUFFER};
  for (int m = 0; m < 2; m++) {
    tstor_load_options o = {sizeof o, NULL, modes[m]};
    tstor_checkpoint *ck = NULL;
    int rc = load(ctx, copy, size, &o, &ck);
    if (rc) {
      if (ck || rc >= 0 || !tstor_last_error()[0]) abort();
      continue;
    }
    walk(tstor_checkpoint_root(ck), 0);
    tstor_checkpoint_free(ck);
  }
  free(copy);
}

#endif
