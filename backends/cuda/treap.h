/* An intrusive ordered set (a treap) for the cuda backend's allocators: free
 * blocks by (size, address) for best-fit search, pinned blocks by address to
 * find the block a pointer falls in. Nodes live inside the caller's structs;
 * the set allocates nothing and so never fails. Not thread-safe: the owner
 * holds its own lock. */
#ifndef TSTOR_CUDA_TREAP_H
#define TSTOR_CUDA_TREAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct tstor__treap_node {
  struct tstor__treap_node *left, *right;
  uint64_t key1, key2; /* ordered by key1, then key2; each (key1, key2) unique */
  uint32_t priority;   /* a hash of the keys: a heap over it keeps the tree balanced */
} tstor__treap_node;

/* Sets the node's keys; call before inserting, never while it is in a set. */
void tstor__treap_init(tstor__treap_node *node, uint64_t key1, uint64_t key2);
/* Adds a node whose keys are not in the set yet. */
void tstor__treap_insert(tstor__treap_node **root, tstor__treap_node *node);
/* Removes a node that is in the set. */
void tstor__treap_erase(tstor__treap_node **root, tstor__treap_node *node);
/* The smallest node >= (key1, key2), or NULL. */
tstor__treap_node *tstor__treap_ceil(tstor__treap_node *root, uint64_t key1, uint64_t key2);
/* The largest node <= (key1, key2), or NULL. */
tstor__treap_node *tstor__treap_floor(tstor__treap_node *root, uint64_t key1, uint64_t key2);
/* The smallest node, or NULL. */
tstor__treap_node *tstor__treap_first(tstor__treap_node *root);

/* The struct a node is embedded in. */
#define TSTOR__TREAP_ENTRY(node, type, member) \
  ((type *)(void *)((char *)(node)-offsetof(type, member)))

#endif
