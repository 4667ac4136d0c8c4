/* Allocation failures in tensor operations: each operation is run again and
 * again with its 1st, 2nd, 3rd, ... allocation (the core's bookkeeping and
 * storage bytes) made to fail, then with that one and every later one, until
 * a run sees no failure (core/runtime/fault.h, as test_faults does for storages). A
 * failed run must return TSTOR_ENOMEM with a detail, hand out nothing, free
 * every core allocation it made and leave its inputs' reference counts as
 * they were. */
#define _GNU_SOURCE
#include "tensortest.h"

#include "runtime/fault.h"

CORETEST_SANITIZER_OPTIONS

#define MEM (TSTOR_FAULT_MALLOC | TSTOR_FAULT_ALLOC)

typedef struct fx {
  tstor_context *ctx;
  tstor_device cpu, fake;
  tstor_tensor *a, *b; /* inputs */
  tstor_tensor *out;   /* a result */
  tstor_tensor **list; /* a result of split/chunk */
  int count;
  char *str; /* a result of to_string */
} fx;

static tstor_tensor *make(fx *f, tstor_device dev, tstor_dtype dt, int nd, const int64_t *sz) {
  tstor_tensor *t;
  ck_tstor_ok(tstor_tensor_empty(f->ctx, dev, dt, nd, sz, &t));
  int64_t n = tstor_tensor_numel(t);
  double *v = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) v[i] = (double)(i % 17) - 3;
  tstor_tensor *src;
  ck_tstor_ok(tstor_tensor_from_array(f->ctx, f->cpu, TSTOR_FLOAT64, nd, sz, v, &src));
  ck_tstor_ok(tstor_tensor_copy_(t, src));
  tstor_tensor_release(src);
  free(v);
  return t;
}

static void setup_cpu(fx *f) {
  int64_t sz[] = {6, 5, 4};
  f->a = make(f, f->cpu, TSTOR_FLOAT32, 3, sz);
  f->b = make(f, f->cpu, TSTOR_INT16, 3, sz);
}
static void setup_fake(fx *f) {
  int64_t sz[] = {6, 5, 4};
  f->a = make(f, f->fake, TSTOR_FLOAT32, 3, sz);
  f->b = make(f, f->fake, TSTOR_FLOAT64, 3, sz);
}

static const int64_t S3[] = {6, 5, 4};

