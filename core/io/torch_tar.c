/* torch.save's first format, a tar archive: what PyTorch wrote until
 * pytorch/pytorch#713 (February 2017, before 0.1.10) replaced it with the
 * legacy format, and what torch.load still reads, with tarfile, in
 * legacy_load (torch/serialization.py). Its members, found as tarfile finds
 * them (tar.c):
 *
 *   sys_info  a pickle of the byte order and type sizes, which torch.load
 *             does not read, nor do we;
 *   pickle    the tree, whose persistent ids are storages' and tensors' keys
 *             (the addresses PyTorch gave them) as strings;
 *   tensors   a pickle of the count, then per tensor a pickle (key, storage
 *             key, tensor class) and its layout as TH wrote it from its
 *             struct: ndim in 4 bytes and 4 more that are not read, ndim
 *             sizes, ndim strides and the storage offset, 8 bytes each;
 *   storages  a pickle of the count, then per storage a pickle (key,
 *             location, storage class), its element count (8 bytes) and its
 *             elements; then a pickle of the views [(key, root key, offset,
 *             count)] of parts of them. Numbers are little-endian.
 *
 * torch.load reads the storages, their views, the tensors, then the tree,
 * and keeps every object by its key in one dict, so that a key given again
 * names the later object from there on; so it is here (a tstor__io_keymap).
 * A view takes its root's dtype, and a tensor its storage's. The pickles go
 * through the strict machine with torch.save's rules (torch_rules.c),
 * Python 2's opcodes included, as most of these files came from Python 2;
 * a storage's bytes through the shared source, read into place or, mapped,
 * viewed where they lie aligned. A storage whose key a later one takes is
 * never read: nothing can name it.
 *
 * Refused where torch.load reads on (docs/formats.md lists it): a tensor
 * that reaches past its storage (torch.load grows the storage with bytes it
 * never wrote) and a view past its root (Python's slice shortens it). */
#include "io_internal.h"

#include <string.h>

#define WINDOW ((size_t)4 << 10) /* a storage's or tensor's header pickle fits in this, mostly */

/* One member's bytes, read forward. */
typedef struct member {
  tstor__io_source *src;
  const char *what;    /* "member 'storages'", for messages */
  uint64_t start, end; /* its bytes in the input */
  uint64_t at;         /* the next byte to read */
  uint8_t *buf;        /* a window read from a file */
  size_t cap;
} member;

/* A storage of the member 'storages', before its record exists. */
typedef struct entry {
  int64_t key;
  tstor_dtype dtype;
  char *location;       /* owned; "" when the file gives none */
  uint64_t numel, data; /* its elements, and where they begin */
} entry;

typedef struct loader {
  tstor__io_source *src;
  tstor_checkpoint *ck;
  tstor__io_keymap keys; /* storages, views and tensors by key */
  member storages, tensors, pickle;
  entry *entries;
  size_t nentries, capentries;
} loader;

#define bad(m, at, code, ...) tstor__io_fail_at((m)->what, (at), (code), __VA_ARGS__)

/* ------------------------------------------------------------ reading */

/* A cursor over the next `want` bytes of m (fewer at its end). */
static int window(member *m, size_t want, tstor__io_cursor *cur) {
  if (want > m->end - m->at) want = (size_t)(m->end - m->at);
  const uint8_t *p = m->src->bytes ? m->src->bytes + m->at : NULL;
  if (!p) {
    if (want > m->cap) {
      uint8_t *grown = tstor__io_realloc(m->buf, want);
      if (!grown)
        return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for %zu bytes of %s", want, m->what);
      m->buf = grown;
      m->cap = want;
    }
    int rc = tstor__io_source_read(m->src, m->buf, want, m->at, m->what);
    if (rc) return rc;
    p = m->buf;
  }
  *cur = tstor__io_cursor_over(p, want, m->what);
  cur->base = m->at;
  return 0;
}

/* The pickle at m's position into *ck (new, the caller's to free), with
 * its value in *out, stepped over: read through a window that grows four
 * times each time the pickle runs past it, each try on a checkpoint of its
 * own, so that what a small pickle costs stays bounded by its size. */
