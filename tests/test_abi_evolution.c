/* ABI evolution: a module built against older, shorter tables loads and works
 * through the core's fallbacks, and no field past a table's declared size is
 * read (plugins/abi_evolution.c puts its tables against guard pages and a trap
 * where today's fini is); a module of a newer major version is refused with a
 * message naming both versions, before any of its code runs. */
#include "testutil.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <unistd.h>
#include <tstor/backend.h>

static const char *plugin(void) {
  static char path[4096];
  const char *dir = getenv("TSTOR_TEST_PLUGINS");
  snprintf(path, sizeof path, "%s/abi_evolution.so",
           dir ? dir : TSTOR_TEST_BUILDDIR "/plugins/.libs");
  return path;
}

/* cpu plus the plugin as [backend NAME], with `more` keys. */
static int open_with(const char *name, const char *more, tstor_context **ctx) {
  char ini[8192];
  snprintf(ini, sizeof ini,
           "[backend cpu]\nlibrary = tstor-cpu.so\n"
           "[backend %s]\nlibrary = %s\n%s\n",
           name, plugin(), more ? more : "");
  return tstor_context_open_string(ini, "abi.ini", ctx);
}

START_TEST(test_older_tables_load_and_work) {
  tstor_context *ctx = NULL;
  ck_tstor_ok(open_with("older", NULL, &ctx));
  tstor_device d, cpu;
  ck_tstor_ok(tstor_device_parse(ctx, "older", &d));
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
  ck_assert_int_eq(tstor_device_count(ctx, d.type), 1);
  ck_assert_int_eq(tstor_copy_path_of(ctx, cpu.type, d.type), TSTOR_COPY_DIRECT);

  enum { N = 5000 };
  unsigned char in[N], out[N];
  for (int i = 0; i < N; i++) in[i] = (unsigned char)(i * 7);
  tstor_storage *s, *h, *ho;
  ck_tstor_ok(tstor_storage_new(ctx, d, N, &s));
  ck_tstor_ok(tstor_storage_wrap(ctx, cpu, in, N, &h));
  ck_tstor_ok(tstor_storage_wrap(ctx, cpu, out, N, &ho));
  ck_tstor_ok(tstor_storage_copy(s, h));
  ck_tstor_ok(tstor_storage_copy(ho, s));
  ck_assert_mem_eq(in, out, N);

  /* No fill in its table: the core copies a pattern in. */
  const uint32_t pat = 0xa1b2c3d4u;
  ck_tstor_ok(tstor_storage_fill_pattern(s, &pat, 4));
  ck_tstor_ok(tstor_storage_copy(ho, s));
  for (int i = 0; i < N; i += 4) ck_assert_mem_eq(out + i, &pat, 4);

  /* No streams: the core's stand-ins, complete on return. */
  tstor_stream *st;
  tstor_event *e;
  ck_tstor_ok(tstor_stream_new(ctx, d, &st));
  ck_tstor_ok(tstor_event_new(ctx, d, &e));
  ck_tstor_ok(tstor_storage_copy_async(s, h, st));
  ck_tstor_ok(tstor_event_record(e, st));
  ck_tstor_ok(tstor_event_query(e));
  ck_tstor_ok(tstor_storage_copy(ho, s));
  ck_assert_mem_eq(in, out, N);
  ck_tstor_ok(tstor_storage_record_stream(s, st));
  tstor_event_free(e);
  tstor_stream_free(st);

  /* No statistics ops: every counter reads 0, and the other calls succeed. */
  tstor_stats stats = TSTOR_STATS_INIT;
  memset(&stats, 0xff, sizeof stats);
  ck_tstor_ok(tstor_device_stats(ctx, d, &stats));
  ck_assert_uint_eq(stats.allocated, 0);
  ck_assert_uint_eq(stats.alloc_count, 0);
  ck_tstor_ok(tstor_device_reset_peak(ctx, d));
  ck_tstor_ok(tstor_device_empty_cache(ctx, d));
  ck_tstor_ok(tstor_synchronize(ctx, d));

  /* No properties op (an older table): the capabilities its ops give, and
   * no field reported. */
  tstor_device_properties props = TSTOR_DEVICE_PROPERTIES_INIT;
  memset(&props, 0xff, sizeof props);
  props.struct_size = sizeof props;
  ck_tstor_ok(tstor_device_get_properties(ctx, d, &props));
  ck_assert_uint_eq(props.reported, 0);
  ck_assert_uint_eq(props.capabilities, 0);
  ck_assert_uint_eq(props.total_bytes, 0);
  ck_assert_str_eq(props.id, "");

  /* Resize without reallocate: allocate, copy, free. */
  ck_tstor_ok(tstor_storage_copy(s, h));
  ck_tstor_ok(tstor_storage_resize(s, 2 * N));
  tstor_storage *head;
  ck_tstor_ok(tstor_storage_view(s, 0, N, &head));
  ck_tstor_ok(tstor_storage_copy(ho, head));
  ck_assert_mem_eq(in, out, N);
  tstor_storage_release(head);

  tstor_storage_release(h);
  tstor_storage_release(ho);
  tstor_storage_release(s);
  tstor_context_close(ctx); /* unloads: the trap where fini would be is not called */
}
END_TEST

