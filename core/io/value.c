/* Checkpoint values: the arena that owns them, accessors, builders, and the
 * walk that checks a finished tree (no cycles, bounded depth and size). */
#include "io_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* ----------------------------------------------------------------- arena */

tstor_value *tstor__io_value_alloc(tstor_checkpoint *ck, int kind) {
  if (ck->nvalues == ck->capvalues) {
    size_t cap = ck->capvalues ? ck->capvalues * 2 : 64;
    tstor_value **v = tstor__io_realloc(ck->values, cap * sizeof *v);
    if (!v) {
      TSTOR__ERR(TSTOR_ENOMEM, "checkpoint: out of memory for %zu values", cap);
      return NULL;
    }
    ck->values = v;
    ck->capvalues = cap;
  }
  if (!ck->slab_left) {
    /* slabs double, from 16 values to 1,024: a small tree wastes little */
    size_t n = ck->slabs ? ck->slabs->n * 2 : 16;
    if (n > 1024) n = 1024;
    tstor__io_value_slab *slab = tstor__io_calloc(1, sizeof *slab + n * sizeof(tstor_value));
    if (!slab) {
      TSTOR__ERR(TSTOR_ENOMEM, "checkpoint: out of memory for %zu values", n);
      return NULL;
    }
    slab->n = n;
    slab->next = ck->slabs;
    ck->slabs = slab;
    ck->slab_left = n;
  }
  tstor_value *v = &ck->slabs->v[ck->slabs->n - ck->slab_left--];
  v->kind = kind;
  if (kind == TSTOR_VALUE_QUANTIZED) v->u.tensor.storage = -1;
  if (kind == TSTOR_VALUE_TENSOR) { /* no storage, and its storage's dtype until a rebuild says */
    v->u.tensor.storage = -1;
    v->u.tensor.dtype = -1;
  }
  ck->values[ck->nvalues++] = v;
  return v;
}

tstor_value *tstor__io_value_global(tstor_checkpoint *ck, int which, int dtype) {
  tstor_value *v = tstor__io_value_alloc(ck, TSTOR__VALUE_GLOBAL);
  if (v) {
    v->u.global.which = which;
    v->u.global.dtype = dtype;
  }
  return v;
}

static void value_free(tstor_value *v) {
  switch (v->kind) {
    case TSTOR_VALUE_STRING:
    case TSTOR_VALUE_BYTES: tstor__io_free(v->u.str.s); break;
    case TSTOR_VALUE_OBJECT:
      tstor__io_free(v->u.obj.cls);
      tstor__io_free(v->u.obj.version);
      break;
    case TSTOR_VALUE_TUPLE:
    case TSTOR_VALUE_LIST:
    case TSTOR_VALUE_DICT:
    case TSTOR_VALUE_SET:
      tstor__io_free(v->u.seq.items);
      tstor__io_free(v->u.seq.keys);
      tstor__io_free(v->u.seq.index);
      break;
    case TSTOR_VALUE_TENSOR:
    case TSTOR_VALUE_QUANTIZED:
      tstor_tensor_release(v->u.tensor.t);
      tstor__io_free(v->u.tensor.sizes);
      break;
    default: break;
  }
}

int tstor_checkpoint_new(tstor_checkpoint **out) {
  if (!out) return TSTOR__ERR(TSTOR_EINVAL, "tstor_checkpoint_new: out is NULL");
  *out = tstor__io_calloc(1, sizeof **out);
  if (!*out) return TSTOR__ERR(TSTOR_ENOMEM, "checkpoint: out of memory");
  return 0;
}

void tstor_checkpoint_free(tstor_checkpoint *ck) {
  if (!ck) return;
  for (size_t i = 0; i < ck->nvalues; i++) value_free(ck->values[i]);
  tstor__io_free(ck->values);
  while (ck->slabs) {
    tstor__io_value_slab *next = ck->slabs->next;
    tstor__io_free(ck->slabs);
    ck->slabs = next;
  }
  for (size_t i = 0; i < ck->nstorages; i++) {
    tstor__io_free(ck->storages[i].key);
    tstor__io_free(ck->storages[i].location);
    tstor_storage_release(ck->storages[i].s);
  }
  tstor__io_free(ck->storages);
  tstor__io_free(ck->storage_slots);
  tstor__io_free(ck->packed);
  tstor__io_free(ck);
}

const tstor_value *tstor_checkpoint_root(const tstor_checkpoint *ck) { return ck ? ck->root : NULL; }

int tstor_checkpoint_set_root(tstor_checkpoint *ck, tstor_value *root) {
  if (!ck || !root) return TSTOR__ERR(TSTOR_EINVAL, "tstor_checkpoint_set_root: NULL argument");
  ck->root = root;
  return 0;
}

const tstor_value *tstor_checkpoint_metadata(const tstor_checkpoint *ck) {
  return ck ? ck->metadata : NULL;
}

int tstor_checkpoint_set_metadata(tstor_checkpoint *ck, tstor_value *dict) {
  if (!ck) return TSTOR__ERR(TSTOR_EINVAL, "tstor_checkpoint_set_metadata: ck is NULL");
  if (dict && dict->kind != TSTOR_VALUE_DICT)
    return TSTOR__ERR(TSTOR_EINVAL, "safetensors metadata must be a dict of strings");
  ck->metadata = dict;
  return 0;
}

size_t tstor_checkpoint_storage_count(const tstor_checkpoint *ck) { return ck ? ck->nstorages : 0; }

int tstor_checkpoint_storage(const tstor_checkpoint *ck, size_t i, const char **key,
                             tstor_storage **storage) {
  if (storage) *storage = NULL;
  if (!ck || i >= ck->nstorages)
    return TSTOR__ERR(TSTOR_ERANGE, "checkpoint storage %zu: the checkpoint has %zu", i,
                      ck ? ck->nstorages : 0);
  if (key) *key = ck->storages[i].key;
  if (storage) *storage = ck->storages[i].s;
  return 0;
}

