/* Contexts: open from a file, from text, from the environment or the embedded
 * default; the process-wide default context; backend reports; argument
 * checks. */
#include "coretest.h"

#include <limits.h>
#include <pthread.h>
#include <sys/wait.h>

START_TEST(open_string_and_close) {
  tstor_context *ctx = NULL;
  ck_tstor_ok(tstor_context_open_string(CORETEST_BASE_INI, "mine.ini", &ctx));
  ck_assert_ptr_nonnull(ctx);
  ck_assert_str_eq(tstor_context_config_name(ctx), "mine.ini");
  ck_assert_int_eq(tstor_backend_count(ctx), 2);
  tstor_context_close(ctx);
  tstor_context_close(NULL); /* no-op */
}
END_TEST

START_TEST(open_string_copies_text_and_name) {
  char text[512], name[64];
  snprintf(text, sizeof text, "%s", CORETEST_BASE_INI);
  snprintf(name, sizeof name, "copied.ini");
  tstor_context *ctx = NULL;
  ck_tstor_ok(tstor_context_open_string(text, name, &ctx));
  memset(text, 'z', sizeof text - 1);
  memset(name, 'z', sizeof name - 1);
  ck_assert_str_eq(tstor_context_config_name(ctx), "copied.ini");
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  ck_tstor_ok(tstor_backend_get(ctx, 0, &info));
  ck_assert_str_eq(info.name, "cpu");
  tstor_context_close(ctx);
}
END_TEST

START_TEST(open_rejects_bad_arguments) {
  tstor_context *ctx = NULL;
  ck_tstor_err(tstor_context_open_string(NULL, "x.ini", &ctx), TSTOR_EINVAL);
  ck_assert_ptr_null(ctx);
  ck_tstor_err(tstor_context_open_string(CORETEST_BASE_INI, "x.ini", NULL), TSTOR_EINVAL);
  ck_tstor_err(tstor_context_open(NULL, NULL), TSTOR_EINVAL);
  ck_tstor_err(tstor_context_default(NULL), TSTOR_EINVAL);
  /* Nothing was loaded by the failed calls. */
  ck_assert(!coretest_is_loaded(coretest_backend("cpu")));
}
END_TEST

START_TEST(open_file_config_name_is_the_path) {
  tstor_context *ctx = NULL;
  const char *path = coretest_src("configs/good.ini");
  ck_tstor_ok(tstor_context_open(path, &ctx));
  ck_assert_str_eq(tstor_context_config_name(ctx), path);
  tstor_context_close(ctx);
}
END_TEST

START_TEST(two_contexts_are_independent) {
  tstor_context *a = coretest_open(NULL);
  tstor_context *b = coretest_open(coretest_fake_section("fake", NULL));
  ck_assert_ptr_ne(a, b);
  tstor_device dev;
  ck_tstor_err(tstor_device_parse(a, "fake", &dev), TSTOR_ENODEV);
  ck_tstor_ok(tstor_device_parse(b, "fake", &dev));
  ck_assert_int_eq(tstor_backend_count(a), 2);
  ck_assert_int_eq(tstor_backend_count(b), 3);
  tstor_context_close(b);
  /* a is untouched by b's close. */
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_new(a, coretest_dev(a, "cpu"), 16, &s));
  tstor_storage_release(s);
  tstor_context_close(a);
}
END_TEST

