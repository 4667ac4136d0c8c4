/* Loading the cuda backend module, on any machine it builds on: it loads and
 * registers "cuda" where there is a GPU, and elsewhere declines with the
 * reason (no driver, driver too old, no device) without failing a context
 * where it is optional. Its config keys are checked the same with or without
 * a GPU. The device work itself is test_cuda's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define BASE_INI                 \
  "[tstor]\n"                    \
  "default_device = cpu\n"       \
  "[backend cpu]\n"              \
  "library = tstor-cpu.so\n"     \
  "[backend cuda]\n"             \
  "library = tstor-cuda.so\n"

/* The reasons the module may give for declining. */
static int is_decline_reason(const char *msg) {
  static const char *const reasons[] = {"no CUDA driver", "CUDA driver too old",
                                        "no CUDA device", "CUDA driver unusable",
                                        "CUDA devices unavailable"};
  for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
    if (strstr(msg, reasons[i])) return 1;
  return 0;
}

static int find_backend(tstor_context *ctx, const char *name, tstor_backend_info *out) {
  for (int i = 0; i < tstor_backend_count(ctx); i++) {
    ck_tstor_ok(tstor_backend_get(ctx, i, out));
    if (strcmp(out->name, name) == 0) return 1;
  }
  return 0;
}

static tstor_context *open_ini(const char *extra) {
  char ini[2048];
  snprintf(ini, sizeof ini, "%s%s", BASE_INI, extra);
  tstor_context *ctx = NULL;
  int rc = tstor_context_open_string(ini, "cuda-module.ini", &ctx);
  ck_assert_msg(rc == 0, "open failed: %s: %s", tstor_err_name(rc), tstor_last_error());
  return ctx;
}

START_TEST(optional_cuda_never_fails_the_context) {
  tstor_context *ctx = open_ini("optional = yes\n");
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  ck_assert(find_backend(ctx, "cuda", &info));
  ck_assert_msg(info.state == TSTOR_BACKEND_LOADED || info.state == TSTOR_BACKEND_DECLINED,
                "cuda backend state %d: %s", (int)info.state, info.message);
  tstor_device dev;
  if (info.state == TSTOR_BACKEND_DECLINED) {
    ck_assert_msg(is_decline_reason(info.message), "unexpected reason: %s", info.message);
    ck_tstor_err(tstor_device_parse(ctx, "cuda", &dev), TSTOR_ENODEV);
  } else {
    ck_tstor_ok(tstor_device_parse(ctx, "cuda:0", &dev));
    ck_assert_int_ge(tstor_device_count(ctx, dev.type), 1);
  }
  /* The cpu device works either way. */
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &dev));
  tstor_context_close(ctx);
}
END_TEST

/* Declining is never an error, optional or not (docs/config.md). */
START_TEST(required_cuda_without_gpu_declines_with_the_reason) {
  tstor_context *ctx = open_ini("");
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  ck_assert(find_backend(ctx, "cuda", &info));
  ck_assert_int_eq(info.optional, 0);
  ck_assert_msg(info.state == TSTOR_BACKEND_LOADED || info.state == TSTOR_BACKEND_DECLINED,
                "cuda backend state %d: %s", (int)info.state, info.message);
  if (info.state == TSTOR_BACKEND_DECLINED)
    ck_assert_msg(is_decline_reason(info.message), "unexpected reason: %s", info.message);
  tstor_context_close(ctx);
}
END_TEST

static const char *const bad_lines[] = {
    "max_split_size_mb = 5\n",           /* at most 20 is refused */
    "max_split_size_mb = lots\n",
    "max_split_size_mb = -1\n",
    "roundup_power2_divisions = 3\n",    /* not a power of two */
    "roundup_power2_divisions = 2048\n", /* past the limit */
    "garbage_collection_threshold = 1.5\n",
    "garbage_collection_threshold = 1\n",
    "garbage_collection_threshold = -0.1\n",
    "garbage_collection_threshold = half\n",
    "garbage_collection_threshold = nan\n",
    "caching = maybe\n",
    "max_devices = -1\n",
    "max_devices = all\n",
};

/* A bad value is a config error, reported the same with or without a GPU and
 * whether the backend is optional or not. */
