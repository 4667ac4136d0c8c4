/* The loader's promises about what it loads and what a failure costs:
 *   - an optional backend that fails, for lack of memory too, leaves the
 *     context usable and is reported with the config's FILE:LINE;
 *   - `entry = SYMBOL` names a symbol of the module itself, never one of a
 *     library it links;
 *   - a module found through a folder that others can write, or owned by
 *     another user, is refused with the reason. */
#define _GNU_SOURCE
#include "coretest.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <tstor/backend.h>

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* Opens cpu + meta + extra as "loading.ini"; returns the code, *out the
 * context or NULL. */
static int open_with(const char *extra, tstor_context **out) {
  const char *text = coretest_fmt("%s\n%s", CORETEST_BASE_INI, extra);
  return tstor_context_open_string(text, "loading.ini", out);
}

/* The report of backend `i`, whose message must contain each of `says`. */
static tstor_backend_info report(tstor_context *ctx, int i, tstor_backend_state state,
                                 const char *says1, const char *says2) {
  tstor_backend_info info;
  ck_tstor_ok(tstor_backend_get(ctx, i, &info));
  ck_assert_msg(info.state == state, "state %d, expected %d (%s)", (int)info.state, (int)state,
                info.message);
  if (says1) ck_assert_msg(strstr(info.message, says1), "\"%s\" lacks \"%s\"", info.message, says1);
  if (says2) ck_assert_msg(strstr(info.message, says2), "\"%s\" lacks \"%s\"", info.message, says2);
  return info;
}

/* cpu works: a storage filled and read back. */
static void cpu_works(tstor_context *ctx) {
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, coretest_dev(ctx, "cpu"), 32, &s));
  ck_tstor_ok(tstor_storage_fill(s, 9));
  ck_assert_int_eq(((unsigned char *)tstor_storage_data(s))[31], 9);
  tstor_storage_release(s);
}

/* ------------------------------------------ optional backends without memory */

START_TEST(optional_backend_out_of_memory_is_reported) {
  /* Line 10 of loading.ini is the [backend oom] header. */
  const char *sec = coretest_fmt("[backend oom]\nlibrary = %s\noptional = yes\ncode = %d\n",
                                 coretest_plugin("initfail"), TSTOR_ENOMEM);
  tstor_context *ctx = NULL;
  int rc = open_with(sec, &ctx);
  ck_assert_msg(rc == 0, "%s: %s", tstor_err_name(rc), tstor_last_error());
  report(ctx, 2, TSTOR_BACKEND_FAILED, "loading.ini:10: backend oom: ",
         "the simulated device is on fire");
  ck_assert_int_lt(tstor_device_parse(ctx, "initfail", &(tstor_device){0, 0}), 0);
  cpu_works(ctx);
  tstor_context_close(ctx);
  ck_assert(!coretest_is_loaded(coretest_plugin("initfail")));
}
END_TEST

START_TEST(required_backend_out_of_memory_names_its_line) {
  const char *sec = coretest_fmt("[backend oom]\nlibrary = %s\noptional = no\ncode = %d\n",
                                 coretest_plugin("initfail"), TSTOR_ENOMEM);
  tstor_context *ctx = (tstor_context *)0x1;
  ck_tstor_err(open_with(sec, &ctx), TSTOR_ENOMEM);
  ck_assert_ptr_null(ctx);
  ck_assert_msg(strstr(tstor_last_error(), "loading.ini:10: backend oom: "),
                "detail: %s", tstor_last_error());
  ck_assert(!coretest_is_loaded(coretest_backend("cpu")));
}
END_TEST

/* The real case: hpu-stub cannot map its simulated memory under ulimit -v.
 * In a child, with the address space capped 1 GiB above what it uses. */
START_TEST(hpu_stub_under_ulimit_v_leaves_cpu_usable) {
  if (UNDER_ASAN) return; /* ASan's shadow needs more address space than any cap */
  fflush(NULL);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%lu", &pages) != 1) _exit(2);
    fclose(f);
    rlim_t cap = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)1 << 30);
    struct rlimit rl = {cap, cap};
    if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(3);
    tstor_context *ctx = NULL;
    const char *sec = "[backend hpu]\nlibrary = tstor-hpu-stub.so\noptional = yes\n"
                      "devices = 2\nmemory_mb = 4096\n";
    if (open_with(sec, &ctx) != 0) {
      fprintf(stderr, "open: %s\n", tstor_last_error());
      _exit(4);
    }
    tstor_backend_info info;
    if (tstor_backend_get(ctx, 2, &info) != 0 || info.state != TSTOR_BACKEND_FAILED) _exit(5);
    if (!strstr(info.message, "loading.ini:10: backend hpu: ") ||
        !strstr(info.message, "cannot map")) {
      fprintf(stderr, "message: %s\n", info.message);
      _exit(6);
    }
    tstor_storage *s = NULL;
    tstor_device cpu;
    if (tstor_device_parse(ctx, "cpu", &cpu) != 0 || tstor_storage_new(ctx, cpu, 64, &s) != 0)
      _exit(7);
    tstor_storage_release(s);
    tstor_context_close(ctx);
    _exit(0);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
}
END_TEST

int main(void) {
  Suite *s = suite_create("loading");
  TCase *tc = tcase_create("optional");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, optional_backend_out_of_memory_is_reported);
  tcase_add_test(tc, required_backend_out_of_memory_names_its_line);
  tcase_add_test(tc, hpu_stub_under_ulimit_v_leaves_cpu_usable);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