START_TEST(backend_reports) {
  tstor_context *ctx = coretest_open(
      "[backend off]\nlibrary = tstor-nothing.so\nenabled = no\n"
      "[backend gone]\nlibrary = tstor-nothing.so\noptional = yes\n");
  ck_assert_int_eq(tstor_backend_count(ctx), 4);
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;

  ck_tstor_ok(tstor_backend_get(ctx, 0, &info));
  ck_assert_str_eq(info.name, "cpu");
  ck_assert_str_eq(info.library, coretest_backend("cpu"));
  ck_assert_int_eq(info.state, TSTOR_BACKEND_LOADED);
  ck_assert_str_eq(info.message, "");
  ck_assert_int_eq(info.optional, 0);

  ck_tstor_ok(tstor_backend_get(ctx, 1, &info));
  ck_assert_str_eq(info.name, "meta");
  ck_assert_int_eq(info.state, TSTOR_BACKEND_LOADED);

  ck_tstor_ok(tstor_backend_get(ctx, 2, &info));
  ck_assert_str_eq(info.name, "off");
  ck_assert_int_eq(info.state, TSTOR_BACKEND_DISABLED);
  ck_assert_int_eq(info.optional, 0);
  ck_assert_ptr_nonnull(info.library);
  ck_assert_ptr_nonnull(info.message);

  ck_tstor_ok(tstor_backend_get(ctx, 3, &info));
  ck_assert_str_eq(info.name, "gone");
  ck_assert_int_eq(info.state, TSTOR_BACKEND_FAILED);
  ck_assert_int_eq(info.optional, 1);
  ck_assert_ptr_nonnull(strstr(info.message, "tstor-nothing.so"));

  /* Out of range, and no output argument. */
  memset(&info, 0x5a, sizeof info);
  tstor_backend_info before = info;
  ck_tstor_err(tstor_backend_get(ctx, 4, &info), TSTOR_ERANGE);
  ck_tstor_err(tstor_backend_get(ctx, -1, &info), TSTOR_ERANGE);
  ck_tstor_err(tstor_backend_get(ctx, INT32_MAX, &info), TSTOR_ERANGE);
  ck_assert_mem_eq(&info, &before, sizeof info);
  ck_tstor_err(tstor_backend_get(ctx, 0, NULL), TSTOR_EINVAL);
  tstor_context_close(ctx);
}
END_TEST

/* A relative library from text without backend_dir: found in the folder the
 * backends are installed in, if this build was installed, else refused with
 * the folders tried; never taken from the working directory, even with the
 * module sitting there. */
static void opens_from_the_installed_folder_only(const char *ini) {
  tstor_context *ctx = (tstor_context *)0x1;
  int rc = tstor_context_open_string(ini, "cwd.ini", &ctx);
  if (rc == 0) {
    tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
    ck_tstor_ok(tstor_backend_get(ctx, 0, &info));
    ck_assert_msg(
        strncmp(info.library, TSTOR_TEST_PKGLIBDIR "/", strlen(TSTOR_TEST_PKGLIBDIR) + 1) == 0,
        "loaded %s", info.library);
    tstor_context_close(ctx);
    return;
  }
  ck_assert_int_eq(rc, TSTOR_ELOAD);
  ck_assert_ptr_null(ctx);
  ck_last_error_has("(tried: " TSTOR_TEST_PKGLIBDIR "/");
  ck_last_error_has("name the folder with backend_dir in [tstor] or $TSTOR_BACKEND_DIR");
}

START_TEST(relative_library_never_from_working_directory) {
  char cwd[4096];
  ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
  const char *modules = coretest_fmt("%s", tstor_test_backend_dir());
  coretest_setenv("TSTOR_BACKEND_DIR", NULL);
  ck_assert_int_eq(chdir(modules), 0);
  opens_from_the_installed_folder_only("[tstor]\n[backend cpu]\nlibrary = tstor-cpu.so\n");
  opens_from_the_installed_folder_only("[tstor]\n[backend cpu]\nlibrary = ./tstor-cpu.so\n");
  /* backend_dir set: the installed folder is not searched */
  tstor_context *ctx = (tstor_context *)0x1;
  ck_tstor_err(tstor_context_open_string(
                   "[tstor]\nbackend_dir = /nonexistent\n[backend cpu]\nlibrary = tstor-cpu.so\n",
                   "cwd.ini", &ctx),
               TSTOR_ELOAD);
  ck_last_error_has("(tried: /nonexistent/tstor-cpu.so); name the folder");
  ck_assert_int_eq(chdir(cwd), 0);
  coretest_setenv("TSTOR_BACKEND_DIR", modules);
}
END_TEST

