package gitaudit

import "container/list"

// cache keeps objects inflated from packs, by pack and offset, up to a
// number of bytes, dropping the least recently used: a tree walk reads
// the same delta bases again and again.
type cache struct {
	max, size int
	lru       *list.List // of *cached, most recent first
	at        map[cacheKey]*list.Element
}

type cacheKey struct {
	p   *pack
	off int64
}

type cached struct {
	key  cacheKey
	typ  Type
	data []byte
}

func newCache(max int) *cache {
	return &cache{max: max, lru: list.New(), at: map[cacheKey]*list.Element{}}
}

func (c *cache) get(p *pack, off int64) (Type, []byte, bool) {
	e, ok := c.at[cacheKey{p, off}]
	if !ok {
		return 0, nil, false
	}
	c.lru.MoveToFront(e)
	v := e.Value.(*cached)
	return v.typ, v.data, true
}

// put keeps data (never changed after: readers share it); an object of
// more than an eighth of the cache is not kept.
func (c *cache) put(p *pack, off int64, t Type, data []byte) {
	k := cacheKey{p, off}
	if _, ok := c.at[k]; ok || len(data) > c.max/8 {
		return
	}
	c.at[k] = c.lru.PushFront(&cached{k, t, data})
	c.size += len(data)
	for c.size > c.max {
		e := c.lru.Back()
		v := e.Value.(*cached)
		c.lru.Remove(e)
		delete(c.at, v.key)
		c.size -= len(v.data)
	}
}
