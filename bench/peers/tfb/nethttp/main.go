// The Go net/http peer of samples/tfb_server (bench/tfbbench.sh), written as
// TechEmpower's go-std entry is: the six test types on net/http,
// database/sql + lib/pq with prepared statements, html/template and
// encoding/json of structs.
//
//	tfb_nethttp -port 8081 -db "host=127.0.0.1 …" -pool 16
package main

import (
	"net/http"

	"tfbpeer/world"
)

func main() {
	db, ln := world.Start(8081)
	send := func(w http.ResponseWriter, ctype string, body []byte) {
		h := w.Header()
		h.Set("Server", "Go")
		h.Set("Content-Type", ctype)
		w.Write(body)
	}
	fail := func(w http.ResponseWriter, err error) { http.Error(w, err.Error(), 500) }
	http.HandleFunc("/plaintext", func(w http.ResponseWriter, r *http.Request) {
		send(w, "text/plain", []byte("Hello, World!"))
	})
	http.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		send(w, "application/json", world.JSON(world.Message{Message: "Hello, World!"}))
	})
	// rows answers with rows as JSON (a single object for /db), or 500.
	rows := func(w http.ResponseWriter, rs []world.Row, err error, one bool) {
		switch {
		case err != nil:
			fail(w, err)
		case one:
			send(w, "application/json", world.JSON(rs[0]))
		default:
			send(w, "application/json", world.JSON(rs))
		}
	}
	http.HandleFunc("/db", func(w http.ResponseWriter, r *http.Request) {
		rs, err := db.Rows(1)
		rows(w, rs, err, true)
	})
	http.HandleFunc("/queries", func(w http.ResponseWriter, r *http.Request) {
		rs, err := db.Rows(world.Count(r.URL.Query().Get("queries")))
		rows(w, rs, err, false)
	})
	http.HandleFunc("/updates", func(w http.ResponseWriter, r *http.Request) {
		rs, err := db.Update(world.Count(r.URL.Query().Get("queries")))
		rows(w, rs, err, false)
	})
	http.HandleFunc("/fortunes", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "Go")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err := db.Fortunes(w); err != nil {
			fail(w, err)
		}
	})
	http.Serve(ln, nil)
}
