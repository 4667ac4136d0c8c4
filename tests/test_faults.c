/* Allocation-failure injection: every operation is run again and again with
 * its 1st, 2nd, 3rd, ... acquisition of memory (core bookkeeping, storage
 * bytes), dlopen, mmap or shm made to fail (core/runtime/fault.h), until a run sees
 * no failure. Each failed run must return the code that matches what failed,
 * say why in tstor_last_error(), leave every object as it was (sizes, bytes,
 * reference counts, the context's own references, the device's allocated
 * bytes, open files) and free all it took (the core's allocations are counted;
 * ASan or valgrind see the rest). Each operation is swept twice: failing only
 * the Nth acquisition, and failing the Nth and every one after it, which
 * walks the cleanup paths too.
 *
 * To cover a new operation, add a sweep_op to one of the tables below. */
#include "coretest.h"

#include "runtime/fault.h"
#include "internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <tstor/mapped.h>
#include <tstor/typed.h>
#include <unistd.h>

CORETEST_SANITIZER_OPTIONS

/* Enough for a sweep: the longest operation here acquires well under this. */
#define SWEEP_LIMIT 5000

typedef struct fx {
  tstor_context *ctx;
  tstor_device cpu, meta, fake0, fake1;
  tstor_storage *a, *b; /* inputs, made by setup */
  tstor_storage *out;   /* the operation's result */
  tstor_context *ctx_out;
  tstor_stream *stream;
  tstor_event *event;
  void *mem;                 /* wrap: caller-owned bytes */
  int deleted;               /* wrap_owned: deleter calls */
  char path[256];            /* mapped: a scratch file, removed after each run */
  char name[64];             /* mapped: a shared-memory name */
  int sock[2];               /* mapped: a socket pair (0, 0 when none) */
  unsigned char before[256]; /* bytes of a (or b) before the operation */
  size_t nbytes_before;
  void *data_before;
  long uses_before;
} fx;

typedef struct sweep_op {
  const char *name;
  unsigned kinds;
  void (*setup)(fx *f);
  int (*run)(fx *f);
  void (*unchanged)(fx *f); /* after a failed run */
  void (*done)(fx *f);      /* after a run that succeeded */
  /* A fault that the operation may absorb and still succeed (an optional
   * backend that cannot be loaded is reported, not fatal). */
  unsigned absorbs;
} sweep_op;

/* --------------------------------------------------------------- helpers */

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

static uint64_t cpu_allocated(fx *f) {
  tstor_stats st = TSTOR_STATS_INIT;
  ck_tstor_ok(tstor_device_stats(f->ctx, f->cpu, &st));
  return st.allocated;
}

/* Whether rc is what a failure of one of `kinds` gives. */
static int code_matches(int rc, unsigned kinds) {
  if (rc == TSTOR_ENOMEM)
    return (kinds & (TSTOR_FAULT_MALLOC | TSTOR_FAULT_ALLOC | TSTOR_FAULT_MMAP)) != 0;
  if (rc == TSTOR_ELOAD) return (kinds & TSTOR_FAULT_DLOPEN) != 0;
  if (rc == TSTOR_EMFILE) return (kinds & TSTOR_FAULT_SHM) != 0;
  return 0;
}

/* Reads n bytes of a storage on any device through a cpu copy. */
static void read_bytes(fx *f, tstor_storage *s, unsigned char *buf, size_t n) {
  ck_assert_uint_le(n, tstor_storage_nbytes(s));
  tstor_storage *host = NULL, *part = NULL;
  ck_tstor_ok(tstor_storage_view(s, 0, n, &part));
  ck_tstor_ok(tstor_storage_to(part, f->cpu, &host));
  memcpy(buf, tstor_storage_data(host), n);
  tstor_storage_release(host);
  tstor_storage_release(part);
}

static void write_pattern(fx *f, tstor_storage *s, unsigned seed) {
  size_t n = tstor_storage_nbytes(s);
  tstor_storage *host = NULL;
  ck_tstor_ok(tstor_storage_new(f->ctx, f->cpu, n, &host));
  for (size_t i = 0; i < n; i++)
    ((unsigned char *)tstor_storage_data(host))[i] = (unsigned char)(i * 7 + seed);
  ck_tstor_ok(tstor_storage_copy(s, host));
  tstor_storage_release(host);
}

