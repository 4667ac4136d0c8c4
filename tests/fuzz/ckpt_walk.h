/* What the checkpoint fuzz targets do with a load that succeeded: walk every
 * value and read every tensor's elements through its strides, so that what a
 * reader hands out is safe to use. */
#ifndef TSTOR_FUZZ_CKPT_WALK_H
#define TSTOR_FUZZ_CKPT_WALK_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

/* A GGUF quantized tensor: its blocks read, and decoded when small. */
static void touch_quantized(const tstor_value *v) {
  touch_tensor(tstor_value_tensor(v));
  const int64_t *sizes;
  int nd = tstor_value_quantized_shape(v, &sizes);
  if (nd < 1 || tstor_tensor_numel(tstor_value_tensor(v)) > (1 << 16)) return;
  tstor_tensor *f;
  if (tstor_value_dequantize(v, TSTOR_FLOAT32, &f) != 0) abort(); /* a loaded one always decodes */
  touch_tensor(f);
  tstor_tensor_release(f);
}

static void walk(const tstor_value *v, int depth);

/* A torch tensor: its elements, its attributes, and a quantized one's
 * parameters, whose per-channel ones number size[axis] (the reader
 * promised). */
static void touch_torch_tensor(const tstor_value *v, int depth) {
  const tstor_tensor *t = tstor_value_tensor(v);
  touch_tensor(t);
  if (tstor_value_attributes(v)) walk(tstor_value_attributes(v), depth + 1);
  tstor_qparams q;
  if (tstor_value_qparams(v, &q)) return;
  if (tstor_tensor_numel(t) <= (1 << 16) && tstor_tensor_data(t)) { /* its bytes always decode */
    tstor_tensor *f;
    if (tstor_value_dequantize(v, TSTOR_FLOAT32, &f) != 0) abort();
    touch_tensor(f);
    tstor_tensor_release(f);
  }
  if (!q.scales) return;
  if (q.axis < 0 || q.axis >= tstor_tensor_dim(t)) abort();
  int64_t n = tstor_tensor_sizes(t)[q.axis];
  const tstor_value *pv[2] = {q.scales, q.zero_points};
  for (int k = 0; k < 2; k++) {
    const tstor_tensor *p = tstor_value_tensor(pv[k]);
    if (p ? tstor_tensor_numel(p) != n : (int64_t)tstor_value_len(pv[k]) != n) abort();
    walk(pv[k], depth + 1);
  }
}

static void walk(const tstor_value *v, int depth) {
  if (depth > TSTOR_CHECKPOINT_MAX_DEPTH + 1) abort(); /* the reader promised a bound */
  switch (tstor_value_kind_of(v)) {
    case TSTOR_VALUE_TENSOR: touch_torch_tensor(v, depth); return;
    case TSTOR_VALUE_QUANTIZED: touch_quantized(v); return;
    case TSTOR_VALUE_STRING:
    case TSTOR_VALUE_BYTES: {
      size_t len;
      const char *s = tstor_value_string(v, &len);
      if (s[len] != '\0') abort();
      return;
    }
    case TSTOR_VALUE_STORAGE: {
      tstor_storage *s = tstor_value_storage(v, NULL);
      const unsigned char *p = s ? tstor_storage_data(s) : NULL;
      size_t n = s ? tstor_storage_nbytes(s) : 0;
      if (!s) abort();
      for (size_t i = 0; p && i < n && i < 4096; i++) sink += p[i];
      return;
    }
    case TSTOR_VALUE_OBJECT:
      if (!tstor_value_object_class(v) || !tstor_value_object_state(v)) abort();
      walk(tstor_value_object_state(v), depth + 1);
      return;
    default: break;
  }
  for (size_t i = 0; i < tstor_value_len(v); i++) {
    if (tstor_value_key(v, i)) walk(tstor_value_key(v, i), depth + 1);
    walk(tstor_value_item(v, i), depth + 1);
  }
  if (tstor_value_dict_attributes(v)) walk(tstor_value_dict_attributes(v), depth + 1);
}

/* Loads `size` bytes with `load` read and borrowed, and from a file with
 * `load_file` (the default way: the zip directory and the records read from
 * the descriptor); each must succeed and be walked, or fail with a code and a
 * message and hand out nothing. The file and the read buffer must agree. */
typedef int (*ckpt_loader)(tstor_context *, const void *, size_t, const tstor_load_options *,
                           tstor_checkpoint **);
typedef int (*ckpt_file_loader)(tstor_context *, const char *, const tstor_load_options *,
                                tstor_checkpoint **);

static int load_and_walk(int rc, tstor_checkpoint *ck) {
  if (rc) {
    if (ck || rc >= 0 || !tstor_last_error()[0]) abort();
    return rc;
  }
  walk(tstor_checkpoint_root(ck), 0);
  if (tstor_checkpoint_metadata(ck)) walk(tstor_checkpoint_metadata(ck), 0);
  tstor_checkpoint_free(ck);
  return 0;
}

/* The input as a file: a memfd (a regular file in memory) by its /proc path. */
static int load_from_file(ckpt_file_loader load_file, const uint8_t *data, size_t size, int *rc) {
  int fd = memfd_create("fuzz", MFD_CLOEXEC);
  if (fd < 0) return -1;
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  int ok = 0;
  for (size_t done = 0; done < size;) {
    ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) break;
    done += (size_t)n;
    ok = done == size;
  }
  if ((ok || size == 0) && access(path, R_OK) == 0) {
    tstor_checkpoint *ck = NULL;
    *rc = load_and_walk(load_file(ctx, path, NULL, &ck), ck);
  } else {
    ok = -1;
  }
  close(fd);
  return ok < 0 ? -1 : 0;
}

static void load_every_way(ckpt_loader load, ckpt_file_loader load_file, const uint8_t *data, size_t size) {
  if (!ctx && tstor_context_open(NULL, &ctx) != 0) {
    fprintf(stderr, "fuzz: no context: %s\n", tstor_last_error());
    abort();
  }
  /* a private copy, so that a borrowed load may never write the input */
  uint8_t *copy = malloc(size ? size : 1);
  if (!copy) return;
  memcpy(copy, data, size);
  static const unsigned modes[] = {TSTOR_LOAD_READ, TSTOR_LOAD_BORROW_BUFFER};
  int read_rc = 0, file_rc;
  for (int m = 0; m < 2; m++) {
    tstor_load_options o = {sizeof o, NULL, modes[m]};
    tstor_checkpoint *ck = NULL;
    int rc = load_and_walk(load(ctx, copy, size, &o, &ck), ck);
    if (m == 0) read_rc = rc;
  }
  if (load_from_file(load_file, copy, size, &file_rc) == 0 && file_rc != read_rc) {
    fprintf(stderr, "fuzz: the file load gave %s, the buffer load %s\n", tstor_err_name(file_rc),
            tstor_err_name(read_rc));
    abort();
  }
  free(copy);
}

#endif
