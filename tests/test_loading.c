/* The loader's promises about what it loads and what a failure costs:
 *   - an optional backend that fails, for lack of memory too, leaves the
 *     context usable and is reported with the config's FILE:LINE;
 *   - `entry = SYMBOL` names a symbol of the module itself, never one of a
 *     library it links;
 *   - a module, or the folder it is found or lies in, that others can write
 *     or that belongs to another user than root or the caller is refused,
 *     with the reason. */
#define _GNU_SOURCE
#include "coretest.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <tstor/backend.h>

/* Opens cpu + meta + extra as "loading.ini"; returns the code, *out the
 * context or NULL. */
static int open_with(const char *extra, tstor_context **out) {
  const char *text = coretest_fmt("%s\n%s", CORETEST_BASE_INI, extra);
  return tstor_context_open_string(text, "loading.ini", out);
}

/* The report of backend `i`, whose message must contain each of `says`. */
static tstor_backend_info report(tstor_context *ctx, int i, tstor_backend_state state,
                                 const char *says1, const char *says2) {
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
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
    tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
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

/* ------------------------------------------------ entry symbols not the module's */

/* `entry = SYMBOL` for a symbol of a library the module links (libc's rand):
 * dlsym finds it through the module's handle, and before the check the core
 * read rand's code as an entry table. */
START_TEST(entry_symbol_of_a_dependency_is_refused) {
  static const char *const symbols[] = {"rand", "malloc", "printf"};
  for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
    const char *sec = coretest_fmt("[backend fake]\nlibrary = %s\nentry = %s\n",
                                   coretest_plugin("fake"), symbols[i]);
    tstor_context *ctx = (tstor_context *)0x1;
    ck_tstor_err(open_with(sec, &ctx), TSTOR_ELOAD);
    ck_assert_ptr_null(ctx);
    const char *why = tstor_last_error();
    /* rand is libc's; malloc and printf may be a sanitizer runtime's */
    ck_assert_msg(strstr(why, coretest_fmt("entry point '%s' is defined by /", symbols[i])) &&
                      (i > 0 || strstr(why, "libc")) &&
                      strstr(why, "not by the module itself") &&
                      strstr(why, "loading.ini:10: backend fake"),
                  "detail: %s", why);
    ck_assert(!coretest_is_loaded(coretest_plugin("fake")));
    /* Optional: reported, and the rest works. */
    sec = coretest_fmt("[backend fake]\nlibrary = %s\nentry = %s\noptional = yes\n",
                       coretest_plugin("fake"), symbols[i]);
    ck_tstor_ok(open_with(sec, &ctx));
    report(ctx, 2, TSTOR_BACKEND_FAILED, "not by the module itself", symbols[i]);
    cpu_works(ctx);
    tstor_context_close(ctx);
  }
}
END_TEST

/* The module's own symbols, the default one and a named one, still load. */
START_TEST(entry_symbol_of_the_module_loads) {
  tstor_context *ctx = NULL;
  const char *sec = coretest_fmt("[backend fake]\nlibrary = %s\nentry = tstor_backend_entry\n",
                                 coretest_plugin("fake"));
  ck_tstor_ok(open_with(sec, &ctx));
  report(ctx, 2, TSTOR_BACKEND_LOADED, NULL, NULL);
  tstor_context_close(ctx);
  sec = coretest_fmt("[backend abi]\nlibrary = %s\nentry = abi_entry_minor\n",
                     coretest_plugin("abi"));
  ck_tstor_ok(open_with(sec, &ctx));
  report(ctx, 2, TSTOR_BACKEND_LOADED, NULL, NULL);
  tstor_context_close(ctx);
}
END_TEST

/* ------------------------------------------------ modules others could plant */

static char trust_dir[64], trust_ini[128], trust_lib[128];

/* A private folder holding a copy of the fake plugin and a config next to it
 * that names it by file name only, so that it is found beside the config. */
static void trust_setup(void) {
  snprintf(trust_dir, sizeof trust_dir, "%s/tstor-trust-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(trust_dir));
  snprintf(trust_lib, sizeof trust_lib, "%s/libtrust.so", trust_dir);
  snprintf(trust_ini, sizeof trust_ini, "%s/trust.ini", trust_dir);
  FILE *in = fopen(coretest_plugin("fake"), "rb"), *out = fopen(trust_lib, "wb");
  ck_assert(in && out);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0) ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
  fclose(in);
  ck_assert_int_eq(fclose(out), 0);
  ck_assert_int_eq(chmod(trust_lib, 0755), 0);
}

static void trust_teardown(void) {
  chmod(trust_dir, 0700);
  unlink(trust_lib);
  unlink(trust_ini);
  rmdir(trust_dir);
}

/* Opens trust.ini, whose trust section is optional or not. */
static int open_trust(int optional, tstor_context **ctx) {
  FILE *f = fopen(trust_ini, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f, "%s\n[backend trust]\nlibrary = libtrust.so\noptional = %s\n", CORETEST_BASE_INI,
          optional ? "yes" : "no");
  ck_assert_int_eq(fclose(f), 0);
  return tstor_context_open(trust_ini, ctx);
}

