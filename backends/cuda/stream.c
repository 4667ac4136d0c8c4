/* Streams and events of the cuda backend, and device-wide synchronize.
 *
 * Streams are created non-blocking, as PyTorch's are: they do not wait for the
 * legacy default stream, which the core's synchronous calls (stream NULL) use. */
#include <stdlib.h>

#include "cuda_backend.h"

int tstor__cuda_synchronize(void *state, int index) {
  tstor__cuda *cu = state;
  tstor__cuda_guard g;
  int rc = tstor__cuda_enter(cu, index, &g);
  if (rc) return rc;
  cudaError_t e = cudaDeviceSynchronize();
  tstor__cuda_leave(cu, &g);
  return e == cudaSuccess ? 0 : tstor__cuda_fail(cu, e, "cuda:%d: synchronize", index);
}

int tstor__cuda_stream_create(void *state, int index, void **out) {
  tstor__cuda *cu = state;
  tstor__cuda_stream *s = calloc(1, sizeof *s);
  if (!s) return cu->reg->set_error(TSTOR_ENOMEM, "cuda:%d: no memory for a stream", index);
  tstor__cuda_guard g;
  int rc = tstor__cuda_enter(cu, index, &g);
  if (rc) {
    free(s);
    return rc;
  }
  cudaError_t e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
  tstor__cuda_leave(cu, &g);
  if (e != cudaSuccess) {
    free(s);
    return tstor__cuda_fail(cu, e, "cuda:%d: cannot create a stream", index);
  }
  s->device = index;
  *out = s;
  return 0;
}

void tstor__cuda_stream_destroy(void *state, int index, void *stream) {
  tstor__cuda *cu = state;
  tstor__cuda_stream *s = stream;
  (void)index;
  if (!s) return;
  tstor__cuda_guard g;
  int entered = tstor__cuda_enter(cu, s->device, &g) == 0;
  /* The allocators may reuse what the stream owned once its work is done;
   * any cache may know it (record_stream of another device's block). */
  if (cudaStreamSynchronize(s->stream) != cudaSuccess) cudaGetLastError();
  for (int i = 0; i < cu->ndev; i++) tstor__cache_forget_stream(cu->devices[i].cache, s);
  if (cu->pinned) tstor__hostcache_forget_stream(cu->pinned, s);
  if (cudaStreamDestroy(s->stream) != cudaSuccess) cudaGetLastError();
  if (entered) tstor__cuda_leave(cu, &g);
  free(s);
}

int tstor__cuda_stream_synchronize(void *state, int index, void *stream) {
  tstor__cuda *cu = state;
  int device = tstor__cuda_stream_device(stream, index);
  tstor__cuda_guard g;
  int rc = tstor__cuda_enter(cu, device, &g);
  if (rc) return rc;
  cudaError_t e = cudaStreamSynchronize(tstor__cuda_stream_of(stream));
  tstor__cuda_leave(cu, &g);
  return e == cudaSuccess ? 0 : tstor__cuda_fail(cu, e, "cuda:%d: stream synchronize", device);
}

int tstor__cuda_stream_wait_event(void *state, int index, void *stream, void *event) {
  tstor__cuda *cu = state;
  tstor__cuda_event *ev = event;
  int device = tstor__cuda_stream_device(stream, index);
  tstor__cuda_guard g;
  int rc = tstor__cuda_enter(cu, device, &g);
  if (rc) return rc;
  /* The event may belong to another device: CUDA orders across devices. */
  cudaError_t e = cudaStreamWaitEvent(tstor__cuda_stream_of(stream), ev->event, 0);
  tstor__cuda_leave(cu, &g);
  return e == cudaSuccess ? 0 : tstor__cuda_fail(cu, e, "cuda:%d: stream wait", device);
}

int tstor__cuda_event_create(void *state, int index, void **out) {
  tstor__cuda *cu = state;
  tstor__cuda_event *ev = calloc(1, sizeof *ev);
  if (!ev) return cu->reg->set_error(TSTOR_ENOMEM, "cuda:%d: no memory for an event", index);
  tstor__cuda_guard g;
  int rc = tstor__cuda_enter(cu, index, &g);
  if (rc) {
    free(ev);
    return rc;
  }
  cudaError_t e = cudaEventCreateWithFlags(&ev->event, cudaEventDisableTiming);
  tstor__cuda_leave(cu, &g);
  if (e != cudaSuccess) {
    free(ev);
    return tstor__cuda_fail(cu, e, "cuda:%d: cannot create an event", index);
  }
  ev->device = index;
  *out = ev;
  return 0;
}

void tstor__cuda_event_destroy(void *state, int index, void *event) {
  tstor__cuda *cu = state;
  tstor__cuda_event *ev = event;
  (void)index;
  if (!ev) return;
  tstor__cuda_guard g;
  int entered = tstor__cuda_enter(cu, ev->device, &g) == 0;
  if (cudaEventDestroy(ev->event) != cudaSuccess) cudaGetLastError();
  if (entered) tstor__cuda_leave(cu, &g);
  free(ev);
}

int tstor__cuda_event_record(void *state, int index, void *event, void *stream) {
  tstor__cuda *cu = state;
  tstor__cuda_event *ev = event;
  (void)index;
  int device = tstor__cuda_stream_device(stream, ev->device);
  if (device != ev->device)
    return cu->reg->set_error(TSTOR_EINVAL,
                              "cuda: an event of cuda:%d cannot be recorded on a stream of "
                              "cuda:%d",
                              ev->device, device);
  tstor__cuda_guard g;
  int rc = tstor__cuda_enter(cu, device, &g);
  if (rc) return rc;
  cudaError_t e = cudaEventRecord(ev->event, tstor__cuda_stream_of(stream));
  tstor__cuda_leave(cu, &g);
  return e == cudaSuccess ? 0 : tstor__cuda_fail(cu, e, "cuda:%d: event record", device);
}

int tstor__cuda_event_query(void *state, int index, void *event) {
  tstor__cuda *cu = state;
  tstor__cuda_event *ev = event;
  (void)index;
  cudaError_t e = cudaEventQuery(ev->event);
  if (e == cudaSuccess) return 0;
  if (e == cudaErrorNotReady) {
    cudaGetLastError();
    return TSTOR_EAGAIN;
  }
  return tstor__cuda_fail(cu, e, "cuda:%d: event query", ev->device);
}

int tstor__cuda_event_synchronize(void *state, int index, void *event) {
  tstor__cuda *cu = state;
  tstor__cuda_event *ev = event;
  (void)index;
  cudaError_t e = cudaEventSynchronize(ev->event);
  return e == cudaSuccess ? 0 : tstor__cuda_fail(cu, e, "cuda:%d: event synchronize", ev->device);
}
