/* Stress: threads creating, filling, viewing, copying and releasing storages
 * on every device of the default configuration (plus the test plugin's fake
 * devices) for a fixed number of rounds, checking every byte they move; and
 * a thousand context open/close cycles that must leave the process with the
 * same open files and the same memory mappings. Counts are fixed, never
 * timed; run it under --enable-tsan for data races. */
#include "coretest.h"

#include <dirent.h>
#include <pthread.h>

enum { NTHREADS = 8, ROUNDS = 2000, CYCLES = 1000, MAXDEV = 64 };

static tstor_context *ctx;
static tstor_device devs[MAXDEV];
static int ndevs;
static tstor_device cpu;
static tstor_storage *shared[MAXDEV]; /* one read-only storage per device */
static pthread_barrier_t start;

#define SHARED_BYTES 4096

static unsigned char pattern_at(unsigned seed, size_t i) {
  return (unsigned char)(seed * 131u + i * 7u + (i >> 8));
}

/* The default configuration, with the fake plugin added: every in-tree
 * device that can load here, and one device the core must stage copies for. */
static void open_all_devices(void) {
  coretest_setenv("TSTOR_CONFIG", NULL);
  const char *ini = coretest_fmt(
      "[tstor]\ndefault_device = cpu\n"
      "[backend cpu]\nlibrary = tstor-cpu.so\n"
      "[backend meta]\nlibrary = tstor-meta.so\n"
      "[backend hpu]\nlibrary = tstor-hpu-stub.so\noptional = yes\n"
      "[backend cuda]\nlibrary = tstor-cuda.so\noptional = yes\n"
      "%s",
      coretest_fake_section("fake", "devices = 2"));
  ck_tstor_ok(tstor_context_open_string(ini, "stress.ini", &ctx));
  cpu = coretest_dev(ctx, "cpu");
  ndevs = 0;
  for (int t = 0; t < tstor_device_type_count(ctx); t++)
    for (int i = 0; i < tstor_device_count(ctx, t) && ndevs < MAXDEV; i++)
      devs[ndevs++] = (tstor_device){t, i};
  ck_assert_int_ge(ndevs, 4); /* cpu, meta, fake:0, fake:1 at least */
  static int told;
  if (!told++) {
    printf("stress: %d threads x %d rounds on", NTHREADS, ROUNDS);
    for (int i = 0; i < ndevs; i++) {
      char name[64];
      ck_tstor_ok(tstor_device_format(ctx, devs[i], name, sizeof name));
      printf(" %s", name);
    }
    printf("\n");
  }
}

static void close_all_devices(void) {
  tstor_context_close(ctx);
  ctx = NULL;
}

static int has_data(tstor_device d) {
  const char *name = tstor_device_type_name(ctx, d.type);
  return strcmp(name, "meta") != 0;
}

/* Writes the pattern of `seed` into s (any device) through a cpu storage. */
static const char *put_pattern(tstor_storage *s, unsigned seed) {
  size_t n = tstor_storage_nbytes(s);
  tstor_storage *h = NULL;
  if (tstor_storage_new(ctx, cpu, n, &h) != 0) return "new cpu staging failed";
  unsigned char *p = tstor_storage_data(h);
  for (size_t i = 0; i < n; i++) p[i] = pattern_at(seed, i);
  int rc = tstor_storage_copy(s, h);
  tstor_storage_release(h);
  return rc ? "copy in failed" : NULL;
}

/* Checks that s holds bytes [from, from + nbytes(s)) of the pattern. */
static const char *check_pattern(tstor_storage *s, unsigned seed, size_t from) {
  tstor_storage *h = NULL;
  if (tstor_storage_to(s, cpu, &h) != 0) return "to cpu failed";
  const unsigned char *p = tstor_storage_data(h);
  const char *why = NULL;
  for (size_t i = 0; i < tstor_storage_nbytes(h) && !why; i++)
    if (p[i] != pattern_at(seed, from + i)) why = "bytes differ";
  tstor_storage_release(h);
  return why;
}

