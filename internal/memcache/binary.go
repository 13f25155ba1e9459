package memcache

const magicRequest = 0x80

func (c *conn) serveBinary() error { return errClose }