START_TEST(relative_library_next_to_the_config_file) {
  /* From a file, a relative path not found in backend_dir resolves in the
   * file's folder. */
  char dir[] = "/tmp/tstor-test-dirXXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  const char *link = coretest_fmt("%s/fake-here.so", dir);
  ck_assert_int_eq(symlink(coretest_plugin("fake"), link), 0);
  const char *ini = coretest_fmt("%s[backend fake]\nlibrary = fake-here.so\n", CORETEST_BASE_INI);
  const char *path = coretest_fmt("%s/tstor.ini", dir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(ini, f);
  fclose(f);
  tstor_context *ctx = NULL;
  ck_tstor_ok(tstor_context_open(path, &ctx));
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  ck_tstor_ok(tstor_backend_get(ctx, 2, &info));
  ck_assert_str_eq(info.library, link);
  tstor_device dev;
  ck_tstor_ok(tstor_device_parse(ctx, "fake", &dev));
  tstor_context_close(ctx);
  unlink(path);
  unlink(link);
  rmdir(dir);
}
END_TEST

/* backend_dir entries that start with $LIBDIR stand for libtstor's own
 * folder (core/.libs here, the modules two folders up); $ORIGIN for the
 * program's; another $ word is not expanded, and says so. */
START_TEST(backend_dir_relative_to_the_library) {
  char want[PATH_MAX];
  ck_assert_ptr_nonnull(realpath(coretest_backend("cpu"), want));
  coretest_setenv("TSTOR_BACKEND_DIR", NULL);
  const char *ini = "[tstor]\nbackend_dir = $NOSUCH/x:$LIBDIR/../../modules\n"
                    "[backend cpu]\nlibrary = tstor-cpu.so\n";
  tstor_context *ctx = NULL;
  ck_tstor_ok(tstor_context_open_string(ini, "libdir.ini", &ctx));
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  ck_tstor_ok(tstor_backend_get(ctx, 0, &info));
  char got[PATH_MAX];
  ck_assert_ptr_nonnull(realpath(info.library, got));
  ck_assert_str_eq(got, want);
  ck_assert_ptr_nonnull(strstr(info.library, "/core/.libs/../../modules/"));
  tstor_context_close(ctx);
  ini = "[tstor]\nbackend_dir = $NOSUCH/x:$ORIGIN/nowhere\n[backend cpu]\nlibrary = tstor-cpu.so\n";
  ck_tstor_err(tstor_context_open_string(ini, "origin.ini", &ctx), TSTOR_ELOAD);
  ck_last_error_has("tried: $NOSUCH/x (not expanded), /");
  ck_last_error_has("/nowhere/tstor-cpu.so");
}
END_TEST

/* ------------------------------------------------------ default context */

START_TEST(default_context_is_one_and_borrowed) {
  tstor_context *a = NULL, *b = NULL;
  ck_tstor_ok(tstor_context_default(&a));
  ck_tstor_ok(tstor_context_default(&b));
  ck_assert_ptr_nonnull(a);
  ck_assert_ptr_eq(a, b);
  /* NULL stands for it everywhere. */
  ck_assert_int_eq(tstor_backend_count(NULL), tstor_backend_count(a));
  ck_assert_str_eq(tstor_context_config_name(NULL), tstor_context_config_name(a));
  tstor_storage *s = NULL;
  tstor_device cpu;
  ck_tstor_ok(tstor_device_parse(NULL, "cpu", &cpu));
  ck_tstor_ok(tstor_storage_new(NULL, cpu, 8, &s));
  ck_assert_ptr_eq(tstor_storage_context(s), a);
  tstor_storage_release(s);
  char line[64];
  ck_tstor_ok(tstor_device_describe(NULL, cpu, line, sizeof line));
  ck_assert_str_eq(line, "cpu:0");
  /* The process owns it: closing it is ignored. */
  tstor_context_close(a);
  ck_tstor_ok(tstor_context_default(&b));
  ck_assert_ptr_eq(a, b);
  ck_tstor_ok(tstor_device_parse(a, "cpu", &cpu));
}
END_TEST

static void *get_default(void *arg) {
  tstor_context **out = arg;
  if (tstor_context_default(out) != 0) *out = NULL;
  return NULL;
}

START_TEST(default_context_first_use_from_many_threads) {
  enum { N = 8 };
  pthread_t t[N];
  tstor_context *got[N];
  for (int i = 0; i < N; i++) ck_assert_int_eq(pthread_create(&t[i], NULL, get_default, &got[i]), 0);
  for (int i = 0; i < N; i++) ck_assert_int_eq(pthread_join(t[i], NULL), 0);
  for (int i = 0; i < N; i++) {
    ck_assert_ptr_nonnull(got[i]);
    ck_assert_ptr_eq(got[i], got[0]);
  }
}
END_TEST

/* Runs `fn` in a child process, so that the default context is opened fresh,
 * and returns its exit status. */
static int in_child(int (*fn)(void)) {
  fflush(NULL);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) _exit(fn());
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFEXITED(status));
  return WEXITSTATUS(status);
}

static int default_from_env_config(void) {
  setenv("TSTOR_CONFIG", TSTOR_TEST_SRCDIR "/configs/good.ini", 1);
  tstor_context *ctx = NULL;
  if (tstor_context_default(&ctx) != 0) return 1;
  if (strcmp(tstor_context_config_name(ctx), TSTOR_TEST_SRCDIR "/configs/good.ini") != 0)
    return 2;
  if (tstor_backend_count(NULL) != 2) return 3;
  return 0;
}

