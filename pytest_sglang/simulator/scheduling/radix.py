"""Radix prefix cache over token ids, with an optional host tier (SGLang's HiCache, simplified).

Nodes hold runs of token ids (radix-tree edges). A node is either on the ``device`` (GPU KV pool) or
on the ``host`` (HiCache pool). Device nodes form a prefix-closed subtree: evicting a device leaf moves
it to the host tier when HiCache is on (write-through means its copy is already there) or deletes it.
A hit on host nodes loads them back to the device and is reported as ``cached_tokens_details.host``.
Running requests lock their matched path so it is never evicted under them.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass

DEVICE = "device"
HOST = "host"


class Node:
    __slots__ = ("children", "key", "last_used", "lock", "parent", "tier")

    def __init__(self, key: tuple[int, ...], parent: Node | None, tier: str) -> None:
        self.key = key
        self.children: dict[int, Node] = {}
        self.parent = parent
        self.tier = tier
        self.last_used = time.monotonic()
        self.lock = 0


@dataclass
class Match:
    device: int
    host: int
    node: Node  # deepest matched node (after any split)


class RadixCache:
    """Device + host token cache. ``device_tokens``/``host_tokens`` are the cached token counts."""

    def __init__(self, host_capacity: int = 0) -> None:
        self.root = Node((), None, DEVICE)
        self.root.lock = 1  # never evicted
        self.host_capacity = host_capacity
        self.device_tokens = 0
        self.host_tokens = 0
        self.locked_tokens = 0
        self.evicted_tokens = 0
        self.loaded_back_tokens = 0
        self._tick = itertools.count()

    # -- lookups ---------------------------------------------------------------------------------
    def match(self, ids: Sequence[int]) -> Match:
        """Longest cached prefix of ``ids`` (split so that the match ends on a node boundary)."""
        node, pos, device, host = self.root, 0, 0, 0
        now = time.monotonic()
        while pos < len(ids):
            child = node.children.get(ids[pos])
            if child is None:
                break
            n = _common(child.key, ids, pos)
            if n < len(child.key):
                child = self._split(child, n)
            child.last_used = now
            if child.tier == DEVICE:
                device += n
            else:
                host += n
            node, pos = child, pos + n
        return Match(device, host, node)

    def _split(self, child: Node, n: int) -> Node:
        """Split ``child`` after ``n`` tokens; return the new upper part."""
        assert child.parent is not None
        upper = Node(child.key[:n], child.parent, child.tier)
        upper.lock = child.lock
        upper.last_used = child.last_used
        child.parent.children[child.key[0]] = upper
        child.key = child.key[n:]
        child.parent = upper
        upper.children[child.key[0]] = child
        return upper

    # -- updates ---------------------------------------------------------------------------------
    def load_back(self, node: Node) -> int:
        """Move host nodes on the path to ``node`` back to the device; return tokens moved."""
        moved = 0
        while node.parent is not None and node.tier == HOST:
            node.tier = DEVICE
            moved += len(node.key)
            node = node.parent
        self.host_tokens -= moved
        self.device_tokens += moved
        self.loaded_back_tokens += moved
        return moved

    def insert(self, ids: Sequence[int]) -> int:
        """Cache ``ids`` on the device; return how many new device tokens that took."""
        m = self.match(ids)
        self.load_back(m.node)
        pos = m.device + m.host
        if pos >= len(ids):
            return 0
        new = Node(tuple(ids[pos:]), m.node, DEVICE)
        m.node.children[new.key[0]] = new
        self.device_tokens += len(new.key)
        return len(new.key)

    def insert_host(self, ids: Sequence[int]) -> int:
        """Cache ``ids`` past what is cached on the host tier (read back from L3); return the tokens added."""
        m = self.match(ids)
        pos = m.device + m.host
        if pos >= len(ids):
            return 0
        new = Node(tuple(ids[pos:]), m.node, DEVICE)
        m.node.children[new.key[0]] = new
        self._to_host(new)  # deleted again when the host pool cannot hold it
        return len(new.key) if new.tier == HOST else 0

    def lock(self, node: Node, delta: int) -> None:
        while node.parent is not None:
            if node.lock == 0 and delta > 0:
                self.locked_tokens += len(node.key)
            node.lock += delta
            if node.lock == 0:
                self.locked_tokens -= len(node.key)
            node = node.parent

    @property
    def evictable_tokens(self) -> int:
        return self.device_tokens - self.locked_tokens

    def evict_device(self, want: int) -> int:
        """Free at least ``want`` device tokens (LRU leaves first); return tokens freed."""
        heap = [(n.last_used, next(self._tick), n) for n in self._nodes() if self._device_leaf(n)]
        heapq.heapify(heap)
        freed = 0
        while heap and freed < want:
            _, _, node = heapq.heappop(heap)
            freed += len(node.key)
            self.device_tokens -= len(node.key)
            self.evicted_tokens += len(node.key)
            parent = node.parent
            if self.host_capacity > 0:
                self._to_host(node)
            else:
                self._delete(node)
            if parent is not None and self._device_leaf(parent):
                heapq.heappush(heap, (parent.last_used, next(self._tick), parent))
        return freed

    def _to_host(self, node: Node) -> None:
        size = len(node.key)
        if size > self.host_capacity:
            self._delete(node)
            return
        if self.host_tokens + size > self.host_capacity:
            self._evict_host(self.host_tokens + size - self.host_capacity, keep=node)
        node.tier = HOST
        self.host_tokens += size

    def _evict_host(self, want: int, keep: Node) -> None:
        leaves = [
            (n.last_used, next(self._tick), n)
            for n in self._nodes()
            if n.tier == HOST and not n.children and n is not keep
        ]
        heapq.heapify(leaves)
        freed = 0
        while leaves and freed < want:
            _, _, node = heapq.heappop(leaves)
            freed += len(node.key)
            self.host_tokens -= len(node.key)
            parent = node.parent
            self._delete(node)
            if parent is not None and parent.tier == HOST and not parent.children and parent is not keep:
                heapq.heappush(leaves, (parent.last_used, next(self._tick), parent))

    def _delete(self, node: Node) -> None:
        assert node.parent is not None
        for child in list(node.children.values()):  # host descendants go with it
            self.host_tokens -= self._subtree_host_tokens(child)
        del node.parent.children[node.key[0]]

    def _subtree_host_tokens(self, node: Node) -> int:
        own = len(node.key) if node.tier == HOST else 0
        return own + sum(self._subtree_host_tokens(c) for c in node.children.values())

    def _device_leaf(self, node: Node) -> bool:
        return (
            node.parent is not None
            and node.tier == DEVICE
            and node.lock == 0
            and not any(c.tier == DEVICE for c in node.children.values())
        )

    def _nodes(self) -> list[Node]:
        out, stack = [], [self.root]
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(node.children.values())
        return out

    def clear(self) -> None:
        self.root.children.clear()
        self.device_tokens = self.host_tokens = self.locked_tokens = 0


def _common(key: tuple[int, ...], ids: Sequence[int], pos: int) -> int:
    n, limit = 0, min(len(key), len(ids) - pos)
    while n < limit and key[n] == ids[pos + n]:
        n += 1
    return n
