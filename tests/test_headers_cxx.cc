// Every public header compiled as C++ under -Wall -Wextra -Werror, and every
// TSTOR_*_INIT initialiser filling the fields that C fills.
#include <tstor/backend.h>
#include <tstor/codec.h>
#include <tstor/dlpack.h>
#include <tstor/mapped.h>
#include <tstor/serialize.h>
#include <tstor/shape.h>
#include <tstor/tensor.h>
#include <tstor/tstor.h>
#include <tstor/typed.h>

#include <cstdio>
#include <cstring>

#include "headers_c.h"

static int failures = 0;

#define SAME(field)                                                                        \
  do {                                                                                     \
    if (std::memcmp(&cxx.field, &c.field, sizeof cxx.field) != 0) {                        \
      std::fprintf(stderr, "%s: C++ and C initialise %s differently\n", __func__, #field); \
      failures++;                                                                          \
    }                                                                                      \
  } while (0)

static void conv(const tstor_conv_params &c) {
  tstor_conv_params cxx = TSTOR_CONV_PARAMS_INIT(3);
  SAME(size);
  SAME(spatial);
  SAME(transposed);
  SAME(stride);
  SAME(padding);
  SAME(dilation);
  SAME(output_padding);
  SAME(groups);
  SAME(padding_mode);
  if (cxx.size != sizeof cxx || cxx.spatial != 3 || cxx.stride[2] != 1 || cxx.groups != 1) {
    std::fprintf(stderr, "conv: not PyTorch's defaults\n");
    failures++;
  }
}

static void pool(const tstor_pool_params &c) {
  tstor_pool_params cxx = TSTOR_POOL_PARAMS_INIT(2, 5);
  SAME(size);
  SAME(kernel);
  SAME(stride);
  SAME(padding);
  SAME(dilation);
  SAME(ceil_mode);
  if (cxx.kernel[1] != 5 || cxx.stride[0] != 2 || cxx.dilation[1] != 1) {
    std::fprintf(stderr, "pool: the stride is not the kernel\n");
    failures++;
  }
}

static void others(const tstor_store_choice &choice, const tstor_load_options &load,
                   const tstor_save_options &save, const tstor_stats &stats,
                   const tstor_backend_info &info) {
  {
    const tstor_store_choice &c = choice;
    tstor_store_choice cxx = TSTOR_STORE_CHOICE_INIT;
    SAME(struct_size);
    SAME(streaming);
    SAME(measured);
    SAME(streaming_speedup);
    SAME(age_s);
  }
  {
    const tstor_load_options &c = load;
    tstor_load_options cxx = TSTOR_LOAD_OPTIONS_INIT;
    SAME(size);
    SAME(map_location);
    SAME(flags);
  }
  {
    const tstor_save_options &c = save;
    tstor_save_options cxx = TSTOR_SAVE_OPTIONS_INIT;
    SAME(size);
    SAME(flags);
  }
  {
    const tstor_stats &c = stats;
    tstor_stats cxx = TSTOR_STATS_INIT;
    SAME(struct_size);
#define SAME_STAT(name, comment) SAME(name);
    TSTOR_STATS_FIELDS(SAME_STAT)
#undef SAME_STAT
  }
  {
    const tstor_backend_info &c = info;
    tstor_backend_info cxx = TSTOR_BACKEND_INFO_INIT;
    SAME(struct_size);
    SAME(name);
    SAME(library);
    SAME(state);
    SAME(message);
    SAME(optional);
  }
}

int main() {
  tstor_conv_params conv_c;
  tstor_pool_params pool_c;
  tstor_store_choice choice_c;
  tstor_load_options load_c;
  tstor_save_options save_c;
  tstor_stats stats_c;
  tstor_backend_info info_c;
  std::memset(&stats_c, 0xa5, sizeof stats_c);
  headers_c_inits(&conv_c, &pool_c, &choice_c, &load_c, &save_c, &stats_c, &info_c);
  conv(conv_c);
  pool(pool_c);
  others(choice_c, load_c, save_c, stats_c, info_c);
  if (failures == 0) std::printf("C++ headers and initialisers: as C\n");
  return failures ? 1 : 0;
}