START_TEST(test_older_tables_reload) {
  for (int round = 0; round < 3; round++) {
    tstor_context *ctx = NULL;
    ck_tstor_ok(open_with("older", NULL, &ctx));
    tstor_storage *s;
    tstor_device d;
    ck_tstor_ok(tstor_device_parse(ctx, "older", &d));
    ck_tstor_ok(tstor_storage_new(ctx, d, 100, &s));
    tstor_storage_release(s);
    tstor_context_close(ctx);
  }
}
END_TEST

static void expect_versions_named(const char *text) {
  char newer[32], ours[32];
  snprintf(newer, sizeof newer, "%d.2", TSTOR_ABI_MAJOR + 1);
  snprintf(ours, sizeof ours, "%d.%d", TSTOR_ABI_MAJOR, TSTOR_ABI_MINOR);
  ck_assert_msg(strstr(text, newer) && strstr(text, ours),
                "\"%s\" does not name both %s and %s", text, newer, ours);
}

START_TEST(test_newer_major_refused) {
  tstor_context *ctx = NULL;
  /* Required: the context does not open. init would abort() if called. */
  ck_tstor_err(open_with("next", "entry = abi_next_major", &ctx), TSTOR_EABI);
  ck_assert_ptr_null(ctx);
  expect_versions_named(tstor_last_error());

  /* Optional: the context opens without it and says why. */
  ck_tstor_ok(open_with("next", "entry = abi_next_major\noptional = yes", &ctx));
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  ck_tstor_ok(tstor_backend_get(ctx, 1, &info));
  ck_assert_str_eq(info.name, "next");
  ck_assert_int_eq(info.state, TSTOR_BACKEND_FAILED);
  expect_versions_named(info.message);
  ck_assert_int_eq(tstor_device_type_count(ctx), 1); /* cpu only */
  tstor_context_close(ctx);
}
END_TEST

/* ------------------------------------------- statistics across ABI versions */

/* An allocator table of ABI 1.0 fills tstor_stats as 1.0 had it, without
 * struct_size: the core must hand it that layout and convert, or every
 * counter would land one field off and the last one past the struct. */
START_TEST(test_older_stats_layout_is_converted) {
  tstor_context *ctx = NULL;
  ck_tstor_ok(open_with("olderstats", "entry = abi_older_stats", &ctx));
  tstor_device d;
  ck_tstor_ok(tstor_device_parse(ctx, "olderstats", &d));
  tstor_stats st = TSTOR_STATS_INIT;
  ck_tstor_ok(tstor_device_stats(ctx, d, &st));
  ck_assert_uint_eq(st.struct_size, sizeof st);
  uint64_t expect = 1;
#define CHECK(name, comment) ck_assert_uint_eq(st.name, expect++);
  TSTOR_STATS_FIELDS_FIRST(CHECK)
#undef CHECK
  tstor_context_close(ctx);
}
END_TEST

