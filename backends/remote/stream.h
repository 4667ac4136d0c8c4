/* Streams and events of the remote devices.
 *
 * A stream is a FIFO of jobs run in order by its own worker thread, as the
 * hpu-stub backend runs its queues; the caller returns once a job is queued.
 * A job is one of the client's synchronous operations (a put, a get, a fill, a
 * copy within a peer, a strided copy) with its arguments copied in, so the
 * worker sends the peer its requests exactly as a synchronous call does,
 * under the peer's lock. Queued work thus overlaps the caller's own work and
 * other peers' transfers; two streams on one peer share its connection and
 * take turns.
 *
 * A job that fails stops the stream: the jobs queued after it are skipped, not
 * run on top of a failed one, and the first failure (its code and text, and
 * how many jobs were skipped) is reported by the next stream_synchronize, which
 * then clears it, and by every event recorded after the failed job.
 *
 * An event is a point on a stream's timeline (the count of jobs queued when it
 * was recorded); it keeps the timeline alive after its stream is gone. */
#ifndef TSTOR_REMOTE_STREAM_H
#define TSTOR_REMOTE_STREAM_H

#include <stddef.h>
#include <tstor/backend.h>

typedef struct rstream rstream;
typedef struct rstreams rstreams; /* every stream of the module */

/* A synchronous operation of the client, run on the worker thread with the
 * module's state and the job's copy of its arguments. 0 or a TSTOR_E* code
 * whose text remote_fail kept. */
typedef int (*rjob_fn)(void *state, const void *args);

/* The module's set of streams. NULL on out-of-memory. */
rstreams *rstreams_new(const tstor_registrar *reg, void *state);
/* Frees the set; its streams are destroyed already (the core destroys every
 * stream before it unloads a module). */
void rstreams_free(rstreams *set);

/* Waits until every job queued so far on the streams of device `index` (-1:
 * of every device) has run. Returns the first stream failure not yet
 * reported on those streams (without clearing it), else 0. Not in a fork
 * child, where no worker runs. */
int rstreams_wait(rstreams *set, int index);

/* The ops of tstor_device_ops, for device `index` of the module. */
int rstream_create(rstreams *set, int index, void **out);
void rstream_destroy(rstreams *set, void *stream);
int rstream_synchronize(rstreams *set, void *stream);
int rstream_wait_event(rstreams *set, void *stream, void *event);
int rstream_event_create(rstreams *set, int index, void **out);
void rstream_event_destroy(rstreams *set, void *event);
int rstream_event_record(rstreams *set, void *event, void *stream);
int rstream_event_query(rstreams *set, void *event);
int rstream_event_synchronize(rstreams *set, void *event);

/* Queues run(state, copy of args[0..args_size)) on the stream. 0, or
 * TSTOR_ENOMEM with nothing queued. */
int rstream_enqueue(void *stream, rjob_fn run, const void *args, size_t args_size);

#endif