/* Remembers a's size, data pointer, use count and first bytes. */
static void snapshot(fx *f, tstor_storage *s) {
  f->nbytes_before = tstor_storage_nbytes(s);
  f->data_before = tstor_storage_data(s);
  f->uses_before = tstor_storage_use_count(s);
  size_t n = f->nbytes_before < sizeof f->before ? f->nbytes_before : sizeof f->before;
  if (!(tstor_storage_flags(s) & TSTOR_FLAG_NO_DATA)) read_bytes(f, s, f->before, n);
}

static void assert_as_snapshot(fx *f, tstor_storage *s) {
  ck_assert_uint_eq(tstor_storage_nbytes(s), f->nbytes_before);
  ck_assert_ptr_eq(tstor_storage_data(s), f->data_before);
  ck_assert_int_eq(tstor_storage_use_count(s), f->uses_before);
  ck_assert_int_eq(atomic_load(&s->nviews), 0);
  size_t n = f->nbytes_before < sizeof f->before ? f->nbytes_before : sizeof f->before;
  if (!(tstor_storage_flags(s) & TSTOR_FLAG_NO_DATA)) {
    unsigned char now[sizeof f->before];
    read_bytes(f, s, now, n);
    ck_assert_msg(memcmp(now, f->before, n) == 0, "bytes changed by a failed operation");
  }
}

/* Mappings of files and shared memory: what a failed mapping must not
 * leave behind. */
static int count_file_maps(void) {
  FILE *m = fopen("/proc/self/maps", "r");
  ck_assert_ptr_nonnull(m);
  char line[4096];
  int n = 0;
  while (fgets(line, sizeof line, m)) {
    char path[2] = "";
    if (sscanf(line, "%*s %*s %*s %*s %*s %1s", path) == 1 && path[0] == '/') n++;
  }
  fclose(m);
  return n;
}

/* Shared-memory objects of this process in /dev/shm ("tstor-PID-..."). */
static int count_own_shm(void) {
  char prefix[32];
  snprintf(prefix, sizeof prefix, "tstor-%ld-", (long)getpid());
  DIR *d = opendir("/dev/shm");
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
  closedir(d);
  return n;
}

static void release_all(fx *f) {
  if (f->path[0]) unlink(f->path);
  if (f->name[0] && strncmp(f->name, "/fault-", 7) == 0) shm_unlink(f->name);
  if (f->sock[0] > 0) {
    close(f->sock[0]);
    close(f->sock[1]);
  }
  tstor_storage_release(f->out);
  tstor_storage_release(f->a);
  tstor_storage_release(f->b);
  tstor_stream_free(f->stream);
  tstor_event_free(f->event);
  tstor_context_close(f->ctx_out);
  free(f->mem);
  f->out = f->a = f->b = NULL;
  f->stream = NULL;
  f->event = NULL;
  f->ctx_out = NULL;
  f->mem = NULL;
}

/* Runs one operation with its nth acquisition failing (and, with persist,
 * every later one); returns 0 when nothing was failed (the sweep is over). */
