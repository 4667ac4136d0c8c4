/* libFuzzer target: sequences of storage operations against a model.
 *
 * Each input is a little program: bytes decode to operations (new, view,
 * retain, release, resize, copy, fill, fill_pattern, clone, to, new_like,
 * wrap_owned, write, check) on up to 16 handles, over cpu, meta and the test
 * plugin's two fake devices (which hold scrambled bytes, so every copy to or
 * from them goes through kernels or host staging). A model of the same
 * storages (sizes, shared bytes of views, reference counts, which bytes are
 * known) predicts each call's exact return code, and after each call every
 * live storage's size, flags, base, data pointer and use count are checked;
 * 'check' compares bytes. An 'inject' operation makes one of the next call's
 * allocations fail (core/runtime/fault.h): that call must then return TSTOR_ENOMEM
 * and change nothing. At the end every handle is released and the cpu
 * allocator must be back to zero bytes.
 *
 * Environment: TSTOR_BACKEND_DIR (the modules) and TSTOR_FUZZ_FAKE (the fake
 * plugin, tests/plugins/.libs/fake.so), as tests/fuzz/run.sh sets them. */
#include "runtime/fault.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tstor/tstor.h>

/* The harness itself is left without coverage instrumentation: its byte
 * loops, traced comparison by comparison, would cost more than the library
 * calls under test, and the library's own coverage is what guides. */
#pragma clang attribute push(__attribute__((no_sanitize("coverage"))), apply_to = function)

enum { NSLOTS = 16, NOBJS = 256, MAXBYTES = 4096, MAXOPS = 200 };
enum { CPU, META, FAKE0, FAKE1, NDEV };

static tstor_context *ctx;
static tstor_device devs[NDEV];

/* One tstor_storage. A root holds the model of the bytes; a view points at
 * its root. Roots stay alive while a slot or a view holds them. */
typedef struct obj {
  tstor_storage *s;
  int live;
  int slotrefs; /* slots holding it */
  int root;     /* index of the root (itself for a root) */
  int is_view;
  int dev;
  size_t off, n; /* views: offset in the root */
  int nviews;    /* roots: live views */
  int resizable;
  unsigned char *bytes, *known; /* roots with data: MAXBYTES each */
} obj;

static obj objs[NOBJS];
static int nobjs;
static int slots[NSLOTS]; /* index into objs, or -1 */

static const uint8_t *in;
static size_t left;

static void fail(const char *what, int rc) {
  fprintf(stderr, "fuzz_ops: %s (rc %s, detail: %s)\n", what, tstor_err_name(rc),
          tstor_last_error());
  abort();
}

static unsigned u8(void) {
  if (!left) return 0;
  left--;
  return *in++;
}
static size_t u16(void) { return (size_t)(u8() | (u8() << 8)); }
static size_t size_arg(void) { return u16() % (MAXBYTES + 1); }

static int has_data(int dev) { return dev != META; }

static int new_obj(tstor_storage *s, int dev, size_t n, int resizable) {
  if (nobjs == NOBJS) abort(); /* bounded by MAXOPS */
  obj *o = &objs[nobjs];
  memset(o, 0, sizeof *o);
  o->s = s;
  o->live = 1;
  o->root = nobjs;
  o->dev = dev;
  o->n = n;
  o->resizable = resizable;
  if (has_data(dev)) {
    o->bytes = calloc(1, MAXBYTES);
    o->known = calloc(1, MAXBYTES);
    if (!o->bytes || !o->known) abort();
  }
  return nobjs++;
}

static int new_view_obj(tstor_storage *s, int base, size_t off, size_t n) {
  int root = objs[base].root;
  size_t root_off = objs[base].off + off;
  int i = new_obj(s, objs[root].dev, n, 0);
  objs[i].is_view = 1;
  objs[i].root = root;
  objs[i].off = root_off;
  objs[root].nviews++;
  return i;
}

static void maybe_die(int i) {
  obj *o = &objs[i];
  if (!o->live || o->slotrefs > 0 || (!o->is_view && o->nviews > 0)) return;
  o->live = 0;
  free(o->bytes);
  free(o->known);
  o->bytes = o->known = NULL;
  if (o->is_view) {
    objs[o->root].nviews--;
    maybe_die(o->root);
  }
}

static int free_slot(void) {
  for (int i = 0; i < NSLOTS; i++)
    if (slots[i] < 0) return i;
  return -1;
}

static void put_slot(int slot, int obj_index) {
  slots[slot] = obj_index;
  objs[obj_index].slotrefs++;
}

static void drop_slot(int slot) {
  int i = slots[slot];
  slots[slot] = -1;
  objs[i].slotrefs--;
  maybe_die(i);
}

