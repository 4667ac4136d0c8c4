/* Treap: a binary search tree on the keys that is also a heap on a priority
 * derived from them, which keeps the expected depth logarithmic without any
 * rebalancing bookkeeping. Recursion depth is that expected depth. */
#include "treap.h"

static int key_less(uint64_t a1, uint64_t a2, uint64_t b1, uint64_t b2) {
  return a1 < b1 || (a1 == b1 && a2 < b2);
}

void tstor__treap_init(tstor__treap_node *node, uint64_t key1, uint64_t key2) {
  node->left = node->right = NULL;
  node->key1 = key1;
  node->key2 = key2;
  /* Fibonacci hashing of the keys: blocks arrive in address and size order,
   * so the priority must not follow that order. */
  uint64_t h = (key1 ^ (key2 * 0x9e3779b97f4a7c15ull)) * 0xbf58476d1ce4e5b9ull;
  h ^= h >> 31;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 29;
  node->priority = (uint32_t)(h >> 32);
}

static tstor__treap_node *rotate_right(tstor__treap_node *n) {
  tstor__treap_node *l = n->left;
  n->left = l->right;
  l->right = n;
  return l;
}

static tstor__treap_node *rotate_left(tstor__treap_node *n) {
  tstor__treap_node *r = n->right;
  n->right = r->left;
  r->left = n;
  return r;
}

static tstor__treap_node *insert(tstor__treap_node *root, tstor__treap_node *node) {
  if (!root) return node;
  if (key_less(node->key1, node->key2, root->key1, root->key2)) {
    root->left = insert(root->left, node);
    if (root->left->priority > root->priority) root = rotate_right(root);
  } else {
    root->right = insert(root->right, node);
    if (root->right->priority > root->priority) root = rotate_left(root);
  }
  return root;
}

void tstor__treap_insert(tstor__treap_node **root, tstor__treap_node *node) {
  node->left = node->right = NULL;
  *root = insert(*root, node);
}

/* Joins two treaps where every key of a is below every key of b. */
static tstor__treap_node *merge(tstor__treap_node *a, tstor__treap_node *b) {
  if (!a) return b;
  if (!b) return a;
  if (a->priority > b->priority) {
    a->right = merge(a->right, b);
    return a;
  }
  b->left = merge(a, b->left);
  return b;
}

static tstor__treap_node *erase(tstor__treap_node *root, tstor__treap_node *node) {
  if (!root) return NULL; /* not in the set: a caller bug, left harmless */
  if (root == node) return merge(root->left, root->right);
  if (key_less(node->key1, node->key2, root->key1, root->key2))
    root->left = erase(root->left, node);
  else
    root->right = erase(root->right, node);
  return root;
}

void tstor__treap_erase(tstor__treap_node **root, tstor__treap_node *node) {
  *root = erase(*root, node);
  node->left = node->right = NULL;
}

tstor__treap_node *tstor__treap_ceil(tstor__treap_node *root, uint64_t key1, uint64_t key2) {
  tstor__treap_node *best = NULL;
  while (root) {
    if (key_less(root->key1, root->key2, key1, key2)) {
      root = root->right;
    } else {
      best = root;
      root = root->left;
    }
  }
  return best;
}

tstor__treap_node *tstor__treap_floor(tstor__treap_node *root, uint64_t key1, uint64_t key2) {
  tstor__treap_node *best = NULL;
  while (root) {
    if (key_less(key1, key2, root->key1, root->key2)) {
      root = root->left;
    } else {
      best = root;
      root = root->right;
    }
  }
  return best;
}

tstor__treap_node *tstor__treap_first(tstor__treap_node *root) {
  if (!root) return NULL;
  while (root->left) root = root->left;
  return root;
}