static int sweep_once(tstor_context *ctx, const sweep_op *op, unsigned long nth, int persist) {
  fx f;
  memset(&f, 0, sizeof f);
  f.ctx = ctx;
  if (ctx) {
    f.cpu = coretest_dev(ctx, "cpu");
    f.meta = coretest_dev(ctx, "meta");
    f.fake0 = coretest_dev(ctx, "fake:0");
    f.fake1 = coretest_dev(ctx, "fake:1");
  }
  if (op->setup) op->setup(&f);
  long ctx_refs = ctx ? atomic_load(&ctx->refs) : 0;
  uint64_t allocated = ctx ? cpu_allocated(&f) : 0;
  int fds = count_fds(), maps = count_file_maps(), shms = count_own_shm();

  tstor__fault_arm(op->kinds, nth, persist);
  int rc = op->run(&f);
  tstor__fault_disarm();
  unsigned long failed = tstor__fault_failed();
  unsigned kind = tstor__fault_failed_kinds();
  long live = tstor__fault_live();
  const char *where = coretest_fmt("%s, failing acquisition %lu%s (kinds %#x)", op->name, nth,
                                   persist ? " and later" : "", kind);

  if (failed == 0 || (rc == 0 && (kind & op->absorbs))) {
    ck_assert_msg(rc == 0, "%s: failed with nothing injected: %s: %s", where, tstor_err_name(rc),
                  tstor_last_error());
    if (op->done) op->done(&f);
  } else {
    ck_assert_msg(code_matches(rc, kind), "%s: returned %s (%s)", where, tstor_err_name(rc),
                  tstor_last_error());
    ck_assert_msg(tstor_last_error()[0] != '\0', "%s: no error detail", where);
    ck_assert_msg(live == 0, "%s: %ld core allocation(s) not freed", where, live);
    ck_assert_msg(f.ctx_out == NULL, "%s: context out not NULL", where);
    ck_assert_msg(f.out == NULL && f.stream == NULL && f.event == NULL,
                  "%s: a failed call handed out an object", where);
    if (ctx) {
      ck_assert_msg(atomic_load(&ctx->refs) == ctx_refs, "%s: context references %ld -> %ld", where,
                    ctx_refs, (long)atomic_load(&ctx->refs));
      ck_assert_msg(cpu_allocated(&f) == allocated, "%s: cpu bytes %llu -> %llu", where,
                    (unsigned long long)allocated, (unsigned long long)cpu_allocated(&f));
    }
    ck_assert_msg(count_fds() == fds, "%s: open files %d -> %d", where, fds, count_fds());
    ck_assert_msg(count_file_maps() == maps, "%s: file mappings %d -> %d", where, maps,
                  count_file_maps());
    ck_assert_msg(count_own_shm() == shms, "%s: shared-memory names %d -> %d", where, shms,
                  count_own_shm());
    if (op->unchanged) op->unchanged(&f);
  }
  release_all(&f);
  return failed != 0;
}

static void sweep(tstor_context *ctx, const sweep_op *op) {
  for (int persist = 0; persist <= 1; persist++) {
    unsigned long n = 1;
    while (sweep_once(ctx, op, n, persist)) {
      n++;
      ck_assert_msg(n < SWEEP_LIMIT, "%s: no end to the sweep", op->name);
    }
    ck_assert_msg(n > 1, "%s: acquires nothing that could fail", op->name);
    if (persist) printf("  %-40s %3lu acquisitions swept\n", op->name, n - 1);
  }
}

static void sweep_table(tstor_context *ctx, const sweep_op *ops, size_t n) {
  for (size_t i = 0; i < n; i++) sweep(ctx, &ops[i]);
}

/* -------------------------------------------------------- context opening */

static const char *ini_with_fake(void) {
  return coretest_fmt("%s%s", CORETEST_BASE_INI, coretest_fake_section("fake", "devices = 2"));
}

static void ctx_not_loaded(fx *f) {
  /* Not cpu: once an earlier step made a block cache, it stays mapped for good
   * (backend.h, "Unloading"). */
  ck_assert(!coretest_is_loaded(coretest_backend("meta")));
  ck_assert(!coretest_is_loaded(coretest_plugin("fake")));
}

static void ctx_works(fx *f) {
  ck_assert_ptr_nonnull(f->ctx_out);
  tstor_device dev;
  ck_tstor_ok(tstor_device_default(f->ctx_out, &dev));
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_new(f->ctx_out, dev, 16, &s));
  tstor_storage_release(s);
}

static int run_open_string(fx *f) {
  return tstor_context_open_string(ini_with_fake(), "fault.ini", &f->ctx_out);
}

static int run_open_file(fx *f) {
  return tstor_context_open(coretest_src("configs/good.ini"), &f->ctx_out);
}

static int run_open_default(fx *f) {
  /* The embedded default: cpu and meta required, hpu and cuda optional. */
  return tstor_context_open(NULL, &f->ctx_out);
}

static const sweep_op open_ops[] = {
    {"open_string cpu+meta+fake", TSTOR_FAULT_ALL, NULL, run_open_string, ctx_not_loaded, ctx_works,
     0},
    {"open file good.ini", TSTOR_FAULT_ALL, NULL, run_open_file, ctx_not_loaded, ctx_works, 0},
    /* hpu and cuda are optional: any fault of theirs leaves the rest working */
    {"open embedded default", TSTOR_FAULT_ALL, NULL, run_open_default, ctx_not_loaded, ctx_works,
     TSTOR_FAULT_ALL},
};

