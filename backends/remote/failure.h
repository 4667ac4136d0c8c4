/* Errors of the remote client that a stream worker reports later.
 *
 * A backend op describes a failure with reg->set_error(), which fills the
 * calling thread's tstor_last_error(). Work queued on a stream runs on the
 * stream's own thread, and its failure is reported by the caller's next
 * stream_synchronize, on another thread: so every failure of the client goes
 * through remote_fail, which also keeps the text in a thread-local buffer the
 * stream worker can read back. */
#ifndef TSTOR_REMOTE_FAILURE_H
#define TSTOR_REMOTE_FAILURE_H

#include <sys/types.h>
#include <tstor/backend.h>

/* Formats the message, keeps it for remote_failure_text() on this thread, and
 * hands it to reg->set_error. Returns code. */
int remote_fail(const tstor_registrar *reg, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* 0 in the process that loaded the module (`loader`); in a child of fork(),
 * TSTOR_EBACKEND with a message saying what to do instead of `what` on
 * remote:index: the child shares none of the parent's connections or threads. */
int remote_check_process(const tstor_registrar *reg, pid_t loader, int index, const char *what);

/* getpid(), without a system call each time: remote_pid_watch (at load,
 * before the module's first fork can matter) installs the fork handler that
 * makes a child ask the system again. */
void remote_pid_watch(void);
pid_t remote_getpid(void);

/* The last message remote_fail formatted on this thread ("" before any);
 * valid until the thread's next remote_fail. */
const char *remote_failure_text(void);

/* Forgets it, so that a failure without a message is not read as an old one. */
void remote_failure_clear(void);

#endif