const char *tstor_checkpoint_storage_location(const tstor_checkpoint *ck, size_t i) {
  return ck && i < ck->nstorages ? ck->storages[i].location : NULL;
}

int64_t tstor_checkpoint_storage_offset(const tstor_checkpoint *ck, size_t i) {
  return ck && i < ck->nstorages ? ck->storages[i].file_offset : -1;
}

/* --------------------------------------------------------------- hashing */

/* The process's hash key, random: the slot a dict or storage key lands in
 * must not be something a file can aim at. Fixed multiplicative hashes let a file of
 * 80,000 int keys, multiples of 2^32, take 161 s to load (all in one slot). */
static uint64_t hash_key;
static pthread_once_t hash_key_once = PTHREAD_ONCE_INIT;

static void hash_key_init(void) {
  if (getrandom(&hash_key, sizeof hash_key, GRND_NONBLOCK) != (ssize_t)sizeof hash_key) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    hash_key = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30 ^ (uint64_t)(uintptr_t)&ts;
  }
}

/* splitmix64's finaliser: every input bit reaches the low bits the indexes
 * use. */
static uint64_t mix(uint64_t x) {
  pthread_once(&hash_key_once, hash_key_init);
  x ^= hash_key;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t tstor__io_hash_u64(uint64_t x) { return mix(x); }

/* Eight bytes a step from a start the hash key decides, each step a
 * multiply and a shift, then mixed (a byte a step, FNV-1a, was a twentieth
 * of a load of many small tensors). */
static uint64_t hash_bytes(const char *p, size_t n) {
  pthread_once(&hash_key_once, hash_key_init);
  uint64_t h = hash_key ^ (n * 0x9e3779b97f4a7c15ull), w;
  for (; n >= 8; p += 8, n -= 8) {
    memcpy(&w, p, 8);
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
  }
  w = 0;
  if (n) memcpy(&w, p, n);
  return mix(h ^ w);
}

uint64_t tstor__io_hash_bytes(const void *p, size_t n) { return hash_bytes(p, n); }

/* ------------------------------------------------------ position indexes */

/* Open addressing over an array's positions (a slot holds position + 1, 0 is
 * empty), kept at most half full, probed linearly from the key's hash: the
 * index of a dict's keys and the index of a checkpoint's storage keys. */
typedef uint64_t (*hash_at_fn)(const void *owner, size_t pos);
typedef int (*same_key_fn)(const void *owner, size_t pos, const void *key);

static void slot_put(uint32_t *slots, size_t cap, uint64_t hash, size_t pos) {
  size_t mask = cap - 1, at = hash & mask;
  while (slots[at]) at = (at + 1) & mask;
  slots[at] = (uint32_t)(pos + 1);
}

/* The position whose key `same` finds equal to `key`, or -1. */
static long slot_find(const uint32_t *slots, size_t cap, uint64_t hash, same_key_fn same,
                      const void *owner, const void *key) {
  size_t mask = cap - 1;
  for (size_t at = hash & mask;; at = (at + 1) & mask) {
    if (!slots[at]) return -1;
    if (same(owner, slots[at] - 1, key)) return (long)(slots[at] - 1);
  }
}

/* Replaces the table by one of twice the capacity (32 at first) holding
 * positions 0 .. n-1. */
static int slots_grow(uint32_t **slots, size_t *cap, size_t n, hash_at_fn hash_at,
                      const void *owner, const char *what) {
  size_t grown = *cap ? 2 * *cap : 32;
  if (grown > UINT32_MAX) return TSTOR__ERR(TSTOR_EOVERFLOW, "checkpoint: %s index too large", what);
  uint32_t *fresh = tstor__io_calloc(grown, sizeof *fresh);
  if (!fresh) return TSTOR__ERR(TSTOR_ENOMEM, "checkpoint: out of memory for a %s index", what);
  for (size_t i = 0; i < n; i++) slot_put(fresh, grown, hash_at(owner, i), i);
  tstor__io_free(*slots);
  *slots = fresh;
  *cap = grown;
  return 0;
}

/* ---------------------------------------------------------------- storages */

/* Storage keys are looked up through the index: a linear scan made loading
 * 50,000 storages take 133 s. */
typedef struct key_bytes {
  const char *s;
  size_t len;
} key_bytes;

static uint64_t storage_hash_at(const void *ck, size_t pos) {
  const char *key = ((const tstor_checkpoint *)ck)->storages[pos].key;
  return hash_bytes(key, strlen(key));
}

static int storage_key_is(const void *ck, size_t pos, const void *key) {
  const char *k = ((const tstor_checkpoint *)ck)->storages[pos].key;
  const key_bytes *want = key;
  return strlen(k) == want->len && memcmp(k, want->s, want->len) == 0;
}

int tstor__io_record_add(tstor_checkpoint *ck, const char *key, size_t keylen, tstor_dtype dtype,
                         int64_t numel, const char *location, size_t loclen, long *index) {
  tstor__io_record *grown =
      tstor__io_grow(ck->storages, &ck->capstorages, ck->nstorages, sizeof *grown, 16,
                     "checkpoint: out of memory for storages");
  if (!grown) return TSTOR_ENOMEM;
  ck->storages = grown;
  tstor__io_record *r = &ck->storages[ck->nstorages];
  memset(r, 0, sizeof *r);
  r->key = tstor__io_malloc(keylen + 1);
  r->location = tstor__io_malloc(loclen + 1);
  if (!r->key || !r->location) {
    tstor__io_free(r->key);
    tstor__io_free(r->location);
    return TSTOR__ERR(TSTOR_ENOMEM, "checkpoint: out of memory for a storage key");
  }
  memcpy(r->key, key, keylen);
  r->key[keylen] = '\0';
  memcpy(r->location, location, loclen);
  r->location[loclen] = '\0';
  r->dtype = dtype;
  r->numel = numel;
  r->view_of = -1;
  r->file_offset = -1;
  if (2 * (ck->nstorages + 1) > ck->storage_slots_cap) {
    int rc = slots_grow(&ck->storage_slots, &ck->storage_slots_cap, ck->nstorages, storage_hash_at,
                        ck, "storage");
    if (rc) {
      tstor__io_free(r->key);
      tstor__io_free(r->location);
      return rc;
    }
  }
  slot_put(ck->storage_slots, ck->storage_slots_cap, storage_hash_at(ck, ck->nstorages), ck->nstorages);
  *index = (long)ck->nstorages++;
  return 0;
}

int tstor__io_record_add_derived(tstor_checkpoint *ck, long from, const char *what,
                                 tstor_dtype dtype, int64_t numel, const char *location,
                                 long *index) {
  const char *base = ck->storages[from].key;
  size_t len = strlen(base) + strlen(what) + 24;
  char *key = tstor__io_malloc(len);
  if (!key) return TSTOR__ERR(TSTOR_ENOMEM, "checkpoint: out of memory for a storage key");
  int n = snprintf(key, len, "%s/%s/%zu", base, what, ck->nstorages);
  int rc =
      tstor__io_record_add(ck, key, (size_t)n, dtype, numel, location, strlen(location), index);
  tstor__io_free(key);
  return rc;
}

long tstor__io_record_find(const tstor_checkpoint *ck, const char *key, size_t keylen) {
  if (!ck->storage_slots_cap) return -1;
  key_bytes want = {key, keylen};
  return slot_find(ck->storage_slots, ck->storage_slots_cap, hash_bytes(key, keylen), storage_key_is,
                   ck, &want);
}

/* ------------------------------------------------------------ containers */

int tstor__io_seq_push(tstor_value *seq, tstor_value *item) {
  if (seq->u.seq.n == seq->u.seq.cap) {
    size_t cap = seq->u.seq.cap ? seq->u.seq.cap * 2 : 4;
    tstor_value **items = tstor__io_realloc(seq->u.seq.items, cap * sizeof *items);
    if (!items) return TSTOR__ERR(TSTOR_ENOMEM, "checkpoint: out of memory for %zu items", cap);
    seq->u.seq.items = items;
    if (seq->kind == TSTOR_VALUE_DICT) {
      tstor_value **keys = tstor__io_realloc(seq->u.seq.keys, cap * sizeof *keys);
      if (!keys) return TSTOR__ERR(TSTOR_ENOMEM, "checkpoint: out of memory for %zu keys", cap);
      seq->u.seq.keys = keys;
    }
    seq->u.seq.cap = cap;
  }
  seq->u.seq.items[seq->u.seq.n++] = item;
  return 0;
}

/* Whether f is an integer in int64's range, which *i then holds (-0.0 is 0). */
static int float_is_int(double f, int64_t *i) {
  if (!(f >= -0x1p63 && f < 0x1p63) || f != (double)(int64_t)f) return 0;
  *i = (int64_t)f;
  return 1;
}

static int int_equals_float(int64_t i, double f) {
  int64_t fi;
  return float_is_int(f, &fi) && fi == i;
}

/* Whether k can be a dict key, as Python's hash() decides: not a list or a
 * dict, nor a tuple holding one. Tuples nest at most as deep as a tree. */
static int key_check(const tstor_value *k, int depth) {
  if (k->kind == TSTOR_VALUE_COMPLEX || k->pyclass == TSTOR__CLASS_DEVICE)
    return TSTOR__ERR(TSTOR_ENOTSUP,
                      "a %s as a dict key: tstor's keys are None, bools, ints, floats, "
                      "strings, bytes, tuples of them and tensors",
                      k->kind == TSTOR_VALUE_COMPLEX ? "complex" : "torch.device");
  if (k->kind == TSTOR_VALUE_LIST || k->kind == TSTOR_VALUE_DICT || k->kind == TSTOR_VALUE_SET ||
      k->pyclass == TSTOR__CLASS_BYTEARRAY)
    return TSTOR__ERR(TSTOR_EINVAL, "unhashable type: '%s' as a dict key", tstor_value_kind_name(k->kind));
  if (k->kind != TSTOR_VALUE_TUPLE) return 0;
  if (depth >= TSTOR_CHECKPOINT_MAX_DEPTH)
    return TSTOR__ERR(TSTOR_EINVAL, "a dict key nested deeper than %d", TSTOR_CHECKPOINT_MAX_DEPTH);
  for (size_t i = 0; i < k->u.seq.n; i++) {
    int rc = key_check(k->u.seq.items[i], depth + 1);
    if (rc) return rc;
  }
  return 0;
}

/* Equal keys hash alike: an int, a bool and a float of the same value are
 * one key, as in Python, and tuples of equal items. */
static uint64_t key_hash(const tstor_value *k) {
  switch (k->kind) {
    case TSTOR_VALUE_TUPLE: {
      uint64_t h = mix(k->u.seq.n ^ 0x7475706c65ull);
      for (size_t i = 0; i < k->u.seq.n; i++) h = mix(h ^ key_hash(k->u.seq.items[i]));
      return h;
    }
    case TSTOR_VALUE_STRING: return hash_bytes(k->u.str.s, k->u.str.len);
    case TSTOR_VALUE_BYTES: return mix(hash_bytes(k->u.str.s, k->u.str.len));
    case TSTOR_VALUE_INT:
    case TSTOR_VALUE_BOOL: return mix((uint64_t)k->u.i);
    case TSTOR_VALUE_NONE: return 7;
    case TSTOR_VALUE_FLOAT: {
      int64_t i;
      if (float_is_int(k->u.f, &i)) return mix((uint64_t)i); /* as the int it equals */
      uint64_t b;
      memcpy(&b, &k->u.f, sizeof b);
      return mix(b);
    }
    default: return mix((uint64_t)(uintptr_t)k);
  }
}

/* Python's equality for the keys a checkpoint holds: tuples item by item,
 * tensors by identity. bool, int and float compare as numbers, as in Python
 * ({1: a, 1.0: b, True: c} is {1: c}). */
static int key_equal(const tstor_value *a, const tstor_value *b) {
  if (a == b) return 1;
  int ak = a->kind == TSTOR_VALUE_BOOL ? TSTOR_VALUE_INT : a->kind;
  int bk = b->kind == TSTOR_VALUE_BOOL ? TSTOR_VALUE_INT : b->kind;
  if (ak == TSTOR_VALUE_INT && bk == TSTOR_VALUE_FLOAT) return int_equals_float(a->u.i, b->u.f);
  if (ak == TSTOR_VALUE_FLOAT && bk == TSTOR_VALUE_INT) return int_equals_float(b->u.i, a->u.f);
  if (ak != bk) return 0;
  switch (ak) {
    case TSTOR_VALUE_NONE: return 1;
    case TSTOR_VALUE_INT: return a->u.i == b->u.i;
    case TSTOR_VALUE_FLOAT: return a->u.f == b->u.f;
    case TSTOR_VALUE_STRING:
    case TSTOR_VALUE_BYTES:
      return a->u.str.len == b->u.str.len && memcmp(a->u.str.s, b->u.str.s, a->u.str.len) == 0;
    case TSTOR_VALUE_TUPLE:
      if (a->u.seq.n != b->u.seq.n) return 0;
      for (size_t i = 0; i < a->u.seq.n; i++)
        if (!key_equal(a->u.seq.items[i], b->u.seq.items[i])) return 0;
      return 1;
    default: return 0;
  }
}

/* Position of an equal key in the dict, or -1. Dicts of more than 8 entries
 * keep an open-addressing index so that a state_dict of thousands of names
 * loads in linear time. */
static uint64_t dict_hash_at(const void *d, size_t pos) {
  return key_hash(((const tstor_value *)d)->u.seq.keys[pos]);
}

/* Equal keys in dict d: a Lua table (Torch7's) tells true from 1, which
 * Python's dict does not. */
static int keys_equal(const tstor_value *d, const tstor_value *a, const tstor_value *b) {
  if (d->lua && (a->kind == TSTOR_VALUE_BOOL) != (b->kind == TSTOR_VALUE_BOOL)) return 0;
  return key_equal(a, b);
}

static int dict_key_is(const void *d, size_t pos, const void *key) {
  return keys_equal(d, ((const tstor_value *)d)->u.seq.keys[pos], key);
}

static long dict_find(const tstor_value *d, const tstor_value *key) {
  if (!d->u.seq.index) {
    for (size_t i = 0; i < d->u.seq.n; i++)
      if (keys_equal(d, d->u.seq.keys[i], key)) return (long)i;
    return -1;
  }
  return slot_find(d->u.seq.index, d->u.seq.index_cap, key_hash(key), dict_key_is, d, key);
}

int tstor__io_iterate(tstor_checkpoint *ck, tstor_value *v, tstor_value **out) {
  *out = v;
  if (v->kind == TSTOR_VALUE_TUPLE || v->kind == TSTOR_VALUE_LIST || v->kind == TSTOR_VALUE_SET)
    return 0;
  int rc = tstor_value_new(ck, TSTOR_VALUE_TUPLE, out);
  if (v->kind == TSTOR_VALUE_DICT) {
    for (size_t i = 0; i < v->u.seq.n && !rc; i++) rc = tstor__io_seq_push(*out, v->u.seq.keys[i]);
    return rc;
  }
  const unsigned char *p = (const unsigned char *)v->u.str.s;
  for (size_t i = 0, n; i < v->u.str.len && !rc; i += n) {
    tstor_value *c = NULL;
    if (v->kind == TSTOR_VALUE_BYTES) { /* a byte, an int */
      n = 1;
      rc = tstor_value_new_int(ck, p[i], &c);
    } else { /* a character, a string of its UTF-8 bytes */
      for (n = 1; i + n < v->u.str.len && (p[i + n] & 0xc0) == 0x80; n++) continue;
      rc = tstor_value_new_string(ck, (const char *)p + i, n, &c);
    }
    if (!rc) rc = tstor__io_seq_push(*out, c);
  }
  return rc;
}

long tstor__io_dict_find(const tstor_value *d, const tstor_value *key) {
  return key_check(key, 0) ? -1 : dict_find(d, key);
}

int tstor__io_dict_set(tstor_value *d, tstor_value *key, tstor_value *value) {
  bool existed;
  return tstor__io_dict_put(d, key, value, true, &existed);
}

int tstor__io_dict_put(tstor_value *d, tstor_value *key, tstor_value *value, bool replace,
                       bool *existed) {
  int rc = d->lua ? 0 : key_check(key, 0); /* a Lua table's keys may be any value, by identity */
  if (rc) return rc;
  long pos = dict_find(d, key);
  *existed = pos >= 0;
  if (pos >= 0) {
    if (replace) d->u.seq.items[pos] = value;
    return 0;
  }
  if (d->u.seq.n + 1 > 8 && (d->u.seq.n + 1) * 2 > d->u.seq.index_cap &&
      (rc = slots_grow(&d->u.seq.index, &d->u.seq.index_cap, d->u.seq.n, dict_hash_at, d, "dict")))
    return rc;
  if ((rc = tstor__io_seq_push(d, value))) return rc;
  d->u.seq.keys[d->u.seq.n - 1] = key;
  if (d->u.seq.index) slot_put(d->u.seq.index, d->u.seq.index_cap, key_hash(key), d->u.seq.n - 1);
  return 0;
}

/* ---------------------------------------------------------- accessors */

tstor_value_kind tstor_value_kind_of(const tstor_value *v) {
  return v ? (tstor_value_kind)v->kind : TSTOR_VALUE_NONE;
}

const char *tstor_value_kind_name(tstor_value_kind kind) {
  static const char *const names[] = {"none",  "bool",   "int",       "float",  "str",
                                      "tuple", "list",   "dict",      "tensor", "storage",
                                      "bytes", "object", "quantized", "set",    "complex"};
  return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

int tstor_value_bool(const tstor_value *v) {
  return v && (v->kind == TSTOR_VALUE_BOOL || v->kind == TSTOR_VALUE_INT) ? v->u.i != 0 : 0;
}
int64_t tstor_value_int(const tstor_value *v) {
  return v && (v->kind == TSTOR_VALUE_BOOL || v->kind == TSTOR_VALUE_INT) ? v->u.i : 0;
}
double tstor_value_float(const tstor_value *v) {
  return v && v->kind == TSTOR_VALUE_FLOAT ? v->u.f : 0.0;
}
const char *tstor_value_string(const tstor_value *v, size_t *len) {
  if (!v || (v->kind != TSTOR_VALUE_STRING && v->kind != TSTOR_VALUE_BYTES)) return NULL;
  if (len) *len = v->u.str.len;
  return v->u.str.s;
}

static int is_container(const tstor_value *v) {
  return v && (v->kind == TSTOR_VALUE_TUPLE || v->kind == TSTOR_VALUE_LIST ||
               v->kind == TSTOR_VALUE_DICT || v->kind == TSTOR_VALUE_SET);
}

size_t tstor_value_len(const tstor_value *v) { return is_container(v) ? v->u.seq.n : 0; }

const tstor_value *tstor_value_item(const tstor_value *v, size_t i) {
  return is_container(v) && i < v->u.seq.n ? v->u.seq.items[i] : NULL;
}
const tstor_value *tstor_value_key(const tstor_value *v, size_t i) {
  return v && v->kind == TSTOR_VALUE_DICT && i < v->u.seq.n ? v->u.seq.keys[i] : NULL;
}
const tstor_value *tstor_value_dict_get(const tstor_value *v, const char *key) {
  if (!v || v->kind != TSTOR_VALUE_DICT || !key) return NULL;
  tstor_value k;
  memset(&k, 0, sizeof k);
  k.kind = TSTOR_VALUE_STRING;
  k.u.str.s = (char *)key;
  k.u.str.len = strlen(key);
  long pos = dict_find(v, &k);
  return pos >= 0 ? v->u.seq.items[pos] : NULL;
}
const tstor_value *tstor_value_dict_attributes(const tstor_value *v) {
  return v && v->kind == TSTOR_VALUE_DICT ? v->u.seq.attrs : NULL;
}

static bool has_tensor(const tstor_value *v) {
  return v && (v->kind == TSTOR_VALUE_TENSOR || v->kind == TSTOR_VALUE_QUANTIZED);
}

tstor_tensor *tstor_value_tensor(const tstor_value *v) {
  return has_tensor(v) ? v->u.tensor.t : NULL;
}
int tstor_value_complex(const tstor_value *v, double *re, double *im) {
  if (!v || v->kind != TSTOR_VALUE_COMPLEX)
    return TSTOR__ERR(TSTOR_EINVAL, "tstor_value_complex: not a complex");
  if (re) *re = v->u.c[0];
  if (im) *im = v->u.c[1];
  return 0;
}
const char *tstor_value_class(const tstor_value *v) {
  if (!v) return NULL;
  if (v->kind == TSTOR_VALUE_DICT && v->ordered) return "collections.OrderedDict";
  switch (v->pyclass) {
    case TSTOR__CLASS_COUNTER: return "collections.Counter";
    case TSTOR__CLASS_SIZE: return "torch.Size";
    case TSTOR__CLASS_DEVICE: return "torch.device";
    case TSTOR__CLASS_BYTEARRAY: return "bytearray";
    case TSTOR__CLASS_PARAMETER: return "torch.nn.Parameter";
    default: return NULL;
  }
}
const tstor_value *tstor_value_attributes(const tstor_value *v) {
  if (v && v->kind == TSTOR_VALUE_TENSOR) return v->u.tensor.attrs;
  return tstor_value_dict_attributes(v);
}
const char *tstor_value_object_class(const tstor_value *v) {
  return v && v->kind == TSTOR_VALUE_OBJECT ? v->u.obj.cls : NULL;
}
const char *tstor_value_object_version(const tstor_value *v) {
  return v && v->kind == TSTOR_VALUE_OBJECT ? v->u.obj.version : NULL;
}
const tstor_value *tstor_value_object_state(const tstor_value *v) {
  return v && v->kind == TSTOR_VALUE_OBJECT ? v->u.obj.state : NULL;
}

tstor_storage *tstor_value_storage(const tstor_value *v, tstor_dtype *dtype) {
  if (!v || v->kind != TSTOR_VALUE_STORAGE) return NULL;
  if (dtype) *dtype = (tstor_dtype)v->u.tensor.dtype;
  return v->u.tensor.s;
}
int tstor_value_qparams(const tstor_value *v, tstor_qparams *out) {
  if (!v || !out || v->kind != TSTOR_VALUE_TENSOR || !v->u.tensor.quantizer)
    return TSTOR__ERR(TSTOR_EINVAL, "tstor_value_qparams: not a quantized tensor");
  tstor_value **p = v->u.tensor.quantizer->u.seq.items;
  tstor_qparams q = {p[0]->u.str.s, 0, 0, NULL, NULL, 0};
  if (v->u.tensor.quantizer->u.seq.n == 3) {
    q.scale = p[1]->kind == TSTOR_VALUE_FLOAT ? p[1]->u.f : (double)p[1]->u.i;
    q.zero_point = p[2]->u.i;
  } else {
    q.scales = p[1];
    q.zero_points = p[2];
    q.axis = p[3]->u.i;
  }
  *out = q;
  return 0;
}

int tstor_value_requires_grad(const tstor_value *v) {
  return v && v->kind == TSTOR_VALUE_TENSOR ? v->requires_grad : 0;
}
long tstor_value_storage_index(const tstor_value *v) {
  if (v && v->kind == TSTOR_VALUE_STORAGE) return v->u.tensor.storage;
  return has_tensor(v) ? v->u.tensor.storage : -1;
}

/* ------------------------------------------------------ typed reads */

static int not_a(const tstor_value *v, const char *want) {
  return TSTOR__ERR(TSTOR_EINVAL, "a value read as %s is %s", want,
                    v ? tstor_value_kind_name((tstor_value_kind)v->kind) : "NULL");
}

/* A GGUF u64 keeps its 64 bits in u.i. */
static bool is_u64(const tstor_value *v) { return v->gguf == TSTOR_GGUF_UINT64 + 1; }

int tstor_value_get_bool(const tstor_value *v, int *out) {
  if (!v || v->kind != TSTOR_VALUE_BOOL) return not_a(v, "a bool");
  if (out) *out = v->u.i != 0;
  return 0;
}

int tstor_value_get_int64(const tstor_value *v, int64_t *out) {
  if (!v || v->kind != TSTOR_VALUE_INT) return not_a(v, "an int");
  if (is_u64(v) && v->u.i < 0)
    return TSTOR__ERR(TSTOR_ERANGE, "the u64 %llu does not fit an int64",
                      (unsigned long long)v->u.i);
  if (out) *out = v->u.i;
  return 0;
}

int tstor_value_get_uint64(const tstor_value *v, uint64_t *out) {
  if (!v || v->kind != TSTOR_VALUE_INT) return not_a(v, "an unsigned int");
  if (!is_u64(v) && v->u.i < 0)
    return TSTOR__ERR(TSTOR_ERANGE, "%lld is negative, no unsigned int", (long long)v->u.i);
  if (out) *out = (uint64_t)v->u.i;
  return 0;
}

int tstor_value_get_double(const tstor_value *v, double *out) {
  if (!v || v->kind != TSTOR_VALUE_FLOAT) return not_a(v, "a float");
  if (out) *out = v->u.f;
  return 0;
}

int tstor_value_get_string(const tstor_value *v, const char **s, size_t *len) {
  if (!v || (v->kind != TSTOR_VALUE_STRING && v->kind != TSTOR_VALUE_BYTES))
    return not_a(v, "a str");
  if (s) *s = v->u.str.s;
  if (len) *len = v->u.str.len;
  return 0;
}

/* ------------------------------------------------------------ builders */

int tstor_value_new(tstor_checkpoint *ck, tstor_value_kind kind, tstor_value **out) {
  if (out) *out = NULL;
  if (!ck || !out) return TSTOR__ERR(TSTOR_EINVAL, "tstor_value_new: NULL argument");
  *out = NULL;
  if (kind != TSTOR_VALUE_NONE && kind != TSTOR_VALUE_TUPLE && kind != TSTOR_VALUE_LIST &&
      kind != TSTOR_VALUE_DICT)
    return TSTOR__ERR(TSTOR_EINVAL, "tstor_value_new: kind %s needs its own constructor",
                      tstor_value_kind_name(kind));
  *out = tstor__io_value_alloc(ck, kind);
  return *out ? 0 : TSTOR_ENOMEM;
}

static int new_scalar(tstor_checkpoint *ck, int kind, tstor_value **out) {
  if (!ck || !out) return TSTOR__ERR(TSTOR_EINVAL, "tstor_value_new: NULL argument");
  *out = tstor__io_value_alloc(ck, kind);
  return *out ? 0 : TSTOR_ENOMEM;
}

int tstor_value_new_bool(tstor_checkpoint *ck, int b, tstor_value **out) {
  if (out) *out = NULL;
  int rc = new_scalar(ck, TSTOR_VALUE_BOOL, out);
  if (!rc) (*out)->u.i = b != 0;
  return rc;
}
int tstor_value_new_int(tstor_checkpoint *ck, int64_t i, tstor_value **out) {
  if (out) *out = NULL;
  int rc = new_scalar(ck, TSTOR_VALUE_INT, out);
  if (!rc) (*out)->u.i = i;
  return rc;
}
int tstor_value_new_float(tstor_checkpoint *ck, double d, tstor_value **out) {
  if (out) *out = NULL;
  int rc = new_scalar(ck, TSTOR_VALUE_FLOAT, out);
  if (!rc) (*out)->u.f = d;
  return rc;
}
/* A STRING or BYTES value holding a copy of the len bytes at s. */
static int new_text(tstor_checkpoint *ck, int kind, const char *s, size_t len, tstor_value **out) {
  char *copy = tstor__io_malloc(len + 1);
  if (!copy) return TSTOR__ERR(TSTOR_ENOMEM, "checkpoint: out of memory for a %zu-byte string", len);
  if (len) memcpy(copy, s, len);
  copy[len] = '\0';
  tstor_value *v = tstor__io_value_alloc(ck, kind);
  if (!v) {
    tstor__io_free(copy);
    return TSTOR_ENOMEM;
  }
  v->u.str.s = copy;
  v->u.str.len = len;
  *out = v;
  return 0;
}

int tstor_value_new_string(tstor_checkpoint *ck, const char *s, size_t len, tstor_value **out) {
  if (out) *out = NULL;
  if (!ck || !out || (!s && len)) return TSTOR__ERR(TSTOR_EINVAL, "tstor_value_new_string: NULL argument");
  if (!tstor__io_utf8_valid(s, len))
    return TSTOR__ERR(TSTOR_EINVAL, "tstor_value_new_string: the %zu bytes are not UTF-8", len);
  return new_text(ck, TSTOR_VALUE_STRING, s, len, out);
}

int tstor_value_new_bytes(tstor_checkpoint *ck, const void *p, size_t len, tstor_value **out) {
  if (out) *out = NULL;
  if (!ck || !out || (!p && len)) return TSTOR__ERR(TSTOR_EINVAL, "tstor_value_new_bytes: NULL argument");
  return new_text(ck, TSTOR_VALUE_BYTES, p, len, out);
}

int tstor_value_new_object(tstor_checkpoint *ck, const char *cls, const char *version, tstor_value *state,
                           tstor_value **out) {
  if (out) *out = NULL;
  if (!ck || !cls || !state || !out) return TSTOR__ERR(TSTOR_EINVAL, "tstor_value_new_object: NULL argument");
  if (state->kind != TSTOR_VALUE_DICT)
    return TSTOR__ERR(TSTOR_EINVAL, "tstor_value_new_object: the state of a %s is a %s, not a dict", cls,
                      tstor_value_kind_name(state->kind));
  tstor_value *v = tstor__io_value_alloc(ck, TSTOR_VALUE_OBJECT);
  if (!v) return TSTOR_ENOMEM;
  v->u.obj.cls = tstor__io_strdup(cls);
  v->u.obj.version = version ? tstor__io_strdup(version) : NULL;
  if (!v->u.obj.cls || (version && !v->u.obj.version))
    return TSTOR__ERR(TSTOR_ENOMEM, "checkpoint: out of memory for a class name"); /* freed with ck */
  v->u.obj.state = state;
  *out = v;
  return 0;
}
int tstor_value_new_tensor(tstor_checkpoint *ck, tstor_tensor *t, tstor_value **out) {
  if (out) *out = NULL;
  if (!ck || !out || !t) return TSTOR__ERR(TSTOR_EINVAL, "tstor_value_new_tensor: NULL argument");
  tstor_value *v = tstor__io_value_alloc(ck, TSTOR_VALUE_TENSOR);
  if (!v) return TSTOR_ENOMEM;
  v->u.tensor.t = tstor_tensor_retain(t);
  *out = v;
  return 0;
}
int tstor_value_new_storage(tstor_checkpoint *ck, tstor_storage *s, tstor_dtype dtype, tstor_value **out) {
  if (out) *out = NULL;
  if (!ck || !s || !out) return TSTOR__ERR(TSTOR_EINVAL, "tstor_value_new_storage: NULL argument");
  *out = NULL;
  const tstor_dtype_info *info = tstor_dtype_info_of(dtype);
  if (!info) return TSTOR__ERR(TSTOR_EINVAL, "tstor_value_new_storage: dtype %d is none of tstor's", (int)dtype);
  if (tstor_storage_nbytes(s) % info->element_size)
    return TSTOR__ERR(TSTOR_ESIZE, "tstor_value_new_storage: %zu bytes hold no whole number of %s elements",
                      tstor_storage_nbytes(s), info->name);
  /* a storage value names its storage by its place among ck's storages, as a
   * loaded one does: one entry per storage, however many values name it */
  long idx = -1;
  for (size_t i = 0; i < ck->nstorages && idx < 0; i++)
    if (ck->storages[i].s == s) idx = (long)i;
  char key[32];
  snprintf(key, sizeof key, "%zu", ck->nstorages);
  int rc = idx >= 0 ? 0
                    : tstor__io_record_add(ck, key, strlen(key), dtype,
                                           (int64_t)(tstor_storage_nbytes(s) / info->element_size),
                                           "", 0, &idx);
  if (rc) return rc;
  tstor_value *v = tstor__io_value_alloc(ck, TSTOR_VALUE_STORAGE);
  if (!v) return TSTOR_ENOMEM;
  if (!ck->storages[idx].s) ck->storages[idx].s = tstor_storage_retain(s);
  v->u.tensor.storage = idx;
  v->u.tensor.s = s;
  v->u.tensor.dtype = (int)dtype;
  *out = v;
  return 0;
}

int tstor_value_append(tstor_value *seq, tstor_value *item) {
  if (!seq || !item || (seq->kind != TSTOR_VALUE_TUPLE && seq->kind != TSTOR_VALUE_LIST))
    return TSTOR__ERR(TSTOR_EINVAL, "tstor_value_append: needs a tuple or list and an item");
  return tstor__io_seq_push(seq, item);
}
int tstor_value_dict_set(tstor_value *dict, tstor_value *key, tstor_value *value) {
  if (!dict || !key || !value || dict->kind != TSTOR_VALUE_DICT)
    return TSTOR__ERR(TSTOR_EINVAL, "tstor_value_dict_set: needs a dict, a key and a value");
  return tstor__io_dict_set(dict, key, value);
}

/* -------------------------------------------------------------- checks */

int tstor__io_utf8_valid(const char *str, size_t len) {
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0;
  while (i < len) {
    /* ASCII eight bytes at a time: names and headers are mostly that */
    uint64_t w;
    while (len - i >= 8 && (memcpy(&w, s + i, 8), !(w & 0x8080808080808080ull))) i += 8;
    if (i >= len) break;
    unsigned c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t n;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) n = 1, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) n = 2, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) n = 3, cp = c & 0x07;
    else return 0;
    if (len - i <= n) return 0;
    for (size_t k = 1; k <= n; k++) {
      if ((s[i + k] & 0xC0) != 0x80) return 0;
      cp = cp << 6 | (s[i + k] & 0x3F);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
    i += n + 1;
  }
  return 1;
}

