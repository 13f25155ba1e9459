module github.com/latchd/latch

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/google/go-cmp v0.7.0
	go.uber.org/goleak v1.3.0
)
