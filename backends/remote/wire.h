/* The stream transport under the remote protocol, shared by the client and
 * the server: addresses, listening and connecting sockets, and whole-message
 * and whole-payload I/O that waits with a bound.
 *
 * Every socket is non-blocking and close-on-exec; waiting is poll()'s, so
 * every wait has a limit: `idle_ms` is how long one wait for the peer may
 * last without a byte moving (-1: no limit). A transfer that keeps moving
 * never times out, one that stalls fails after idle_ms. Nothing here raises
 * SIGPIPE: a peer that hung up is an error code. */
#ifndef TSTOR_REMOTE_WIRE_H
#define TSTOR_REMOTE_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* An address to listen on or connect to: "HOST:PORT", "[V6]:PORT", ":PORT"
 * (the loopback address) or "unix:PATH". */
typedef struct tsr_addr {
  struct sockaddr_storage sa;
  socklen_t len;
  char text[160]; /* as written, for messages */
} tsr_addr;

/* Parses text into *out. numeric: the host must be a numeric IPv4 or IPv6
 * address (the server's rule); otherwise names are resolved (the first
 * address getaddrinfo gives). 0, or -1 with a reason in why. */
int tsr_addr_parse(const char *text, int numeric, tsr_addr *out, char *why, size_t why_size);

/* A listening socket on a. A Unix socket's path must not exist, unless it is
 * a socket nobody listens on (one left by a server that died), which is
 * replaced; TCP ports are reusable at once after a server that died. Returns
 * the descriptor, or -1 with a reason. */
int tsr_listen(const tsr_addr *a, char *why, size_t why_size);

/* Connects to a within idle_ms. Returns the descriptor, or -1 with a reason. */
int tsr_connect(const tsr_addr *a, int idle_ms, char *why, size_t why_size);

/* Results of the I/O calls: 0, or one of these (errno kept for ERROR). */
enum { TSR_IO_CLOSED = -1, TSR_IO_TIMEOUT = -2, TSR_IO_ERROR = -3 };

/* "connection closed by the peer", "no progress within 5000 ms", or errno's
 * text, for a result of the calls below. */
const char *tsr_io_text(int result, int idle_ms, char *buf, size_t size);

/* Sends every byte of iov[0..iovcnt) (the array is consumed). */
int tsr_send_all(int fd, struct iovec *iov, int iovcnt, int idle_ms);
/* Receives exactly n bytes into buf. */
int tsr_recv_all(int fd, void *buf, size_t n, int idle_ms);
/* Receives and drops n bytes. */
int tsr_recv_discard(int fd, uint64_t n, int idle_ms);

/* Descriptor passing on a Unix socket (SCM_RIGHTS). tsr_send_fd sends the n
 * bytes of buf with the descriptor `passed` attached (the caller keeps its
 * own). tsr_recv_fd receives exactly n bytes and puts the descriptor that
 * came with them in *passed (close-on-exec; -1 when none came; any more than
 * one are closed). */
int tsr_send_fd(int fd, const void *buf, size_t n, int passed, int idle_ms);
int tsr_recv_fd(int fd, void *buf, size_t n, int idle_ms, int *passed);

/* Waits until fd is readable, at most idle_ms (-1: no limit): 0 or a
 * TSR_IO_* result. */
int tsr_wait_readable(int fd, int idle_ms);

/* A receive buffer: what recv brought and nobody used yet, so that a train of
 * small messages costs one recv for many instead of two each. Unread bytes
 * are data[start..end). */
typedef struct tsr_inbuf {
  uint8_t *data;
  size_t cap, start, end;
} tsr_inbuf;

/* One recv of what the socket has, without waiting, into the free space
 * (moving the unread bytes to the front first). Returns the bytes read, 0
 * when there were none, or a TSR_IO_* result. */
int tsr_inbuf_fill(int fd, tsr_inbuf *b);
/* The next whole message in the buffer, framed with tsr_frame against
 * max_body: 1 with *msg and *len set and the message consumed (its bytes stay
 * valid until the next tsr_inbuf_fill); 0 when it has not all arrived; -1
 * when its header cannot be framed (why says so). */
int tsr_inbuf_message(tsr_inbuf *b, uint32_t max_body, const uint8_t **msg, size_t *len, char *why,
                      size_t why_size);
/* Moves up to n buffered bytes into dst (NULL: drops them); returns how many. */
size_t tsr_inbuf_take(tsr_inbuf *b, void *dst, size_t n);
/* Receives exactly n bytes into dst: the buffered ones, then straight from the
 * socket, each wait at most idle_ms. dst NULL drops them. */
int tsr_inbuf_recv_all(int fd, tsr_inbuf *b, void *dst, uint64_t n, int idle_ms);

#endif
