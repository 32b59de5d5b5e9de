package cluster

import "hash/fnv"

// Hash is the one hash behind every placement decision (node priorities,
// which pool instance carries an address): FNV-1a over the parts, each
// followed by a zero byte, then splitmix64's finalizer. FNV alone barely
// changes its low bits when only the last byte differs (master-0,
// master-1, ...), which would give such nodes neighbouring priorities and
// skew the spread.
func Hash(parts ...[]byte) uint64 {
	h := fnv.New64a()
	for i, p := range parts {
		if i > 0 {
			_, _ = h.Write([]byte{0})
		}
		_, _ = h.Write(p)
	}
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
