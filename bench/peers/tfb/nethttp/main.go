// The Go net/http peer of samples/tfb_server (scripts/tfbbench.sh): the six
// TechEmpower test types on net/http, database/sql and lib/pq.
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
		send(w, "application/json", world.JSON(map[string]string{"message": "Hello, World!"}))
	})
	http.HandleFunc("/db", func(w http.ResponseWriter, r *http.Request) {
		rows, err := db.Rows(1)
		if err != nil {
			fail(w, err)
			return
		}
		send(w, "application/json", world.JSON(rows[0]))
	})
	http.HandleFunc("/queries", func(w http.ResponseWriter, r *http.Request) {
		rows, err := db.Rows(world.Count(r.URL.Query().Get("queries")))
		if err != nil {
			fail(w, err)
			return
		}
		send(w, "application/json", world.JSON(rows))
	})
	http.HandleFunc("/updates", func(w http.ResponseWriter, r *http.Request) {
		rows, err := db.Update(world.Count(r.URL.Query().Get("queries")))
		if err != nil {
			fail(w, err)
			return
		}
		send(w, "application/json", world.JSON(rows))
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