/* Python's str.isspace() over ASCII. */
static bool py_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

static int digit_of(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'z') return c - 'a' + 10;
  if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
  return 99;
}

int tstor__io_parse_int(const char *s, size_t len, int base, int64_t *out) {
  size_t i = 0;
  *out = 0;
  while (len && py_space(s[len - 1])) len--;
  while (i < len && py_space(s[i])) i++;
  bool neg = i < len && s[i] == '-';
  if (i < len && (s[i] == '+' || s[i] == '-')) i++;
  /* a prefix: the base's own, or for base 0 the one that picks it */
  bool prefixed = false;
  if (i + 1 < len && s[i] == '0') {
    char p = (char)(s[i + 1] | 0x20);
    int b = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (b && (base == 0 || base == b)) base = b, prefixed = true, i += 2;
  }
  /* base 0 without a prefix is decimal, and a leading 0 makes it all zeros */
  bool zeros_only = base == 0 && i < len && s[i] == '0';
  if (base == 0) base = 10;
  uint64_t v = 0;
  bool digit = false, over = false;
  for (; i < len; i++) {
    if (s[i] == '_' && (digit || prefixed) && i + 1 < len && digit_of(s[i + 1]) < base) {
      prefixed = false;
      continue;
    }
    int d = digit_of(s[i]);
    if (d >= base || (zeros_only && d)) return TSTOR_EINVAL;
    over |= v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base;
    v = v * (uint64_t)base + (uint64_t)d;
    digit = true;
  }
  if (!digit) return TSTOR_EINVAL;
  if (over || v > (uint64_t)INT64_MAX + neg) return TSTOR_ERANGE;
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return 0;
}

