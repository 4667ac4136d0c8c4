/* The TSTOR_*_INIT initialisers as C compiles them, for test_headers_cxx. */
#include "headers_c.h"

void headers_c_inits(tstor_conv_params *conv, tstor_pool_params *pool, tstor_store_choice *choice,
                     tstor_load_options *load, tstor_save_options *save, tstor_stats *stats,
                     tstor_backend_info *info) {
  *conv = (tstor_conv_params)TSTOR_CONV_PARAMS_INIT(3);
  *pool = (tstor_pool_params)TSTOR_POOL_PARAMS_INIT(2, 5);
  *choice = (tstor_store_choice)TSTOR_STORE_CHOICE_INIT;
  *load = (tstor_load_options)TSTOR_LOAD_OPTIONS_INIT;
  *save = (tstor_save_options)TSTOR_SAVE_OPTIONS_INIT;
  *stats = (tstor_stats)TSTOR_STATS_INIT;
  *info = (tstor_backend_info)TSTOR_BACKEND_INFO_INIT;
}