/* One round on device d: a fresh storage, its view, copies into a storage on
 * device e and back, and reads of the shared storage of d, all released in
 * an order that depends on the round. */
static const char *one_round(long id, int r) {
  tstor_device d = devs[(id + r) % ndevs], e = devs[(id * 3 + r * 7 + 1) % ndevs];
  size_t n = 64 + (size_t)((id * 977 + r * 131) % 3000);
  unsigned seed = (unsigned)(id * 1000 + r);
  tstor_storage *s = NULL, *v = NULL, *t = NULL, *sv = NULL, *c = NULL;
  const char *why = NULL;
  if (tstor_storage_new(ctx, d, n, &s) != 0) return "new failed";
  if (has_data(d)) why = put_pattern(s, seed);
  if (!why && tstor_storage_view(s, 16, n - 32, &v) != 0) why = "view failed";
  if (!why && tstor_storage_new(ctx, e, n - 32, &t) != 0) why = "new on e failed";
  if (!why) {
    int rc = tstor_storage_copy(t, v);
    if (!has_data(d) && has_data(e)) {
      if (rc != TSTOR_ENODATA) why = "copy out of meta did not fail";
    } else if (rc != 0) {
      why = "copy d -> e failed";
    } else if (has_data(e)) {
      why = check_pattern(t, seed, 16);
    }
  }
  /* Everyone reads the shared storage of d through a view and a clone. */
  tstor_storage *base = shared[(id + r) % ndevs];
  size_t off = (size_t)(r * 17 + id) % (SHARED_BYTES / 2);
  if (!why && tstor_storage_view(base, off, SHARED_BYTES / 4, &sv) != 0) why = "shared view failed";
  if (!why && tstor_storage_clone(sv, &c) != 0) why = "clone failed";
  if (!why && has_data(d)) why = check_pattern(c, 7, off);
  switch (r % 3) { /* release orders: base first, view first, mixed */
    case 0:
      tstor_storage_release(s);
      tstor_storage_release(v);
      tstor_storage_release(sv);
      tstor_storage_release(t);
      tstor_storage_release(c);
      break;
    case 1:
      tstor_storage_release(c);
      tstor_storage_release(sv);
      tstor_storage_release(v);
      tstor_storage_release(t);
      tstor_storage_release(s);
      break;
    default:
      tstor_storage_release(t);
      tstor_storage_release(v);
      tstor_storage_release(c);
      tstor_storage_release(s);
      tstor_storage_release(sv);
      break;
  }
  return why;
}

static void *worker(void *arg) {
  long id = *(long *)arg;
  pthread_barrier_wait(&start);
  for (int r = 0; r < ROUNDS; r++) {
    const char *why = one_round(id, r);
    if (why) return (void *)why;
  }
  return NULL;
}

START_TEST(threads_on_every_device) {
  for (int i = 0; i < ndevs; i++) {
    ck_tstor_ok(tstor_storage_new(ctx, devs[i], SHARED_BYTES, &shared[i]));
    if (has_data(devs[i])) ck_assert_ptr_null(put_pattern(shared[i], 7));
  }
  tstor_stats before = TSTOR_STATS_INIT;
  ck_tstor_ok(tstor_device_stats(ctx, cpu, &before));

  pthread_t t[NTHREADS];
  long ids[NTHREADS];
  ck_assert_int_eq(pthread_barrier_init(&start, NULL, NTHREADS), 0);
  for (long i = 0; i < NTHREADS; i++) {
    ids[i] = i;
    ck_assert_int_eq(pthread_create(&t[i], NULL, worker, &ids[i]), 0);
  }
  for (int i = 0; i < NTHREADS; i++) {
    void *ret = NULL;
    ck_assert_int_eq(pthread_join(t[i], &ret), 0);
    ck_assert_msg(ret == NULL, "thread %d: %s", i, (const char *)ret);
  }
  pthread_barrier_destroy(&start);

  /* Every storage the threads made is gone; the shared ones are untouched. */
  tstor_stats after = TSTOR_STATS_INIT;
  ck_tstor_ok(tstor_device_stats(ctx, cpu, &after));
  ck_assert_uint_eq(after.allocated, before.allocated);
  for (int i = 0; i < ndevs; i++) {
    ck_assert_int_eq(tstor_storage_use_count(shared[i]), 1);
    if (has_data(devs[i])) ck_assert_ptr_null(check_pattern(shared[i], 7, 0));
    ck_tstor_ok(tstor_storage_resize(shared[i], SHARED_BYTES / 2)); /* no view left */
  }
  for (int i = 0; i < ndevs; i++) tstor_storage_release(shared[i]);
  ck_tstor_ok(tstor_device_stats(ctx, cpu, &after));
  ck_assert_uint_eq(after.allocated, 0);
}
END_TEST