typedef void (*seen_fn)(uint32_t *, int *, int *, int *);

/* A module built against the next minor version's header: bigger tables,
 * an appended op in each, an entry with an appended hook, a stats() that
 * would fill an appended counter. Today's core loads it, uses what it
 * knows, and hands stats() its own size. */
START_TEST(test_newer_minor_module_loads_and_stays_correct) {
  tstor_context *ctx = NULL;
  ck_tstor_ok(open_with("future", "entry = abi_future", &ctx));
  void *dl = dlopen(plugin(), RTLD_NOW | RTLD_NOLOAD);
  ck_assert_ptr_nonnull(dl);
  seen_fn seen = (seen_fn)(void (*)(void))dlsym(dl, "abi_future_seen");
  ck_assert_ptr_nonnull(seen);
  uint32_t size;
  int wrote, health, finis_before, finis;
  seen(&size, &wrote, &health, &finis_before);
  ck_assert_int_eq(health, 0); /* today's registrar has no report_health */

  tstor_device d, cpu;
  ck_tstor_ok(tstor_device_parse(ctx, "future", &d));
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
  tstor_storage *s, *h;
  ck_tstor_ok(tstor_storage_new(ctx, d, 64, &s));
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 64, &h));
  ck_tstor_ok(tstor_storage_fill(h, 0x5c));
  ck_tstor_ok(tstor_storage_copy(s, h));
  ck_assert_int_eq(((unsigned char *)tstor_storage_data(s))[63], 0x5c);
  ck_tstor_ok(tstor_storage_fill(s, 3)); /* no fill op: the core's fallback */
  ck_assert_int_eq(((unsigned char *)tstor_storage_data(s))[0], 3);

  /* The caller has a bigger struct too (the next version's tstor.h). */
  struct {
    tstor_stats now;
    uint64_t next;
  } big;
  memset(&big, 0, sizeof big);
  big.now.struct_size = sizeof big;
  big.next = 0x5a5a5a5a;
  ck_tstor_ok(tstor_device_stats(ctx, d, &big.now));
  ck_assert_uint_eq(big.now.struct_size, sizeof(tstor_stats));
  ck_assert_uint_eq(big.now.allocated, 4242);
  ck_assert_uint_eq(big.now.oom_count, 7);
  ck_assert_uint_eq(big.next, 0x5a5a5a5a);
  seen(&size, &wrote, &health, &finis);
  ck_assert_uint_eq(size, sizeof(tstor_stats));
  ck_assert_int_eq(wrote, 0);

  /* Its properties op is handed the core's own struct, never the caller's
   * bigger one, and writes nothing past it. */
  struct {
    tstor_device_properties now;
    uint64_t next;
  } bigp;
  memset(&bigp, 0, sizeof bigp);
  bigp.now.struct_size = sizeof bigp;
  bigp.next = 0x77;
  ck_tstor_ok(tstor_device_get_properties(ctx, d, &bigp.now));
  ck_assert_uint_eq(bigp.now.struct_size, sizeof(tstor_device_properties));
  ck_assert_uint_eq(bigp.now.total_bytes, 1 << 30);
  ck_assert_uint_eq(bigp.now.free_bytes, 1 << 20);
  ck_assert_uint_eq(bigp.now.reported, TSTOR_PROP_TOTAL | TSTOR_PROP_FREE);
  ck_assert_uint_eq(bigp.now.capabilities, TSTOR_DEVICE_CAP_PROPERTIES);
  ck_assert_uint_eq(bigp.next, 0x77);
  void (*props_seen)(uint32_t *, int *) =
      (void (*)(uint32_t *, int *))(void (*)(void))dlsym(dl, "abi_future_properties_seen");
  ck_assert_ptr_nonnull(props_seen);
  props_seen(&size, &wrote);
  ck_assert_uint_eq(size, sizeof(tstor_device_properties));
  ck_assert_int_eq(wrote, 0);

  tstor_storage_release(h);
  tstor_storage_release(s);
  tstor_context_close(ctx);
  /* Our handle keeps the module mapped: fini, within the entry's prefix,
   * ran once; the appended hook (a trap) did not. */
  seen(&size, &wrote, &health, &finis);
  ck_assert_int_eq(finis, finis_before + 1);
  dlclose(dl);
}
END_TEST

