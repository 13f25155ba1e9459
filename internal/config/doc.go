// Package config owns latch's configuration: the Config struct and its
// sections, the defaults (DefaultConfig), validation (Config.Validate), and
// loading a Config from command-line flags, LATCH_* environment variables
// and an optional TOML file.
//
// The sections of a Config hold the components' own configurations
// (node.Config, memcache.Config, dlock.Config, admin.Config), so that a
// default lives once, in its component's DefaultConfig, and the server
// builds each component from its section without copying settings. Their
// toml tags name the settings; the fields tagged "-" (loggers, metrics,
// TLS) are the program's to set and no setting reaches them.
//
// # Precedence
//
// Load builds a Config from, highest precedence first:
//
//  1. flags given on the command line (--log-level=debug);
//  2. environment variables, named mechanically from the flag:
//     --log-level is LATCH_LOG_LEVEL (an empty variable counts as unset);
//  3. the TOML file named by --config or LATCH_CONFIG, if any;
//  4. DefaultConfig.
//
// # TOML file
//
// The file mirrors the Config sections. Durations are strings accepted by
// time.ParseDuration. A key latch does not know is an error naming the key,
// so that a typo never goes unnoticed.
//
//	[log]
//	level = "info"       # debug, info, warn or error
//	format = "text"      # text or json
//
//	[lock]
//	max-keys = 1000      # keys per lock request, 0 = no limit
//	lock-delay = "0s"    # default lock-delay of sessions
//
//	[server]
//	shutdown-timeout = "10s"
//
//	[dlock]
//	addr = "127.0.0.1:11212"  # dlock protocol v2/v3; "" = off
//	max-frame = 262144        # largest request frame, bytes
//	idle-timeout = "60s"      # close silent connections with nothing waiting; "0s" = never
//	tokens-file = ""          # access tokens: TOKEN [lock|read [PREFIX...]] a line; "" = not checked
//
//	[admin]
//	addr = "127.0.0.1:11280"  # HTTP: /metrics, status page, /v1 API; "" = off
//	token-file = ""           # bearer token for admin actions, or token = "..."
//
//	[tls]                     # with cert and key, every listener serves TLS only
//	cert = ""                 # PEM certificate
//	key = ""                  # PEM private key
//	client-ca = ""            # PEM CAs of required client certificates; "" = none required
package config
