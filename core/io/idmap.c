/* Two maps, open addressing, at most half full: from identities (pointers)
 * to small numbers, the memo of the pickle writer and the reference indices
 * of the Torch7 writer, both of which write an object once and refer to it
 * after; and from integer keys a file chooses to objects, hashed with the
 * process's key (tstor__io_hash_u64) so that no file can aim them at one
 * slot. */
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

/* ---------------------------------------------------------- by key */

static size_t key_slot(const tstor__io_keymap *m, int64_t key) {
  size_t i = (size_t)tstor__io_hash_u64((uint64_t)key) & (m->cap - 1);
  while (m->vals[i] && m->keys[i] != key) i = (i + 1) & (m->cap - 1);
  return i;
}

static int key_grow(tstor__io_keymap *m) {
  tstor__io_keymap g = {NULL, NULL, m->cap ? m->cap * 2 : 64, 0};
  g.keys = tstor__io_calloc(g.cap, sizeof *g.keys);
  g.vals = tstor__io_calloc(g.cap, sizeof *g.vals);
  if (!g.keys || !g.vals) {
    tstor__io_keymap_free(&g);
    return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for %zu keys", g.cap);
  }
  for (size_t i = 0; i < m->cap; i++)
    if (m->vals[i]) {
      size_t j = key_slot(&g, m->keys[i]);
      g.keys[j] = m->keys[i];
      g.vals[j] = m->vals[i];
      g.n++;
    }
  tstor__io_keymap_free(m);
  *m = g;
  return 0;
}

int tstor__io_keymap_put(tstor__io_keymap *m, int64_t key, void *v) {
  if ((m->n + 1) * 2 > m->cap) {
    int rc = key_grow(m);
    if (rc) return rc;
  }
  size_t i = key_slot(m, key);
  if (!m->vals[i]) m->n++;
  m->keys[i] = key;
  m->vals[i] = v;
  return 0;
}

void *tstor__io_keymap_get(const tstor__io_keymap *m, int64_t key) {
  return m->cap ? m->vals[key_slot(m, key)] : NULL;
}

void tstor__io_keymap_free(tstor__io_keymap *m) {
  tstor__io_free(m->keys);
  tstor__io_free(m->vals);
  memset(m, 0, sizeof *m);
}