static void expect_trusted(void) {
  tstor_context *ctx = NULL;
  int rc = open_trust(0, &ctx);
  ck_assert_msg(rc == 0, "%s: %s", tstor_err_name(rc), tstor_last_error());
  report(ctx, 2, TSTOR_BACKEND_LOADED, NULL, NULL);
  tstor_context_close(ctx);
}

/* Refused, with `says` in the detail; optional, reported and the rest works. */
static void expect_refused(const char *says1, const char *says2) {
  tstor_context *ctx = (tstor_context *)0x1;
  ck_tstor_err(open_trust(0, &ctx), TSTOR_EACCES);
  ck_assert_ptr_null(ctx);
  const char *why = tstor_last_error();
  ck_assert_msg(strstr(why, "refusing to load ") && strstr(why, says1) && strstr(why, says2) &&
                    strstr(why, "trust.ini:10: backend trust"),
                "detail: %s", why);
  ck_assert(!coretest_is_loaded(trust_lib));
  ck_tstor_ok(open_trust(1, &ctx));
  report(ctx, 2, TSTOR_BACKEND_FAILED, says1, says2);
  cpu_works(ctx);
  tstor_context_close(ctx);
}

START_TEST(module_beside_a_config_in_a_folder_others_write_is_refused) {
  expect_trusted(); /* 0700 folder, 0755 file: fine */
  ck_assert_int_eq(chmod(trust_dir, 0777), 0);
  expect_refused(coretest_fmt("its folder %s is writable by others (mode 0777)", trust_dir),
                 "chmod go-w");
  ck_assert_int_eq(chmod(trust_dir, 0770), 0);
  expect_refused(coretest_fmt("its folder %s is writable by its group (mode 0770)", trust_dir),
                 "chmod go-w");
  /* Sticky, as /tmp: others cannot replace a file they do not own. */
  ck_assert_int_eq(chmod(trust_dir, 01777), 0);
  expect_trusted();
  ck_assert_int_eq(chmod(trust_dir, 0755), 0);
  expect_trusted();
}
END_TEST

START_TEST(module_file_others_write_is_refused) {
  ck_assert_int_eq(chmod(trust_lib, 0757), 0);
  expect_refused(coretest_fmt("the module file %s is writable by others", trust_lib), "0757");
  ck_assert_int_eq(chmod(trust_lib, 0775), 0);
  expect_refused(coretest_fmt("the module file %s is writable by its group", trust_lib), "0775");
  ck_assert_int_eq(chmod(trust_lib, 0500), 0);
  expect_trusted();
}
END_TEST

/* A link from a private folder to a module in a folder others write. */
START_TEST(module_reached_through_a_link_is_checked_where_it_lies) {
  char shared[128], target[192];
  snprintf(shared, sizeof shared, "%s/shared", trust_dir);
  snprintf(target, sizeof target, "%s/real.so", shared);
  ck_assert_int_eq(mkdir(shared, 0777), 0);
  ck_assert_int_eq(chmod(shared, 0777), 0);
  ck_assert_int_eq(rename(trust_lib, target), 0);
  ck_assert_int_eq(symlink(target, trust_lib), 0);
  expect_refused(coretest_fmt("its folder %s is writable by others", shared), "0777");
  ck_assert_int_eq(chmod(shared, 0755), 0);
  expect_trusted();
  unlink(trust_lib);
  unlink(target);
  rmdir(shared);
}
END_TEST

/* Only root can give files away; as anyone else this part has nothing to try. */
START_TEST(module_owned_by_another_user_is_refused) {
  if (geteuid() != 0) return;
  ck_assert_int_eq(chown(trust_lib, 65534, 65534), 0);
  expect_refused(coretest_fmt("the module file %s is owned by uid 65534", trust_lib),
                 "neither root nor the caller");
  ck_assert_int_eq(chown(trust_lib, 0, 0), 0);
  ck_assert_int_eq(chown(trust_dir, 65534, 65534), 0);
  expect_refused(coretest_fmt("its folder %s is owned by uid 65534", trust_dir),
                 "neither root nor the caller");
  ck_assert_int_eq(chown(trust_dir, 0, 0), 0);
  expect_trusted();
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
  tc = tcase_create("entry");
  tcase_add_test(tc, entry_symbol_of_a_dependency_is_refused);
  tcase_add_test(tc, entry_symbol_of_the_module_loads);
  suite_add_tcase(s, tc);
  tc = tcase_create("trust");
  tcase_add_checked_fixture(tc, trust_setup, trust_teardown);
  tcase_add_test(tc, module_beside_a_config_in_a_folder_others_write_is_refused);
  tcase_add_test(tc, module_file_others_write_is_refused);
  tcase_add_test(tc, module_reached_through_a_link_is_checked_where_it_lies);
  tcase_add_test(tc, module_owned_by_another_user_is_refused);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
