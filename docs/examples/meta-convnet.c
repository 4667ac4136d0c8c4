/* Planning a small convolutional network's memory on the meta device.
 *
 * Every layer is run through shape inference on meta tensors, which have sizes
 * and strides but no bytes: conv, relu, max pool, conv, relu, max pool,
 * flatten, linear, softmax over a batch of 8 RGB images of 32 x 32. The program
 * prints each activation's shape, strides and the bytes it needs, then
 * allocates exactly their sum on the cpu as one storage and places every
 * activation in it with the same layout, as a memory planner would.
 *
 * Build: cc meta-convnet.c $(pkg-config --cflags --libs tstor) -o meta-convnet
 * Run:   ./meta-convnet            (make check runs it and checks its output)
 */
#include <stdio.h>
#include <stdlib.h>
#include <tstor/shape.h>

#define CHECK(call)                                                                      \
  do {                                                                                   \
    int rc_ = (call);                                                                    \
    if (rc_ < 0) {                                                                       \
      fprintf(stderr, "%s: %s: %s\n", #call, tstor_err_name(rc_), tstor_last_error()); \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

#define MAX_LAYERS 16

static struct {
  const char *name;
  tstor_tensor *t;   /* on meta */
  uint64_t bytes;    /* 0 for a view of the layer before */
  uint64_t offset;   /* where it goes in the cpu arena */
} layers[MAX_LAYERS];
static int nlayers;

/* Records an activation (the reference passes to the table). */
static void add(const char *name, tstor_tensor *t, int is_view) {
  tstor_layout l;
  CHECK(tstor_layout_of(t, &l));
  layers[nlayers].name = name;
  layers[nlayers].t = t;
  if (!is_view) CHECK(tstor_layout_bytes(&l, &layers[nlayers].bytes));
  nlayers++;
}

static tstor_tensor *last(void) { return layers[nlayers - 1].t; }

/* A parameter tensor on meta (weights are not activations: not planned). */
static tstor_tensor *param(tstor_context *ctx, tstor_device meta, int ndim, const int64_t *sizes) {
  tstor_tensor *t;
  CHECK(tstor_tensor_empty(ctx, meta, TSTOR_FLOAT32, ndim, sizes, &t));
  return t;
}

static void print_dims(char *buf, size_t n, int ndim, const int64_t *v) {
  size_t at = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && at < n; i++)
    at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? ", " : "", (long long)v[i]);
  if (at < n) snprintf(buf + at, n - at, "]");
}

int main(void) {
  tstor_context *ctx;
  tstor_device meta, cpu;
  CHECK(tstor_context_open(NULL, &ctx));
  CHECK(tstor_device_parse(ctx, "meta", &meta));
  CHECK(tstor_device_parse(ctx, "cpu", &cpu));

  /* parameters */
  int64_t w1s[] = {16, 3, 3, 3}, b1s[] = {16}, w2s[] = {32, 16, 3, 3}, b2s[] = {32};
  int64_t fcw[] = {10, 32 * 8 * 8}, fcb[] = {10};
  tstor_tensor *w1 = param(ctx, meta, 4, w1s), *b1 = param(ctx, meta, 1, b1s);
  tstor_tensor *w2 = param(ctx, meta, 4, w2s), *b2 = param(ctx, meta, 1, b2s);
  tstor_tensor *fw = param(ctx, meta, 2, fcw), *fb = param(ctx, meta, 1, fcb);

  /* the forward pass, on meta */
  int64_t xs[] = {8, 3, 32, 32};
  tstor_tensor *x, *y;
  CHECK(tstor_tensor_empty(ctx, meta, TSTOR_FLOAT32, 4, xs, &x));
  add("input", x, 0);
  tstor_conv_params conv = TSTOR_CONV_PARAMS_INIT(2);
  conv.padding[0] = conv.padding[1] = 1;
  tstor_pool_params pool = TSTOR_POOL_PARAMS_INIT(2, 2);

  CHECK(tstor_shape_conv(last(), w1, b1, &conv, &y));
  add("conv1", y, 0);
  CHECK(tstor_shape_activation(TSTOR_ACT_RELU, last(), &y));
  add("relu1", y, 0);
  CHECK(tstor_shape_max_pool2d(last(), &pool, &y));
  add("pool1", y, 0);
  CHECK(tstor_shape_conv(last(), w2, b2, &conv, &y));
  add("conv2", y, 0);
  CHECK(tstor_shape_activation(TSTOR_ACT_RELU, last(), &y));
  add("relu2", y, 0);
  CHECK(tstor_shape_max_pool2d(last(), &pool, &y));
  add("pool2", y, 0);

  /* flatten: a view of pool2, sharing its (meta) storage */
  tstor_layout l, flat;
  int64_t fs[] = {8, -1};
  CHECK(tstor_layout_of(last(), &l));
  CHECK(tstor_layout_view(&l, 2, fs, &flat));
  CHECK(tstor_tensor_on_storage(tstor_tensor_storage(last()), flat.dtype,
                                tstor_tensor_storage_offset(last()), flat.ndim, flat.sizes,
                                flat.strides, &y));
  add("flatten", y, 1);

  CHECK(tstor_shape_linear(last(), fw, fb, &y));
  add("linear", y, 0);
  CHECK(tstor_shape_softmax(last(), 1, &y));
  add("softmax", y, 0);

  /* the plan: every activation at a 64-byte aligned offset of one arena */
  uint64_t total = 0;
  printf("%-8s %-18s %-20s %10s\n", "layer", "shape", "strides", "bytes");
  for (int i = 0; i < nlayers; i++) {
    char sz[64], st[64];
    const tstor_tensor *t = layers[i].t;
    print_dims(sz, sizeof sz, tstor_tensor_dim(t), tstor_tensor_sizes(t));
    print_dims(st, sizeof st, tstor_tensor_dim(t), tstor_tensor_strides(t));
    if (layers[i].bytes) {
      total = (total + 63) & ~(uint64_t)63;
      layers[i].offset = total;
      total += layers[i].bytes;
      printf("%-8s %-18s %-20s %10llu\n", layers[i].name, sz, st,
             (unsigned long long)layers[i].bytes);
    } else {
      layers[i].offset = layers[i - 1].offset;
      printf("%-8s %-18s %-20s %10s\n", layers[i].name, sz, st, "(view)");
    }
  }
  printf("total: %llu bytes for %d activations\n", (unsigned long long)total, nlayers);

  /* allocate exactly that on the cpu and lay the activations out in it */
  tstor_storage *arena;
  CHECK(tstor_storage_new(ctx, cpu, (size_t)total, &arena));
  for (int i = 0; i < nlayers; i++) {
    const tstor_tensor *m = layers[i].t;
    tstor_tensor *c;
    int64_t off = (int64_t)(layers[i].offset / tstor_dtype_size(tstor_tensor_dtype(m)));
    CHECK(tstor_tensor_on_storage(arena, tstor_tensor_dtype(m), off, tstor_tensor_dim(m),
                                  tstor_tensor_sizes(m), tstor_tensor_strides(m), &c));
    CHECK(tstor_tensor_fill(c, (double)i));
    tstor_tensor_release(c);
  }
  printf("cpu: one storage of %zu bytes holds them all\n", tstor_storage_nbytes(arena));

  tstor_storage_release(arena);
  for (int i = 0; i < nlayers; i++) tstor_tensor_release(layers[i].t);
  tstor_tensor *params[] = {w1, b1, w2, b2, fw, fb};
  for (int i = 0; i < 6; i++) tstor_tensor_release(params[i]);
  tstor_context_close(ctx);
  return 0;
}