enum { WHITE = 0, GREY = 1, BLACK = 2 };

typedef struct frame {
  tstor_value *v;
  size_t next; /* next child: a dict's keys first, then the items, then attrs; a
                  tensor's attrs, then its quantizer */
} frame;

static size_t nchildren(const tstor_value *v) {
  if (v->kind == TSTOR_VALUE_OBJECT) return 1;
  if (v->kind == TSTOR_VALUE_TENSOR)
    return (v->u.tensor.attrs ? 1 : 0) + (v->u.tensor.quantizer ? 1 : 0);
  if (!is_container(v)) return 0;
  return v->u.seq.n * (v->kind == TSTOR_VALUE_DICT ? 2 : 1) + (v->u.seq.attrs ? 1 : 0);
}
static tstor_value *child(const tstor_value *v, size_t i) {
  if (v->kind == TSTOR_VALUE_OBJECT) return v->u.obj.state;
  if (v->kind == TSTOR_VALUE_TENSOR)
    return i || !v->u.tensor.attrs ? v->u.tensor.quantizer : v->u.tensor.attrs;
  size_t n = v->u.seq.n;
  if (v->kind == TSTOR_VALUE_DICT) {
    if (i < n) return v->u.seq.keys[i];
    i -= n;
  }
  return i < n ? v->u.seq.items[i] : v->u.seq.attrs;
}