/* ------------------------------------------------- open/close cycles */

/* Open files (the directory listing's own descriptor included, the same
 * every time) and memory mappings of this process. */
static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  ck_assert_ptr_nonnull(d);
  int n = 0;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

/* Mappings of files (shared objects, mapped files, shared memory): what a
 * module that is never unloaded, or a mapping never unmapped, leaves behind.
 * Anonymous mappings come and go with the allocator's arenas and are not
 * counted. */
static int count_file_maps(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  ck_assert_ptr_nonnull(f);
  char line[4096];
  int n = 0;
  while (fgets(line, sizeof line, f)) {
    char path[2] = "";
    /* address perms offset device inode [path] */
    if (sscanf(line, "%*s %*s %*s %*s %*s %1s", path) == 1 && path[0] == '/') n++;
  }
  fclose(f);
  return n;
}

static void one_cycle(int i, const char *ini) {
  tstor_context *c = NULL;
  ck_tstor_ok(tstor_context_open_string(ini, "cycle.ini", &c));
  tstor_storage *s = NULL, *f = NULL;
  ck_tstor_ok(tstor_storage_new(c, coretest_dev(c, "cpu"), 256 + (size_t)i, &s));
  ck_tstor_ok(tstor_storage_to(s, coretest_dev(c, "fake:1"), &f));
  /* Alternately the context or the storages go first. */
  if (i % 2) tstor_context_close(c);
  tstor_storage_release(s);
  tstor_storage_release(f);
  if (i % 2 == 0) tstor_context_close(c);
}

START_TEST(open_and_close_a_thousand_times) {
  char text[8192];
  snprintf(text, sizeof text, "%s%s", CORETEST_BASE_INI, coretest_fake_section("fake", NULL));
  /* A first cycle maps what stays mapped for good (the loader's caches). */
  one_cycle(0, text);
  int fds = count_fds(), maps = count_file_maps();
  for (int i = 1; i <= CYCLES; i++) one_cycle(i, text);
  ck_assert_int_eq(count_fds(), fds);
  ck_assert_int_eq(count_file_maps(), maps);
  ck_assert(!coretest_is_loaded(coretest_plugin("fake")));
  ck_assert(!coretest_is_loaded(coretest_backend("meta")));
  /* The cpu module made a block cache in the first cycle and pinned itself
   * (backend.h, "Unloading"): mapped, and counted in `maps` above. */
  ck_assert(coretest_is_loaded(coretest_backend("cpu")));
}
END_TEST

int main(void) {
  Suite *s = suite_create("stress");
  TCase *tc = tcase_create("threads");
  tcase_set_timeout(tc, 600);
  tcase_add_checked_fixture(tc, open_all_devices, close_all_devices);
  tcase_add_test(tc, threads_on_every_device);
  suite_add_tcase(s, tc);
  tc = tcase_create("cycles");
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, open_and_close_a_thousand_times);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