START_TEST(context_open) {
  coretest_setenv("TSTOR_CONFIG", NULL);
  sweep_table(NULL, open_ops, sizeof open_ops / sizeof open_ops[0]);
}
END_TEST

/* --------------------------------------------------------------- storages */

static void setup_cpu_a(fx *f) {
  ck_tstor_ok(tstor_storage_new(f->ctx, f->cpu, 200, &f->a));
  write_pattern(f, f->a, 1);
  snapshot(f, f->a);
}

static void setup_fake_ab(fx *f) {
  ck_tstor_ok(tstor_storage_new(f->ctx, f->fake0, 200, &f->a));
  ck_tstor_ok(tstor_storage_new(f->ctx, f->fake1, 200, &f->b));
  write_pattern(f, f->a, 3);
  write_pattern(f, f->b, 5);
  snapshot(f, f->b); /* the destination */
}

static void setup_fake_a(fx *f) {
  ck_tstor_ok(tstor_storage_new(f->ctx, f->fake1, 200, &f->a));
  write_pattern(f, f->a, 9);
  snapshot(f, f->a);
}

static void a_unchanged(fx *f) { assert_as_snapshot(f, f->a); }
static void b_unchanged(fx *f) { assert_as_snapshot(f, f->b); }

static void out_equals_a(fx *f) {
  ck_assert_ptr_nonnull(f->out);
  ck_assert_uint_eq(tstor_storage_nbytes(f->out), tstor_storage_nbytes(f->a));
  unsigned char x[200], y[200];
  read_bytes(f, f->a, x, sizeof x);
  read_bytes(f, f->out, y, sizeof y);
  ck_assert(memcmp(x, y, sizeof x) == 0);
}

static int run_new_cpu(fx *f) { return tstor_storage_new(f->ctx, f->cpu, 1000, &f->out); }
static int run_new_fake(fx *f) { return tstor_storage_new(f->ctx, f->fake0, 1000, &f->out); }
static int run_new_meta(fx *f) { return tstor_storage_new(f->ctx, f->meta, 1000, &f->out); }
static int run_new_like(fx *f) { return tstor_storage_new_like(f->a, 300, &f->out); }
static void out_exists(fx *f) { ck_assert_ptr_nonnull(f->out); }

static int run_view(fx *f) { return tstor_storage_view(f->a, 10, 100, &f->out); }
static void view_done(fx *f) {
  ck_assert_ptr_eq(tstor_storage_base(f->out), f->a);
  ck_assert_int_eq(tstor_storage_use_count(f->a), 2);
}

static int run_view_of_view(fx *f) {
  tstor_storage *v = NULL;
  int rc = tstor_storage_view(f->a, 10, 100, &v);
  if (rc) return rc;
  rc = tstor_storage_view(v, 5, 50, &f->out);
  tstor_storage_release(v);
  return rc;
}

static int run_resize_grow(fx *f) { return tstor_storage_resize(f->a, 5000); }
static int run_resize_shrink(fx *f) { return tstor_storage_resize(f->a, 100); }
static void resize_grow_done(fx *f) {
  ck_assert_uint_eq(tstor_storage_nbytes(f->a), 5000);
  unsigned char now[200];
  read_bytes(f, f->a, now, sizeof now);
  ck_assert(memcmp(now, f->before, sizeof now) == 0);
}

static int run_copy_staged(fx *f) { return tstor_storage_copy(f->b, f->a); }
static void copy_done(fx *f) {
  unsigned char x[200], y[200];
  read_bytes(f, f->a, x, sizeof x);
  read_bytes(f, f->b, y, sizeof y);
  ck_assert(memcmp(x, y, sizeof x) == 0);
}

static int run_clone(fx *f) { return tstor_storage_clone(f->a, &f->out); }
static int run_to_cpu(fx *f) { return tstor_storage_to(f->a, f->cpu, &f->out); }
static int run_to_fake(fx *f) { return tstor_storage_to(f->a, f->fake0, &f->out); }

static int run_fill_fake(fx *f) { return tstor_storage_fill(f->a, 0x5a); }
static int run_fill_pattern_fake(fx *f) {
  const uint32_t pattern = 0x01020304;
  return tstor_storage_fill_pattern(f->a, &pattern, sizeof pattern);
}
static void filled(fx *f) {
  unsigned char now[200];
  read_bytes(f, f->a, now, sizeof now);
  ck_assert(now[0] == 0x5a || now[0] == 0x04);
}