static int refuse_internal(void) {
  return TSTOR__ERR(TSTOR_EINVAL,
                    "checkpoint: a class or function that nothing consumed stands in the tree");
}

/* An iterative depth-first walk (no recursion on hostile input) that enters
 * each container once: a GREY value met again is a cycle, a BLACK one a
 * shared subtree already checked; depth is the walk's stack height. Linear
 * in the values, whatever the sharing. */
int tstor__io_tree_check(tstor_value *root) {
  if (!root) return TSTOR__ERR(TSTOR_EINVAL, "checkpoint: no value");
  if (root->kind >= TSTOR__VALUE_GLOBAL) return refuse_internal();
  frame *stack = tstor__io_malloc((TSTOR_CHECKPOINT_MAX_DEPTH + 1) * sizeof *stack);
  if (!stack) return TSTOR__ERR(TSTOR_ENOMEM, "checkpoint: out of memory");
  int rc = 0;
  size_t top = 1;
  stack[0] = (frame){root, 0};
  root->colour = GREY;
  while (top && !rc) {
    frame *f = &stack[top - 1];
    if (f->next == nchildren(f->v)) {
      f->v->colour = BLACK;
      top--;
      continue;
    }
    tstor_value *c = child(f->v, f->next++);
    if (c->kind >= TSTOR__VALUE_GLOBAL)
      rc = refuse_internal();
    else if (c->colour == GREY)
      rc = TSTOR__ERR(TSTOR_EINVAL, "checkpoint: a %s contains itself",
                      tstor_value_kind_name(c->kind));
    else if (c->colour == BLACK ||
             (!is_container(c) && c->kind != TSTOR_VALUE_OBJECT && nchildren(c) == 0))
      continue;
    else if (top > TSTOR_CHECKPOINT_MAX_DEPTH)
      rc = TSTOR__ERR(TSTOR_EINVAL, "checkpoint: values nest deeper than %d levels",
                      TSTOR_CHECKPOINT_MAX_DEPTH);
    else {
      c->colour = GREY;
      stack[top++] = (frame){c, 0};
    }
  }
  tstor__io_free(stack);
  return rc;
}
