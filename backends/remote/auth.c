/* The shared secret and the challenge-response of the hello (protocol.h):
 * HMAC-SHA256 and random nonces from OpenSSL's libcrypto, secret files that
 * only their owner may read. The secret itself never crosses the wire. */
#include "protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#define SECRET_MIN 16
#define SECRET_MAX 4096

int tsr_mac(const uint8_t *secret, size_t secret_len, const char *label, const uint8_t *first,
            const uint8_t *second, uint8_t *mac_out) {
  /* label NUL-terminated, then the two nonces: one unambiguous message. */
  uint8_t msg[16 + 2 * TSR_NONCE_SIZE];
  size_t n = strlen(label) + 1;
  if (n > 16) return -1;
  memcpy(msg, label, n);
  memcpy(msg + n, first, TSR_NONCE_SIZE);
  memcpy(msg + n + TSR_NONCE_SIZE, second, TSR_NONCE_SIZE);
  unsigned int out_len = 0;
  if (HMAC(EVP_sha256(), secret, (int)secret_len, msg, n + 2 * TSR_NONCE_SIZE, mac_out,
           &out_len) == NULL ||
      out_len != TSR_MAC_SIZE)
    return -1;
  return 0;
}

int tsr_mac_equal(const uint8_t *a, const uint8_t *b) {
  return CRYPTO_memcmp(a, b, TSR_MAC_SIZE) == 0;
}

int tsr_random(uint8_t *buf, size_t n) { return RAND_bytes(buf, (int)n) == 1 ? 0 : -1; }

void tsr_secret_free(uint8_t *secret, size_t len) {
  if (!secret) return;
  OPENSSL_cleanse(secret, len);
  free(secret);
}

int tsr_secret_read(const char *path, uint8_t **secret, size_t *len, char *why,
                    size_t why_size) {
  *secret = NULL;
  *len = 0;
  /* O_NONBLOCK: opening a FIFO for reading would wait for a writer, and a
   * device's open may wait too; regular files ignore the flag. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    snprintf(why, why_size, "secret file %s: %s", path, strerror(errno));
    return -1;
  }
  struct stat st;
  uint8_t *buf = NULL;
  if (fstat(fd, &st) != 0) {
    snprintf(why, why_size, "secret file %s: %s", path, strerror(errno));
    goto fail;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(why, why_size, "secret file %s: not a regular file (%s)", path,
             S_ISFIFO(st.st_mode)  ? "a FIFO"
             : S_ISDIR(st.st_mode) ? "a directory"
             : S_ISSOCK(st.st_mode) ? "a socket"
                                   : "a device");
    goto fail;
  }
  if (st.st_uid != geteuid()) {
    snprintf(why, why_size, "secret file %s: owned by uid %u, not by this user (%u)", path,
             (unsigned)st.st_uid, (unsigned)geteuid());
    goto fail;
  }
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    snprintf(why, why_size,
             "secret file %s: mode %04o lets others read or write it (chmod 600 it)", path,
             (unsigned)(st.st_mode & 07777));
    goto fail;
  }
  if (st.st_size < SECRET_MIN || st.st_size > SECRET_MAX + 1) {
    snprintf(why, why_size, "secret file %s: %lld bytes; a secret is %d to %d bytes", path,
             (long long)st.st_size, SECRET_MIN, SECRET_MAX);
    goto fail;
  }
  buf = malloc((size_t)st.st_size);
  if (!buf) {
    snprintf(why, why_size, "secret file %s: out of memory", path);
    goto fail;
  }
  size_t got = 0;
  while (got < (size_t)st.st_size) {
    ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      snprintf(why, why_size, "secret file %s: %s", path, r < 0 ? strerror(errno) : "cut short");
      goto fail;
    }
    got += (size_t)r;
  }
  if (got && buf[got - 1] == '\n') got--;
  if (got && buf[got - 1] == '\r') got--;
  if (got < SECRET_MIN || got > SECRET_MAX) {
    snprintf(why, why_size, "secret file %s: %zu bytes; a secret is %d to %d bytes", path, got,
             SECRET_MIN, SECRET_MAX);
    goto fail;
  }
  close(fd);
  *secret = buf;
  *len = got;
  return 0;
fail:
  tsr_secret_free(buf, buf ? (size_t)st.st_size : 0);
  close(fd);
  return -1;
}