static int read_pickle(member *m, const tstor__io_pickle_rules *rules, tstor_checkpoint **ck,
                       tstor_value **out) {
  uint64_t left = m->end - m->at, limit = left < TSTOR__PICKLE_MAX ? left : TSTOR__PICKLE_MAX;
  size_t want = limit < WINDOW ? (size_t)limit : WINDOW;
  for (;;) {
    tstor__io_cursor cur;
    tstor_checkpoint_free(*ck);
    *ck = NULL;
    int rc = tstor_checkpoint_new(ck);
    if (!rc) rc = window(m, want, &cur);
    if (rc) return rc;
    rc = tstor__io_unpickle(*ck, &cur, rules, (size_t)limit + 16, out);
    if (!rc) {
      m->at += cur.off;
      return 0;
    }
    if (!cur.ran_out || want == limit) {
      if (cur.ran_out && limit < left)
        return bad(m, m->at, TSTOR_ERANGE, "a pickle of more than %llu bytes",
                   (unsigned long long)TSTOR__PICKLE_MAX);
      return rc;
    }
    want = limit / 4 < want ? (size_t)limit : want * 4;
  }
}

/* n little-endian bytes (4 or 8) at m's position, signed, stepped over;
 * `what` names them when the member ends first. */
static int read_int(member *m, size_t n, const char *what, int64_t *out) {
  uint8_t b[8];
  if (m->end - m->at < n)
    return bad(m, m->at, TSTOR_EINVAL, "the member ends inside %s (%zu bytes, %llu left)", what, n,
               (unsigned long long)(m->end - m->at));
  int rc = tstor__io_source_read(m->src, b, n, m->at, m->what);
  if (rc) return rc;
  uint64_t u = 0;
  for (size_t i = n; i--;) u = u << 8 | b[i];
  if (n < 8 && (u >> (8 * n - 1))) u |= ~(uint64_t)0 << (8 * n);
  memcpy(out, &u, sizeof u);
  m->at += n;
  return 0;
}

/* A pickled count, as range() takes it: an int (a negative one is none). */
static int read_count(member *m, const char *what, uint64_t *n) {
  tstor_checkpoint *ck = NULL;
  tstor_value *v = NULL;
  uint64_t at = m->at;
  int rc = read_pickle(m, &tstor__io_torch_tar_header_rules, &ck, &v);
  if (!rc && v->kind != TSTOR_VALUE_INT && v->kind != TSTOR_VALUE_BOOL)
    rc = bad(m, at, TSTOR_EINVAL, "the count of %s is no int but a %s", what,
             tstor_value_kind_name((tstor_value_kind)v->kind));
  if (!rc) *n = v->u.i > 0 ? (uint64_t)v->u.i : 0;
  tstor_checkpoint_free(ck);
  return rc;
}

/* A tuple or list of n items, as Python unpacks one. */
static bool unpacks(const tstor_value *v, size_t n) {
  return (v->kind == TSTOR_VALUE_TUPLE || v->kind == TSTOR_VALUE_LIST) && v->u.seq.n == n;
}

/* The value of key `key`, a storage (or a view of one): *idx its record. */
static int storage_of(loader *ld, const member *m, uint64_t at, int64_t key, const char *who,
                      long *idx) {
  const tstor_value *v = tstor__io_keymap_get(&ld->keys, key);
  if (!v || v->kind != TSTOR_VALUE_STORAGE)
    return bad(m, at, TSTOR_EINVAL, "%s names storage %lld, which is %s", who, (long long)key,
               v ? "a tensor" : "no key of the member 'storages'");
  *idx = v->u.tensor.storage;
  return 0;
}

/* A STORAGE value of record idx under `key`, which it takes from whatever
 * held it. */
static int storage_value(loader *ld, long idx, int64_t key) {
  tstor_value *v = tstor__io_value_alloc(ld->ck, TSTOR_VALUE_STORAGE);
  if (!v) return TSTOR_ENOMEM;
  v->u.tensor.storage = idx;
  v->u.tensor.dtype = (int)ld->ck->storages[idx].dtype;
  return tstor__io_keymap_put(&ld->keys, key, v);
}

/* ----------------------------------------------------------- storages */

/* The header (key, location, storage class) of the storage at m's
 * position, its count and where its bytes are, which are stepped over. */
