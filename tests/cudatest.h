/* What the GPU suites share: whether the cuda backend loads here (they exit
 * 77, skipped, when it declines), the context they open, and their runner,
 * which never forks (CUDA cannot be used in a child forked after the parent
 * initialised it, and the probe does). */
#ifndef TSTOR_CUDATEST_H
#define TSTOR_CUDATEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* 1 when the cuda backend loads, 0 when it declines (why says why), -1 when
 * no context opens at all. */
static int cudatest_gpu_present(char *why, size_t size) {
  tstor_context *c = NULL;
  int rc = tstor_context_open_string(
      "[tstor]\n[backend cpu]\nlibrary = tstor-cpu.so\n"
      "[backend cuda]\nlibrary = tstor-cuda.so\noptional = yes\n",
      "probe.ini", &c);
  if (rc) {
    snprintf(why, size, "cannot open a context: %s", tstor_last_error());
    return -1;
  }
  int present = 0;
  for (int i = 0; i < tstor_backend_count(c); i++) {
    tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
    if (tstor_backend_get(c, i, &info) == 0 && strcmp(info.name, "cuda") == 0) {
      present = info.state == TSTOR_BACKEND_LOADED;
      snprintf(why, size, "%s", info.message);
    }
  }
  tstor_context_close(c);
  return present;
}

/* Whether the suite runs with the caching allocators (TSTOR_TEST_CUDA_CACHING
 * = no turns them off, for compute-sanitizer). */
static int cudatest_caching(void) {
  const char *c = getenv("TSTOR_TEST_CUDA_CACHING");
  return !(c && strcmp(c, "no") == 0);
}

/* A context with cpu, cuda and meta (checkpoints may hold meta tensors, which
 * stay on meta whatever map_location says), caching as cudatest_caching() says. */
static tstor_context *cudatest_open(void) {
  char ini[512];
  snprintf(ini, sizeof ini,
           "[tstor]\ndefault_device = cpu\n[backend cpu]\nlibrary = tstor-cpu.so\n"
           "[backend cuda]\nlibrary = tstor-cuda.so\ncaching = %s\n"
           "[backend meta]\nlibrary = tstor-meta.so\n",
           cudatest_caching() ? "yes" : "no");
  tstor_context *ctx = NULL;
  ck_tstor_ok(tstor_context_open_string(ini, "cudatest.ini", &ctx));
  return ctx;
}

/* Runs the suite if the cuda backend loads: the exit status for automake. */
static int cudatest_run(const char *name, Suite *s) {
  char why[512] = "";
  int present = cudatest_gpu_present(why, sizeof why);
  if (present < 0) {
    fprintf(stderr, "%s: %s\n", name, why);
    srunner_free(srunner_create(s));
    return EXIT_FAILURE;
  }
  if (!present) {
    printf("%s: skipped: the cuda backend declined: %s\n", name, why);
    srunner_free(srunner_create(s));
    return 77;
  }
  SRunner *runner = srunner_create(s);
  srunner_set_fork_status(runner, CK_NOFORK);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
