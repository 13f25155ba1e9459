package memcache

func (c *conn) textStats() error {
	c.w.WriteString(rEnd)
	return nil
}
