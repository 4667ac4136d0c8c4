/* A map from identities (pointers) to small numbers: the memo of the pickle
 * writer and the reference indices of the Torch7 writer, both of which write
 * an object once and refer to it after. Open addressing, at most half full. */
#include "io_internal.h"

#include <string.h>

static size_t slot_of(const void *p, size_t mask) {
  return (size_t)(((uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull) >> 17) & mask;
}

static int grow(tstor__io_idmap *m) {
  size_t cap = m->cap ? m->cap * 2 : 64;
  const void **k = tstor__io_calloc(cap, sizeof *k);
  uint32_t *v = tstor__io_calloc(cap, sizeof *v);
  if (!k || !v) {
    tstor__io_free(k);
    tstor__io_free(v);
    return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for %zu object identities", cap);
  }
  for (size_t i = 0; i < m->cap; i++)
    if (m->keys[i]) {
      size_t j = slot_of(m->keys[i], cap - 1);
      while (k[j]) j = (j + 1) & (cap - 1);
      k[j] = m->keys[i];
      v[j] = m->vals[i];
    }
  tstor__io_free(m->keys);
  tstor__io_free(m->vals);
  m->keys = k;
  m->vals = v;
  m->cap = cap;
  return 0;
}

int tstor__io_idmap_put(tstor__io_idmap *m, const void *id, uint32_t value) {
  if ((m->n + 1) * 2 > m->cap) {
    int rc = grow(m);
    if (rc) return rc;
  }
  size_t j = slot_of(id, m->cap - 1);
  while (m->keys[j] && m->keys[j] != id) j = (j + 1) & (m->cap - 1);
  if (!m->keys[j]) m->n++;
  m->keys[j] = id;
  m->vals[j] = value;
  return 0;
}

bool tstor__io_idmap_get(const tstor__io_idmap *m, const void *id, uint32_t *value) {
  if (!m->cap) return false;
  for (size_t i = slot_of(id, m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    if (!m->keys[i]) return false;
    if (m->keys[i] == id) {
      *value = m->vals[i];
      return true;
    }
  }
}

void tstor__io_idmap_free(tstor__io_idmap *m) {
  tstor__io_free(m->keys);
  tstor__io_free(m->vals);
  memset(m, 0, sizeof *m);
}