START_TEST(bad_config_values_are_refused) {
  const char *line = bad_lines[_i];
  char key[64];
  ck_assert_int_eq(sscanf(line, "%63s", key), 1);
  for (int optional = 0; optional <= 1; optional++) {
    char ini[2048];
    snprintf(ini, sizeof ini, "%s%s%s", BASE_INI, optional ? "optional = yes\n" : "", line);
    tstor_context *ctx = (tstor_context *)1;
    int rc = tstor_context_open_string(ini, "cuda-bad.ini", &ctx);
    ck_assert_msg(rc == TSTOR_ECONFIG, "%s: got %s (%s)", line, tstor_err_name(rc),
                  tstor_last_error());
    ck_assert_ptr_null(ctx);
    ck_assert_msg(strstr(tstor_last_error(), key) != NULL, "detail \"%s\" does not name %s",
                  tstor_last_error(), key);
    ck_last_error_has("[backend cuda]");
    /* The bad key is the last line: the detail names it as FILE:LINE. */
    int lineno = 1;
    for (const char *c = ini; c[1] != '\0'; c++) lineno += *c == '\n';
    char where[64];
    snprintf(where, sizeof where, "cuda-bad.ini:%d:", lineno);
    ck_last_error_has(where);
  }
}
END_TEST

START_TEST(good_config_values_are_accepted) {
  tstor_context *ctx = open_ini(
      "optional = yes\n"
      "caching = no\n"
      "max_split_size_mb = 64\n"
      "roundup_power2_divisions = 4\n"
      "garbage_collection_threshold = 0.8\n");
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  ck_assert(find_backend(ctx, "cuda", &info));
  ck_assert_msg(info.state != TSTOR_BACKEND_FAILED, "failed: %s", info.message);
  tstor_context_close(ctx);
}
END_TEST

/* max_devices = 0 declines before the driver is asked anything, with or
 * without a GPU; a limit above the devices present leaves them all. */
START_TEST(max_devices_limits_the_devices) {
  tstor_context *ctx = open_ini("max_devices = 0\n");
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  ck_assert(find_backend(ctx, "cuda", &info));
  ck_assert_int_eq(info.state, TSTOR_BACKEND_DECLINED);
  ck_assert_str_eq(info.message, "no CUDA device used: max_devices = 0");
  tstor_device dev;
  ck_tstor_err(tstor_device_parse(ctx, "cuda", &dev), TSTOR_ENODEV);
  tstor_context_close(ctx);
  ctx = open_ini("optional = yes\nmax_devices = 1\n");
  ck_assert(find_backend(ctx, "cuda", &info));
  if (info.state == TSTOR_BACKEND_LOADED) {
    ck_tstor_ok(tstor_device_parse(ctx, "cuda:0", &dev));
    ck_assert_int_eq(tstor_device_count(ctx, dev.type), 1);
    ck_tstor_err(tstor_device_parse(ctx, "cuda:1", &dev), TSTOR_ENODEV);
  }
  tstor_context_close(ctx);
  tstor_context *all = open_ini("optional = yes\n");
  ctx = open_ini("optional = yes\nmax_devices = 1000000\n");
  ck_assert(find_backend(ctx, "cuda", &info));
  if (info.state == TSTOR_BACKEND_LOADED) {
    ck_tstor_ok(tstor_device_parse(ctx, "cuda:0", &dev));
    tstor_device every;
    ck_tstor_ok(tstor_device_parse(all, "cuda:0", &every));
    ck_assert_int_eq(tstor_device_count(ctx, dev.type), tstor_device_count(all, every.type));
  }
  tstor_context_close(ctx);
  tstor_context_close(all);
}
END_TEST

static const char *self_path; /* argv[0]: /proc/self/exe would be valgrind's */

/* Runs this program with --probe in a child process whose dynamic loader finds
 * `driver` as libcuda.so.1 first, and returns what the probe printed (in a
 * static buffer). A child, as the runtime reads the driver once per process. */
