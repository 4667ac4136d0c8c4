/* A shared object that loads fine but exports no tstor_backend_entry: the core
 * must report the missing symbol and unload it. */
#include <tstor/backend.h>

TSTOR_EXTERN int tstor_test_noentry_marker;
int tstor_test_noentry_marker = 42;