static int run_wrap(fx *f) {
  f->mem = malloc(64);
  return tstor_storage_wrap(f->ctx, f->cpu, f->mem, 64, &f->out);
}

static void count_delete(void *data, void *ctx) {
  (void)data;
  ((fx *)ctx)->deleted++;
}
static int run_wrap_owned(fx *f) {
  f->mem = malloc(64);
  return tstor_storage_wrap_owned(f->ctx, f->cpu, f->mem, 64, count_delete, f, &f->out);
}
static void deleter_not_called(fx *f) { ck_assert_int_eq(f->deleted, 0); }
static void wrap_owned_done(fx *f) {
  tstor_storage_release(f->out);
  f->out = NULL;
  ck_assert_int_eq(f->deleted, 1);
}

static int run_stream(fx *f) { return tstor_stream_new(f->ctx, f->fake0, &f->stream); }
/* 300 streams at once: the table of open handles (core/runtime/handles.c) grows
 * twice on the way, and a grow that fails must fail that stream alone. */
#define MANY_STREAMS 300
static int run_many_streams(fx *f) {
  tstor_stream *s[MANY_STREAMS];
  int n = 0, rc = 0;
  while (n < MANY_STREAMS && !(rc = tstor_stream_new(f->ctx, f->cpu, &s[n]))) n++;
  while (n > 0) tstor_stream_free(s[--n]);
  return rc;
}
static int run_event(fx *f) { return tstor_event_new(f->ctx, f->cpu, &f->event); }

static const unsigned MEM = TSTOR_FAULT_MALLOC | TSTOR_FAULT_ALLOC;

static const sweep_op storage_ops[] = {
    {"new cpu", MEM, NULL, run_new_cpu, NULL, out_exists, 0},
    {"new fake", MEM, NULL, run_new_fake, NULL, out_exists, 0},
    {"new meta", MEM, NULL, run_new_meta, NULL, out_exists, 0},
    {"new_like cpu", MEM, setup_cpu_a, run_new_like, a_unchanged, out_exists, 0},
    {"view cpu", MEM, setup_cpu_a, run_view, a_unchanged, view_done, 0},
    {"view of a view", MEM, setup_cpu_a, run_view_of_view, a_unchanged, view_done, 0},
    {"resize cpu grow", MEM, setup_cpu_a, run_resize_grow, a_unchanged, resize_grow_done, 0},
    {"resize cpu shrink", MEM, setup_cpu_a, run_resize_shrink, a_unchanged, NULL, 0},
    {"resize fake grow", MEM, setup_fake_a, run_resize_grow, a_unchanged, resize_grow_done, 0},
    {"copy fake:0 -> fake:1 (staged)", MEM, setup_fake_ab, run_copy_staged, b_unchanged, copy_done,
     0},
    {"clone cpu", MEM, setup_cpu_a, run_clone, a_unchanged, out_equals_a, 0},
    {"clone fake", MEM, setup_fake_a, run_clone, a_unchanged, out_equals_a, 0},
    {"to cpu from fake", MEM, setup_fake_a, run_to_cpu, a_unchanged, out_equals_a, 0},
    {"to fake from cpu", MEM, setup_cpu_a, run_to_fake, a_unchanged, out_equals_a, 0},
    {"fill fake (staged)", MEM, setup_fake_a, run_fill_fake, a_unchanged, filled, 0},
    {"fill_pattern fake", MEM, setup_fake_a, run_fill_pattern_fake, a_unchanged, filled, 0},
    {"wrap", MEM, NULL, run_wrap, NULL, out_exists, 0},
    {"wrap_owned", MEM, NULL, run_wrap_owned, deleter_not_called, wrap_owned_done, 0},
    {"stream_new", MEM, NULL, run_stream, NULL, NULL, 0},
    {"300 streams (the handle table grows)", MEM, NULL, run_many_streams, NULL, NULL, 0},
    {"event_new", MEM, NULL, run_event, NULL, NULL, 0},
};

static tstor_context *open_fixture(void) {
  return coretest_open(coretest_fake_section("fake", "devices = 2"));
}