static const char *probe_with_driver(const char *driver) {
  static char out[1024];
  char dir[] = "/tmp/tstor-cuda-driver-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char link[512];
  snprintf(link, sizeof link, "%s/libcuda.so.1", dir);
  ck_assert_int_eq(symlink(driver, link), 0);
  int fds[2];
  ck_assert_int_eq(pipe(fds), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    const char *old = getenv("LD_LIBRARY_PATH");
    char path[4096];
    snprintf(path, sizeof path, "%s%s%s", dir, old ? ":" : "", old ? old : "");
    setenv("LD_LIBRARY_PATH", path, 1);
    execl(self_path, self_path, "--probe", (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  size_t n = 0;
  ssize_t r;
  while (n < sizeof out - 1 && (r = read(fds[0], out + n, sizeof out - 1 - n)) > 0)
    n += (size_t)r;
  out[n] = '\0';
  close(fds[0]);
  int status;
  waitpid(pid, &status, 0);
  unlink(link);
  rmdir(dir);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "probe failed: %s", out);
  return out;
}

static const char *fake_driver(const char *name) {
  static char path[1024];
  const char *dir = getenv("TSTOR_TEST_PLUGINS");
  snprintf(path, sizeof path, "%s/%s.so", dir ? dir : TSTOR_TEST_BUILDDIR "/plugins/.libs",
           name);
  return path;
}

START_TEST(old_driver_is_declined) {
  const char *out = probe_with_driver(fake_driver("fake_libcuda_old"));
  ck_assert_msg(strstr(out, "declined: CUDA driver too old: it supports CUDA 11.4, this module "
                            "needs "),
                "probe: %s", out);
}
END_TEST

START_TEST(driver_without_devices_is_declined) {
  const char *out = probe_with_driver(fake_driver("fake_libcuda_nodev"));
  ck_assert_msg(strstr(out, "declined: no CUDA device"), "probe: %s", out);
}
END_TEST

#ifdef TSTOR_TEST_CUDA_STUB
/* The toolkit's stub libcuda.so, which build machines without a GPU have. */
START_TEST(stub_driver_is_declined) {
  if (access(TSTOR_TEST_CUDA_STUB, R_OK) != 0) return; /* a toolkit without stubs */
  const char *out = probe_with_driver(TSTOR_TEST_CUDA_STUB);
  ck_assert_msg(strstr(out, "declined: no CUDA driver") && strstr(out, "stub"), "probe: %s",
                out);
}
END_TEST
#endif

/* --probe: print what became of the cuda backend, for stub_driver_is_declined. */
static int probe(void) {
  tstor_context *ctx = NULL;
  int rc = tstor_context_open_string(BASE_INI "optional = yes\n", "probe.ini", &ctx);
  if (rc) {
    printf("open failed: %s\n", tstor_last_error());
    return 1;
  }
  for (int i = 0; i < tstor_backend_count(ctx); i++) {
    tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
    if (tstor_backend_get(ctx, i, &info) == 0 && strcmp(info.name, "cuda") == 0)
      printf("%s: %s\n",
             info.state == TSTOR_BACKEND_DECLINED ? "declined"
             : info.state == TSTOR_BACKEND_LOADED ? "loaded"
                                                  : "failed",
             info.message);
  }
  tstor_context_close(ctx);
  return 0;
}

int main(int argc, char **argv) {
  self_path = argv[0];
  if (argc > 1 && strcmp(argv[1], "--probe") == 0) return probe();
  Suite *s = suite_create("cuda module");
  TCase *t = tcase_create("load");
  tcase_set_timeout(t, 60); /* the first CUDA initialisation can be slow */
  tcase_add_test(t, optional_cuda_never_fails_the_context);
  tcase_add_test(t, required_cuda_without_gpu_declines_with_the_reason);
  tcase_add_test(t, max_devices_limits_the_devices);
  tcase_add_test(t, old_driver_is_declined);
  tcase_add_test(t, driver_without_devices_is_declined);
#ifdef TSTOR_TEST_CUDA_STUB
  tcase_add_test(t, stub_driver_is_declined);
#endif
  suite_add_tcase(s, t);
  t = tcase_create("config");
  tcase_set_timeout(t, 60);
  tcase_add_loop_test(t, bad_config_values_are_refused, 0,
                      (int)(sizeof bad_lines / sizeof bad_lines[0]));
  tcase_add_test(t, good_config_values_are_accepted);
  suite_add_tcase(s, t);
  return tstor_test_run(s);
}