/* The object in the slot named by the next byte, or -1 for an empty one. */
static int pick(int *slot) {
  int k = (int)(u8() % NSLOTS);
  if (slot) *slot = k;
  return slots[k];
}

/* Model bytes of object i: the root's, from the view's offset. */
static unsigned char *mbytes(int i) { return objs[objs[i].root].bytes + objs[i].off; }
static unsigned char *mknown(int i) { return objs[objs[i].root].known + objs[i].off; }

/* ------------------------------------------------------------ checking */

static void check_obj(int i) {
  obj *o = &objs[i];
  long uses = o->slotrefs + (o->is_view ? 0 : o->nviews);
  if (tstor_storage_use_count(o->s) != uses) fail("use count differs from the model", 0);
  if (tstor_storage_nbytes(o->s) != o->n) fail("size differs from the model", 0);
  unsigned flags = tstor_storage_flags(o->s);
  if (!!(flags & TSTOR_FLAG_VIEW) != o->is_view) fail("view flag differs", 0);
  if (!!(flags & TSTOR_FLAG_NO_DATA) != !has_data(o->dev)) fail("no-data flag differs", 0);
  if (!!(flags & TSTOR_FLAG_RESIZABLE) != o->resizable) fail("resizable flag differs", 0);
  tstor_device d = tstor_storage_device(o->s);
  if (d.type != devs[o->dev].type || d.index != devs[o->dev].index) fail("device differs", 0);
  if (o->is_view) {
    obj *r = &objs[o->root];
    if (tstor_storage_base(o->s) != r->s) fail("view's base is not its root", 0);
    if (tstor_storage_offset(o->s) != o->off) fail("view's offset differs", 0);
    void *rd = tstor_storage_data(r->s);
    if (rd && tstor_storage_data(o->s) != (char *)rd + o->off) fail("view's data pointer", 0);
  } else if (tstor_storage_base(o->s) != NULL) {
    fail("root with a base", 0);
  }
  if (!has_data(o->dev) && tstor_storage_data(o->s) != NULL) fail("meta with data", 0);
}

static void check_all(void) {
  for (int i = 0; i < nobjs; i++)
    if (objs[i].live) check_obj(i);
}

/* Reads object i's bytes to the host and compares the known ones. */
static void check_bytes(int i) {
  obj *o = &objs[i];
  if (!has_data(o->dev) || o->n == 0) return;
  tstor_storage *h = NULL;
  int rc = tstor_storage_to(o->s, devs[CPU], &h);
  if (rc) fail("to cpu for a check", rc);
  const unsigned char *p = tstor_storage_data(h);
  const unsigned char *want = mbytes(i), *known = mknown(i);
  for (size_t k = 0; k < o->n; k++)
    if (known[k] && p[k] != want[k]) fail("bytes differ from the model", 0);
  tstor_storage_release(h);
}

/* ---------------------------------------------------------- operations */

static int injected; /* the next call runs with one allocation failing */

static void deleter(void *data, void *c) {
  (void)c;
  free(data);
}

/* Runs one call: with an injected failure, an ENOMEM means "nothing
 * happened"; otherwise the return code must be the model's. Returns 1 when
 * the model should apply the operation. */
static int outcome(int rc, int expected) {
  if (injected) {
    tstor__fault_disarm();
    injected = 0;
    if (tstor__fault_failed() > 0) {
      if (rc != TSTOR_ENOMEM) fail("an injected failure did not give ENOMEM", rc);
      return 0;
    }
  }
  if (rc != expected) {
    fprintf(stderr, "fuzz_ops: expected %s\n", tstor_err_name(expected));
    fail("return code differs from the model", rc);
  }
  return rc == 0;
}

static void op_new(void) {
  int dev = (int)(u8() % NDEV);
  size_t n = size_arg();
  int slot = free_slot();
  if (slot < 0) return;
  tstor_storage *s = NULL;
  int rc = tstor_storage_new(ctx, devs[dev], n, &s);
  if (outcome(rc, 0)) put_slot(slot, new_obj(s, dev, n, 1));
}

static void op_view(void) {
  int i = pick(NULL);
  size_t off = size_arg(), n = size_arg();
  int slot = free_slot();
  if (i < 0 || slot < 0) return;
  tstor_storage *v = NULL;
  int expected = off > objs[i].n || n > objs[i].n - off ? TSTOR_ERANGE : 0;
  int rc = tstor_storage_view(objs[i].s, off, n, &v);
  if (outcome(rc, expected)) put_slot(slot, new_view_obj(v, i, off, n));
}

static void op_retain(void) {
  int i = pick(NULL);
  int slot = free_slot();
  if (i < 0 || slot < 0) return;
  if (tstor_storage_retain(objs[i].s) != objs[i].s) fail("retain returned another storage", 0);
  put_slot(slot, i);
}

