#ifndef TSTOR_TESTS_HEADERS_C_H
#define TSTOR_TESTS_HEADERS_C_H
#include <tstor/serialize.h>
#include <tstor/shape.h>
#include <tstor/tstor.h>

#ifdef __cplusplus
extern "C" {
#endif
void headers_c_inits(tstor_conv_params *conv, tstor_pool_params *pool, tstor_store_choice *choice,
                     tstor_load_options *load, tstor_save_options *save, tstor_stats *stats,
                     tstor_backend_info *info);
#ifdef __cplusplus
}
#endif
#endif