START_TEST(storage_operations) {
  tstor_context *ctx = open_fixture();
  sweep_table(ctx, storage_ops, sizeof storage_ops / sizeof storage_ops[0]);
  tstor_context_close(ctx);
}
END_TEST

/* ---------------------------------------------------------- typed storages */

static void setup_typed_fake(fx *f) {
  const float v[50] = {1.5f, -2.25f, 3.0f, 1e20f, -0.0f};
  ck_tstor_ok(tstor_typed_from_array(f->ctx, f->fake0, TSTOR_FLOAT32, v, TSTOR_FLOAT32, 50, &f->a));
  ck_tstor_ok(tstor_typed_new(f->ctx, f->fake1, TSTOR_FLOAT64, 50, &f->b));
  write_pattern(f, f->b, 11);
  snapshot(f, f->a);
}

static void setup_typed_cpu(fx *f) {
  ck_tstor_ok(tstor_typed_new(f->ctx, f->cpu, TSTOR_UINT8, 100, &f->a));
  write_pattern(f, f->a, 13);
  snapshot(f, f->a);
}

static void b_unchanged_by_bytes(fx *f) {
  /* b was written with pattern 11 and must still hold it. */
  unsigned char now[200];
  read_bytes(f, f->b, now, sizeof now);
  for (size_t i = 0; i < sizeof now; i++)
    ck_assert_msg(now[i] == (unsigned char)(i * 7 + 11), "b changed at byte %zu", i);
  a_unchanged(f);
}

static int run_typed_new(fx *f) {
  return tstor_typed_new(f->ctx, f->fake0, TSTOR_BFLOAT16, 33, &f->out);
}
static int run_typed_view(fx *f) { return tstor_typed_view(f->a, TSTOR_FLOAT32, 5, 10, &f->out); }
static int run_typed_resize(fx *f) { return tstor_typed_resize(f->a, TSTOR_FLOAT32, 4000); }
static int run_typed_from_array(fx *f) {
  const int32_t v[40] = {1, -2, 3, 1 << 30};
  return tstor_typed_from_array(f->ctx, f->fake0, TSTOR_FLOAT16, v, TSTOR_INT32, 40, &f->out);
}
static int run_typed_from_buffer(fx *f) {
  const unsigned char buf[64] = {0, 0, 0, 1, 0, 0, 0, 2};
  return tstor_typed_from_buffer(f->ctx, f->fake1, TSTOR_INT32, buf, sizeof buf, TSTOR_ORDER_BIG,
                                 &f->out);
}
static int run_typed_to_array(fx *f) {
  double out[50];
  return tstor_typed_to_array(f->a, TSTOR_FLOAT32, out, TSTOR_FLOAT64, 50);
}
static int run_typed_fill(fx *f) {
  const float one = 1.0f;
  return tstor_typed_fill(f->a, TSTOR_FLOAT32, &one);
}
static int run_typed_byteswap(fx *f) { return tstor_typed_byteswap(f->a, TSTOR_INT32); }
static int run_typed_copy(fx *f) {
  return tstor_typed_copy(f->b, TSTOR_FLOAT64, f->a, TSTOR_FLOAT32);
}
static int run_typed_convert(fx *f) {
  return tstor_typed_convert(f->a, TSTOR_FLOAT32, TSTOR_COMPLEX64, &f->out);
}
static int run_typed_set_string(fx *f) {
  return tstor_typed_set_string(f->a, TSTOR_UINT8, "a longer string than the storage", 33);
}
static int run_typed_print(fx *f) {
  FILE *devnull = fopen("/dev/null", "w");
  ck_assert_ptr_nonnull(devnull);
  int rc = tstor_typed_print(devnull, f->a, TSTOR_FLOAT32, 0);
  fclose(devnull);
  return rc;
}

