/* ckpt_resave OUTDIR FILE...: loads each torch.save file with tstor and saves
 * it again as OUTDIR/BASENAME, for ckpt/roundtrip.sh to have PyTorch read.
 * ckpt_resave --built FILE: writes a tree built with the value API (tensors,
 * views sharing one storage, nested containers, scalars) for the same. */
#define _GNU_SOURCE
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tstor/serialize.h>
#include <tstor/tensor.h>

#define OK(x)                                                                      \
  do {                                                                             \
    int rc_ = (x);                                                                 \
    if (rc_) {                                                                     \
      fprintf(stderr, "%s: %s: %s\n", #x, tstor_err_name(rc_), tstor_last_error()); \
      exit(1);                                                                     \
    }                                                                              \
  } while (0)

static tstor_value *s(tstor_checkpoint *ck, const char *text) {
  tstor_value *v;
  OK(tstor_value_new_string(ck, text, strlen(text), &v));
  return v;
}

static tstor_value *tens(tstor_checkpoint *ck, tstor_tensor *t) {
  tstor_value *v;
  OK(tstor_value_new_tensor(ck, t, &v));
  tstor_tensor_release(t);
  return v;
}

/* {"w": arange(12) as 3x4, "wt": its transpose, "row": w[1] (offset 4),
 *  "col": w[:, 2] (offset 2, stride 4), "i": int16 [-1, 0, 7], "meta": [5, "five",
 *  None, True, (1, 2), -123456789012], "again": the same value as "w"} */
static int built(const char *path) {
  tstor_context *ctx;
  tstor_device cpu;
  OK(tstor_context_open(NULL, &ctx));
  OK(tstor_device_parse(ctx, "cpu", &cpu));
  float v[12];
  for (int i = 0; i < 12; i++) v[i] = (float)i;
  int64_t n = 12, sz[2] = {3, 4}, tsz[2] = {4, 3}, tst[2] = {1, 4}, one = 4, three = 3, four = 4;
  tstor_tensor *flat, *w, *wt, *row, *col, *i16;
  OK(tstor_tensor_from_array(ctx, cpu, TSTOR_FLOAT32, 1, &n, v, &flat));
  tstor_storage *st = tstor_tensor_storage(flat);
  OK(tstor_tensor_on_storage(st, TSTOR_FLOAT32, 0, 2, sz, NULL, &w));
  OK(tstor_tensor_on_storage(st, TSTOR_FLOAT32, 0, 2, tsz, tst, &wt));
  OK(tstor_tensor_on_storage(st, TSTOR_FLOAT32, 4, 1, &one, NULL, &row));
  OK(tstor_tensor_on_storage(st, TSTOR_FLOAT32, 2, 1, &three, &four, &col));
  int16_t iv[3] = {-1, 0, 7};
  OK(tstor_tensor_from_array(ctx, cpu, TSTOR_INT16, 1, &three, iv, &i16));
  tstor_tensor_release(flat);
  tstor_checkpoint *ck;
  tstor_value *root, *meta, *tup, *x;
  OK(tstor_checkpoint_new(&ck));
  OK(tstor_value_new(ck, TSTOR_VALUE_DICT, &root));
  tstor_value *wv = tens(ck, w);
  OK(tstor_value_dict_set(root, s(ck, "w"), wv));
  OK(tstor_value_dict_set(root, s(ck, "wt"), tens(ck, wt)));
  OK(tstor_value_dict_set(root, s(ck, "row"), tens(ck, row)));
  OK(tstor_value_dict_set(root, s(ck, "col"), tens(ck, col)));
  OK(tstor_value_dict_set(root, s(ck, "i"), tens(ck, i16)));
  OK(tstor_value_new(ck, TSTOR_VALUE_LIST, &meta));
  OK(tstor_value_new_int(ck, 5, &x));
  OK(tstor_value_append(meta, x));
  OK(tstor_value_append(meta, s(ck, "five")));
  OK(tstor_value_new(ck, TSTOR_VALUE_NONE, &x));
  OK(tstor_value_append(meta, x));
  OK(tstor_value_new_bool(ck, 1, &x));
  OK(tstor_value_append(meta, x));
  OK(tstor_value_new(ck, TSTOR_VALUE_TUPLE, &tup));
  OK(tstor_value_new_int(ck, 1, &x));
  OK(tstor_value_append(tup, x));
  OK(tstor_value_new_int(ck, 2, &x));
  OK(tstor_value_append(tup, x));
  OK(tstor_value_append(meta, tup));
  OK(tstor_value_new_int(ck, -123456789012LL, &x));
  OK(tstor_value_append(meta, x));
  OK(tstor_value_dict_set(root, s(ck, "meta"), meta));
  OK(tstor_value_dict_set(root, s(ck, "again"), wv));
  OK(tstor_checkpoint_set_root(ck, root));
  OK(tstor_torch_save(ck, path, NULL));
  tstor_checkpoint_free(ck);
  tstor_context_close(ctx);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--built") == 0) return built(argv[2]);
  if (argc < 3) {
    fprintf(stderr, "usage: ckpt_resave OUTDIR FILE...\n");
    return 2;
  }
  int status = 0;
  for (int i = 2; i < argc; i++) {
    tstor_checkpoint *ck;
    char *copy = strdup(argv[i]), *out = NULL;
    if (asprintf(&out, "%s/%s", argv[1], basename(copy)) < 0) return 1;
    int rc = tstor_torch_load(NULL, argv[i], NULL, &ck);
    if (!rc) {
      rc = tstor_torch_save(ck, out, NULL);
      tstor_checkpoint_free(ck);
    }
    if (rc) {
      fprintf(stderr, "%s: %s: %s\n", argv[i], tstor_err_name(rc), tstor_last_error());
      status = 1;
    }
    free(out);
    free(copy);
  }
  return status;
}
