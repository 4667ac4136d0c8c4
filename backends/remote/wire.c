/* Sockets and bounded stream I/O for the remote protocol (wire.h). */
#include "wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "protocol.h"

#define UNIX_PREFIX "unix:"

int tsr_addr_parse(const char *text, int numeric, tsr_addr *out, char *why, size_t why_size) {
  memset(out, 0, sizeof *out);
  snprintf(out->text, sizeof out->text, "%s", text);
  if (strncmp(text, UNIX_PREFIX, strlen(UNIX_PREFIX)) == 0) {
    const char *path = text + strlen(UNIX_PREFIX);
    struct sockaddr_un *un = (struct sockaddr_un *)&out->sa;
    if (path[0] == '\0' || strlen(path) >= sizeof un->sun_path) {
      snprintf(why, why_size, "%s: a Unix socket path of 1 to %zu bytes", text,
               sizeof un->sun_path - 1);
      return -1;
    }
    un->sun_family = AF_UNIX;
    memcpy(un->sun_path, path, strlen(path) + 1);
    out->len = (socklen_t)sizeof *un;
    return 0;
  }
  const char *colon = strrchr(text, ':');
  if (!colon) {
    snprintf(why, why_size, "%s: not HOST:PORT or unix:PATH", text);
    return -1;
  }
  char host[128];
  size_t n = (size_t)(colon - text);
  const char *h = text;
  if (n >= 2 && text[0] == '[' && colon[-1] == ']') { /* [::1]:13337 */
    h++;
    n -= 2;
  }
  if (n >= sizeof host) {
    snprintf(why, why_size, "%s: host name too long", text);
    return -1;
  }
  memcpy(host, h, n);
  host[n] = '\0';
  if (n == 0) snprintf(host, sizeof host, "127.0.0.1");
  char *end;
  errno = 0;
  unsigned long port = strtoul(colon + 1, &end, 10);
  if (colon[1] == '\0' || *end || errno || port == 0 || port > 65535) {
    snprintf(why, why_size, "%s: the port is not a number from 1 to 65535", text);
    return -1;
  }
  struct sockaddr_in *in = (struct sockaddr_in *)&out->sa;
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&out->sa;
  if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    in->sin_port = htons((uint16_t)port);
    out->len = (socklen_t)sizeof *in;
    return 0;
  }
  if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons((uint16_t)port);
    out->len = (socklen_t)sizeof *in6;
    return 0;
  }
  if (numeric) {
    snprintf(why, why_size, "%s: '%s' is not a numeric IPv4 or IPv6 address", text, host);
    return -1;
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *ai = NULL;
  int gai = getaddrinfo(host, NULL, &hints, &ai);
  if (gai != 0 || !ai || ai->ai_addrlen > sizeof out->sa) {
    snprintf(why, why_size, "%s: cannot resolve '%s': %s", text, host,
             gai ? gai_strerror(gai) : "no address");
    if (ai) freeaddrinfo(ai);
    return -1;
  }
  memcpy(&out->sa, ai->ai_addr, ai->ai_addrlen);
  out->len = ai->ai_addrlen;
  if (ai->ai_family == AF_INET)
    in->sin_port = htons((uint16_t)port);
  else
    in6->sin6_port = htons((uint16_t)port);
  freeaddrinfo(ai);
  return 0;
}

/* A socket of a's family, non-blocking and close-on-exec; TCP without
 * Nagle's delay, since every request waits for its reply. */