static int run_empty(fx *f) {
  return tstor_tensor_empty(f->ctx, f->fake, TSTOR_FLOAT16, 3, S3, &f->out);
}
static int run_zeros(fx *f) {
  return tstor_tensor_zeros(f->ctx, f->fake, TSTOR_INT32, 3, S3, &f->out);
}
static int run_from_array(fx *f) {
  float v[120] = {1, 2, 3};
  return tstor_tensor_from_array(f->ctx, f->fake, TSTOR_FLOAT32, 3, S3, v, &f->out);
}
static int run_on_storage(fx *f) {
  int64_t sz[] = {5, 4}, st[] = {1, 5};
  return tstor_tensor_on_storage(tstor_tensor_storage(f->a), TSTOR_FLOAT32, 2, 2, sz, st, &f->out);
}
static int run_transpose(fx *f) { return tstor_tensor_transpose(f->a, 0, 2, &f->out); }
static int run_reshape_copy(fx *f) {
  tstor_tensor *t;
  int rc = tstor_tensor_transpose(f->a, 0, 1, &t);
  if (rc) return rc;
  int64_t flat[] = {-1};
  rc = tstor_tensor_reshape(t, 1, flat, &f->out);
  tstor_tensor_release(t);
  return rc;
}
static int run_split(fx *f) { return tstor_tensor_split(f->a, 2, 0, &f->count, &f->list); }
static int run_chunk(fx *f) { return tstor_tensor_chunk(f->a, 3, 1, &f->count, &f->list); }
static int run_contiguous(fx *f) {
  tstor_tensor *t;
  int64_t order[] = {2, 0, 1};
  int rc = tstor_tensor_permute(f->a, 3, order, &t);
  if (rc) return rc;
  rc = tstor_tensor_contiguous(t, &f->out);
  tstor_tensor_release(t);
  return rc;
}
static int run_clone(fx *f) {
  tstor_tensor *t;
  int rc = tstor_tensor_slice(f->a, 1, 0, INT64_MAX, 2, &t);
  if (rc) return rc;
  rc = tstor_tensor_clone(t, &f->out);
  tstor_tensor_release(t);
  return rc;
}
static int run_to(fx *f) { return tstor_tensor_to(f->a, f->cpu, TSTOR_FLOAT64, &f->out); }
static int run_copy_strided(fx *f) {
  tstor_tensor *t;
  int rc = tstor_tensor_transpose(f->a, 0, 2, &t);
  if (rc) return rc;
  tstor_tensor *u;
  if ((rc = tstor_tensor_transpose(f->b, 0, 2, &u)) == 0) {
    rc = tstor_tensor_copy_(u, t);
    tstor_tensor_release(u);
  }
  tstor_tensor_release(t);
  return rc;
}
static int run_copy_overlap(fx *f) {
  tstor_tensor *d, *s;
  int rc = tstor_tensor_slice(f->a, 0, 1, INT64_MAX, 2, &d);
  if (rc) return rc;
  if ((rc = tstor_tensor_slice(f->a, 0, 0, 5, 2, &s)) == 0) {
    rc = tstor_tensor_copy_(d, s);
    tstor_tensor_release(s);
  }
  tstor_tensor_release(d);
  return rc;
}
static int run_fill_strided(fx *f) {
  tstor_tensor *t;
  int rc = tstor_tensor_slice(f->a, 2, 1, INT64_MAX, 2, &t);
  if (rc) return rc;
  rc = tstor_tensor_fill(t, 2.5);
  tstor_tensor_release(t);
  return rc;
}
static int run_to_array(fx *f) {
  double out[120];
  tstor_tensor *t;
  int rc = tstor_tensor_t(f->a, &t);
  if (rc == TSTOR_EINVAL) rc = tstor_tensor_transpose(f->a, 0, 2, &t);
  if (rc) return rc;
  rc = tstor_tensor_to_array(t, out, TSTOR_FLOAT64, 120);
  tstor_tensor_release(t);
  return rc;
}
static int run_to_string(fx *f) { return tstor_tensor_to_string(f->a, &f->str); }

typedef struct op {
  const char *name;
  void (*setup)(fx *f);
  int (*run)(fx *f);
} op;

static const op ops[] = {
    {"empty fake", NULL, run_empty},
    {"zeros fake", NULL, run_zeros},
    {"from_array fake", NULL, run_from_array},
    {"on_storage", setup_cpu, run_on_storage},
    {"transpose", setup_cpu, run_transpose},
    {"reshape that copies, fake", setup_fake, run_reshape_copy},
    {"split", setup_cpu, run_split},
    {"chunk", setup_cpu, run_chunk},
    {"contiguous cpu", setup_cpu, run_contiguous},
    {"contiguous fake", setup_fake, run_contiguous},
    {"clone fake", setup_fake, run_clone},
    {"to fake -> cpu float64", setup_fake, run_to},
    {"copy_ strided converting cpu", setup_cpu, run_copy_strided},
    {"copy_ strided converting fake", setup_fake, run_copy_strided},
    {"copy_ overlapping fake", setup_fake, run_copy_overlap},
    {"fill strided fake", setup_fake, run_fill_strided},
    {"to_array fake", setup_fake, run_to_array},
    {"to_string fake", setup_fake, run_to_string},
    {"to_string cpu", setup_cpu, run_to_string},
};

static tstor_context *ctx;

static void setup(void) { ctx = coretest_open(coretest_fake_section("fake", NULL)); }
static void teardown(void) { tstor_context_close(ctx); }