static int read_entry(member *m, uint64_t i, entry *e) {
  tstor_checkpoint *ck = NULL;
  tstor_value *h = NULL;
  uint64_t at = m->at;
  int64_t count = 0;
  memset(e, 0, sizeof *e);
  int rc = read_pickle(m, &tstor__io_torch_tar_header_rules, &ck, &h);
  if (rc) goto out;
  tstor_value **f = h->u.seq.items;
  if (!unpacks(h, 3) || f[0]->kind != TSTOR_VALUE_INT || f[2]->kind != TSTOR__VALUE_GLOBAL ||
      f[2]->u.global.which != TSTOR__G_STORAGE_CLASS) {
    rc = bad(m, at, TSTOR_EINVAL, "storage %llu's header is no (key, location, storage class)",
             (unsigned long long)i);
    goto out;
  }
  e->key = f[0]->u.i;
  e->dtype = (tstor_dtype)f[2]->u.global.dtype;
  /* a location that is no string is kept as "": torch.load ignores it under
   * a map_location, and the source refuses it without one */
  bool named = f[1]->kind == TSTOR_VALUE_STRING;
  e->location = tstor__io_strdup(named ? f[1]->u.str.s : "");
  if (!e->location) {
    rc = TSTOR__ERR(TSTOR_ENOMEM, "out of memory for a storage's location");
    goto out;
  }
  if ((rc = read_int(m, 8, "a storage's element count", &count))) goto out;
  uint64_t es = tstor_dtype_size(e->dtype);
  if (count < 0 || (uint64_t)count > (m->end - m->at) / es) {
    rc = bad(m, at, TSTOR_EINVAL, "storage %lld of %lld %s elements: %s", (long long)e->key,
             (long long)count, tstor_dtype_name(e->dtype),
             count < 0 ? "a negative count" : "more bytes than the member has left");
    goto out;
  }
  e->numel = (uint64_t)count;
  e->data = m->at;
  m->at += e->numel * es;
out:
  tstor_checkpoint_free(ck);
  return rc;
}

/* Each storage of the member, the last of a key its record, read. */
static int load_roots(loader *ld) {
  member *m = &ld->storages;
  uint64_t n;
  int rc = read_count(m, "storages", &n);
  for (uint64_t i = 0; i < n && !rc; i++) {
    entry *grown = tstor__io_grow(ld->entries, &ld->capentries, ld->nentries, sizeof *grown, 16,
                                  "out of memory for storages");
    if (!grown) return TSTOR_ENOMEM;
    ld->entries = grown;
    rc = read_entry(m, i, &ld->entries[ld->nentries]);
    ld->nentries++; /* its location is freed with the others */
  }
  if (rc) return rc;
  /* the last entry of a key in the map, then each of them a record */
  for (size_t i = 0; i < ld->nentries && !rc; i++)
    rc = tstor__io_keymap_put(&ld->keys, ld->entries[i].key, &ld->entries[i]);
  for (size_t i = 0; i < ld->nentries && !rc; i++) {
    entry *e = &ld->entries[i];
    if (tstor__io_keymap_get(&ld->keys, e->key) != e) continue;
    char key[24];
    int klen = snprintf(key, sizeof key, "%lld", (long long)e->key);
    long idx;
    size_t nbytes = (size_t)e->numel * tstor_dtype_size(e->dtype);
    if (!(rc = tstor__io_record_add(ld->ck, key, (size_t)klen, e->dtype, (int64_t)e->numel,
                                    e->location, strlen(e->location), &idx)) &&
        !(rc = tstor__io_source_record(ld->src, &ld->ck->storages[idx], e->data, nbytes)))
      rc = storage_value(ld, idx, e->key);
  }
  return rc;
}

/* The views [(key, root key, offset, count)] after the storages: parts of
 * them (or of views before), counted in their root's elements. */
static int load_views(loader *ld) {
  member *m = &ld->storages;
  tstor_checkpoint *ck = NULL;
  tstor_value *list = NULL;
  uint64_t at = m->at;
  int rc = read_pickle(m, &tstor__io_torch_tar_header_rules, &ck, &list);
  if (!rc && list->kind != TSTOR_VALUE_LIST && list->kind != TSTOR_VALUE_TUPLE)
    rc = bad(m, at, TSTOR_EINVAL, "the storages' views are no list but a %s",
             tstor_value_kind_name((tstor_value_kind)list->kind));
  for (size_t i = 0; !rc && i < list->u.seq.n; i++) {
    tstor_value *v = list->u.seq.items[i], **f = v->u.seq.items;
    if (!unpacks(v, 4) || f[0]->kind != TSTOR_VALUE_INT || f[1]->kind != TSTOR_VALUE_INT ||
        f[2]->kind != TSTOR_VALUE_INT || f[3]->kind != TSTOR_VALUE_INT) {
      rc = bad(m, at, TSTOR_EINVAL, "view %zu is no (key, root key, offset, count) of ints", i);
      break;
    }
    long root = -1;
    if ((rc = storage_of(ld, m, at, f[1]->u.i, "a view", &root))) break;
    const tstor__io_record *r = &ld->ck->storages[root];
    int64_t off = f[2]->u.i, n = f[3]->u.i;
    if (off < 0 || n < 0 || off > r->numel || n > r->numel - off) {
      rc = bad(m, at, TSTOR_ERANGE,
               "view %lld of %lld elements at %lld lies past storage %s of %lld %s elements",
               (long long)f[0]->u.i, (long long)n, (long long)off, r->key, (long long)r->numel,
               tstor_dtype_name(r->dtype));
      break;
    }
    /* a view of a view is one of its root */
    long base = r->view_of >= 0 ? r->view_of : root;
    int64_t from = off + (r->view_of >= 0 ? r->view_offset : 0);
    char key[24];
    int klen = snprintf(key, sizeof key, "%lld", (long long)f[0]->u.i);
    long idx;
    if ((rc = tstor__io_record_add(ld->ck, key, (size_t)klen, r->dtype, n, r->location,
                                   strlen(r->location), &idx)))
      break;
    ld->ck->storages[idx].view_of = base;
    ld->ck->storages[idx].view_offset = from;
    rc = storage_value(ld, idx, f[0]->u.i);
  }
  tstor_checkpoint_free(ck);
  return rc;
}