static int new_socket(const tsr_addr *a) {
  int fd = socket(a->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd >= 0 && a->sa.ss_family != AF_UNIX) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

/* Whether the Unix socket at path is one that nobody listens on. */
static int stale_unix_socket(const tsr_addr *a) {
  const struct sockaddr_un *un = (const struct sockaddr_un *)&a->sa;
  struct stat st;
  if (lstat(un->sun_path, &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  int refused = connect(fd, (const struct sockaddr *)&a->sa, a->len) != 0 && errno == ECONNREFUSED;
  close(fd);
  return refused;
}

int tsr_listen(const tsr_addr *a, char *why, size_t why_size) {
  int fd = new_socket(a);
  if (fd < 0) {
    snprintf(why, why_size, "cannot listen on %s: %s", a->text, strerror(errno));
    return -1;
  }
  int one = 1;
  if (a->sa.ss_family != AF_UNIX) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc = bind(fd, (const struct sockaddr *)&a->sa, a->len);
  if (rc != 0 && errno == EADDRINUSE && a->sa.ss_family == AF_UNIX && stale_unix_socket(a)) {
    unlink(((const struct sockaddr_un *)&a->sa)->sun_path);
    rc = bind(fd, (const struct sockaddr *)&a->sa, a->len);
  }
  if (rc != 0 || listen(fd, 128) != 0) {
    snprintf(why, why_size, "cannot listen on %s: %s", a->text, strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

/* Waits for fd to be ready for events; TSR_IO_TIMEOUT after idle_ms. */
static int wait_for(int fd, short events, int idle_ms) {
  struct pollfd p = {.fd = fd, .events = events};
  for (;;) {
    int n = poll(&p, 1, idle_ms);
    if (n > 0) return 0; /* readable, writable, or an error the next call reports */
    if (n == 0) return TSR_IO_TIMEOUT;
    if (errno != EINTR) return TSR_IO_ERROR;
  }
}

int tsr_connect(const tsr_addr *a, int idle_ms, char *why, size_t why_size) {
  int fd = new_socket(a);
  if (fd < 0) {
    snprintf(why, why_size, "cannot connect: %s", strerror(errno));
    return -1;
  }
  int rc = connect(fd, (const struct sockaddr *)&a->sa, a->len);
  /* A Unix socket whose backlog is full says EAGAIN and connects nothing:
   * ask again, a millisecond apart, for as long as a wait may last. */
  for (int waited = 0; rc != 0 && errno == EAGAIN && a->sa.ss_family == AF_UNIX &&
                       (idle_ms < 0 || waited < idle_ms);
       waited++) {
    usleep(1000);
    rc = connect(fd, (const struct sockaddr *)&a->sa, a->len);
  }
  if (rc != 0) {
    int err = errno;
    if (err == EINPROGRESS || (err == EAGAIN && a->sa.ss_family != AF_UNIX)) {
      socklen_t len = sizeof err;
      int w = wait_for(fd, POLLOUT, idle_ms);
      if (w == TSR_IO_TIMEOUT) {
        snprintf(why, why_size, "cannot connect: no answer within %d ms", idle_ms);
        close(fd);
        return -1;
      }
      if (w != 0)
        err = errno;
      else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    }
    if (err != 0) {
      snprintf(why, why_size, "cannot connect: %s", strerror(err));
      close(fd);
      return -1;
    }
  }
  return fd;
}

const char *tsr_io_text(int result, int idle_ms, char *buf, size_t size) {
  switch (result) {
    case TSR_IO_CLOSED: snprintf(buf, size, "connection closed by the peer"); break;
    case TSR_IO_TIMEOUT: snprintf(buf, size, "no progress within %d ms", idle_ms); break;
    default: snprintf(buf, size, "%s", strerror(errno));
  }
  return buf;
}

int tsr_send_all(int fd, struct iovec *iov, int iovcnt, int idle_ms) {
  while (iovcnt > 0) {
    if (iov->iov_len == 0) {
      iov++;
      iovcnt--;
      continue;
    }
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)iovcnt};
    ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        int w = wait_for(fd, POLLOUT, idle_ms);
        if (w) return w;
        continue;
      }
      return errno == EPIPE || errno == ECONNRESET ? TSR_IO_CLOSED : TSR_IO_ERROR;
    }
    for (size_t left = (size_t)n; left > 0;) {
      size_t step = left < iov->iov_len ? left : iov->iov_len;
      iov->iov_base = (uint8_t *)iov->iov_base + step;
      iov->iov_len -= step;
      left -= step;
      if (iov->iov_len == 0) {
        iov++;
        iovcnt--;
      }
    }
  }
  return 0;
}

int tsr_recv_all(int fd, void *buf, size_t n, int idle_ms) {
  uint8_t *p = buf;
  while (n > 0) {
    ssize_t got = recv(fd, p, n, 0);
    if (got > 0) {
      p += got;
      n -= (size_t)got;
      continue;
    }
    if (got == 0) return TSR_IO_CLOSED;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return errno == ECONNRESET ? TSR_IO_CLOSED : TSR_IO_ERROR;
    int w = wait_for(fd, POLLIN, idle_ms);
    if (w) return w;
  }
  return 0;
}

int tsr_recv_discard(int fd, uint64_t n, int idle_ms) {
  uint8_t sink[65536];
  while (n > 0) {
    size_t step = n < sizeof sink ? (size_t)n : sizeof sink;
    int rc = tsr_recv_all(fd, sink, step, idle_ms);
    if (rc) return rc;
    n -= step;
  }
  return 0;
}

int tsr_send_fd(int fd, const void *buf, size_t n, int passed, int idle_ms) {
  union {
    struct cmsghdr align;
    char bytes[CMSG_SPACE(sizeof(int))];
  } control;
  memset(&control, 0, sizeof control);
  struct iovec iov = {(void *)buf, n};
  struct msghdr mh = {.msg_iov = &iov,
                      .msg_iovlen = 1,
                      .msg_control = control.bytes,
                      .msg_controllen = sizeof control.bytes};
  struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &passed, sizeof passed);
  for (;;) { /* the first byte carries the descriptor; the rest may follow */
    ssize_t k = sendmsg(fd, &mh, MSG_NOSIGNAL);
    if (k > 0) {
      struct iovec rest = {(uint8_t *)buf + k, n - (size_t)k};
      return tsr_send_all(fd, &rest, 1, idle_ms);
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int w = wait_for(fd, POLLOUT, idle_ms);
      if (w) return w;
      continue;
    }
    return k < 0 && (errno == EPIPE || errno == ECONNRESET) ? TSR_IO_CLOSED : TSR_IO_ERROR;
  }
}

/* Ends tsr_recv_fd with a failure: a descriptor that came is not kept. */
static int recv_fd_failed(int rc, int *passed) {
  if (*passed >= 0) close(*passed);
  *passed = -1;
  return rc;
}

int tsr_recv_fd(int fd, void *buf, size_t n, int idle_ms, int *passed) {
  *passed = -1;
  uint8_t *p = buf;
  while (n > 0) {
    union {
      struct cmsghdr align;
      char bytes[CMSG_SPACE(4 * sizeof(int))];
    } control;
    struct iovec iov = {p, n};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = control.bytes,
                        .msg_controllen = sizeof control.bytes};
    ssize_t got = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    for (struct cmsghdr *c = got > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; i++) {
        int one;
        memcpy(&one, CMSG_DATA(c) + i * sizeof(int), sizeof one);
        if (*passed < 0)
          *passed = one;
        else
          close(one);
      }
    }
    if (got > 0) {
      p += got;
      n -= (size_t)got;
      continue;
    }
    if (got == 0) return recv_fd_failed(TSR_IO_CLOSED, passed);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return recv_fd_failed(errno == ECONNRESET ? TSR_IO_CLOSED : TSR_IO_ERROR, passed);
    int w = wait_for(fd, POLLIN, idle_ms);
    if (w) return recv_fd_failed(w, passed);
  }
  return 0;
}