static void op_release(void) {
  int slot;
  int i = pick(&slot);
  if (i < 0) return;
  tstor_storage_release(objs[i].s);
  drop_slot(slot);
}

static void op_resize(void) {
  int i = pick(NULL);
  size_t n = size_arg();
  if (i < 0) return;
  obj *o = &objs[i];
  int expected = 0;
  if (o->is_view || !o->resizable)
    expected = TSTOR_ENOTSUP;
  else if (o->nviews > 0)
    expected = TSTOR_EBUSY;
  void *data = tstor_storage_data(o->s);
  int rc = tstor_storage_resize(o->s, n);
  if (!outcome(rc, expected)) {
    if (tstor_storage_data(o->s) != data) fail("a failed resize moved the bytes", rc);
    return;
  }
  if (has_data(o->dev) && n > o->n) memset(o->known + o->n, 0, n - o->n);
  o->n = n;
}

static void op_copy(void) {
  int d = pick(NULL), s = pick(NULL);
  if (d < 0 || s < 0) return;
  int expected = 0;
  if (objs[d].n != objs[s].n)
    expected = TSTOR_ESIZE;
  else if (d != s && has_data(objs[d].dev) && !has_data(objs[s].dev))
    expected = TSTOR_ENODATA;
  int rc = tstor_storage_copy(objs[d].s, objs[s].s);
  if (!outcome(rc, expected) || !has_data(objs[d].dev) || d == s) return;
  memmove(mbytes(d), mbytes(s), objs[s].n);
  memmove(mknown(d), mknown(s), objs[s].n);
}

static void op_fill(void) {
  int i = pick(NULL);
  uint8_t v = (uint8_t)u8();
  if (i < 0) return;
  int rc = tstor_storage_fill(objs[i].s, v);
  if (!outcome(rc, 0) || !has_data(objs[i].dev)) return;
  memset(mbytes(i), v, objs[i].n);
  memset(mknown(i), 1, objs[i].n);
}

static void model_pattern(int i, const unsigned char *pattern, size_t ps) {
  for (size_t k = 0; k < objs[i].n; k++) mbytes(i)[k] = pattern[k % ps];
  memset(mknown(i), 1, objs[i].n);
}

static void op_fill_pattern(void) {
  static const size_t sizes[] = {1, 2, 4, 8, 16, 3, 0, 32};
  int i = pick(NULL);
  size_t ps = sizes[u8() % 8];
  unsigned char pattern[32];
  for (size_t k = 0; k < sizeof pattern; k++) pattern[k] = (unsigned char)u8();
  if (i < 0) return;
  int expected = 0;
  if (ps != 1 && ps != 2 && ps != 4 && ps != 8 && ps != 16)
    expected = TSTOR_EINVAL;
  else if (objs[i].n % ps)
    expected = TSTOR_ESIZE;
  int rc = tstor_storage_fill_pattern(objs[i].s, pattern, ps);
  if (!outcome(rc, expected) || !has_data(objs[i].dev)) return;
  model_pattern(i, pattern, ps);
}

/* clone (same device), to (another device or the same), new_like. */
static void op_clone_to(int which) {
  int i = pick(NULL);
  int dev = (int)(u8() % NDEV);
  size_t like = size_arg();
  int slot = free_slot();
  if (i < 0 || slot < 0) return;
  obj *o = &objs[i];
  tstor_storage *c = NULL;
  int rc, expected = 0;
  if (which == 0) {
    dev = o->dev;
    rc = tstor_storage_clone(o->s, &c);
  } else if (which == 1) {
    if (dev != o->dev && has_data(dev) && !has_data(o->dev)) expected = TSTOR_ENODATA;
    rc = tstor_storage_to(o->s, devs[dev], &c);
  } else {
    dev = o->dev;
    rc = tstor_storage_new_like(o->s, like, &c);
  }
  if (!outcome(rc, expected)) return;
  if (which == 1 && dev == o->dev) { /* to the same device: s itself */
    if (c != o->s) fail("to() the same device gave another storage", 0);
    put_slot(slot, i);
    return;
  }
  size_t n = which == 2 ? like : o->n;
  int j = new_obj(c, dev, n, 1);
  if (which != 2 && has_data(dev)) {
    memcpy(objs[j].bytes, mbytes(i), n);
    memcpy(objs[j].known, mknown(i), n);
  }
  put_slot(slot, j);
}

static void model_wrapped_bytes(unsigned char *mem, size_t n) {
  for (size_t k = 0; k < n; k++) mem[k] = (unsigned char)(k * 31 + n);
}

