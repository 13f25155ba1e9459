package server

import (
	"fmt"
	"slices"
	"strings"

	"github.com/latchd/latch/internal/admin"
	"github.com/latchd/latch/internal/config"
	"github.com/latchd/latch/internal/netserve"
	"github.com/latchd/latch/internal/tlsconf"
)

// Reload applies the settings a running server can change without a
// restart: it reads the configuration again (ServerConfig.Load) and
// applies the log level, the certificates of the listeners and of the
// connections between nodes, the dlock and Redis token files, the admin
// token and every front end's allow-list, reading the files they name
// again even when their names are the same. A part whose new settings do
// not load (a broken certificate, a token file with an error) keeps the
// ones in force; a changed setting that needs a restart keeps its value
// until then. A reload never lowers access control: turning TLS, client
// certificates, tokens or the admin token off waits for a restart too, so
// that a configuration file read half-written cannot open the server.
// Open connections, their sessions and their locks are untouched.
//
// Reload logs one line saying what changed, what was kept and why, and
// returns the same. It is safe to call at any time, from SIGHUP's handler
// and the admin API at once.
func (s *Server) Reload() admin.Reloaded {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	r := &reloading{Reloaded: admin.Reloaded{Changed: []string{}, Kept: []string{}, Restart: []string{}}}
	next := s.cfg
	if load := s.cfg.Server.Load; load != nil {
		c, err := load()
		if err != nil {
			r.kept("every setting", err)
			return s.reported(r)
		}
		next = c
	}
	_, r.Restart = config.Changed(s.cfg, next)
	if r.Restart == nil {
		r.Restart = []string{}
	}

	s.reloadLogLevel(r, next)
	c, nc := &s.cfg.TLS, &next.TLS
	s.reloadTLS(r, "tls", s.tls, [3]*string{&c.Cert, &c.Key, &c.ClientCA}, [3]string{nc.Cert, nc.Key, nc.ClientCA})
	p, np := &s.cfg.Cluster, &next.Cluster
	s.reloadTLS(r, "peer-tls", s.peerFiles, [3]*string{&p.PeerTLSCert, &p.PeerTLSKey, &p.PeerTLSCA},
		[3]string{np.PeerTLSCert, np.PeerTLSKey, np.PeerTLSCA})
	if s.dlock != nil {
		s.reloadTokens(r, "dlock-tokens-file", next.DLock.TokensFile, &s.dlockTokens, s.dlock.SetTokens)
	}
	s.cfg.DLock.TokensFile = next.DLock.TokensFile
	if s.redis != nil {
		s.reloadTokens(r, "redis-tokens-file", next.Redis.TokensFile, &s.redisTokens, s.redis.SetTokens)
	}
	s.cfg.Redis.TokensFile = next.Redis.TokensFile
	s.reloadAdminToken(r, next.Admin)
	s.reloadAllow(r, next)
	return s.reported(r)
}

// reloading is a reload's report as it is made.
type reloading struct{ admin.Reloaded }

func (r *reloading) changed(format string, a ...any) {
	r.Changed = append(r.Changed, fmt.Sprintf(format, a...))
}

func (r *reloading) kept(what string, err error) {
	r.Kept = append(r.Kept, fmt.Sprintf("%s: %v", what, err))
}

// reported logs r in one line and returns it.
func (s *Server) reported(r *reloading) admin.Reloaded {
	r.OK = len(r.Kept) == 0 && len(r.Restart) == 0
	attrs := []any{
		"changed", strings.Join(r.Changed, "; "),
		"kept", strings.Join(r.Kept, "; "),
		"restart_needed", strings.Join(r.Restart, ", "),
	}
	switch {
	case !r.OK:
		s.logger.Warn("reload: some settings kept in force", attrs...)
	case len(r.Changed) == 0:
		s.logger.Info("reload: nothing changed", attrs...)
	default:
		s.logger.Info("reloaded", attrs...)
	}
	return r.Reloaded
}

// reloadLogLevel sets the logger's level to next's.
func (s *Server) reloadLogLevel(r *reloading, next config.Config) {
	if next.Log.Level == s.cfg.Log.Level {
		return
	}
	level, err := config.ParseLogLevel(next.Log.Level)
	switch {
	case err != nil:
		r.kept("log-level", err)
	case s.cfg.Server.LogLevel == nil:
		r.Restart = append(r.Restart, "log-level")
	default:
		s.cfg.Server.LogLevel.Set(level)
		r.changed("log-level %s (was %s)", next.Log.Level, s.cfg.Log.Level)
		s.cfg.Log.Level = next.Log.Level
	}
}