static const sweep_op typed_ops[] = {
    {"typed_new fake bfloat16", MEM, NULL, run_typed_new, NULL, out_exists, 0},
    {"typed_view", MEM, setup_typed_fake, run_typed_view, a_unchanged, out_exists, 0},
    {"typed_resize", MEM, setup_typed_fake, run_typed_resize, a_unchanged, NULL, 0},
    {"typed_from_array int32 -> fake float16", MEM, NULL, run_typed_from_array, NULL, out_exists,
     0},
    {"typed_from_buffer big-endian fake", MEM, NULL, run_typed_from_buffer, NULL, out_exists, 0},
    {"typed_to_array fake", MEM, setup_typed_fake, run_typed_to_array, a_unchanged, NULL, 0},
    {"typed_fill fake", MEM, setup_typed_fake, run_typed_fill, a_unchanged, NULL, 0},
    {"typed_byteswap fake", MEM, setup_typed_fake, run_typed_byteswap, a_unchanged, NULL, 0},
    {"typed_copy fake float32 -> fake float64", MEM, setup_typed_fake, run_typed_copy,
     b_unchanged_by_bytes, NULL, 0},
    {"typed_convert fake -> complex64", MEM, setup_typed_fake, run_typed_convert, a_unchanged,
     out_exists, 0},
    {"typed_set_string cpu", MEM, setup_typed_cpu, run_typed_set_string, a_unchanged, NULL, 0},
    {"typed_print fake", MEM, setup_typed_fake, run_typed_print, a_unchanged, NULL, 0},
};

START_TEST(typed_operations) {
  tstor_context *ctx = open_fixture();
  sweep_table(ctx, typed_ops, sizeof typed_ops / sizeof typed_ops[0]);
  tstor_context_close(ctx);
}
END_TEST

/* ----------------------------------------------- files and shared memory */

static void scratch_path(fx *f) {
  const char *dir = getenv("TMPDIR");
  static int serial;
  snprintf(f->path, sizeof f->path, "%s/tstor-fault-%ld-%d", dir ? dir : "/tmp", (long)getpid(),
           serial++);
  unlink(f->path);
}

static void setup_file(fx *f) {
  scratch_path(f);
  unsigned char bytes[200];
  for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (unsigned char)(i * 7 + 1);
  FILE *w = fopen(f->path, "wb");
  ck_assert_ptr_nonnull(w);
  ck_assert_uint_eq(fwrite(bytes, 1, sizeof bytes, w), sizeof bytes);
  ck_assert_int_eq(fclose(w), 0);
}

static void file_unchanged(fx *f) {
  struct stat st;
  ck_assert_int_eq(stat(f->path, &st), 0);
  ck_assert_int_eq(st.st_size, 200);
}

static void file_not_created(fx *f) {
  ck_assert_msg(access(f->path, F_OK) != 0, "a failed from_file left %s behind", f->path);
}

static void shm_not_created(fx *f) {
  int fd = shm_open(f->name, O_RDONLY, 0);
  if (fd >= 0) close(fd);
  ck_assert_msg(fd < 0, "a failed from_file left %s behind", f->name);
}

static void out_maps_200(fx *f) {
  ck_assert_ptr_nonnull(f->out);
  ck_assert_uint_eq(tstor_storage_nbytes(f->out), 200);
  ck_assert_int_eq(((unsigned char *)tstor_storage_data(f->out))[199],
                   (unsigned char)(199 * 7 + 1));
}

static int run_from_file_private(fx *f) {
  return tstor_storage_from_file(f->ctx, f->path, 0, 0, 1, &f->out);
}

static int run_from_file_create(fx *f) {
  return tstor_storage_from_file(f->ctx, f->path, TSTOR_FILE_SHARED, 50, 4, &f->out);
}

static void setup_shm_name(fx *f) {
  static int serial;
  snprintf(f->name, sizeof f->name, "/fault-%ld-%d", (long)getpid(), serial++);
  shm_unlink(f->name);
}

static int run_from_shm_create(fx *f) {
  return tstor_storage_from_file(f->ctx, f->name, TSTOR_FILE_SHARED | TSTOR_FILE_SHM, 300, 1,
                                 &f->out);
}

static void not_shared(fx *f) {
  a_unchanged(f);
  ck_assert_int_eq(tstor_storage_is_shared(f->a), 0);
  ck_assert_uint_eq(tstor_storage_flags(f->a) & TSTOR_FLAG_SHARED, 0);
}

static void now_shared(fx *f) {
  ck_assert_int_eq(tstor_storage_is_shared(f->a), 1);
  unsigned char now[200];
  read_bytes(f, f->a, now, sizeof now);
  ck_assert(memcmp(now, f->before, sizeof now) == 0);
}

static int run_share_memory(fx *f) { return tstor_storage_share_memory(f->a); }

static int run_export_name(fx *f) {
  return tstor_storage_export_name(f->a, f->name, sizeof f->name);
}