/* One run with acquisition nth failing; 0 when nothing was failed. */
static int once(const op *o, unsigned long nth, int persist) {
  fx f;
  memset(&f, 0, sizeof f);
  f.ctx = ctx;
  f.cpu = coretest_dev(ctx, "cpu");
  f.fake = coretest_dev(ctx, "fake:0");
  if (o->setup) o->setup(&f);
  long a_uses = f.a ? tstor_storage_use_count(tstor_tensor_storage(f.a)) : 0;
  long a_refs = f.a ? tstor_tensor_use_count(f.a) : 0;
  tstor__fault_arm(MEM, nth, persist);
  int rc = o->run(&f);
  tstor__fault_disarm();
  unsigned long failed = tstor__fault_failed();
  long live = tstor__fault_live();
  if (failed == 0) {
    ck_assert_msg(rc == 0, "%s: failed with nothing injected: %s", o->name, tstor_last_error());
  } else {
    ck_assert_msg(rc == TSTOR_ENOMEM, "%s, acquisition %lu%s: returned %s (%s)", o->name, nth,
                  persist ? " and later" : "", tstor_err_name(rc), tstor_last_error());
    ck_assert_msg(tstor_last_error()[0] != '\0', "%s: no error detail", o->name);
    ck_assert_msg(live == 0, "%s, acquisition %lu: %ld core allocation(s) not freed", o->name, nth,
                  live);
    ck_assert_msg(f.out == NULL && f.list == NULL && f.count == 0 && f.str == NULL,
                  "%s: a failed call handed out something", o->name);
    if (f.a) {
      ck_assert_int_eq(tstor_storage_use_count(tstor_tensor_storage(f.a)), a_uses);
      ck_assert_int_eq(tstor_tensor_use_count(f.a), a_refs);
    }
  }
  tstor_tensor_release(f.out);
  tstor_tensor_list_free(f.list, f.count);
  free(f.str);
  tstor_tensor_release(f.a);
  tstor_tensor_release(f.b);
  return failed != 0;
}

START_TEST(every_allocation_can_fail) {
  const op *o = &ops[_i];
  for (int persist = 0; persist <= 1; persist++) {
    unsigned long n = 1;
    while (once(o, n, persist)) {
      n++;
      ck_assert_msg(n < 2000, "%s: no end to the sweep", o->name);
    }
    ck_assert_msg(n > 1, "%s: allocates nothing that could fail", o->name);
  }
}
END_TEST

/* Freed storage and tensor objects wait in per-thread pools for the next
 * create (core/runtime/memory.c); while a fault is armed the pools stand aside, so
 * that the sweeps above reach those allocations too. With the pools full,
 * the first core allocation of a new storage, and the second of a new tensor
 * (after its storage), still fail. */
START_TEST(pooled_objects_still_fail) {
  tstor_device fake = coretest_dev(ctx, "fake:0");
  tstor_tensor *t[4];
  for (int i = 0; i < 4; i++)
    ck_tstor_ok(tstor_tensor_empty(ctx, fake, TSTOR_FLOAT32, 3, S3, &t[i]));
  for (int i = 0; i < 4; i++) tstor_tensor_release(t[i]);

  tstor_storage *s = NULL;
  tstor__fault_arm(TSTOR_FAULT_MALLOC, 1, 0);
  int rc = tstor_storage_new(ctx, fake, 64, &s);
  tstor__fault_disarm();
  ck_assert_int_eq(rc, TSTOR_ENOMEM);
  ck_assert_ptr_null(s);
  ck_assert_uint_eq(tstor__fault_failed(), 1);
  ck_assert_int_eq(tstor__fault_live(), 0);

  tstor_tensor *x = NULL;
  tstor__fault_arm(TSTOR_FAULT_MALLOC, 2, 0);
  rc = tstor_tensor_empty(ctx, fake, TSTOR_FLOAT32, 3, S3, &x);
  tstor__fault_disarm();
  ck_assert_int_eq(rc, TSTOR_ENOMEM);
  ck_assert_ptr_null(x);
  ck_assert_uint_eq(tstor__fault_failed(), 1);
  ck_assert_int_eq(tstor__fault_live(), 0);

  /* Disarmed, the pools serve again and nothing was lost from them. */
  for (int i = 0; i < 4; i++)
    ck_tstor_ok(tstor_tensor_empty(ctx, fake, TSTOR_FLOAT32, 3, S3, &t[i]));
  for (int i = 0; i < 4; i++) tstor_tensor_release(t[i]);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tensor_fault");
  TCase *tc = tcase_create("sweep");
  tcase_set_timeout(tc, 120);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_loop_test(tc, every_allocation_can_fail, 0, (int)(sizeof ops / sizeof ops[0]));
  suite_add_tcase(s, tc);
  TCase *pools = tcase_create("pools");
  tcase_add_checked_fixture(pools, setup, teardown);
  tcase_add_test(pools, pooled_objects_still_fail);
  suite_add_tcase(s, pools);
  return tstor_test_run(s);
}