/* ------------------------------------------------------------ tensors */

/* A tensor's layout after its header, as TH's writeMetadataRaw wrote it. */
static int read_layout(member *m, tstor_value *t) {
  int64_t ndim, skip;
  int rc = read_int(m, 4, "a tensor's ndim", &ndim);
  if (!rc) rc = read_int(m, 4, "the 4 bytes after a tensor's ndim", &skip);
  if (rc) return rc;
  if (ndim < 0 || ndim > TSTOR_TENSOR_MAX_DIM)
    return bad(m, m->at - 8, TSTOR_EINVAL, "a tensor of %lld dimensions (0 to %d)", (long long)ndim,
               TSTOR_TENSOR_MAX_DIM);
  if ((uint64_t)(2 * ndim + 1) * 8 > m->end - m->at)
    return bad(m, m->at - 8, TSTOR_EINVAL, "the member ends inside a tensor of %lld dimensions",
               (long long)ndim);
  if (!(t->u.tensor.sizes = tstor__io_malloc((size_t)(2 * ndim + 1) * sizeof(int64_t))))
    return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for a tensor of %lld dimensions",
                      (long long)ndim);
  t->u.tensor.strides = t->u.tensor.sizes + ndim;
  t->u.tensor.ndim = (int)ndim;
  for (int64_t d = 0; d < 2 * ndim && !rc; d++)
    rc = read_int(m, 8, "a tensor's sizes", &t->u.tensor.sizes[d]);
  if (!rc) rc = read_int(m, 8, "a tensor's storage offset", &t->u.tensor.offset);
  return rc;
}

/* Tensor i of the member: its header (key, storage key, tensor class), its
 * layout, checked against its storage. */
static int load_tensor(loader *ld, member *m, uint64_t i) {
  tstor_checkpoint *ck = NULL;
  tstor_value *h = NULL, *t = NULL;
  uint64_t at = m->at;
  long idx = -1;
  int rc = read_pickle(m, &tstor__io_torch_tar_header_rules, &ck, &h);
  if (rc) goto out;
  tstor_value **f = h->u.seq.items;
  if (!unpacks(h, 3) || f[0]->kind != TSTOR_VALUE_INT || f[2]->kind != TSTOR__VALUE_GLOBAL ||
      f[2]->u.global.which != TSTOR__G_TENSOR_CLASS) {
    rc = bad(m, at, TSTOR_EINVAL, "tensor %llu's header is no (key, storage key, tensor class)",
             (unsigned long long)i);
    goto out;
  }
  if (f[1]->kind != TSTOR_VALUE_INT) {
    rc = f[1]->kind == TSTOR_VALUE_NONE
             ? bad(m, at, TSTOR_EINVAL,
                   "tensor %lld names no storage (None: an empty tensor of PyTorch 0.1, "
                   "which torch.load cannot look up)",
                   (long long)f[0]->u.i)
             : bad(m, at, TSTOR_EINVAL, "tensor %lld names no storage but a %s",
                   (long long)f[0]->u.i, tstor_value_kind_name((tstor_value_kind)f[1]->kind));
    goto out;
  }
  if ((rc = storage_of(ld, m, at, f[1]->u.i, "a tensor", &idx))) goto out;
  if (!(t = tstor__io_value_alloc(ld->ck, TSTOR_VALUE_TENSOR))) {
    rc = TSTOR_ENOMEM;
    goto out;
  }
  t->u.tensor.storage = idx;
  if ((rc = read_layout(m, t))) goto out;
  const tstor__io_record *r = &ld->ck->storages[idx];
  uint64_t need;
  rc = tstor_layout_nbytes(t->u.tensor.ndim, t->u.tensor.sizes, t->u.tensor.strides,
                           tstor_dtype_size(r->dtype), t->u.tensor.offset, &need);
  if (rc) {
    rc = bad(m, at, rc, "tensor %lld: %s", (long long)f[0]->u.i, tstor_last_error());
    goto out;
  }
  if (need > (uint64_t)r->numel * tstor_dtype_size(r->dtype)) {
    rc = bad(m, at, TSTOR_ERANGE,
             "tensor %lld needs %llu bytes of storage %s, which has %llu (torch.load would grow it "
             "with bytes "
             "the file does not hold)",
             (long long)f[0]->u.i, (unsigned long long)need, r->key,
             (unsigned long long)r->numel * tstor_dtype_size(r->dtype));
    goto out;
  }
  rc = tstor__io_keymap_put(&ld->keys, f[0]->u.i, t);
out:
  tstor_checkpoint_free(ck);
  return rc;
}

