package luascript

// B2I is b2i, for the tests.
func B2I(b bool) int64 { return b2i(b) }