static void op_wrap_owned(void) {
  size_t n = size_arg();
  int slot = free_slot();
  if (slot < 0) return;
  unsigned char *mem = malloc(n ? n : 1);
  if (!mem) abort();
  model_wrapped_bytes(mem, n);
  tstor_storage *s = NULL;
  int rc = tstor_storage_wrap_owned(ctx, devs[CPU], mem, n, deleter, NULL, &s);
  if (!outcome(rc, 0)) {
    free(mem); /* on failure the caller keeps the bytes */
    return;
  }
  int j = new_obj(s, CPU, n, 0);
  memcpy(objs[j].bytes, mem, n);
  memset(objs[j].known, 1, n);
  put_slot(slot, j);
}

static void model_write(int i, unsigned char *p, size_t at, size_t len, uint8_t v) {
  for (size_t k = 0; k < len; k++) p[at + k] = mbytes(i)[at + k] = (unsigned char)(v + k);
  memset(mknown(i) + at, 1, len);
}

/* Writes bytes straight into a cpu storage's memory. */
static void op_write(void) {
  int i = pick(NULL);
  size_t at = size_arg(), len = u8();
  uint8_t v = (uint8_t)u8();
  if (i < 0 || objs[i].dev != CPU || objs[i].n == 0) return;
  at %= objs[i].n;
  if (len > objs[i].n - at) len = objs[i].n - at;
  model_write(i, tstor_storage_data(objs[i].s), at, len, v);
}

static void op_check(void) {
  tstor__fault_disarm(); /* the check's own copies must not fail */
  injected = 0;
  int i = pick(NULL);
  if (i >= 0) check_bytes(i);
}

static void op_inject(void) {
  unsigned nth = u8() % 4 + 1;
  tstor__fault_arm(TSTOR_FAULT_MALLOC | TSTOR_FAULT_ALLOC, nth, 0);
  injected = 1;
}

/* ------------------------------------------------------------- driver */

static const char *getenv_or_die(const char *name) {
  const char *v = getenv(name);
  if (!v || !*v) {
    fprintf(stderr, "fuzz_ops: set %s (tests/fuzz/run.sh does)\n", name);
    exit(2);
  }
  return v;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  getenv_or_die("TSTOR_BACKEND_DIR");
  char ini[4096];
  snprintf(ini, sizeof ini,
           "[tstor]\ndefault_device = cpu\n[backend cpu]\nlibrary = tstor-cpu.so\n"
           "[backend meta]\nlibrary = tstor-meta.so\n"
           "[backend fake]\nlibrary = %s\ndevices = 2\n",
           getenv_or_die("TSTOR_FUZZ_FAKE"));
  int rc = tstor_context_open_string(ini, "fuzz.ini", &ctx);
  if (rc) fail("cannot open the fuzzing context", rc);
  const char *names[NDEV] = {"cpu", "meta", "fake:0", "fake:1"};
  for (int i = 0; i < NDEV; i++)
    if ((rc = tstor_device_parse(ctx, names[i], &devs[i]))) fail("parse a device", rc);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  in = data;
  left = size;
  nobjs = 0;
  injected = 0;
  for (int i = 0; i < NSLOTS; i++) slots[i] = -1;

  for (int ops = 0; left > 0 && ops < MAXOPS; ops++) {
    switch (u8() % 16) {
      case 0: case 1: op_new(); break;
      case 2: case 3: op_view(); break;
      case 4: op_retain(); break;
      case 5: op_release(); break;
      case 6: op_resize(); break;
      case 7: op_copy(); break;
      case 8: op_fill(); break;
      case 9: op_fill_pattern(); break;
      case 10: op_clone_to((int)(u8() % 3)); break;
      case 11: op_wrap_owned(); break;
      case 12: op_write(); break;
      case 13: op_check(); break;
      case 14: op_inject(); break;
      default: op_release(); break;
    }
    if (injected) { /* the operation made no call that could fail */
      tstor__fault_disarm();
      injected = 0;
    }
    check_all();
  }
  for (int i = 0; i < nobjs; i++)
    if (objs[i].live) check_bytes(i);
  for (int k = 0; k < NSLOTS; k++) {
    if (slots[k] < 0) continue;
    tstor_storage_release(objs[slots[k]].s);
    drop_slot(k);
    check_all();
  }
  for (int i = 0; i < nobjs; i++)
    if (objs[i].live) fail("the model has a storage left after releasing every handle", 0);
  tstor_stats st = TSTOR_STATS_INIT;
  int rc = tstor_device_stats(ctx, devs[CPU], &st);
  if (rc || st.allocated != 0) fail("cpu bytes left allocated", rc);
  return 0;
}

#pragma clang attribute pop
