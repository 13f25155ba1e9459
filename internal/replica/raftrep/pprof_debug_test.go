package raftrep_test

import (
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	if os.Getenv("PPROF_DEBUG") != "" {
		go http.ListenAndServe("127.0.0.1:6061", nil)
	}
}