static int load_tensors(loader *ld) {
  uint64_t n;
  int rc = read_count(&ld->tensors, "tensors", &n);
  for (uint64_t i = 0; i < n && !rc; i++) rc = load_tensor(ld, &ld->tensors, i);
  return rc;
}

/* --------------------------------------------------------------- tree */

/* The tree, whose persistent ids the keys name. */
static int load_tree(loader *ld) {
  member *m = &ld->pickle;
  uint64_t limit = m->end - m->start < TSTOR__PICKLE_MAX ? m->end - m->start : TSTOR__PICKLE_MAX;
  tstor__io_cursor cur;
  int rc = window(m, (size_t)limit, &cur);
  if (rc) return rc;
  tstor__io_pickle_rules rules = tstor__io_torch_tar_rules;
  rules.state = &ld->keys;
  uint64_t size = ld->src->size;
  rc = tstor__io_unpickle(ld->ck, &cur, &rules,
                          (size_t)(size < SIZE_MAX - 16 ? size + 16 : SIZE_MAX), &ld->ck->root);
  if (rc && cur.ran_out && limit < m->end - m->start)
    return bad(m, m->start, TSTOR_ERANGE, "a pickle of more than %llu bytes",
               (unsigned long long)TSTOR__PICKLE_MAX);
  return rc;
}

/* ------------------------------------------------------------ members */

static int find_members(loader *ld) {
  static const char *const names[] = {"storages", "tensors", "pickle"};
  static const char *const whats[] = {"member 'storages'", "member 'tensors'", "member 'pickle'"};
  member *ms[] = {&ld->storages, &ld->tensors, &ld->pickle};
  tstor__io_tar_member found[3];
  int rc = tstor__io_tar_find(ld->src, names, 3, found);
  for (int i = 0; i < 3 && !rc; i++) {
    if (!found[i].found)
      return TSTOR__ERR(
          TSTOR_EINVAL,
          "a tar archive without the member '%s' (torch.save's tar format has sys_info, "
          "pickle, tensors and storages)",
          names[i]);
    if (!found[i].file)
      return TSTOR__ERR(TSTOR_EINVAL,
                        "tar offset %llu: the member '%s' is no file but of type '%c'",
                        (unsigned long long)found[i].header, names[i], found[i].type);
    *ms[i] = (member){
        ld->src, whats[i], found[i].data, found[i].data + found[i].size, found[i].data, NULL, 0};
  }
  return rc;
}

int tstor__io_torch_tar_load(tstor__io_source *src, tstor_checkpoint **out) {
  loader ld;
  memset(&ld, 0, sizeof ld);
  ld.src = src;
  int rc = find_members(&ld);
  if (!rc) rc = tstor_checkpoint_new(&ld.ck);
  if (!rc) rc = load_roots(&ld);
  if (!rc) rc = load_views(&ld);
  if (!rc) rc = load_tensors(&ld);
  if (!rc) rc = load_tree(&ld);
  if (!rc) rc = tstor__io_tree_check(ld.ck->root);
  if (!rc) rc = tstor__io_source_run(src);
  if (!rc) rc = tstor__io_torch_bind(src->ctx, ld.ck);
  for (size_t i = 0; i < ld.nentries; i++) tstor__io_free(ld.entries[i].location);
  tstor__io_free(ld.entries);
  tstor__io_keymap_free(&ld.keys);
  tstor__io_free(ld.storages.buf);
  tstor__io_free(ld.tensors.buf);
  tstor__io_free(ld.pickle.buf);
  if (rc) {
    tstor_checkpoint_free(ld.ck);
    return rc;
  }
  *out = ld.ck;
  return 0;
}
