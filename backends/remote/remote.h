/* The remote backend: tstor-remote.so (the client, client.h) and `tstor
 * serve` (the server, server.h and server_state.h), which share the protocol
 * and the transport. docs/remote.md describes the model and the threat model.
 *
 * The pieces, one file each. A file calls (or takes the address of) functions
 * of its own layer and the layers above it only, never of a later one, so no
 * two files call each other round in a circle (tests/layering.py checks this
 * in make check):
 *
 * layer 1: protocol.c auth.c wire.c failure.c serve_log.c region.c
 * layer 2: conn.c session.c
 * layer 3: peer.c gate.c
 * layer 4: xfer.c stream.c serve.c
 * layer 5: client.c
 *
 *   protocol.c   the messages: one header, an encoder and a decoder per type
 *                (protocol.h)
 *   auth.c       the shared secret's file, its HMACs and the nonces
 *   wire.c       addresses, sockets, and stream I/O whose every wait is
 *                bounded (wire.h)
 *   failure.c    client: errors that a stream worker reports later (failure.h)
 *   conn.c       client: a server's connection as a pipeline: requests and
 *                WRITE bytes through a send buffer, replies read as they
 *                come (client.h)
 *   peer.c       client: one server: its record, the handshake, the block
 *                table
 *   xfer.c       client: the bytes of copies, one span or a batch, each
 *                peer's spans pipelined on its connection
 *   stream.c     client: streams and events (stream.h)
 *   client.c     client: the device ops, the config keys, the entry point
 *   serve_log.c  server: its log, one line per event, from any thread
 *   region.c     server: a client's shared region (a sealed memfd) and the
 *                allocator of its blocks in it
 *   session.c    server: one authenticated client, its blocks and requests
 *   gate.c       server: connections before authentication
 *   serve.c      server: the start, the signals and the stop (server.h) */
#ifndef TSTOR_REMOTE_H
#define TSTOR_REMOTE_H
#endif