static int default_fails_as_open_would(void) {
  setenv("TSTOR_CONFIG", TSTOR_TEST_SRCDIR "/configs/malformed.ini", 1);
  tstor_context *ctx = (tstor_context *)0x1;
  if (tstor_context_default(&ctx) != TSTOR_ECONFIG) return 1;
  if (strstr(tstor_last_error(), "malformed.ini:3") == NULL) return 2;
  /* Every call with NULL fails the same way, with a code, not a crash. */
  tstor_device dev;
  if (tstor_device_parse(NULL, "cpu", &dev) != TSTOR_ECONFIG) return 3;
  tstor_storage *s = NULL;
  dev.type = 0;
  dev.index = 0;
  if (tstor_storage_new(NULL, dev, 8, &s) != TSTOR_ECONFIG || s != NULL) return 4;
  return 0;
}

/* The installed configuration comes after $TSTOR_CONFIG and before the
 * embedded default; $TSTOR_SYSTEM_CONFIG stands for its place here. */
static int default_from_system_config(void) {
  unsetenv("TSTOR_CONFIG");
  setenv("TSTOR_SYSTEM_CONFIG", TSTOR_TEST_SRCDIR "/configs/good.ini", 1);
  tstor_context *ctx = NULL;
  if (tstor_context_open(NULL, &ctx) != 0) return 1;
  if (strcmp(tstor_context_config_name(ctx), TSTOR_TEST_SRCDIR "/configs/good.ini") != 0) return 2;
  tstor_context_close(ctx);
  setenv("TSTOR_CONFIG", TSTOR_TEST_SRCDIR "/configs/good.ini", 1);
  setenv("TSTOR_SYSTEM_CONFIG", TSTOR_TEST_SRCDIR "/configs/malformed.ini", 1);
  if (tstor_context_open(NULL, &ctx) != 0) return 3; /* $TSTOR_CONFIG first */
  tstor_context_close(ctx);
  unsetenv("TSTOR_CONFIG");
  if (tstor_context_open(NULL, &ctx) != TSTOR_ECONFIG) return 4; /* read when there, errors and all */
  setenv("TSTOR_SYSTEM_CONFIG", TSTOR_TEST_SRCDIR "/configs/no-such.ini", 1);
  if (tstor_context_open(NULL, &ctx) != 0) return 5;
  if (strcmp(tstor_context_config_name(ctx), "embedded default") != 0) return 6;
  tstor_context_close(ctx);
  setenv("TSTOR_SYSTEM_CONFIG", "", 1);
  if (tstor_context_open(NULL, &ctx) != 0) return 7;
  if (strcmp(tstor_context_config_name(ctx), "embedded default") != 0) return 8;
  tstor_context_close(ctx);
  return 0;
}

static int default_from_embedded(void) {
  unsetenv("TSTOR_CONFIG");
  tstor_context *ctx = NULL;
  if (tstor_context_default(&ctx) != 0) return 1;
  if (strcmp(tstor_context_config_name(ctx), "embedded default") != 0) return 2;
  return 0;
}

START_TEST(default_context_from_environment) {
  ck_assert_int_eq(in_child(default_from_env_config), 0);
  ck_assert_int_eq(in_child(default_fails_as_open_would), 0);
  ck_assert_int_eq(in_child(default_from_system_config), 0);
  ck_assert_int_eq(in_child(default_from_embedded), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("context");
  TCase *tc = tcase_create("open");
  tcase_add_test(tc, open_string_and_close);
  tcase_add_test(tc, open_string_copies_text_and_name);
  tcase_add_test(tc, open_rejects_bad_arguments);
  tcase_add_test(tc, open_file_config_name_is_the_path);
  tcase_add_test(tc, two_contexts_are_independent);
  tcase_add_test(tc, backend_reports);
  tcase_add_test(tc, relative_library_never_from_working_directory);
  tcase_add_test(tc, relative_library_next_to_the_config_file);
  tcase_add_test(tc, backend_dir_relative_to_the_library);
  suite_add_tcase(s, tc);
  /* In this order, so that with CK_FORK=no too the children fork before the
   * default context is first opened, and the threads race to open it. */
  tc = tcase_create("default");
  tcase_add_test(tc, default_context_from_environment);
  tcase_add_test(tc, default_context_first_use_from_many_threads);
  tcase_add_test(tc, default_context_is_one_and_borrowed);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
