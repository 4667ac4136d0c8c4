/* The guide's minimal backend (docs/examples/minimal-backend.c), compiled
 * through this file so that its objects stay in the tests' build folder
 * instead of under docs/, which is distributed whole. */
#include "../../docs/examples/minimal-backend.c"
