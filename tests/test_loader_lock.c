/* backend.h promises that init and fini run under the core's loader lock,
 * never two at once, even for different contexts sharing one module. Two
 * threads open and close contexts that load the same module (and cpu and
 * meta) while a third context keeps it mapped; the module counts overlaps of
 * its init and fini, and under ThreadSanitizer its plain static counter
 * would be reported as a race. */
#include "coretest.h"

#include <pthread.h>

#define ROUNDS 150

static const char *ini(void) {
  static char text[4096];
  if (!text[0])
    snprintf(text, sizeof text, "%s\n[backend serial]\nlibrary = %s\n", CORETEST_BASE_INI,
             coretest_plugin("serial"));
  return text;
}

static void *open_close(void *arg) {
  (void)arg;
  for (int i = 0; i < ROUNDS; i++) {
    tstor_context *ctx = NULL;
    if (tstor_context_open_string(ini(), "lock.ini", &ctx) != 0) return (void *)1;
    tstor_device dev;
    tstor_storage *s = NULL;
    if (tstor_device_parse(ctx, "serial", &dev) != 0 || tstor_storage_new(ctx, dev, 8, &s) != 0)
      return (void *)2;
    /* Half the time the storage outlives the context: fini then runs from
     * the storage's release. */
    if (i % 2) {
      tstor_context_close(ctx);
      tstor_storage_release(s);
    } else {
      tstor_storage_release(s);
      tstor_context_close(ctx);
    }
  }
  return NULL;
}

START_TEST(init_and_fini_never_overlap) {
  (void)ini();
  tstor_context *holder = coretest_open(coretest_fmt("[backend serial]\nlibrary = %s\n",
                                                     coretest_plugin("serial")));
  void *dl = dlopen(coretest_plugin("serial"), RTLD_NOW | RTLD_NOLOAD);
  ck_assert_ptr_nonnull(dl);
  int (*overlaps)(void) = (int (*)(void))dlsym(dl, "serial_overlaps");
  ck_assert_ptr_nonnull(overlaps);

  pthread_t t[2];
  for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_create(&t[i], NULL, open_close, NULL), 0);
  for (int i = 0; i < 2; i++) {
    void *rc = NULL;
    ck_assert_int_eq(pthread_join(t[i], &rc), 0);
    ck_assert_msg(rc == NULL, "thread %d failed at step %ld: %s", i, (long)rc, tstor_last_error());
  }
  ck_assert_msg(overlaps() == 0, "init and fini overlapped %d times", overlaps());
  dlclose(dl);
  tstor_context_close(holder);
}
END_TEST

int main(void) {
  Suite *s = suite_create("loader_lock");
  TCase *tc = tcase_create("threads");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, init_and_fini_never_overlap);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
