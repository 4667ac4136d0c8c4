/* libFuzzer target: the remote protocol's decoder (backends/remote/protocol.c),
 * which `tstor serve` runs on every request before anything else.
 *
 * Structure-aware: the first input byte picks how the rest is used.
 *   0..127  raw bytes, decoded as a request and as a reply
 *   128..   a header that passes the magic, version and length checks, for
 *           the type in the low bits (request or reply by bit 6), with the
 *           rest as its body: the fuzzer reaches each type's field checks at
 *           once
 * Whatever decodes must hold its invariants (lengths within their bounds,
 * strings terminated), and a request that decodes must re-encode to the very
 * same bytes with the encoders the client uses: the decoder accepts exactly
 * what the encoders write. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"

static uint8_t msg[TSR_MAX_MESSAGE + 64];
static uint8_t again[TSR_MAX_MESSAGE + 64];

static void require(int cond, const char *what) {
  if (cond) return;
  fprintf(stderr, "fuzz_remote_msg: %s\n", what);
  abort();
}

static void check_decoded(const tsr_msg *m, int is_reply) {
  require(m->version == TSR_PROTO_VERSION, "version");
  require(tsr_type_known(m->type) || (is_reply && m->status != 0), "type");
  require(strlen(m->text) <= TSR_MAX_TEXT, "text");
  require(m->ndevices <= TSR_MAX_DEVICES, "ndevices");
  require(m->ndim <= TSR_MAX_DIMS, "ndim");
  for (uint32_t d = 0; d < m->ndim; d++)
    require(m->sizes[d] >= 0 && m->dst_strides[d] >= 0 && m->src_strides[d] >= 0, "negative");
  for (uint32_t i = 0; i < m->ndevices; i++)
    require(memchr(m->devices[i].name, '\0', TSR_DEVICE_NAME_SIZE) != NULL, "device name");
}

/* The encoders' bytes for a decoded request (its id kept). */
static size_t reencode(const tsr_msg *m) {
  switch (m->type) {
    case TSR_HELLO:
      return tsr_encode_hello(again, m->id, m->abi, m->nonce);
    case TSR_AUTH:
      return tsr_encode_auth(again, m->id, m->mac);
    case TSR_ALLOC:
      return tsr_encode_alloc(again, m->id, m->device, m->nbytes);
    case TSR_FREE:
      return tsr_encode_free(again, m->id, m->handle);
    case TSR_COPY:
      return tsr_encode_copy(again, m->id, m->handle, m->offset, m->src_handle, m->src_offset,
                             m->nbytes);
    case TSR_FILL:
      return tsr_encode_fill(again, m->id, m->handle, m->offset, m->nbytes, m->pattern_size,
                             m->pattern);
    case TSR_STATS:
      return tsr_encode_stats(again, m->id, m->device);
    case TSR_BYE:
      return tsr_encode_bye(again, m->id);
    case TSR_WRITE:
    case TSR_READ:
      return tsr_encode_transfer(again, m->type, m->id, m->handle, m->offset, m->nbytes);
    case TSR_SHM: return tsr_encode_shm(again, m->id);
    case TSR_COPY_STRIDED:
      return tsr_encode_copy_strided(again, m->id, m->handle, m->offset, m->src_handle,
                                     m->src_offset, m->element_size, (int)m->ndim, m->sizes,
                                     m->dst_strides, m->src_strides);
  }
  require(0, "a request of an unknown type decoded");
  return 0;
}

static void decode_both(const uint8_t *data, size_t size) {
  tsr_msg m;
  char why[256];
  uint32_t body;
  if (size >= TSR_HEADER_SIZE && tsr_frame(data, TSR_MAX_BODY, &body, why, sizeof why) == 0)
    require(body <= TSR_MAX_BODY, "framed past the bound");
  if (tsr_decode(data, size, 0, &m, why, sizeof why) == 0) {
    check_decoded(&m, 0);
    size_t n = reencode(&m);
    require(n == size && memcmp(again, data, size) == 0, "re-encoding differs");
  } else {
    require(memchr(why, '\0', sizeof why) != NULL && why[0] != '\0', "no reason given");
  }
  if (tsr_decode(data, size, 1, &m, why, sizeof why) == 0) check_decoded(&m, 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0 || size > sizeof msg - TSR_HEADER_SIZE) return 0;
  uint8_t sel = data[0];
  if (sel < 128) {
    memcpy(msg, data + 1, size - 1);
    decode_both(msg, size - 1);
    return 0;
  }
  /* magic, version, type (bit 6: a reply), the body's length, id 0, status
   * from the next byte */
  int type = (sel & 0x0f) | ((sel & 0x40) ? TSR_REPLY : 0);
  uint32_t status = size > 1 && (sel & 0x20) ? data[1] % 16 : 0;
  size_t body = size - 1;
  uint8_t h[TSR_HEADER_SIZE] = {0x54, 0x53, 0x52, 0x4d, (uint8_t)TSR_PROTO_VERSION, 0,
                                (uint8_t)type, 0, (uint8_t)body, (uint8_t)(body >> 8),
                                0, 0, 0, 0, 0, 0, (uint8_t)status, 0, 0, 0};
  memcpy(msg, h, sizeof h);
  memcpy(msg + TSR_HEADER_SIZE, data + 1, body);
  decode_both(msg, TSR_HEADER_SIZE + body);
  return 0;
}