static void setup_shared_a(fx *f) {
  setup_cpu_a(f);
  ck_tstor_ok(tstor_storage_share_memory(f->a));
  snapshot(f, f->a);
}

static void setup_named_a(fx *f) {
  setup_cpu_a(f);
  ck_tstor_ok(tstor_storage_export_name(f->a, f->name, sizeof f->name));
  snapshot(f, f->a);
}

static void setup_socket_a(fx *f) {
  setup_shared_a(f);
  ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, f->sock), 0);
}

static int run_export_import_fd(fx *f) {
  int fd = -1;
  int rc = tstor_storage_export_fd(f->a, &fd);
  if (rc) return rc;
  rc = tstor_storage_import_fd(f->ctx, fd, 0, &f->out);
  close(fd);
  return rc;
}

static int run_import_name(fx *f) { return tstor_storage_import_name(f->ctx, f->name, 0, &f->out); }

static int run_send_recv(fx *f) {
  int rc = tstor_storage_send(f->a, f->sock[0]);
  if (rc) return rc;
  return tstor_storage_recv(f->ctx, f->sock[1], &f->out);
}

static const sweep_op mapped_ops[] = {
    {"from_file private", TSTOR_FAULT_ALL, setup_file, run_from_file_private, file_unchanged,
     out_maps_200, 0},
    {"from_file shared, created", TSTOR_FAULT_ALL, scratch_path, run_from_file_create,
     file_not_created, out_exists, 0},
    {"from_file shm, created", TSTOR_FAULT_ALL, setup_shm_name, run_from_shm_create,
     shm_not_created, out_exists, 0},
    {"share_memory", TSTOR_FAULT_ALL, setup_cpu_a, run_share_memory, not_shared, now_shared, 0},
    {"export_name", TSTOR_FAULT_ALL, setup_cpu_a, run_export_name, not_shared, now_shared, 0},
    {"export_fd + import_fd", TSTOR_FAULT_ALL, setup_shared_a, run_export_import_fd, a_unchanged,
     out_equals_a, 0},
    {"import_name", TSTOR_FAULT_ALL, setup_named_a, run_import_name, a_unchanged, out_equals_a, 0},
    {"send + recv", TSTOR_FAULT_ALL, setup_socket_a, run_send_recv, a_unchanged, out_equals_a, 0},
};

START_TEST(mapped_operations) {
  tstor_context *ctx = open_fixture();
  sweep_table(ctx, mapped_ops, sizeof mapped_ops / sizeof mapped_ops[0]);
  tstor_context_close(ctx);
}
END_TEST

/* ---------------------------------------------------- the control itself */

START_TEST(control_counts_and_fails_the_nth) {
  tstor_context *ctx = open_fixture();
  tstor_device cpu = coretest_dev(ctx, "cpu");
  tstor_storage *s = NULL;
  /* Counting only: nothing fails, every acquisition is seen. */
  tstor__fault_arm(TSTOR_FAULT_ALL, 0, 0);
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 64, &s));
  tstor__fault_disarm();
  ck_assert_uint_eq(tstor__fault_seen(), 2); /* the object, then its bytes */
  ck_assert_uint_eq(tstor__fault_failed(), 0);
  ck_assert_int_eq(tstor__fault_live(), 1);
  tstor_storage_release(s);
  /* Only the kinds armed are counted: the bytes are the first ALLOC. */
  tstor__fault_arm(TSTOR_FAULT_ALLOC, 1, 0);
  ck_tstor_err(tstor_storage_new(ctx, cpu, 64, &s), TSTOR_ENOMEM);
  tstor__fault_disarm();
  ck_assert_uint_eq(tstor__fault_failed_kinds(), TSTOR_FAULT_ALLOC);
  ck_last_error_has("64 bytes");
  /* Disarmed: nothing counts. */
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 64, &s));
  ck_assert_uint_eq(tstor__fault_seen(), 1);
  tstor_storage_release(s);
  tstor_context_close(ctx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("fault");
  TCase *tc = tcase_create("sweeps");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, control_counts_and_fails_the_nth);
  tcase_add_test(tc, context_open);
  tcase_add_test(tc, storage_operations);
  tcase_add_test(tc, typed_operations);
  tcase_add_test(tc, mapped_operations);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