int tsr_wait_readable(int fd, int idle_ms) { return wait_for(fd, POLLIN, idle_ms); }

int tsr_inbuf_fill(int fd, tsr_inbuf *b) {
  if (b->start > 0) { /* what is left is less than a message or a READ's bytes */
    memmove(b->data, b->data + b->start, b->end - b->start);
    b->end -= b->start;
    b->start = 0;
  }
  for (;;) {
    ssize_t got = recv(fd, b->data + b->end, b->cap - b->end, 0);
    if (got > 0) {
      b->end += (size_t)got;
      return (int)got;
    }
    if (got == 0) return TSR_IO_CLOSED;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return errno == ECONNRESET ? TSR_IO_CLOSED : TSR_IO_ERROR;
  }
}

int tsr_inbuf_message(tsr_inbuf *b, uint32_t max_body, const uint8_t **msg, size_t *len, char *why,
                      size_t why_size) {
  size_t have = b->end - b->start;
  if (have < TSR_HEADER_SIZE) return 0;
  uint32_t body;
  if (tsr_frame(b->data + b->start, max_body, &body, why, why_size) != 0) return -1;
  if (have < TSR_HEADER_SIZE + (size_t)body) {
    /* The rest will come: make room for it at the front when the end is near. */
    if (b->cap - b->start < TSR_HEADER_SIZE + (size_t)body) {
      memmove(b->data, b->data + b->start, have);
      b->start = 0;
      b->end = have;
    }
    return 0;
  }
  *msg = b->data + b->start;
  *len = TSR_HEADER_SIZE + body;
  b->start += *len;
  return 1;
}

size_t tsr_inbuf_take(tsr_inbuf *b, void *dst, size_t n) {
  size_t have = b->end - b->start;
  if (n > have) n = have;
  if (dst && n) memcpy(dst, b->data + b->start, n);
  b->start += n;
  return n;
}

int tsr_inbuf_recv_all(int fd, tsr_inbuf *b, void *dst, uint64_t n, int idle_ms) {
  size_t took = tsr_inbuf_take(b, dst, n < SIZE_MAX ? (size_t)n : SIZE_MAX);
  if (dst) return tsr_recv_all(fd, (uint8_t *)dst + took, (size_t)(n - took), idle_ms);
  return tsr_recv_discard(fd, n - took, idle_ms);
}
