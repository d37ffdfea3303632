package tools

import (
	"context"
	"time"
)

// CachedCatalogForTest exposes the REST endpoints' cache to the external
// tests, for the concurrency test that needs no HTTP in between.
type CachedCatalogForTest struct{ c *cachedCatalog }

func NewCachedCatalogForTest(src Catalog, ttl time.Duration, now func() time.Time) CachedCatalogForTest {
	return CachedCatalogForTest{newCachedCatalog(src, ttl, now)}
}

func (t CachedCatalogForTest) List(ctx context.Context, force bool) ([]Summary, error) {
	return t.c.List(ctx, force)
}
