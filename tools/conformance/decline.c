/* The decline section: with the keys that make it find no hardware, the
 * module declines with a reason and leaves nothing registered. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"

void conf_section_decline(conf_run *r) {
  conf_begin(r, "declines without hardware", NULL);
  tstor_context *ctx = NULL;
  tstor_storage *s = NULL;
  const conf_options *o = r->opt;
  TRY(r, conf_open_context(r, o->no_hw_keys, o->nno_hw_keys, &ctx), "opening a context");
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  EXPECT(r, conf_find_backend(ctx, o->name, &info) == 0, "no [backend %s] in the context", o->name);
  if (o->nno_hw_keys == 0 && info.state == TSTOR_BACKEND_LOADED) {
    conf_skipf(r, "loaded here; --no-hardware KEY=VALUE gives the keys that make it decline");
    goto out;
  }
  EXPECT(r, info.state == TSTOR_BACKEND_DECLINED, "%s instead of declining%s%s",
         info.state == TSTOR_BACKEND_LOADED ? "loaded" : "failed", info.message[0] ? ": " : "",
         info.message);
  EXPECT(r, !conf_no_own_message(info.message),
         "declined without saying why (the message is the core's \"%s\")", info.message);
  for (int t = 0; t < tstor_device_type_count(ctx); t++)
    EXPECT(r, !conf_is_target_type(r, ctx, t), "device type '%s' stayed registered after declining",
           tstor_device_type_name(ctx, t));
  /* The rest of the context goes on working. */
  tstor_device host;
  TRY(r, tstor_device_parse(ctx, "cpu", &host), "finding the host device");
  TRY(r, tstor_storage_new(ctx, host, 64, &s), "allocating host memory after the decline");
  conf_notef(r, "%s", info.message);
out:
  tstor_storage_release(s);
  tstor_context_close(ctx);
  conf_end(r);
}