// reloadTLS reads the certificate files of f (named name in the report)
// again, at the paths files (certificate, key, CA): those in force, which
// become files when they load. TLS is turned on or off only by a restart.
func (s *Server) reloadTLS(r *reloading, name string, f *tlsconf.Files, inForce [3]*string, files [3]string) {
	switch {
	case f == nil && files[0] == "":
		return
	case f == nil || files[0] == "":
		r.Restart = append(r.Restart, name+"-cert (TLS on or off)")
		return
	case (files[2] == "") != (*inForce[2] == "") && name == "tls":
		// Client certificates required or not: access control is not
		// lowered by a reload, which could read a half-written file.
		r.Restart = append(r.Restart, "tls-client-ca (client certificates on or off)")
		return
	}
	before := f.Describe()
	var changed bool
	var err error
	if files == [3]string{*inForce[0], *inForce[1], *inForce[2]} {
		changed, err = f.Reload()
	} else {
		err = f.SetFiles(files[0], files[1], files[2])
		changed = err == nil
	}
	if err != nil {
		r.kept(name, fmt.Errorf("%w; still serving %s", err, before))
		return
	}
	for i, p := range inForce {
		*p = files[i]
	}
	if changed {
		r.changed("%s certificate %s (was %s)", name, f.Describe(), before)
	}
}

// reloadTokens reads the tokens file at path (none when empty) and gives
// its tokens to set, when they differ from those in force (*cur).
func (s *Server) reloadTokens(r *reloading, name, path string, cur *[]netserve.Token, set func([]netserve.Token) error) {
	if path == "" && len(*cur) > 0 {
		// Access control is not lowered by a reload, which could read a
		// half-written configuration file.
		r.Restart = append(r.Restart, name+" (tokens off)")
		return
	}
	var toks []netserve.Token
	if path != "" {
		var err error
		if toks, err = netserve.LoadTokens(path); err != nil {
			r.kept(name, fmt.Errorf("%w; keeping the %d tokens in force", err, len(*cur)))
			return
		}
	}
	if slices.EqualFunc(toks, *cur, sameToken) {
		return
	}
	if err := set(toks); err != nil {
		r.kept(name, err)
		return
	}
	*cur = toks
	noun := "tokens"
	if len(toks) == 1 {
		noun = "token"
	}
	r.changed("%s: %d %s", name, len(toks), noun)
}

func sameToken(a, b netserve.Token) bool {
	return a.Value == b.Value && a.ReadOnly == b.ReadOnly && slices.Equal(a.Prefixes, b.Prefixes)
}

// reloadAdminToken reads the admin token again (admin-token, or the file
// of admin-token-file).
func (s *Server) reloadAdminToken(r *reloading, next config.AdminConfig) {
	if s.admin == nil {
		return
	}
	tok, err := next.LoadToken()
	if err != nil {
		r.kept("admin token", fmt.Errorf("%w; keeping the token in force", err))
		return
	}
	if tok == "" && s.adminToken != "" {
		// Access control is not lowered by a reload, which could read a
		// half-written configuration file.
		r.Restart = append(r.Restart, "admin-token (admin actions open)")
		return
	}
	s.cfg.Admin.Token, s.cfg.Admin.TokenFile = next.Token, next.TokenFile
	if tok == s.adminToken {
		return
	}
	s.admin.SetToken(tok)
	s.adminToken = tok
	r.changed("admin token")
}

// reloadAllow gives every front end its allow-list of next.
func (s *Server) reloadAllow(r *reloading, next config.Config) {
	for _, fe := range []struct {
		name     string
		cur      *string
		allow    string
		setAllow func(string) error // nil: the front end is off
	}{
		{"memcache-allow", &s.cfg.Memcache.Allow, next.Memcache.Allow, setAllowOf(s.memcache)},
		{"dlock-allow", &s.cfg.DLock.Allow, next.DLock.Allow, setAllowOf(s.dlock)},
		{"redis-allow", &s.cfg.Redis.Allow, next.Redis.Allow, setAllowOf(s.redis)},
		{"zookeeper-allow", &s.cfg.ZooKeeper.Allow, next.ZooKeeper.Allow, setAllowOf(s.zookeeper)},
	} {
		if fe.allow == *fe.cur {
			continue
		}
		if fe.setAllow != nil {
			if err := fe.setAllow(fe.allow); err != nil {
				r.kept(fe.name, err)
				continue
			}
			shown := fe.allow
			if shown == "" {
				shown = "all"
			}
			r.changed("%s %s", fe.name, shown)
		}
		*fe.cur = fe.allow
	}
}

// allowSetter is a front end whose allow-list a reload replaces.
type allowSetter interface{ SetAllow(string) error }

// setAllowOf returns fe's SetAllow, or nil when fe is a nil pointer (the
// front end is off).
func setAllowOf[T interface {
	*E
	allowSetter
}, E any](fe T) func(string) error {
	if fe == nil {
		return nil
	}
	return fe.SetAllow
}