/* Where `size` bytes end exactly at a PROT_NONE page: writing one byte past
 * a struct placed there faults. */
static void *before_guard(size_t size, void **pages) {
  long pagesize = sysconf(_SC_PAGESIZE);
  char *p = mmap(NULL, 2 * (size_t)pagesize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  ck_assert(p != MAP_FAILED);
  ck_assert_int_eq(mprotect(p + pagesize, (size_t)pagesize, PROT_NONE), 0);
  *pages = p;
  return p + pagesize - size;
}

static void drop_guard(void *pages) { munmap(pages, 2 * (size_t)sysconf(_SC_PAGESIZE)); }

/* The user's side: the library writes no byte past the caller's struct_size,
 * takes 0 for the first layout, refuses a size no layout ever had. */
START_TEST(test_user_structs_carry_their_size) {
  tstor_context *ctx = NULL;
  ck_tstor_ok(open_with("older", NULL, &ctx));
  tstor_device cpu;
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
  void *pages;

  tstor_stats *st = before_guard(sizeof *st, &pages);
  memset(st, 0xee, sizeof *st);
  st->struct_size = sizeof *st;
  ck_tstor_ok(tstor_device_stats(ctx, cpu, st));
  ck_assert_uint_eq(st->struct_size, sizeof *st);
  ck_assert_uint_lt(st->allocated, 0xeeeeeeeeeeeeeeeeull);
  memset(st, 0, sizeof *st); /* = {0}: the first layout */
  ck_tstor_ok(tstor_device_stats(ctx, cpu, st));
  ck_assert_uint_eq(st->struct_size, sizeof *st);
  st->struct_size = 4;
  ck_tstor_err(tstor_device_stats(ctx, cpu, st), TSTOR_EINVAL);
  drop_guard(pages);

  tstor_backend_info *info = before_guard(sizeof *info, &pages);
  memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
  ck_tstor_ok(tstor_backend_get(ctx, 1, info));
  ck_assert_str_eq(info->name, "older");
  ck_assert_uint_eq(info->struct_size, sizeof *info);
  ck_assert(TSTOR_BACKEND_INFO_HAS(info, optional));
  memset(info, 0, sizeof *info);
  ck_tstor_ok(tstor_backend_get(ctx, 0, info));
  ck_assert_str_eq(info->name, "cpu");
  info->struct_size = 12;
  ck_tstor_err(tstor_backend_get(ctx, 0, info), TSTOR_EINVAL);
  drop_guard(pages);

  tstor_device_properties *pr = before_guard(sizeof *pr, &pages);
  memset(pr, 0, sizeof *pr); /* = {0}: the first layout */
  ck_tstor_ok(tstor_device_get_properties(ctx, cpu, pr));
  ck_assert_uint_eq(pr->struct_size, sizeof *pr);
  pr->struct_size = 4;
  ck_tstor_err(tstor_device_get_properties(ctx, cpu, pr), TSTOR_EINVAL);
  drop_guard(pages);

  struct {
    tstor_backend_info now;
    uint64_t next;
  } big;
  memset(&big, 0, sizeof big);
  big.now.struct_size = sizeof big;
  big.next = 77;
  ck_tstor_ok(tstor_backend_get(ctx, 0, &big.now));
  ck_assert_uint_eq(big.now.struct_size, sizeof(tstor_backend_info));
  ck_assert_uint_eq(big.next, 77);
  tstor_context_close(ctx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("abi evolution");
  TCase *tc = tcase_create("abi");
  tcase_add_test(tc, test_older_tables_load_and_work);
  tcase_add_test(tc, test_older_tables_reload);
  tcase_add_test(tc, test_newer_major_refused);
  tcase_add_test(tc, test_older_stats_layout_is_converted);
  tcase_add_test(tc, test_newer_minor_module_loads_and_stays_correct);
  tcase_add_test(tc, test_user_structs_carry_their_size);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
